import os

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


def run_cli(*args, cwd=None, timeout=600):
    """Run ``python -m s2s2net_cli`` in a subprocess; returns CompletedProcess."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "s2s2net_cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)
