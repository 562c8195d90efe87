"""The README's examples on the bundled sample data run as written: each shell line of a
fenced block that starts with ``s2s2net`` and reads ``sample_data/``, and its Python block, in a
fresh process from a folder of their own (outputs land there), against the repository's
sample_data."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import rasterio

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"```(\w*)\n(.*?)```", re.S)


def _blocks(kind: str) -> list[str]:
    return [body for lang, body in BLOCK.findall((ROOT / "README.md").read_text()) if lang == kind]


def test_the_readmes_commands_on_the_sample_data_run_as_written(tmp_path):
    shutil.copytree(ROOT / "sample_data", tmp_path / "sample_data")
    lines = [line for body in _blocks("") for line in body.splitlines()
             if line.startswith("s2s2net ") and "sample_data/" in line]
    assert len(lines) >= 2
    for line in lines:
        args = line.split()[1:]
        r = subprocess.run([sys.executable, "-m", "s2s2net_cli", *args], cwd=tmp_path, capture_output=True, text=True)
        assert r.returncode == 0, (line, r.stderr)
        with rasterio.open(tmp_path / args[args.index("-o") + 1]) as src:
            assert (src.read(1) == 1).any()  # water mapped (clouds of the L2A product are 255)


def test_the_readmes_python_example_runs_as_written(tmp_path):
    shutil.copytree(ROOT / "sample_data", tmp_path / "sample_data")
    (code,) = _blocks("python")
    r = subprocess.run([sys.executable, "-W", "error::UserWarning", "-c", code], cwd=tmp_path, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    assert float(r.stdout.strip()) > 0 and (tmp_path / "water.tif").exists()
