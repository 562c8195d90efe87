import numpy as np
import pytest
import rasterio
from affine import Affine
from rasterio.windows import Window

from s2s2net_cli.bands import BandSpec
from s2s2net_cli.formats import valid_mask
from s2s2net_cli.sources.checks import band_order_warnings
from s2s2net_cli.sources.scene import SceneReader, read_scene
from s2s2net_cli.errors import InputError
from s2s2net_cli.sources.open import open_scene
from s2s2net_cli.sources.options import SceneOptions

from ..conftest import write_raster


def test_bad_scenes_get_one_clear_error(tmp_path, scene_factory):
    text = tmp_path / "notes.tif"
    text.write_text("not a raster")
    with pytest.raises(InputError, match="notes.tif: not a readable raster"):
        open_scene(text)
    with pytest.raises(InputError, match="has no CRS"):
        open_scene(scene_factory(crs=None))
    with pytest.raises(InputError, match="rotated"):
        open_scene(scene_factory(transform=Affine(10, 2, 500000, 1, -10, 4000000)))
    with pytest.raises(InputError, match="has 3 band"):
        open_scene(scene_factory(count=3))
    u8 = write_raster(tmp_path / "u8.tif", np.ones((6, 8, 8), "uint8"))
    with pytest.raises(InputError, match="dtype uint8"):
        open_scene(u8)
    with pytest.raises(InputError, match="band index 9 does not exist"):
        open_scene(scene_factory(), SceneOptions(bands=(1, 2, 3, 4, 5, 9)))


def test_band_indexes_pick_and_reorder(tmp_path):
    data = np.stack([np.full((4, 4), 100 * (i + 1), "uint16") for i in range(8)])
    path = write_raster(tmp_path / "stack.tif", data)
    norm, valid, scene = read_scene(path, BandSpec(mean=(0,) * 6, std=(1,) * 6), indexes=(8, 7, 6, 5, 4, 3))
    assert scene.indexes == (8, 7, 6, 5, 4, 3)
    assert np.allclose(norm[:, 0, 0], [0.08, 0.07, 0.06, 0.05, 0.04, 0.03])


def test_nodata_nan_and_all_zero_pixels_are_invalid_and_filled_with_the_mean():
    raw = np.full((6, 3, 3), 1000.0, dtype="float32")
    raw[:, 0, 0] = 0  # all zero
    raw[2, 0, 1] = np.nan  # NaN in one band
    raw[:, 0, 2] = -9999  # the file's nodata
    raw[1, 1, 1] = 0  # one zero band is data
    valid = valid_mask(raw, -9999)
    assert valid.tolist() == [[False, False, False], [True, True, True], [True, True, True]]
    spec = BandSpec()
    from s2s2net_cli.bands import normalise
    from s2s2net_cli.sources.scene import Scene

    scene = Scene("x.tif", None, None, 3, 3, "float32", 6, (1, 2, 3, 4, 5, 6), -9999)
    norm = normalise(scene.reflectance(raw), valid, spec)
    assert np.isfinite(norm).all() and (norm[:, 0] == 0).all()


def test_windows_past_the_edge_are_reflected(scene_factory):
    path = scene_factory(10, 12)
    scene = open_scene(path)
    with rasterio.open(path) as src:
        full = src.read()
    with SceneReader(scene) as reader:
        tile, valid, keep = reader.read(Window(-3, -2, 18, 16))
    assert valid.shape == keep.shape == (16, 18) and (valid == keep).all()
    assert tile.shape == (6, 16, 18)
    assert np.array_equal(tile[:, 2:12, 3:15], full)
    assert np.array_equal(tile[:, 1, 3:15], full[:, 1])  # row -1 mirrors row 1
    assert np.array_equal(tile[:, 2:12, 15], full[:, :, 10])  # column 12 mirrors column 10


def test_band_descriptions_that_contradict_the_model_warn(tmp_path):
    data = np.ones((6, 4, 4), "uint16") * 500
    ok = write_raster(tmp_path / "ok.tif", data, descriptions=("B02", "B03", "B04", "B8", "B11", "B12"))
    swapped = write_raster(tmp_path / "sw.tif", data, descriptions=("B04", "B03", "B02", "B08", "B11", "B12"))
    assert band_order_warnings(open_scene(ok), BandSpec()) == []
    warnings = band_order_warnings(open_scene(swapped), BandSpec())
    assert len(warnings) == 2 and "sw.tif" in warnings[0] and "'B04'" in warnings[0]
