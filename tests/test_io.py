"""The house's GeoTIFF helpers."""

import numpy as np
import rasterio
from rasterio.windows import Window

from s2s2net_cli.io import GDAL_THREADS, gdal_threads, geotiff_profile


def test_gdal_threads_keep_a_users_own_setting(monkeypatch):
    monkeypatch.delenv("GDAL_NUM_THREADS", raising=False)
    with gdal_threads():
        assert rasterio.env.getenv()["GDAL_NUM_THREADS"] == GDAL_THREADS
    monkeypatch.setenv("GDAL_NUM_THREADS", "1")
    with gdal_threads():
        assert rasterio.env.getenv()["GDAL_NUM_THREADS"] == "1"


def test_a_geotiff_written_and_read_in_threads_holds_the_same_pixels(tmp_path):
    rng = np.random.default_rng(3)
    data = (rng.random((1, 1100, 1300)) < 0.2).astype("uint8")
    data[0, 500:700, :] = 255  # a band of nodata across blocks
    profile = geotiff_profile(data.shape, "uint8", "EPSG:32633", rasterio.Affine(2, 0, 500000, 0, -2, 5000000), 255,
                              block=256)
    paths = {}
    for name, threaded in (("one", False), ("threads", True)):
        paths[name] = tmp_path / f"{name}.tif"
        with (gdal_threads() if threaded else rasterio.Env()), rasterio.open(paths[name], "w", **profile) as dst:
            for row in range(0, 1100, 300):  # in pieces, as predict writes
                dst.write(data[:, row: row + 300], window=Window(0, row, 1300, min(300, 1100 - row)))
    for path in paths.values():
        with gdal_threads(), rasterio.open(path) as src:
            assert src.compression.value == "DEFLATE" and src.block_shapes[0] == (256, 256)
            assert np.array_equal(src.read(), data)
