import contextlib
import os
import re
import signal
import subprocess
import sys
import traceback
from dataclasses import dataclass

import numpy as np
import pytest
import rasterio
import torch
from affine import Affine

os.environ.setdefault("OMP_NUM_THREADS", "2")
torch.set_num_threads(2)

UTM = "EPSG:32633"


def write_raster(path, data, transform=Affine(10, 0, 500000, 0, -10, 4000000), crs=UTM, nodata=None, dtype=None,
                 descriptions=None):
    """Write a (bands, h, w) or (h, w) array as a GeoTIFF; returns the path."""
    data = np.asarray(data)
    if data.ndim == 2:
        data = data[None]
    with rasterio.open(path, "w", driver="GTiff", width=data.shape[2], height=data.shape[1], count=data.shape[0],
                       dtype=dtype or data.dtype, crs=crs, transform=transform, nodata=nodata) as dst:
        dst.write(data.astype(dtype or data.dtype))
        if descriptions:
            dst.descriptions = descriptions
    return path


def default_sigint() -> None:
    """preexec_fn for a child that a test interrupts with SIGINT: a shell that starts the test
    run in the background leaves SIGINT ignored, Python then never raises KeyboardInterrupt, and
    the child would run on to the end whatever the code does. As from a terminal, it is not ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def scene_factory(tmp_path):
    """Make a random 6-band uint16 scene file of a given size."""
    counter = iter(range(10_000))

    def make(height=40, width=40, seed=0, **kw):
        rng = np.random.default_rng(seed)
        data = rng.integers(200, 4000, size=(kw.pop("count", 6), height, width)).astype("uint16")
        return write_raster(tmp_path / f"scene{next(counter)}.tif", data, nodata=kw.pop("nodata", 0), **kw)

    return make


@pytest.fixture(scope="session")
def random_weights(tmp_path_factory):
    """An untrained but valid weights file (seeded)."""
    from s2s2net_cli.checkpoint import WeightsCard, save_weights
    from s2s2net_cli.model import S2S2Net

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("weights") / "random.safetensors"
    save_weights(path, S2S2Net().state_dict(), WeightsCard(training={"note": "random init for tests"}))
    return path


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str


def run_cli(*args, cwd=None, timeout=600, process=False):
    """Run the s2s2net command on ``args``: in this process through Click's CliRunner (no cold
    start of torch per call), or as a real ``python -m s2s2net_cli`` with ``process=True``
    (training, which sets up a process group, and anything about processes). An exception the
    command lets escape shows on stderr as a traceback, as it would in a process."""
    if process:
        return subprocess.run([sys.executable, "-m", "s2s2net_cli", *map(str, args)], capture_output=True, text=True,
                              cwd=cwd, timeout=timeout)
    from click.testing import CliRunner

    from s2s2net_cli.cli.main import cli

    old_cwd, old_sigterm = os.getcwd(), signal.getsignal(signal.SIGTERM)
    try:
        if cwd:
            os.chdir(cwd)
        result = CliRunner().invoke(cli, [str(a) for a in args], prog_name="s2s2net")
    finally:
        os.chdir(old_cwd)
        signal.signal(signal.SIGTERM, old_sigterm)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))  # "Traceback (most recent call last): ..."
    return CliResult(result.exit_code, result.stdout, stderr)


CODE = re.compile(r"\[(S2N-[A-Z0-9-]+)\]$")


SMALL = "S2N-SCENE-SMALL"  # what predict says of every scene under 128 px: the tests' scenes are tiny, for speed


def codes(text: str, small: bool = False) -> list[str]:
    """The rulebook codes that end the lines of ``text`` (stderr), in order; without the
    small-scene warning (SMALL) every tiny test scene gets, unless ``small``."""
    return [m.group(1) for line in text.splitlines() if (m := CODE.search(line.strip()))
            and (small or m.group(1) != SMALL)]


def said(warnings) -> list[str]:
    """The codes of a JSON (or Python) list of warnings, without SMALL (see codes)."""
    found = [w if isinstance(w, str) else w["code"] if isinstance(w, dict) else getattr(w, "code", None)
             or w.finding.code for w in warnings]
    return [c for c in found if c != SMALL]


def refused(r, code: str, exit_code: int = 1, names=None) -> bool:
    """Whether a run ended with one error line of rule ``code`` and ``exit_code``, naming ``names``."""
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    return (r.returncode == exit_code and bool(lines) and lines[-1].startswith("Error: ")
            and codes(lines[-1]) == [code] and (names is None or str(names) in lines[-1]))


@contextlib.contextmanager
def raises_rule(code: str, names=None):
    """The block raises the rulebook's refusal ``code``; its message names ``names`` (a file)."""
    from s2s2net_cli.errors import S2S2NetError
    from s2s2net_cli.rulebook import code_of

    with pytest.raises(S2S2NetError) as info:
        yield info
    assert code_of(info.value) == code, f"{code_of(info.value)}: {info.value}"
    assert names is None or str(names) in str(info.value), str(info.value)


def write_polygons(path, mask, transform, crs=UTM, to_crs=None, **to_file):
    """The water (1) of a (h, w) mask on ``transform`` traced into polygons, written as a vector
    file (reprojected to ``to_crs`` when given); returns the path."""
    import geopandas as gpd
    from rasterio.features import shapes
    from shapely.geometry import shape

    water = np.asarray(mask) == 1
    polygons = [shape(g) for g, _ in shapes(water.astype("uint8"), mask=water, transform=transform)]
    frame = gpd.GeoDataFrame({"water": [1] * len(polygons)}, geometry=polygons, crs=crs)
    (frame.to_crs(to_crs) if to_crs else frame).to_file(path, **to_file)
    return path
