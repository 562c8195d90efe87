"""The house's GeoTIFF helpers."""

import numpy as np
import pytest
import rasterio
from rasterio.windows import Window

from s2s2net_cli.io import GDAL_THREADS, gdal_threads, geotiff_profile


def test_gdal_threads_keep_a_users_own_setting_and_are_not_used_where_gdal_reads_damage_as_zeros(tmp_path,
                                                                                                   monkeypatch):
    """GDAL 3.6 (rasterio 1.3.9's wheels) read a truncated GeoTIFF's blocks decoded in threads
    as zeros, without an error: a cut scene was mapped as if whole. Before GDAL 3.8 its reads
    and writes take one thread; a user's own setting is kept; and a cut file read under
    gdal_threads() is an error on the GDAL here."""
    monkeypatch.delenv("GDAL_NUM_THREADS", raising=False)
    for version, threads in (("3.6.4", "1"), ("3.7.3", "1"), ("3.8.4", GDAL_THREADS), ("3.10.3", GDAL_THREADS),
                             ("4.0.0", GDAL_THREADS)):
        monkeypatch.setattr(rasterio, "__gdal_version__", version)
        with gdal_threads():
            assert rasterio.env.getenv()["GDAL_NUM_THREADS"] == threads, version
    for own in ("1", "4"):
        monkeypatch.setenv("GDAL_NUM_THREADS", own)
        with gdal_threads():
            assert rasterio.env.getenv()["GDAL_NUM_THREADS"] == own
    monkeypatch.undo()
    data = np.random.default_rng(3).integers(1, 4000, (2, 700, 610)).astype("uint16")
    profile = geotiff_profile(data.shape, "uint16", "EPSG:32633", rasterio.Affine(10, 0, 500000, 0, -10, 4000000))
    whole, cut = tmp_path / "whole.tif", tmp_path / "cut.tif"
    with rasterio.open(whole, "w", **profile) as dst:
        dst.write(data)
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size * 2 // 3])
    with gdal_threads(), rasterio.open(cut) as src, pytest.raises(rasterio.errors.RasterioIOError):
        src.read()


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
