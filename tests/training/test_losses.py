import numpy as np
import torch
from scipy import ndimage

from s2s2net_cli.metrics import boundary_counts, boundary_f1
from s2s2net_cli.training.losses import IGNORE, WaterLoss, label_edge_cells, soft_boundary_loss

from ..conftest import raises_rule


def test_nodata_pixels_change_nothing():
    torch.manual_seed(0)
    logits = torch.randn(2, 1, 20, 20, requires_grad=True)
    target = (torch.rand(2, 1, 20, 20) > 0.5).float()
    target[:, :, :5] = IGNORE
    loss = WaterLoss()
    base = loss(logits, target)
    other_logits = logits.detach().clone()
    other_logits[:, :, :5] = torch.randn(2, 1, 5, 20) * 10
    assert torch.allclose(loss(other_logits, target), base)
    base.backward()
    assert logits.grad[:, :, :5].abs().max() == 0
    assert logits.grad[:, :, 5:].abs().max() > 0


def test_loss_has_both_parts_and_prefers_the_truth():
    target = torch.zeros(1, 1, 10, 10)
    target[..., 3:7, 3:7] = 1
    good = (target * 2 - 1) * 8
    bad = -good
    loss = WaterLoss()
    parts = loss.parts(good, target)
    assert set(parts) == {"loss", "bce", "dice"}
    assert loss(good, target) < loss(bad, target)
    # soft labels (0.1): even a confident correct prediction keeps some BCE
    assert parts["bce"] > 0.1


def test_dice_is_fp32_under_bf16():
    logits = torch.randn(1, 1, 8, 8, dtype=torch.bfloat16)
    target = (torch.rand(1, 1, 8, 8) > 0.5).float()
    assert WaterLoss()(logits, target).dtype == torch.float32


def test_loss_of_a_batch_is_the_mean_of_its_halves():
    # what makes one rank and two ranks with the same global batch give the same loss
    torch.manual_seed(3)
    logits = torch.randn(4, 1, 12, 12)
    target = (torch.rand(4, 1, 12, 12) > 0.6).float()
    target[1, :, :4] = IGNORE
    loss = WaterLoss()
    halves = (loss(logits[:2], target[:2]) + loss(logits[2:], target[2:])) / 2
    assert torch.allclose(loss(logits, target), halves, atol=1e-6)


def test_water_predicted_on_a_dry_chip_costs_dice():
    dry = torch.zeros(2, 1, 16, 16)
    clean = torch.full((2, 1, 16, 16), -8.0)
    false_water = clean.clone()
    false_water[1, :, 4:12, 4:12] = 8.0  # a 64 px false lake on the second, dry chip
    loss = WaterLoss()
    assert loss.parts(clean, dry)["dice"] < 0.01
    # the second chip calls a quarter of itself water: its Dice part is 0.25, the batch's 0.125
    assert abs(loss.parts(false_water, dry)["dice"] - 0.125) < 0.01


def _old_loss_parts(logits, target):
    """The 2 m loss as it was written before coarse labels existed (its reference)."""
    from segmentation_models_pytorch.losses import SoftBCEWithLogitsLoss

    from s2s2net_cli.training.losses import soft_dice

    valid = target != IGNORE
    clean = torch.where(valid, target, torch.zeros_like(target))
    n = logits.shape[0]
    bce = SoftBCEWithLogitsLoss(smooth_factor=0.1, reduction="none")(logits, clean)
    bce = ((bce * valid).reshape(n, -1).sum(1) / valid.reshape(n, -1).sum(1).clamp_min(1)).mean()
    dice = soft_dice(torch.sigmoid(logits), clean, valid).mean()
    return bce, dice


def _truth_and_its_cells(seed=5, n=2, cells=6):
    """A 2 m truth with edges inside 10 m cells, and its 10 m average (water fractions)."""
    g = torch.Generator().manual_seed(seed)
    truth = (torch.rand(n, 1, cells * 5, cells * 5, generator=g) > 0.55).float()
    return truth, torch.nn.functional.avg_pool2d(truth, 5)


def test_a_perfect_2m_prediction_scores_zero_coarse_loss_against_its_own_10m_average():
    truth, cells = _truth_and_its_cells()
    perfect = (truth * 2 - 1) * 30  # sigmoid 0 or 1 to float precision
    bce, dice = WaterLoss(smooth_factor=0.0).coarse_terms(perfect, cells, 5)
    assert bce.abs().max() < 1e-4 and dice.abs().max() < 1e-4
    # the same water placed elsewhere in each cell costs nothing either: the 10 m label says how
    # much water a cell holds, not where in it
    shuffled = perfect.reshape(2, 1, 6, 5, 6, 5).flip(3).reshape(2, 1, 30, 30)
    assert not torch.equal(shuffled, perfect)
    assert WaterLoss(smooth_factor=0.0).coarse_terms(shuffled, cells, 5)[0].abs().max() < 1e-4
    # while a prediction with the wrong amount of water in some cells does cost
    wrong = perfect.clone()
    wrong[..., :10, :] = 30
    b, d = WaterLoss(smooth_factor=0.0).coarse_terms(wrong, cells, 5)
    assert (b > 0.05).all() and (d > 0.01).all()


def test_coarse_loss_prefers_the_right_amount_with_soft_labels_and_ignores_nodata_cells():
    truth, _ = _truth_and_its_cells(seed=8)
    label = (torch.nn.functional.avg_pool2d(truth, 5) >= 0.5).float()  # a 10 m label drawn from it
    label[0, :, 0, :] = IGNORE
    loss = WaterLoss()
    right = (torch.nn.functional.interpolate(label.clamp(0, 1), scale_factor=5) * 2 - 1) * 3
    too_much = right + 2
    assert loss.coarse_terms(right, label, 5)[0].mean() < loss.coarse_terms(too_much, label, 5)[0].mean()
    changed = right.clone()
    changed[0, :, :5, :] = 40  # under the nodata row of cells
    assert torch.equal(loss.coarse_terms(changed, label, 5)[0], loss.coarse_terms(right, label, 5)[0])


def test_the_2m_path_keeps_its_numbers_and_a_mixed_batch_is_the_mean_of_its_samples():
    torch.manual_seed(11)
    logits = torch.randn(4, 1, 20, 20)
    target = (torch.rand(4, 1, 20, 20) > 0.6).float()
    target[2, :, :3] = IGNORE
    loss = WaterLoss()
    bce, dice = _old_loss_parts(logits, target)
    for scale in (None, torch.tensor([1, 1, 1, 1])):
        parts = loss.parts(logits, target, scale)
        assert torch.equal(parts["bce"], bce) and torch.equal(parts["dice"], dice)
    # samples 1 and 3 carry 10 m labels (repeated on the 2 m grid): the 2 m samples' terms are
    # unchanged, and the coarse ones are scored on their cells
    coarse_target = torch.nn.functional.interpolate((torch.rand(4, 1, 4, 4) > 0.5).float(), scale_factor=5)
    mixed = target.clone()
    mixed[[1, 3]] = coarse_target[[1, 3]]
    parts = loss.parts(logits, mixed, torch.tensor([1, 5, 1, 5]))
    fine_b, fine_d = loss.fine_terms(logits[[0, 2]], mixed[[0, 2]])
    coarse_b, coarse_d = loss.coarse_terms(logits[[1, 3]], mixed[[1, 3]][..., ::5, ::5], 5)
    assert torch.allclose(parts["bce"], torch.cat([fine_b, coarse_b]).mean())
    assert torch.allclose(parts["dice"], torch.cat([fine_d, coarse_d]).mean())
    # and they are not scored as 2 m blocks
    as_blocks = loss.parts(logits, mixed)
    assert not torch.allclose(as_blocks["bce"], parts["bce"])


def _shore(water_share_left: float, water_share_right: float) -> tuple[torch.Tensor, torch.Tensor]:
    """A 4 x 4 cell label, water in its two left columns, and 2 m logits that fill the cells
    exactly, except the two shore columns: the water one holds ``water_share_left`` of water,
    the land one ``water_share_right`` (in fifths)."""
    cells = torch.zeros(1, 1, 4, 4)
    cells[..., :2] = 1
    prob = torch.zeros(1, 1, 20, 20)
    prob[..., :5] = 1
    prob[..., 5:5 + round(5 * water_share_left)] = 1
    prob[..., 10:10 + round(5 * water_share_right)] = 1
    return torch.logit(prob.clamp(1e-4, 1 - 1e-4)), cells


def test_majority_label_edges_ask_a_shore_cell_only_for_its_side_of_half():
    whole, majority = WaterLoss(smooth_factor=0.0), WaterLoss(smooth_factor=0.0, label_edges="majority")
    mixed_shore = _shore(0.6, 0.4)  # each shore cell on its label's side of half
    bce, dice = whole.coarse_terms(*mixed_shore, 5)
    assert bce > 0.2 and dice > 0.05  # "whole" asks them for all water and no water
    bce, dice = majority.coarse_terms(*mixed_shore, 5)
    assert bce < 1e-3 and dice < 1e-6
    # a shore cell on the wrong side of half still costs, the more the further from half
    costs = [majority.coarse_terms(*_shore(share, 0.0), 5)[0].item() for share in (0.6, 0.4, 0.2, 0.0)]
    assert costs[0] < 1e-3 < costs[1] < costs[2] < costs[3]
    logits, cells = _shore(0.4, 0.0)
    logits.requires_grad_(True)
    majority(logits, torch.nn.functional.interpolate(cells, scale_factor=5), torch.tensor([5])).backward()
    assert logits.grad[..., 5:10].sum() < 0  # pulls the water shore cell towards water
    assert logits.grad[..., 15:].abs().max() < 1e-6  # the land inside is already right


def test_majority_label_edges_leave_labels_without_shores_and_the_2m_path_as_they_were():
    torch.manual_seed(5)
    logits = torch.randn(3, 1, 20, 20)
    uniform = torch.zeros(3, 1, 4, 4)
    uniform[1] = 1
    uniform[2, :, 0] = IGNORE  # nodata beside water is no shore
    uniform[2, :, 1:] = 1
    whole, majority = WaterLoss(), WaterLoss(label_edges="majority")
    for a, b in zip(whole.coarse_terms(logits, uniform, 5), majority.coarse_terms(logits, uniform, 5)):
        assert torch.equal(a, b)
    fractions = torch.rand(3, 1, 4, 4)  # fractional labels are asked for their fraction by both
    for a, b in zip(whole.coarse_terms(logits, fractions, 5), majority.coarse_terms(logits, fractions, 5)):
        assert torch.equal(a, b)
    target = (torch.rand(3, 1, 20, 20) > 0.5).float()
    assert torch.equal(whole(logits, target), majority(logits, target))


def test_label_edge_cells_are_the_cells_beside_the_other_class():
    cells = torch.tensor([[0, 0, 0, 0], [0, 1, 1, 0], [0, 1, 1, 0], [0, 0, 0, IGNORE]], dtype=torch.float32)[None, None]
    cells[..., 0, 0] = IGNORE
    wet, dry = label_edge_cells(cells, cells != IGNORE)
    assert wet.sum() == 4  # every water cell touches land
    assert not dry[..., 0, 0] and not dry[..., 3, 3]  # nodata is neither
    assert dry.sum() == 10  # the other land cells: all touch water, diagonals included
    with raises_rule("S2N-LABEL-EDGES"):
        WaterLoss(label_edges="blocks")


def test_soft_boundary_loss_of_hard_masks_is_one_less_the_scored_boundary_f1():
    rng = np.random.default_rng(5)
    for _ in range(4):
        ref = ndimage.gaussian_filter(rng.random((48, 48)), 2) > 0.5
        pred = ndimage.gaussian_filter(rng.random((48, 48)), 2) > 0.5
        valid = np.ones_like(ref)
        valid[:6, :9] = False  # nodata: its water is neither edge nor land beside an edge
        scored = boundary_f1(boundary_counts(pred, ref, valid))
        target = torch.tensor(np.where(valid, ref, IGNORE), dtype=torch.float32)[None, None]
        loss = soft_boundary_loss(torch.tensor(pred, dtype=torch.float32)[None, None], target)
        assert abs(loss.item() - (1 - scored)) < 1e-4


def test_boundary_weight_asks_for_small_water_that_pixel_losses_let_go():
    # a label of scattered 2 x 2 pools; a prediction that leaves them all out, and one that
    # draws each pool two pixels off: the pixel losses prefer the first, the boundary term the second
    target = torch.zeros(1, 1, 40, 40)
    for y in range(4, 36, 8):
        for x in range(4, 36, 8):
            target[..., y:y + 2, x:x + 2] = 1
    dry = torch.full_like(target, -6.0)
    shifted = torch.where(torch.roll(target, 2, dims=-1) > 0, 6.0, -6.0)
    plain, edged = WaterLoss(), WaterLoss(boundary_weight=2.0)
    assert plain(dry, target) < plain(shifted, target)
    assert edged(shifted, target) < edged(dry, target)
    parts = edged.parts(shifted, target)
    assert parts["loss"] == parts["bce"] + parts["dice"] + 2.0 * parts["boundary"]


def test_boundary_term_is_the_fine_samples_alone_and_gradients_reach_their_edges():
    torch.manual_seed(2)
    logits = torch.randn(2, 1, 20, 20, requires_grad=True)
    target = (torch.rand(2, 1, 20, 20) > 0.5).float()
    target[1] = torch.nn.functional.interpolate((torch.rand(1, 1, 4, 4) > 0.5).float(), scale_factor=5)[0]
    loss = WaterLoss(boundary_weight=1.0)
    parts = loss.parts(logits, target, torch.tensor([1, 5]))
    alone = soft_boundary_loss(torch.sigmoid(logits[:1]), target[:1])
    assert torch.allclose(parts["boundary"], alone.sum() / 2)  # the coarse sample adds nothing
    parts["boundary"].backward()
    assert logits.grad[0].abs().max() > 0 and logits.grad[1].abs().max() == 0
    assert set(WaterLoss().parts(logits, target)) == {"loss", "bce", "dice"}  # off by default
