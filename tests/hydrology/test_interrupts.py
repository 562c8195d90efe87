"""rivers and occurrence killed mid-run leave no output (and, for a catchable signal, no
temporary file either); an existing output is kept."""

import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import rasterio
from affine import Affine
from rasterio.features import rasterize
from shapely.geometry import LineString

from s2s2net_cli.io import geotiff_profile

from ..conftest import default_sigint


def river_mask(path, size=3000, shift=0):
    """A 2 m mask with meandering rivers across it, big enough to take seconds."""
    x = np.linspace(-50, size + 50, 400)
    rivers = [LineString(np.c_[x, y0 + 120 * np.sin(2 * np.pi * x / 700 + k) + shift]).buffer(8 + 4 * k)
              for k, y0 in enumerate(range(250, size, 500))]
    data = rasterize([(r, 1) for r in rivers], out_shape=(size, size), dtype="uint8")
    profile = geotiff_profile((1, size, size), "uint8", "EPSG:32631", Affine(2, 0, 600000, 0, -2, 5900000), 255)
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(data, 1)
    return path


def interrupt(args, tmp_path, sig, started):
    proc = subprocess.Popen([sys.executable, "-m", "s2s2net_cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and not started():
        time.sleep(0.05)
    assert proc.poll() is None, f"finished before it could be interrupted: {proc.communicate()}"
    proc.send_signal(sig)
    proc.wait(timeout=60)
    return proc.returncode


def leftovers(tmp_path):
    return sorted(p.name for p in tmp_path.iterdir() if ".tmp" in p.name)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_interrupted_occurrence_leaves_no_output(tmp_path, sig):
    masks = [str(river_mask(tmp_path / f"m{k}.tif", shift=20 * (k % 3))) for k in range(12)]  # 12 dates, 3 kinds
    out = tmp_path / "occurrence.tif"
    rc = interrupt(["occurrence", *masks, "--from-masks", "-o", str(out)], tmp_path, sig,
                   lambda: bool(leftovers(tmp_path)))
    assert rc != 0 and not out.exists()
    if sig != signal.SIGKILL:
        assert leftovers(tmp_path) == []


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_interrupted_rivers_leaves_no_output_and_keeps_an_existing_one(tmp_path, sig):
    mask = river_mask(tmp_path / "mask.tif", size=8000)  # 16 s on an AMX Xeon's two cores: a 4000 px mask took 4 s
    # there, so the kill at 4 s came after the finished output had replaced the old one
    out = tmp_path / "rivers.gpkg"
    out.write_bytes(b"an earlier run's output")
    start = time.time()
    rc = interrupt(["rivers", str(mask), "-o", str(out), "--window", "512", "--overwrite"], tmp_path, sig,
                   lambda: time.time() - start > 4)  # started, imported, measuring windows
    assert rc != 0 and out.read_bytes() == b"an earlier run's output"
    if sig != signal.SIGKILL:
        assert leftovers(tmp_path) == []
