import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _machine():
    spec = importlib.util.spec_from_file_location("bench_machine", ROOT / "benchmarks" / "machine.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC
flags\t\t: fpu sse avx2 avx512f avx512_bf16 avx512_vnni

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 26
model\t\t: 2
model name\t: Other
flags\t\t: fpu avx2 amx_tile
"""


def test_machine_record_names_the_cpu_by_family_and_model_and_its_path_flags():
    record = _machine().describe(CPUINFO)
    # the first processor's block only; "AMD EPYC" alone would not tell a Zen 4 from a Zen 5
    assert record["cpu"] == "AMD EPYC" and record["family"] == 25 and record["model"] == 17
    assert record["flags"] == ["avx2", "avx512f", "avx512_vnni", "avx512_bf16"]
    assert record["cores"] >= 1


def test_machine_record_without_cpuinfo_has_no_family():
    record = _machine().describe("")
    assert "family" not in record and record["flags"] == [] and record["cpu"]


def _benchmark(name: str):
    """benchmarks/NAME.py as a module, its imports found as `python benchmarks/NAME.py` finds them."""
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "benchmarks" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return module


def _int8_accuracy():
    return _benchmark("int8_head_accuracy")


def test_int8_simulation_calibrates_on_the_trained_heads_own_numbers_then_rounds_to_255_steps():
    import torch

    from s2s2net_cli.model import ProgressiveUpsamplingHead

    torch.manual_seed(0)
    head = ProgressiveUpsamplingHead(8, (8, 6, 4, 4)).eval()
    x = torch.randn(1, 8, 6, 6)
    bench = _int8_accuracy().Int8Head()
    with torch.no_grad():
        # calibrating: exactly the trained head, every tensor's range recorded
        assert torch.allclose(bench.forward(head, x), head(x), atol=1e-5)
        assert set(bench.ranges) == {"features"} | {f"step {k} {w} Mish" for k in range(4) for w in ("before", "after")}
        lo, hi = bench.ranges["features"]
        assert (lo, hi) == (float(x.min()), float(x.max()))
        bench.ranges["logit"] = (-16.0, 16.0)
        bench.calibrating = False
        rounded = bench.tensor(x, "features")
        step = (hi - lo) / 255
        assert float((rounded - x).abs().max()) <= step  # within a step: the zero point is rounded too
        assert len(torch.unique(rounded)) <= 256
        assert float(bench.tensor(torch.tensor([hi + 10.0]), "features")) <= hi + step  # clipped to the range
        w = head.steps[0][0].weight
        assert all(len(torch.unique(bench.weight(w)[c])) <= 255 for c in range(w.shape[0]))
        int8 = bench.forward(head, x)
        assert int8.shape == head(x).shape and not torch.equal(int8, head(x))


def test_winograd_benchmark_computes_the_convolution_it_times():
    """The benchmark's F(2x2, 3x3) is the 3x3 convolution (padding 1) it is timed against."""
    import torch
    import torch.nn.functional as F

    bench = _benchmark("winograd_bench")
    torch.manual_seed(0)
    x = torch.randn(2, 5, 6, 10).contiguous(memory_format=torch.channels_last)
    w, b = torch.randn(7, 5, 3, 3), torch.randn(7)
    expected = F.conv2d(x, w, b, padding=1)
    got = bench.winograd_conv(x, bench.winograd_weights(w), b)
    assert got.shape == expected.shape
    assert (got - expected).abs().max() < 1e-4 * expected.abs().max()
    assert not torch.equal(bench.winograd_conv(x, bench.winograd_weights(w.flip(-1)), b), expected)


def test_a_benchmark_times_the_package_it_imports_not_the_current_folders(tmp_path):
    """The benchmarks run ``python -m s2s2net_cli``, which puts the current directory first on
    sys.path: an A/B turn (B with PYTHONPATH of another checkout) run from A's root timed A's
    code twice. Their children run in their own folder now; here one run beside a package named
    s2s2net_cli that stops at once times the real one."""
    import subprocess
    import sys

    fake = tmp_path / "s2s2net_cli"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "__main__.py").write_text("import sys\nsys.exit('the package of the current folder ran')\n")
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "chip_bench.py"), "--size", "512", "--chip", "256",
                        "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "the package of the current folder ran" not in r.stderr, r.stderr[-1500:]
