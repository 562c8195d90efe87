import pytest
import torch

from s2s2net_cli.model import S2S2Net, SdpaAttention, pad_to_multiple


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return S2S2Net(in_channels=6).eval()


@pytest.mark.parametrize("h,w", [(1, 33), (37, 45), (32, 32), (64, 48), (5, 1), (33, 97)])
def test_output_is_exactly_five_times_the_input(model, h, w):
    with torch.no_grad():
        out = model(torch.randn(2, 6, h, w))
    assert out.shape == (2, 1, 5 * h, 5 * w)
    assert torch.isfinite(out).all()


def test_activations_are_swish_and_mish():
    m = S2S2Net()
    kinds = {type(x).__name__ for x in m.modules()}
    assert "GELU" not in kinds and "ReLU" not in kinds
    assert "SiLU" in kinds and "Mish" in kinds
    assert sum(isinstance(x, torch.nn.Mish) for x in m.head.modules()) == 4


def test_padding_reflects_and_output_depends_on_real_pixels_only_at_the_crop(model):
    x = torch.randn(1, 6, 40, 40)
    padded = pad_to_multiple(x, 32)
    assert padded.shape[-2:] == (64, 64)
    assert torch.equal(padded[..., :40, :40], x)
    assert torch.equal(padded[..., 40, :40], x[..., 38, :])  # reflection, not zeros


def test_gradients_reach_the_encoder(model):
    m = S2S2Net().train()
    out = m(torch.randn(2, 6, 32, 32))
    out.mean().backward()
    assert m.encoder.patch_embed1.proj.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("box,rows", [((37, 21, 51, 47), 32), ((0, 0, 96, 80), 8), ((3, 5, 90, 70), None),
                                      ((64, 16, 32, 64), 4)])
def test_a_window_of_the_output_equals_the_whole_forward_there(model, box, rows):
    # The head runs only on the window's decoder pixels plus HEAD_MARGIN, its last step in
    # pieces of `rows`: the numbers must be those of the whole map.
    torch.manual_seed(1)
    x = torch.randn(2, 6, 96, 80).contiguous(memory_format=torch.channels_last)
    top, left, h, w = box
    with torch.no_grad():
        whole = model(x)[..., 5 * top: 5 * (top + h), 5 * left: 5 * (left + w)]
        window = model.forward_window(x, *box, last_step_rows=rows)
    assert window.shape == (2, 1, 5 * h, 5 * w)
    assert (window - whole).abs().max() < 1e-4


def test_a_window_without_the_heads_margin_differs(model, monkeypatch):
    # the check above can fail: the head's receptive field reaches past the window
    import s2s2net_cli.model as model_module

    monkeypatch.setattr(model_module, "HEAD_MARGIN", 0)
    x = torch.randn(1, 6, 96, 96)
    with torch.no_grad():
        whole = model(x)[..., 5 * 37: 5 * 80, 5 * 37: 5 * 80]
        window = model.forward_window(x, 37, 37, 43, 43)
    assert (window - whole).abs().max() > 1e-3


def test_windows_outside_the_input_are_refused(model):
    with pytest.raises(ValueError, match="does not lie inside"):
        model.forward_window(torch.randn(1, 6, 32, 32), 0, 0, 33, 32)


def test_water_index_inputs_are_ndwi_and_mndwi_of_the_reflectance():
    import numpy as np

    from s2s2net_cli.bands import BandSpec, normalise
    from s2s2net_cli.indices import water_index
    from s2s2net_cli.model import WATER_INDEX_GAIN, WaterIndexInputs

    spec = BandSpec()
    rng = np.random.default_rng(0)
    refl = rng.uniform(0.01, 0.4, (6, 12, 10)).astype(np.float32)
    x = torch.from_numpy(normalise(refl, np.ones((12, 10), bool), spec))[None]
    out = WaterIndexInputs(spec)(x)
    assert out.shape == (1, 8, 12, 10)
    assert torch.equal(out[:, :6], x)  # the bands pass unchanged
    for k, name in enumerate(("ndwi", "mndwi")):
        expected = torch.from_numpy(water_index(refl, name)) * WATER_INDEX_GAIN
        torch.testing.assert_close(out[0, 6 + k], expected, atol=1e-5, rtol=1e-5)
    # bands summing to nothing (nodata offsets, dark water) give bounded indices, never inf or NaN
    dark = torch.full((1, 6, 2, 2), 0.0)
    dark[:, 1] = -spec.mean[1] / spec.std[1]  # green reflectance 0
    dark[:, 3] = -spec.mean[3] / spec.std[3]  # NIR reflectance 0
    out = WaterIndexInputs(spec)(dark)
    assert torch.isfinite(out).all() and out[:, 6:].abs().max() <= WATER_INDEX_GAIN


def test_water_index_inputs_refuse_other_bands():
    from s2s2net_cli.bands import BandSpec
    from s2s2net_cli.model import ModelConfig

    spec = BandSpec(("B02", "B03", "B04", "B08"), 10000, (0.1,) * 4, (0.1,) * 4)
    with pytest.raises(ValueError, match="B02, B03, B04, B08, B11, B12"):
        S2S2Net(config=ModelConfig(in_channels=4, water_indices=True), spec=spec)


def test_widened_weights_compute_what_the_narrower_network_did():
    from dataclasses import replace

    from s2s2net_cli.model import widen_inputs

    torch.manual_seed(3)
    narrow = S2S2Net().eval()
    wide = S2S2Net(config=replace(narrow.config, water_indices=True)).eval()
    state = widen_inputs(narrow.state_dict(), wide)
    wide.load_state_dict(state)
    first = state["encoder.patch_embed1.proj.weight"]
    assert first.shape[1] == 8 and torch.count_nonzero(first[:, 6:]) == 0
    x = torch.randn(2, 6, 40, 36)
    with torch.no_grad():
        torch.testing.assert_close(wide(x), narrow(x), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(wide.forward_window(x, 4, 8, 20, 16), narrow.forward_window(x, 4, 8, 20, 16),
                                   atol=1e-5, rtol=1e-5)
    # and once its index weights are not zero, the indices change what it says
    with torch.no_grad():
        wide.encoder.patch_embed1.proj.weight[:, 6:] = torch.randn_like(wide.encoder.patch_embed1.proj.weight[:, 6:])
        first_stage = [net.encoder(net.inputs(x))[2] for net in (wide, narrow)]  # 1/4 resolution
        assert (first_stage[0] - first_stage[1]).abs().mean() > 0.1


def test_an_ndwi_prior_adds_gain_times_the_positive_bilinear_ndwi_to_the_logits():
    import numpy as np
    import torch.nn.functional as F

    from s2s2net_cli.bands import BandSpec, normalise
    from s2s2net_cli.indices import water_index

    torch.manual_seed(3)
    plain = S2S2Net().eval()
    prior = S2S2Net(spec=BandSpec(), ndwi_prior=12.0).eval()
    prior.load_state_dict(plain.state_dict())  # the prior has no weights: the same network
    rng = np.random.default_rng(0)
    reflectance = rng.uniform(0.01, 0.4, (6, 21, 34)).astype(np.float32)
    x = torch.from_numpy(normalise(reflectance, np.ones((21, 34), bool), BandSpec()))[None]
    ndwi = torch.from_numpy(water_index(reflectance, "ndwi").astype(np.float32))[None, None]
    fine = F.interpolate(ndwi, scale_factor=5, mode="bilinear", align_corners=False)
    with torch.no_grad():
        added = prior(x) - plain(x)
    assert added.shape == (1, 1, 105, 170)
    assert (added - 12.0 * fine.clamp_min(0)).abs().max() < 1e-4
    # where NDWI is negative nothing is added (water NDWI cannot see stays the network's to find);
    # at a pixel's centre a positive NDWI adds its own value times the gain
    assert (fine < 0).any() and (added[fine < 0] == 0).all()
    i, j = map(int, np.argwhere(water_index(reflectance, "ndwi")[1:-1, 1:-1] > 0.2)[0] + 1)
    assert float(added[0, 0, 5 * i + 2, 5 * j + 2]) == pytest.approx(12.0 * float(ndwi[0, 0, i, j]), abs=1e-4)


@pytest.mark.parametrize("box", [(37, 21, 51, 47), (0, 0, 96, 80), (95, 79, 1, 1)])
def test_a_window_of_a_network_with_an_ndwi_prior_equals_the_whole_forward_there(box):
    from s2s2net_cli.bands import BandSpec

    torch.manual_seed(4)
    model = S2S2Net(spec=BandSpec(), ndwi_prior=20.0).eval()
    x = torch.randn(1, 6, 96, 80)
    top, left, h, w = box
    with torch.no_grad():
        whole = model(x)[..., 5 * top: 5 * (top + h), 5 * left: 5 * (left + w)]
        window = model.forward_window(x, *box)
    # bilinear coordinates are rounded in float32 by where the window starts: 1e-5 of an NDWI at most
    torch.testing.assert_close(window, whole, rtol=0, atol=1e-3)


def test_an_ndwi_prior_refuses_other_bands_and_gains_out_of_range():
    from s2s2net_cli.bands import BandSpec
    from s2s2net_cli.model import ModelConfig

    spec = BandSpec(("B02", "B03", "B04", "B08"), 10000, (0.1,) * 4, (0.1,) * 4)
    with pytest.raises(ValueError, match="NDWI prior needs the bands B02, B03, B04, B08, B11, B12"):
        S2S2Net(config=ModelConfig(in_channels=4), spec=spec, ndwi_prior=8.0)
    with pytest.raises(ValueError, match="NDWI prior -1 is not in 0-100"):
        S2S2Net(ndwi_prior=-1)


def test_the_encoders_attention_is_smps_in_one_call_with_the_same_state_and_gradients():
    from segmentation_models_pytorch.encoders.mix_transformer import Attention

    torch.manual_seed(0)
    model = S2S2Net()
    fused = [m for m in model.encoder.modules() if isinstance(m, SdpaAttention)]
    assert len(fused) == 8 and not any(isinstance(m, Attention) for m in model.modules())
    for sr_ratio, (dim, heads, side) in zip((8, 1), ((32, 1, 16), (256, 8, 4))):
        smp = Attention(dim, heads, qkv_bias=True, sr_ratio=sr_ratio)
        ours = SdpaAttention(smp)
        assert ours.state_dict().keys() == smp.state_dict().keys()
        x = torch.randn(2, side * side, dim, requires_grad=True)
        x2 = x.detach().clone().requires_grad_()
        expected, got = smp(x, side, side), ours(x2, side, side)
        assert got.shape == expected.shape
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
        expected.square().sum().backward()
        got.square().sum().backward()
        torch.testing.assert_close(x2.grad, x.grad, atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError, match="dropout"):
        SdpaAttention(Attention(32, 1, attn_drop=0.1))


def test_a_two_bound_water_gate_is_two_one_bound_gates_side_by_side():
    """The water bound has hidden channels of its own: the gate's two outputs are two
    independent one-bound gates, so a land bound fitted alone keeps its numbers beside it."""
    from s2s2net_cli.model import WaterGate

    torch.manual_seed(5)
    land, water, both = WaterGate(32), WaterGate(32), WaterGate(32, bounds=2)
    with torch.no_grad():
        for name in ("reduce", "score"):
            for part in ("weight", "bias"):
                getattr(getattr(both, name), part).copy_(torch.cat([getattr(getattr(g, name), part) for g in (land, water)]))
    features = torch.randn(2, 32, 9, 7)
    out = both(features)
    assert both.bounds == 2 and land.bounds == 1 and out.shape == (2, 2, 9, 7)
    torch.testing.assert_close(out[:, :1], land(features))
    torch.testing.assert_close(out[:, 1:], water(features))
    with pytest.raises(ValueError, match="1 or 2 bounds"):
        WaterGate(32, bounds=3)


def test_an_ndwi_priors_cell_bounds_hold_every_2m_value_of_the_cell():
    """cell_bounds bound the prior's bilinear 2 m values inside each decoder cell
    (what the gate adds to its bounds), the partly outside cells at the edges included."""
    import numpy as np

    from s2s2net_cli.bands import BandSpec, normalise

    model = S2S2Net(spec=BandSpec(), ndwi_prior=16.0).eval()
    rng = np.random.default_rng(1)
    reflectance = rng.uniform(0.01, 0.4, (6, 22, 30)).astype(np.float32)
    reflectance[1, :13, :17] = rng.uniform(0.1, 0.2, (13, 17))  # a pond: green above near infrared
    reflectance[3, :13, :17] = rng.uniform(0.01, 0.05, (13, 17))
    x = torch.from_numpy(normalise(reflectance, np.ones((22, 30), bool), BandSpec()))[None]
    fine = model.prior(x)[0, 0]
    rows, cols = 6, 8  # cells of 4 x 4 pixels, the last row and column cut by the edge
    high, low = (bound[0] for bound in model.prior.cell_bounds(x, rows, cols))
    for r in range(rows):
        for c in range(cols):
            cell = fine[20 * r: 20 * (r + 1), 20 * c: 20 * (c + 1)]
            assert float(low[r, c]) <= float(cell.min()) + 1e-5 and float(cell.max()) <= float(high[r, c]) + 1e-5
    assert (low > 0).any() and (low < high).any()  # bounds that say something


def test_cell_pixels_and_pixel_cells_map_a_window_between_cells_and_2m_pixels():
    """A window off the cells' grid (10 m pixels 6-29 x 3-24 of a 10 x 8 map of 40 m cells): each
    2 m pixel is in the cell that holds it, and the cells of a window's pixels are those of its
    cells that it overlaps, none beyond."""
    from s2s2net_cli.model import cell_pixels, pixel_cells

    torch.manual_seed(0)
    cells = torch.rand(10, 8) < 0.4
    top, left, height, width = 6, 3, 24, 22
    pixels = cell_pixels(cells, top, left, height, width)
    assert pixels.shape == (120, 110)
    rows, cols = torch.meshgrid(torch.arange(120), torch.arange(110), indexing="ij")
    assert torch.equal(pixels, cells[(5 * top + rows) // 20, (5 * left + cols) // 20])
    inside = torch.zeros_like(cells)
    inside[6 // 4: -(-30 // 4), 3 // 4: -(-25 // 4)] = True  # the cells the window overlaps
    assert torch.equal(pixel_cells(pixels, top, left, cells.shape), cells & inside)
    assert not pixel_cells(torch.zeros_like(pixels), top, left, cells.shape).any()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fill_cells_sets_the_pixels_of_the_cells_given_and_only_those(dtype):
    """On a view inside a larger map (its rows not contiguous), as masked_fill would, and nothing
    outside the view or outside the cells touched; no cell set: nothing changes."""
    from s2s2net_cli.model import fill_cells_

    torch.manual_seed(1)
    canvas = torch.randn(2, 1, 200, 260, dtype=dtype)
    view = canvas[..., 20:160, 40:220]  # 7 x 9 cells of 20 x 20 pixels
    cells = torch.zeros(7, 9, dtype=torch.bool)
    cells[1, 2] = cells[4, 3:7] = cells[6, 8] = True
    expected = view.masked_fill(cells.repeat_interleave(20, 0).repeat_interleave(20, 1), -1000.0)
    before = canvas.clone()
    fill_cells_(view, cells, -1000.0)
    assert torch.equal(view, expected) and (view == -1000.0).sum() == 2 * 6 * 400
    outside = torch.ones(canvas.shape, dtype=torch.bool)
    outside[..., 20:160, 40:220] = False
    assert torch.equal(canvas[outside], before[outside])
    fill_cells_(view, torch.zeros_like(cells), 1000.0)
    assert torch.equal(view, expected)
