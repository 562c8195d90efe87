"""The network as inference runs it (folded decoder, sub-pixel head, fused Mish) gives the
trained network's numbers."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from s2s2net_cli.inference import runtime, subpixel_head
from s2s2net_cli.inference.folded_decoder import FoldedDecoder
from s2s2net_cli.inference.predictor import PredictOptions, Predictor
from s2s2net_cli.inference.runtime import inference_network
from s2s2net_cli.inference.subpixel_head import FusedMish, SubpixelHead, phase_taps
from s2s2net_cli.model import S2S2Net

from ..conftest import write_raster


def trained_like(seed=0):
    """A network with random weights and batch-norm statistics that are not the identity."""
    torch.manual_seed(seed)
    model = S2S2Net()
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2.0)
            module.weight.data.uniform_(0.5, 1.5)
            module.bias.data.uniform_(-0.2, 0.2)
    return model.eval()


def whole_map(model):
    """``model`` decoding the whole map, not only the window's region: a stubbed gate's cells,
    drawn on the whole map, then line up with the features it is given."""
    model.decoder.takes_region = False
    return model


@pytest.mark.parametrize("factor,phases,stride,length", [(2.0, 2, 1, 3), (2.5, 5, 2, 4)])
def test_phase_taps_are_bilinear_weights(factor, phases, stride, length):
    P, Q, low, coef = phase_taps(factor)
    assert (P, Q, coef.shape) == (phases, stride, (phases, 3, length)) and low == -1
    assert torch.allclose(coef.sum(-1), torch.ones(phases, 3, dtype=coef.dtype))  # each fine tap a weighted mean
    assert (coef >= 0).all()


@pytest.mark.parametrize("shape,rows", [((1, 256, 12, 10), None), ((2, 256, 7, 9), None), ((1, 256, 1, 3), None),
                                        ((1, 256, 24, 17), 16), ((1, 256, 30, 8), 6)])
def test_subpixel_head_equals_the_trained_head(shape, rows):
    head = trained_like().head
    fast = SubpixelHead(head).eval()
    x = torch.randn(*shape)
    with torch.inference_mode():
        expected, got = head(x, rows), fast(x, rows)
    assert got.shape == expected.shape == (shape[0], 1, 20 * shape[2], 20 * shape[3])
    assert (got - expected).abs().max() < 1e-4 * expected.abs().max()


def test_subpixel_head_edges_need_their_fix():
    """The phases alone are wrong at the map's edges: the fix is what makes them exact."""
    head = trained_like().head
    step = SubpixelHead(head).steps[0]
    x = torch.randn(1, 256, 8, 8)
    with torch.inference_mode():
        expected = step.original(x)
        fixed = step(x)
        unfixed = F.pixel_shuffle(F.mish(F.conv2d(x, step.weight, step.bias, padding=1)), 2)
    assert torch.allclose(fixed, expected, atol=1e-5)
    inner = (slice(None), slice(None), slice(2, -2), slice(2, -2))
    assert torch.allclose(unfixed[inner], expected[inner], atol=1e-5)
    assert (unfixed[..., 0, :] - expected[..., 0, :]).abs().max() > 1e-2


def test_last_step_phases_read_only_their_taps():
    """x2.5: each phase reads 3 (or 2) of the 4 coarse taps a side; the phases that share a
    window run as one 3x3 convolution each (9 of 16 taps), with the one 4x4 convolution's numbers.
    The x2 steps read all three taps: one convolution."""
    fast = SubpixelHead(trained_like().head)
    last = fast.last
    assert sorted(len(g.index) for g in last.groups) == [4, 6, 6, 9]
    assert all(g.weight.shape[-2:] == (3, 3) for g in last.groups)
    assert sorted(torch.cat([g.index for g in last.groups]).tolist()) == list(range(25))
    assert all(len(step.groups) == 0 for step in fast.steps)
    x = torch.randn(2, 32, 12, 14)
    with torch.inference_mode():
        grouped = last(x)
        groups, last.groups = last.groups, torch.nn.ModuleList()
        whole = last(x)
        last.groups = groups
        original = last.original(x)
    assert grouped.shape == whole.shape == (2, 1, 30, 35)
    assert (grouped - whole).abs().max() < 1e-5 * whole.abs().max()
    assert (grouped - original).abs().max() < 1e-5 * original.abs().max()


def test_folded_decoder_equals_the_trained_decoder():
    model = trained_like()
    folded = FoldedDecoder(model.decoder)
    for shape in ((1, 6, 64, 96), (2, 6, 32, 32)):
        with torch.inference_mode():
            features = model.encoder(torch.randn(*shape))
            expected, got = model.decoder(features), folded(features)
        assert got.shape == expected.shape
        assert (got - expected).abs().max() < 1e-4 * expected.abs().max()


def test_inference_network_forward_and_window_equal_the_trained_network():
    trained = trained_like()
    fast = inference_network(trained_like())
    x = torch.randn(1, 6, 72, 56)
    with torch.inference_mode():
        for run in (lambda m: m(x), lambda m: m.forward_window(x, 8, 16, 40, 24, last_step_rows=8)):
            expected, got = run(trained), run(fast)
            assert (got - expected).abs().max() < 1e-4 * expected.abs().max()


def test_fused_mish_is_mish_and_falls_back_when_it_cannot_compile(monkeypatch):
    x = torch.linspace(-30, 60, 4001).reshape(1, 1, 1, -1).to(torch.bfloat16)
    off = FusedMish()
    assert not off.active and torch.equal(off(x.clone()), F.mish(x))
    if not subpixel_head.has_cpp_compiler():
        pytest.skip("no C++ compiler for TorchInductor")
    on = FusedMish(enabled=True)
    got = on(x)
    assert on.active and on.failure is None and got.dtype == torch.bfloat16
    assert (got.float() - F.mish(x.float())).abs().max() < 0.02 * 60  # bf16 rounding of values up to 60

    # fp32 in the head's layouts: TorchInductor's AVX-512 code for it was wrong here (errors of 1-2)
    for shape in ((1, 144, 18, 512), (1, 64, 7, 9), (64, 32, 24, 40)):  # the last: a batch of the gate's blocks
        y = torch.randn(*shape).contiguous(memory_format=torch.channels_last)
        got = on(y)
        assert (got - F.mish(y)).abs().max() < 1e-5 and on.failure is None
        assert got.shape == y.shape and got.is_contiguous(memory_format=torch.channels_last)
    sliced = torch.randn(2, 8, 6, 6)[..., 1:4]  # not dense: compiled as it is
    assert (on(sliced) - F.mish(sliced)).abs().max() < 1e-5 and on.failure is None

    def broken(*args, **kwargs):
        raise RuntimeError("compiler exploded\nmore")

    monkeypatch.setattr(torch, "compile", broken)
    failing = FusedMish(enabled=True)
    assert torch.equal(failing(x.clone()), F.mish(x))
    assert not failing.active and failing.failure == "RuntimeError: compiler exploded"


def test_fused_mish_compiles_without_a_word_of_cuda_on_a_cpu(tmp_path):
    """On a CPU with nvcc on the PATH (a CUDA toolkit beside a CPU-only torch), compiling the
    fused Mish printed torch's "W... No CUDA runtime is found, using CUDA_HOME=..." in the
    middle of predict's output, -q or not."""
    if not subpixel_head.has_cpp_compiler() or torch.cuda.is_available():
        pytest.skip("no C++ compiler for TorchInductor, or a GPU (where there is a CUDA runtime)")
    (tmp_path / "bin").mkdir()
    nvcc = tmp_path / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\nexit 0\n")
    nvcc.chmod(0o755)
    script = ("import torch\nfrom s2s2net_cli.inference.subpixel_head import FusedMish\n"
              "on = FusedMish(enabled=True)\non(torch.randn(1, 4, 8, 8))\nprint(on.active, on.failure)\n")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    env.pop("CUDA_HOME", None)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0 and r.stdout.split() == ["True", "None"], r.stderr
    assert "No CUDA runtime" not in r.stderr and "cpp_extension" not in r.stderr, r.stderr


def test_fused_mish_takes_256_bit_vectors_where_torch_would_take_512(monkeypatch):
    """The compiled Mish's options are set by TorchInductor's config for the call, not by
    torch.compile's options, which torch before 2.5 refused ("Unexpected type of attr
    cpp.simdlen"): 256-bit vectors on AVX-512 kernels, torch's own choice elsewhere, and the
    config as it was after."""
    from torch._inductor import config

    before = config.cpp.simdlen
    for kernels, inside in (("AVX512", 256), ("AVX2", before), ("DEFAULT", before)):
        monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda k=kernels: k)
        with subpixel_head.compile_options():
            assert config.cpp.simdlen == inside
        assert config.cpp.simdlen == before


def test_compiling_mish_leaves_the_processs_subnormal_numbers_as_they_were():
    """torch 2.4's TorchInductor compiled with -ffast-math, which gcc 12 links with
    crtfastmath.o: loading the fused Mish set flush-to-zero for the whole process, and a
    caller's numbers (numpy's, torch's) lost their subnormals. Kept as they were; a block that
    flips the setting has it put back."""
    if not subpixel_head.has_cpp_compiler():
        pytest.skip("no C++ compiler for TorchInductor")
    script = ("import numpy as np, torch\nfrom s2s2net_cli.inference.subpixel_head import FusedMish\n"
              "on = FusedMish(enabled=True)\non(torch.randn(1, 4, 8, 8))\n"
              "print(on.active, float(np.float32(1e-40) * np.float32(2)) > 0,"
              " float(torch.tensor([1e-40]) * 2) > 0)\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.split() == ["True", "True", "True"], (r.stdout, r.stderr)
    assert not subpixel_head.flushes_subnormals()
    with subpixel_head.subnormals_kept():
        torch.set_flush_denormal(True)
        assert subpixel_head.flushes_subnormals()
    assert not subpixel_head.flushes_subnormals()


def test_fused_mish_that_compiles_wrong_is_not_used(monkeypatch):
    """The first compiled answer is checked against torch's Mish: a compiler that gets it wrong
    gives torch's answer and is not used again, and says why."""
    monkeypatch.setattr(subpixel_head, "has_cpp_compiler", lambda: True)
    monkeypatch.setattr(torch, "compile", lambda fn, **kwargs: lambda x: fn(x) + 0.5)
    x = torch.linspace(-5, 5, 101).reshape(1, 1, 1, -1)
    fused = FusedMish(enabled=True)
    assert torch.allclose(fused(x.clone()), F.mish(x))
    assert not fused.active and fused.failure.startswith("compiled Mish differs from torch's by 0.5")
    assert torch.allclose(fused(x.clone()), F.mish(x))


def test_large_scenes_fuse_mish_and_give_the_same_mask(tmp_path, random_weights, monkeypatch):
    if not subpixel_head.has_cpp_compiler():
        pytest.skip("no C++ compiler for TorchInductor")
    scene = write_raster(tmp_path / "s.tif", np.random.default_rng(4).integers(100, 3000, (6, 48, 48)).astype("uint16"),
                         nodata=0)
    results = {}
    for name, min_pixels in (("small", 10 ** 9), ("large", 1)):
        monkeypatch.setattr(runtime, "FUSED_MISH_MIN_PIXELS", min_pixels)
        predictor = Predictor(random_weights, PredictOptions(tile_size=32, overlap=8, probability=True))
        out = tmp_path / f"{name}.tif"
        results[name] = (predictor.predict_scene(scene, out).to_dict(), out)
    assert results["small"][0]["fused_mish"] is False and results["large"][0]["fused_mish"] is True
    json.dumps(results["large"][0])
    import rasterio
    with rasterio.open(results["small"][1]) as a, rasterio.open(results["large"][1]) as b:
        gap = np.abs(a.read(1).astype(int) - b.read(1).astype(int))
    assert gap.max() <= 2  # whole percent, bf16 rounding at most


@pytest.mark.parametrize("shape,rows,seed,density", [((1, 256, 24, 17), 16, 0, 0.15), ((2, 256, 30, 21), 6, 1, 0.15),
                                                      ((1, 256, 9, 40), 8, 2, 0.15), ((1, 256, 44, 52), 32, 3, 0.01)])
def test_gated_subpixel_head_equals_the_head_on_its_active_cells(shape, rows, seed, density):
    """Rows and columns of the x2 and x2.5 steps skipped around the active cells (in thin bands
    where they are sparse) change none of the active cells' logits, whatever the pattern
    (edges, lone cells, empty bands)."""
    fast = SubpixelHead(trained_like().head).eval()
    x = torch.randn(*shape)
    active = torch.rand(shape[-2:], generator=torch.Generator().manual_seed(seed)) < density
    active[-1, -1] = active[0, 3] = True
    active[4:8] = False  # a band or more without an active cell
    with torch.inference_mode():
        expected, got = fast(x, rows), fast(x, rows, active=active)
    assert got.shape == expected.shape
    on = active.repeat_interleave(20, 0).repeat_interleave(20, 1).expand_as(got)
    assert (got[on] - expected[on]).abs().max() < 1e-4 * expected.abs().max()
    assert (got[~on] != expected[~on]).any()  # work was skipped


@pytest.mark.parametrize("int8", [False, True])
def test_a_step_inside_its_input_is_the_padded_steps_middle(int8):
    """``inside`` computes only the blocks whose every tap lies in its input: the padded step's
    output there, for the x2 step and the x2.5 step with its logit (in 8-bit integers too)."""
    if int8 and not runtime.cpu_runs_int8():
        pytest.skip("oneDNN's 8-bit convolutions need an x86 CPU")
    head = SubpixelHead(trained_like().head).eval()
    for step, channels in ((head.steps[-1], 64), (head.last, 32)):
        if int8:
            step.quantize(-3.0, 3.0)
        x = torch.randn(3, channels, 14, 18)
        first = 1  # the padded step's first block that lies inside: its taps from row Q - pad on
        crop = step.Q * first - step.pad
        with torch.inference_mode():
            padded, inside = step(x), step.inside(x[..., crop:, crop:])
        rows, cols = ((n - crop - step.weight.shape[-1]) // step.Q + 1 for n in x.shape[-2:])
        assert inside.shape == (3, padded.shape[1], step.P * rows, step.P * cols)
        middle = padded[..., step.P * first: step.P * (first + rows), step.P * first: step.P * (first + cols)]
        assert (inside - middle).abs().max() < 1e-5 * middle.abs().max()


def test_gated_head_runs_wide_bands_edge_blocks_and_batched_blocks_exactly(monkeypatch):
    """The three ways the gated head runs, in one pattern: a band whose active cells are wide
    (over its spans), lone cells at the map's edges (each block alone, its edge made exact) and
    lone cells inside it (blocks batched, their halos cut away): every active cell's logits are
    the full head's. Blocks of four cells, for which the pattern is drawn."""
    monkeypatch.setattr(subpixel_head, "GATE_BLOCK_CELLS", 4)
    fast = SubpixelHead(trained_like().head).eval()
    x = torch.randn(2, 256, 40, 36)
    active = torch.zeros(40, 36, dtype=torch.bool)
    active[16:20, :30] = True  # wide: 10 m rows 64-80, in the band of rows 64-96
    active[0, 0] = active[-1, -1] = active[10, 35] = True  # at the map's edges
    active[30, 10] = active[30, 12] = active[34, 20] = True  # inside: two blocks
    active[26, 33] = True  # its block would reach the right edge: moved left, batched with them
    seen = {"alone": [], "batched": 0}
    band, inside = SubpixelHead._band, fast.steps[-1].inside

    def spy_band(self, x, lo, hi, a, b, rows, c0, c1, last_step_rows):
        seen["alone"].append((a, b, c0, c1))
        return band(self, x, lo, hi, a, b, rows, c0, c1, last_step_rows)

    def spy_inside(y):
        seen["batched"] += y.shape[0] // x.shape[0]
        return inside(y)

    monkeypatch.setattr(SubpixelHead, "_band", spy_band)
    with torch.inference_mode():
        expected = fast(x, 32)
        seen["alone"].clear()
        monkeypatch.setattr(fast.steps[-1], "inside", spy_inside)
        got = fast(x, 32, active=active)
    on = active.repeat_interleave(20, 0).repeat_interleave(20, 1).expand_as(got)
    assert (got[on] - expected[on]).abs().max() < 1e-4 * expected.abs().max()
    assert seen["batched"] == 3  # the blocks inside the map and the one moved off its edge, in one batch
    assert len(seen["alone"]) == 1 + 3  # the wide band's one span, and the three blocks at the edges
    assert (64, 96, 0, 122) in seen["alone"]  # the wide band: cells 0-29 and GATE_HALO pixels


def test_gated_window_is_land_where_the_gate_rules_water_out(monkeypatch):
    """forward_window with a water gate: the window's logits where the gate says a cell may
    hold water are the full head's; elsewhere LAND_LOGIT (a probability of 0)."""
    from s2s2net_cli.model import LAND_LOGIT

    model = whole_map(inference_network(trained_like()))
    x = torch.randn(1, 6, 96, 80)
    pattern = torch.zeros(24, 20, dtype=torch.bool)
    pattern[5:9, 3:6] = pattern[20, 17] = pattern[0, 0] = True
    model.gate = object()  # any gate: which cells it keeps is the pattern
    monkeypatch.setattr(model, "head_cells", lambda x, features, skip_below, prior_cells=None: (pattern, torch.zeros_like(pattern)))
    with torch.inference_mode():
        expected = model.forward_window(x, 8, 12, 80, 64, last_step_rows=8)
        got = model.forward_window(x, 8, 12, 80, 64, last_step_rows=8, skip_below=0.0)
    on = pattern.repeat_interleave(20, 0).repeat_interleave(20, 1)[40:440, 60:380].expand_as(got)
    assert on.any() and (~on).any()
    assert (got[on] - expected[on]).abs().max() < 1e-4 * expected.abs().max()
    assert (got[~on] == LAND_LOGIT).all()
    monkeypatch.setattr(model, "head_cells", lambda x, features, skip_below, prior_cells=None: (torch.zeros_like(pattern),) * 2)
    with torch.inference_mode():
        assert (model.forward_window(x, 8, 12, 80, 64, skip_below=0.0) == LAND_LOGIT).all()
    monkeypatch.setattr(model, "head_cells", lambda x, features, skip_below, prior_cells=None: (torch.ones_like(pattern), torch.zeros_like(pattern)))
    with torch.inference_mode():  # every cell active: the full head's own path
        assert torch.equal(model.forward_window(x, 8, 12, 80, 64, last_step_rows=8, skip_below=0.0), expected)


def test_gated_window_is_water_where_the_gate_finds_water_throughout(monkeypatch):
    """With a water bound, the cells the gate finds water throughout are WATER_LOGIT (a
    probability of 1), those it rules water out of LAND_LOGIT, and the rest the full head's."""
    from s2s2net_cli.model import LAND_LOGIT, WATER_LOGIT

    model = whole_map(inference_network(trained_like()))
    x = torch.randn(1, 6, 96, 80)
    run = torch.zeros(24, 20, dtype=torch.bool)
    water = torch.zeros_like(run)
    run[5:9, 3:6] = True
    water[9:14, 2:7] = water[0, 0] = water[23, 19] = True  # beside the run, and at both corners
    model.gate = object()
    monkeypatch.setattr(model, "head_cells", lambda x, features, skip_below, prior_cells=None: (run, water))
    with torch.inference_mode():
        expected = model.forward_window(x, 2, 3, 93, 75, last_step_rows=8)
        got = model.forward_window(x, 2, 3, 93, 75, last_step_rows=8, skip_below=0.0)

    def pixels(cells):
        return cells.repeat_interleave(20, 0).repeat_interleave(20, 1)[10:475, 15:390].expand_as(got)

    assert pixels(water).sum() == (got == WATER_LOGIT).sum() and (got[pixels(water)] == WATER_LOGIT).all()
    assert (got[pixels(run)] - expected[pixels(run)]).abs().max() < 1e-4 * expected.abs().max()
    assert (got[~pixels(run) & ~pixels(water)] == LAND_LOGIT).all()
    monkeypatch.setattr(model, "head_cells", lambda x, features, skip_below, prior_cells=None: (torch.zeros_like(run), water))
    with torch.inference_mode():  # no cell to run: land and water filled, the head not run at all
        got = model.forward_window(x, 2, 3, 93, 75, skip_below=0.0)
    assert (got[pixels(water)] == WATER_LOGIT).all() and (got[~pixels(water)] == LAND_LOGIT).all()


def test_a_fine_gate_narrows_the_cells_the_last_steps_run_on(monkeypatch):
    """With a fine gate, of the cells the water gate leaves, the head's last two steps run only
    on those the fine gate keeps (the full head's logits there), it fills those it finds water
    throughout with WATER_LOGIT, LAND_LOGIT the rest; it reads the head's 10 m features over the
    window, and cells a caller gives run as given, without it."""
    from s2s2net_cli.model import LAND_LOGIT, WATER_LOGIT

    model = whole_map(inference_network(trained_like()))
    x = torch.randn(1, 6, 96, 80)
    run = torch.zeros(24, 20, dtype=torch.bool)
    run[4:12, 2:9] = run[20, 17] = True
    kept, water = torch.zeros_like(run), torch.zeros_like(run)
    kept[5:8, 3:6] = True  # of the run: a block kept, a strip filled as water, the rest ruled out
    water[10, 2:9] = True
    model.gate, model.fine_gate = object(), object()
    seen = {}

    own = torch.zeros_like(run)  # the run cells of the window's own cells (10 m rows 8-88, columns 12-76)
    own[2:22, 3:19] = run[2:22, 3:19]

    def fine_cells(y, coarse, cells, r0, c0, skip_below, shape, prior_cells=None):
        seen.update(coarse=tuple(coarse.shape), window=(r0, c0, *cells.shape), shape=tuple(shape))
        assert torch.equal(cells, own[r0: r0 + cells.shape[0], c0: c0 + cells.shape[1]])
        return (kept[r0: r0 + cells.shape[0], c0: c0 + cells.shape[1]],
                water[r0: r0 + cells.shape[0], c0: c0 + cells.shape[1]])

    monkeypatch.setattr(model, "head_cells", lambda x, features, skip_below, prior_cells=None: (run, torch.zeros_like(run)))
    monkeypatch.setattr(model, "fine_cells", fine_cells)
    with torch.inference_mode():
        expected = model.forward_window(x, 8, 12, 80, 64, last_step_rows=8)
        got = model.forward_window(x, 8, 12, 80, 64, last_step_rows=8, skip_below=0.0)
    r0, c0, rows, cols = seen["window"]
    assert seen["coarse"][1] == model.head.steps[1].weight.shape[0] // 4  # the second step's channels
    assert seen["coarse"][-2:] == (4 * rows, 4 * cols)  # the 10 m features of the window's cells

    def pixels(cells):
        return cells.repeat_interleave(20, 0).repeat_interleave(20, 1)[40:440, 60:380].expand_as(got)

    assert pixels(kept).any() and (got[pixels(kept)] - expected[pixels(kept)]).abs().max() < 1e-4 * expected.abs().max()
    assert (got[pixels(water)] == WATER_LOGIT).all() and pixels(water).sum() == (got == WATER_LOGIT).sum()
    assert (got[~pixels(kept) & ~pixels(water)] == LAND_LOGIT).all()
    seen.clear()
    with torch.inference_mode():  # cells given by the caller (as --flips gives them) run as given
        given = model.forward_window(x, 8, 12, 80, 64, last_step_rows=8, skip_below=0.0,
                                     cells=(run, torch.zeros_like(run)))
    assert not seen and (given[pixels(run)] - expected[pixels(run)]).abs().max() < 1e-4 * expected.abs().max()


def test_gated_flips_keep_the_full_heads_mask_where_each_flips_gate_differs(monkeypatch):
    """With flips, each flip's gate rules on its own cells (here an exact one: the cells whose
    full-head logits all lie below the threshold, or all at or above it). Averaging each flip's
    gated output moves the mean where one flip filled a cell another ran; gated_mean_over_flips
    fills only where all eight flips fill alike, so its mask is the full head's mean's and its
    probability the full head's mean on every pixel it does not fill."""
    from s2s2net_cli.inference.runtime import gated_mean_over_flips, mean_over_flips

    model = inference_network(trained_like(3))
    x = torch.randn(1, 6, 64, 48)
    box = (4, 8, 52, 36)
    with torch.inference_mode():
        skip = float(model.forward_window(x, *box).median())  # about half the pixels water

        def exact_gate(y, features, skip_below, prior_cells=None):
            logits = model.head(features)
            high = F.max_pool2d(logits, 20)[0, 0] >= skip_below
            low = -F.max_pool2d(-logits, 20)[0, 0] >= skip_below
            return high & ~low, low

        monkeypatch.setattr(model, "head_cells", exact_gate)
        model.gate = object()
        full = mean_over_flips(lambda y, *b: torch.sigmoid(model.forward_window(y, *b)), x, box)
        each = mean_over_flips(lambda y, *b: torch.sigmoid(model.forward_window(y, *b, skip_below=skip)), x, box)
        got = gated_mean_over_flips(model, x, box, skip)
    threshold = torch.sigmoid(torch.tensor(skip))
    filled = (got == 0) | (got == 1)
    assert filled.any() and (~filled).any()
    assert (each - full).abs().max() > 1e-3  # one pass of gated flips is not the full head's mean
    assert (got[~filled] - full[~filled]).abs().max() < 1e-5
    assert torch.equal(got >= threshold, full >= threshold)


@pytest.mark.parametrize("region", [(0, 40, 0, 36), (3, 17, 5, 36), (0, 9, 28, 36), (37, 40, 0, 1), (11, 12, 13, 14)])
def test_the_folded_decoder_over_a_region_is_that_region_of_its_map(region):
    """Each stage convolved and upsampled over only the rows and columns its upsampling reads
    for the region: the whole map's numbers there, at its edges and inside it."""
    decoder = FoldedDecoder(trained_like().decoder.eval())
    encoder = trained_like().encoder.eval()
    with torch.inference_mode():
        features = encoder(torch.randn(1, 6, 160, 144))
        whole = decoder(features)
        a, b, c, d = region
        torch.testing.assert_close(decoder(features, region), whole[..., a:b, c:d], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("window", [(8, 12, 80, 64), (0, 0, 40, 52), (50, 30, 45, 41), (17, 3, 21, 77)])
def test_a_window_decoded_over_its_region_only_is_the_same(window):
    """forward_window decodes only the window's cells and HEAD_MARGIN around them (the gates,
    the fine gate and the NDWI prior read as if the input began there): the logits of decoding
    the whole map, gated or not, windows at the input's edges and off the cells' grid included."""
    torch.manual_seed(5)
    model = inference_network(S2S2Net(ndwi_prior=4.0, gate=2, fine_gate=2).eval())
    x = torch.randn(1, 6, 95, 80)
    regions = []
    decode = model.decoder.forward
    model.decoder.forward = lambda features, region=None: regions.append(region) or decode(features, region)
    with torch.inference_mode():
        full = model.forward_window(x, *window)
        skip = float(full.median())  # about half the pixels water: the gates rule on some cells, not all
        got = [model.forward_window(x, *window), model.forward_window(x, *window, skip_below=skip)]
        assert regions and all(r is not None for r in regions)
        whole_map(model)
        expected = [model.forward_window(x, *window), model.forward_window(x, *window, skip_below=skip)]
    filled = (got[1] == -1000.0) | (got[1] == 1000.0)
    assert filled.any() and (~filled).any()
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_int8_head_is_the_head_within_rounding_and_gating_it_changes_nothing():
    """The head's convolutions in 8-bit integers (ranges measured on its own input, as weights
    gate measures them): its logits are the fp32 head's within rounding, but not equal (the
    integers ran), and the gated int8 head gives the full int8 head's logits on its active cells."""
    if not runtime.cpu_runs_int8():
        pytest.skip("oneDNN's 8-bit convolutions need an x86 CPU")
    from s2s2net_cli.training.gate import StepInputRanges

    head = trained_like().head
    exact, fast = SubpixelHead(head).eval(), SubpixelHead(head).eval()
    x = torch.randn(1, 256, 24, 20)
    active = torch.zeros(24, 20, dtype=torch.bool)
    active[3, 4] = active[12:14, 2:18] = active[23, 19] = True
    with torch.inference_mode():
        watch = StepInputRanges([*exact.steps, exact.last])
        expected = exact(x, 16)
        ranges = watch.close()
        fast.quantize(ranges)
        got, gated = fast(x, 16), fast(x, 16, active=active)
    assert len(ranges) == 4 and all(low < 0 < high for low, high in ranges[1:])  # Mish's outputs: from -0.31 up
    error = (got - expected).abs()
    assert 0 < error.max() < 0.1 * expected.abs().max() and error.mean() < 0.01 * expected.abs().mean()
    on = active.repeat_interleave(20, 0).repeat_interleave(20, 1).expand_as(got)
    assert (gated[on] - got[on]).abs().max() < 1e-4 * got.abs().max()


def test_codes_compiled_are_torchs(monkeypatch):
    if not subpixel_head.has_cpp_compiler():
        pytest.skip("no C++ compiler for TorchInductor")
    fused = FusedMish(enabled=True)
    for shape, channels_last in (((1, 32, 10, 14), True), ((3, 8, 5, 7), False)):
        x = torch.randn(*shape) * 4
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        got, expected = fused.codes(x, 1 / 0.05, 7), subpixel_head.codes(x, 1 / 0.05, 7)
        assert fused.failure is None and got.dtype == torch.uint8 and got.stride() == expected.stride()
        assert (got.int() - expected.int()).abs().max() <= 1 and expected.min() == 0 and expected.max() == 255


def test_inference_network_keeps_every_number_on_the_networks_device():
    """On a GPU the rewritten head's numbers (phased kernels, biases, phase indices) must be
    made where the trained network's are; built on the CPU they made predict --device cuda
    fail at its first tile. The meta device stands in for a GPU here."""
    fast = inference_network(S2S2Net().eval().to("meta"))
    assert {t.device.type for t in (*fast.parameters(), *fast.buffers())} == {"meta"}


def test_a_bf16_runtime_holds_the_heads_weights_in_bf16_with_the_same_numbers(random_weights):
    """Its convolutions cast their weights to their input's type on every call; held in bf16
    once, the answer is the same to the bit."""
    fast = runtime.ModelRuntime(random_weights, "cpu", "bf16", full_head=True)
    assert {p.dtype for p in fast.model.head.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in fast.model.encoder.parameters()} == {torch.float32}
    batch = np.random.default_rng(4).normal(0, 1, (1, 6, 48, 48)).astype("float32")
    got = fast(batch, (8, 8, 32, 32))
    fast.model.head.to(torch.float32)  # bf16 values held in fp32: what each call's cast would give
    assert np.array_equal(got, fast(batch, (8, 8, 32, 32)))
