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
    assert record["flags"] == ["avx2", "avx512f", "avx512_bf16"]
    assert record["cores"] >= 1


def test_machine_record_without_cpuinfo_has_no_family():
    record = _machine().describe("")
    assert "family" not in record and record["flags"] == [] and record["cpu"]
