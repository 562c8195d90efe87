import torch

from s2s2net_cli.training.losses import IGNORE, WaterLoss


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
