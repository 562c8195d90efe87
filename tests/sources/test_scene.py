import ast
import json
from pathlib import Path

import numpy as np
import pytest
import rasterio
from affine import Affine
from rasterio.windows import Window

from s2s2net_cli.bands import BandSpec
from s2s2net_cli.errors import InputError
from s2s2net_cli.formats import valid_mask
from s2s2net_cli.rulebook import code_of
from s2s2net_cli.sources.checks import band_order_warnings
from s2s2net_cli.sources.open import open_scene
from s2s2net_cli.sources.options import SceneOptions
from s2s2net_cli.sources.scene import SceneReader, read_scene

from ..conftest import raises_rule, write_raster


def test_a_south_up_scene_is_told_how_to_turn_it_north_up(tmp_path, scene_factory):
    """A stack whose rows run south to north (rioxarray writes one from ascending y) was said
    to have "no usable geotransform"; it is told what it is and the line that turns it."""
    import subprocess
    import sys

    north_up = scene_factory(20, 24)
    with rasterio.open(north_up) as src:
        data, profile, t = src.read(), src.profile, src.transform
    profile.update(transform=Affine(t.a, 0, t.c, 0, -t.e, t.f + t.e * src.height))
    south_up = tmp_path / "south up.tif"
    with rasterio.open(south_up, "w", **profile) as dst:
        dst.write(data[:, ::-1])
    with raises_rule("S2N-RASTER-SOUTH-UP", "south up.tif: its rows run from south to north") as refused:
        open_scene(south_up)
    fix = str(refused.value).split("in Python: ")[1]
    done = subprocess.run([sys.executable, "-c", f"import rioxarray; {fix}"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    with rasterio.open(tmp_path / "south up_north_up.tif") as fixed, rasterio.open(north_up) as src:
        assert fixed.transform == src.transform and np.array_equal(fixed.read(), src.read())
    assert open_scene(tmp_path / "south up_north_up.tif").transform == open_scene(north_up).transform


def test_a_raster_georeferenced_by_control_points_is_told_the_warp_that_grids_it(tmp_path, scene_factory):
    """A scene or mask georeferenced by ground control points alone (an image not yet
    orthorectified, a georeferencer's output) was said to have "no CRS", a mask among
    occurrence's dates first to run "from south to north" (GDAL's identity transform); a rotated
    one was told only that north-up grids are supported. Each is told the rio warp that puts it
    on a grid, and what that writes is read as the original."""
    import shlex
    import subprocess
    import sys
    import warnings

    from rasterio.control import GroundControlPoint

    from ..conftest import codes, run_cli

    north_up = scene_factory(24, 20)
    with rasterio.open(north_up) as src:
        data, profile, t, crs = src.read(), src.profile, src.transform, src.crs
    height, width = data.shape[1:]
    corners = [(0, 0), (0, width), (height, 0), (height, width)]  # (row, col)
    points = [GroundControlPoint(row=r, col=c, x=(t * (c, r))[0], y=(t * (c, r))[1]) for r, c in corners]

    def with_points(path, pixels, tags=None, nodata=0):
        bare = {k: v for k, v in profile.items() if k not in ("crs", "transform")}
        bare.update(count=len(pixels), dtype=pixels.dtype, nodata=nodata)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)
            with rasterio.open(path, "w", **bare) as dst:
                dst.write(pixels)
                dst.gcps = (points, crs)
                dst.update_tags(**(tags or {}))
        return path

    def warped(message):
        command = shlex.split(message.split("north-up grid first: ")[1].split(" [S2N-")[0])
        assert command[:2] == ["rio", "warp"]
        rio = Path(sys.executable).with_name("rio")  # rasterio's command, installed beside this Python
        done = subprocess.run([str(rio), *command[1:]], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return command[3]

    scene = with_points(tmp_path / "scene.tif", data)
    with raises_rule("S2N-RASTER-GCPS", "scene.tif: is georeferenced by 4 ground control points") as refused:
        open_scene(scene)
    fixed = open_scene(warped(str(refused.value)))
    assert fixed.transform == t and fixed.crs == crs
    with rasterio.open(fixed.path) as src:
        assert np.array_equal(src.read(), data)
    import rioxarray  # a notebook's DataArray of it is told the line that mends the array

    import s2s2net_cli as s2n

    da = rioxarray.open_rasterio(scene)
    with raises_rule("S2N-RASTER-GCPS", "DataArray: is georeferenced by 4 ground control points") as refused:
        s2n.predict(da)
    line = str(refused.value).split("north-up grid first: ")[1]
    assert line.startswith("da.rio.reproject(")
    assert s2n.predict(eval(line, {"da": da, "rasterio": rasterio})).shape == (5 * height, 5 * width)
    rotated = tmp_path / "rotated.tif"
    with rasterio.open(rotated, "w", **{**profile, "transform": Affine.rotation(30) * t}) as dst:
        dst.write(data)
    with raises_rule("S2N-SCENE-ROTATED", "only north-up grids are supported: warp it onto a north-up grid first"):
        open_scene(rotated)
    # masks: evaluate's label, rivers' mask, and an occurrence date, first or not
    mask = np.zeros((1, height, width), "uint8")
    mask[0, 3:9, 2:15] = 1
    label = write_raster(tmp_path / "label.tif", mask, transform=t, crs=crs, nodata=255)
    gcp_label = with_points(tmp_path / "gcp_label.tif", mask, nodata=255)
    r = run_cli("evaluate", "--pair", north_up, gcp_label, "--baseline", "ndwi")
    assert r.returncode == 1 and codes(r.stderr) == ["S2N-RASTER-GCPS"], r.stderr
    r = run_cli("evaluate", "--pair", north_up, warped(r.stderr), "--baseline", "ndwi", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["rows"][0]["pixels"] == 480, r.stderr
    r = run_cli("rivers", gcp_label, "-o", tmp_path / "rivers.gpkg")
    assert r.returncode == 1 and codes(r.stderr) == ["S2N-RASTER-GCPS"], r.stderr
    for masks in ((gcp_label, label), (label, gcp_label)):
        r = run_cli("occurrence", *masks, "--from-masks", "-o", tmp_path / "occurrence.tif", "--strict")
        assert r.returncode == 1 and codes(r.stderr) == ["S2N-RASTER-GCPS"], r.stderr
    no_crs = tmp_path / "no_crs.tif"  # no CRS at all: said so, not "south to north"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)
        with rasterio.open(no_crs, "w", driver="GTiff", width=width, height=height, count=1, dtype="uint8") as dst:
            dst.write(mask)
    r = run_cli("occurrence", no_crs, label, "--from-masks", "-o", tmp_path / "occurrence.tif")
    assert r.returncode == 1 and codes(r.stderr) == ["S2N-MASK-NO-CRS"], r.stderr
    assert not (tmp_path / "occurrence.tif").exists() and not (tmp_path / "rivers.gpkg").exists()


def test_a_south_up_mask_is_told_the_same_where_it_was_misread(tmp_path, scene_factory):
    """A south-up label stopped evaluate with rasterio's "Bounds and transform are inconsistent"
    (no code), and occurrence skipped a south-up mask as not overlapping its own place."""
    from ..conftest import codes, run_cli

    scene = scene_factory(20, 20)
    with rasterio.open(scene) as src:
        t, h = src.transform, src.height
    mask = np.zeros((20, 20), "uint8")
    mask[3:9, 2:15] = 1
    south_up = write_raster(tmp_path / "label.tif", mask[::-1], transform=Affine(t.a, 0, t.c, 0, -t.e, t.f + t.e * h),
                            nodata=255)
    north_up = write_raster(tmp_path / "north.tif", mask, transform=t, nodata=255)
    r = run_cli("evaluate", "--pair", scene, south_up, "--baseline", "ndwi")
    assert r.returncode == 1 and codes(r.stderr) == ["S2N-RASTER-SOUTH-UP"] and "label.tif: its rows" in r.stderr
    r = run_cli("occurrence", north_up, south_up, "--from-masks", "-o", tmp_path / "o.tif", "--json")
    (skipped,) = json.loads(r.stdout)["skipped"]
    assert r.returncode == 1 and skipped["code"] == "S2N-RASTER-SOUTH-UP"  # a date skipped: exit 1


def test_bad_scenes_get_one_clear_error(tmp_path, scene_factory):
    text = tmp_path / "notes.tif"
    text.write_text("not a raster")
    with raises_rule("S2N-SCENE-UNREADABLE", "notes.tif"):
        open_scene(text)
    with raises_rule("S2N-SCENE-NO-CRS"):
        open_scene(scene_factory(crs=None))
    with raises_rule("S2N-SCENE-ROTATED"):
        open_scene(scene_factory(transform=Affine(10, 2, 500000, 1, -10, 4000000)))
    with raises_rule("S2N-SCENE-BAND-COUNT") as refused:
        open_scene(scene_factory(count=3))
    assert "lacks" not in str(refused.value)  # its bands name nothing: nothing to say of them
    # a stack of the four 10 m bands, named: told which it lacks and where they come from
    ten_m = write_raster(tmp_path / "ten_m.tif", np.ones((4, 8, 8), "uint16"), descriptions=("B02", "B03", "B04", "B08"))
    with raises_rule("S2N-SCENE-BAND-COUNT") as refused:
        open_scene(ten_m)
    assert "it lacks B11, B12 (B11, B12 are 20 m bands" in str(refused.value)
    u8 = write_raster(tmp_path / "u8.tif", np.ones((6, 8, 8), "uint8"))
    with raises_rule("S2N-SCENE-DTYPE") as refused:
        open_scene(u8)
    assert "a mask, perhaps" not in str(refused.value)
    # one band of bytes: a mask given where the scene goes (a pair's two files swapped)
    mask = write_raster(tmp_path / "mask.tif", np.ones((1, 8, 8), "uint8"))
    with raises_rule("S2N-SCENE-DTYPE", mask) as refused:
        open_scene(mask)
    assert str(refused.value).endswith("a mask, perhaps (one band of bytes); of a pair, the scene comes first and its "
                                       "mask second")
    with raises_rule("S2N-BANDS-INDEX"):
        open_scene(scene_factory(), SceneOptions(bands=(1, 2, 3, 4, 5, 9)))
    # one band read twice would stand for two of the six, the network given a wrong band without
    # a word (an undescribed stack gets no band-order warning to give it away)
    with raises_rule("S2N-BANDS-TWICE"):
        open_scene(scene_factory(), SceneOptions(bands=(1, 2, 3, 4, 5, 5)))


def test_a_folder_of_scenes_given_as_a_scene_names_them_and_one_of_bands_does_not(tmp_path, scene_factory):
    """``predict scenes/ -o out/`` was refused as "is a folder, not a scene", whose way out
    (gdalbuildvrt) was for a folder of band files; one of scenes says how to name them."""
    scenes = tmp_path / "scenes"
    scenes.mkdir()
    for name in ("a.tif", "b.tif", "c.tif"):
        (scenes / name).write_bytes(scene_factory().read_bytes())
    (scenes / "notes.txt").write_text("not a scene")
    with pytest.raises(InputError, match=rf"scenes: is a folder, not a scene \(it holds 3 files that may be scenes: "
                                         rf"a.tif, b.tif, ...; name each, as {scenes}/\*.tif\)"):
        open_scene(scenes)
    bands = tmp_path / "T18SVG_20230823"
    bands.mkdir()
    for band in ("B02", "B03", "B04"):
        (bands / f"T18SVG_20230823_{band}_10m.tif").write_bytes(b"")
    with pytest.raises(InputError, match=r"T18SVG_20230823: holds band files \(B02, B03, B04\) and none named for "
                                         r"B08: a folder \(or zip\) of band files needs"):  # read as one since
        open_scene(bands)


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


def test_band_descriptions_say_which_band_is_which(tmp_path):
    data = np.ones((6, 4, 4), "uint16") * 500
    ok = write_raster(tmp_path / "ok.tif", data, descriptions=("B02", "B03", "B04", "B8", "B11", "B12"))
    swapped = write_raster(tmp_path / "sw.tif", data, descriptions=("B04", "B03", "B02", "B08", "B11", "B12"))
    assert open_scene(ok).indexes == (1, 2, 3, 4, 5, 6) and band_order_warnings(open_scene(ok), BandSpec()) == []
    assert open_scene(swapped).indexes == (3, 2, 1, 4, 5, 6)  # read by name
    assert band_order_warnings(open_scene(swapped), BandSpec()) == []
    # --bands says otherwise: the user is followed, and told what the descriptions say
    warnings = band_order_warnings(open_scene(swapped, SceneOptions(bands=(1, 2, 3, 4, 5, 6))), BandSpec())
    assert [w.code for w in warnings] == ["S2N-BANDS-DESCRIBED-OTHER"] * 2
    assert warnings[0].path == str(swapped) and warnings[0].values["description"] == "B04"
    # a Sen1Floods11 chip: 13 bands B1 ... B12 with B8A, and Earth Search's names
    s1f11 = ("B1", "B2", "B3", "B4", "B5", "B6", "B7", "B8", "B8A", "B9", "B10", "B11", "B12")
    thirteen = write_raster(tmp_path / "13.tif", np.ones((13, 4, 4), "uint16"), descriptions=s1f11)
    assert open_scene(thirteen).indexes == (2, 3, 4, 8, 12, 13)
    named = write_raster(tmp_path / "n.tif", np.ones((7, 4, 4), "uint16"),
                         descriptions=("coastal", "nir", "red", "green", "blue", "swir22", "swir16"))
    assert open_scene(named).indexes == (5, 4, 3, 2, 7, 6)
    # the SWIR1/SWIR2 of many exports (an Earth Engine script's renamed bands), however spelt
    exported = write_raster(tmp_path / "e.tif", np.ones((7, 4, 4), "uint16"),
                            descriptions=("QA60", "SWIR2", "SWIR 1", "NIR", "Red", "Green", "Blue"))
    assert open_scene(exported).indexes == (7, 6, 5, 4, 3, 2)
    # a band's resolution or a composite's statistic after it (Sen2Cor's B02_10m, an Earth
    # Engine median's B2_median) is read past; a prefix is not (Landsat's SR_B5 is its NIR)
    suffixed = write_raster(tmp_path / "s.tif", np.ones((7, 4, 4), "uint16"),
                            descriptions=("B12_20m", "B11_20m", "B08_10m", "B8A_20m", "B04_10m", "B03_10m", "B02_10m"))
    assert open_scene(suffixed).indexes == (7, 6, 5, 3, 2, 1)
    median = write_raster(tmp_path / "m.tif", np.ones((6, 4, 4), "uint16"),
                          descriptions=("B4_median", "B3_median", "B2_median", "B8_median", "B11_median", "B12_median"))
    assert open_scene(median).indexes == (3, 2, 1, 4, 5, 6)
    landsat = write_raster(tmp_path / "l.tif", np.ones((7, 4, 4), "uint16"),
                           descriptions=tuple(f"SR_B{i}" for i in range(1, 8)))
    with raises_rule("S2N-BANDS-AMBIGUOUS", landsat):
        open_scene(landsat)


def test_a_stack_whose_bands_say_nothing_is_read_in_order_with_a_warning(tmp_path):
    """Six bands with no description: read as B02 ... B12, and said so, because red, green and
    blue first (as many exports are) would be mapped without a word; --bands silences it."""
    data = np.ones((6, 4, 4), "uint16") * 500
    bare = write_raster(tmp_path / "bare.tif", data)
    scene = open_scene(bare)
    assert scene.indexes == (1, 2, 3, 4, 5, 6)
    warnings = band_order_warnings(scene, BandSpec())
    assert [w.code for w in warnings] == ["S2N-BANDS-UNDESCRIBED"] and warnings[0].path == str(bare)
    assert warnings[0].values["names"] == "B02, B03, B04, B08, B11, B12"
    assert band_order_warnings(open_scene(bare, SceneOptions(bands=(3, 2, 1, 4, 5, 6))), BandSpec()) == []
    described = write_raster(tmp_path / "d.tif", data, descriptions=("B02", "B03", "B04", "B08", "B11", "B12"))
    assert band_order_warnings(open_scene(described), BandSpec()) == []


@pytest.mark.parametrize("count,descriptions,said", [
    (10, None, "they name nothing"),
    (6, ("B02", "B03", "B04", "B05", "B06", "B07"), "they name 1=B02, 2=B03, 3=B04, 4=B05, 5=B06, 6=B07"),
    (7, ("B02", "B03", "B04", "B08", "B08", "B11", "B12"), "4=B08, 5=B08"),
    # all of a product's bands unnamed, as Earth Engine and SNAP export them: their likely indexes
    (12, None, "they name nothing): give their 1-based indexes with bands; a stack of all 12 bands of L2A in ESA's "
               "order (B01, B02, B03, B04, B05, B06, B07, B08, B8A, B09, B11, B12) is bands=(2, 3, 4, 8, 11, 12)"),
    (13, None, "a stack of all 13 bands of L1C in ESA's order (B01, B02, B03, B04, B05, B06, B07, B08, B8A, B09, "
               "B10, B11, B12) is bands=(2, 3, 4, 8, 12, 13)"),
])
def test_a_stack_whose_bands_cannot_be_told_apart_is_refused(tmp_path, count, descriptions, said):
    path = write_raster(tmp_path / "s.tif", np.ones((count, 4, 4), "uint16"), descriptions=descriptions)
    with pytest.raises(InputError) as exc:
        open_scene(path)
    assert code_of(exc.value) == "S2N-BANDS-AMBIGUOUS" and str(exc.value.finding.path) == str(path) and said in str(exc.value)
    assert ("ESA's order" in str(exc.value)) == (count in (12, 13)), str(exc.value)
    assert open_scene(path, SceneOptions(bands=(1, 2, 3, 4, 6, 7 if count > 6 else 5))).count == count


@pytest.mark.parametrize("crs, transform, warned", [
    ("EPSG:32633", Affine(10, 0, 500000, 0, -10, 4000000), None),
    ("EPSG:32633", Affine(20, 0, 500000, 0, -20, 4000000), 20),
    ("EPSG:32633", Affine(60, 0, 500000, 0, -60, 4000000), 60),
    ("EPSG:2263", Affine(32.8, 0, 900000, 0, -32.8, 200000), None),  # 10 m in US survey feet
    ("EPSG:2263", Affine(10, 0, 900000, 0, -10, 200000), 3.05),  # 10 feet
    ("EPSG:4326", Affine(8.983e-5, 0, -65.0, 0, -8.983e-5, -14.0), None),  # a Sen1Floods11 chip's ~10 m
    ("EPSG:4326", Affine(5.4e-4, 0, -65.0, 0, -5.4e-4, -14.0), 59.6),
])
def test_pixels_other_than_10m_are_warned_of(tmp_path, crs, transform, warned):
    from s2s2net_cli.sources.checks import resolution_warning

    data = np.random.default_rng(0).integers(200, 4000, size=(6, 16, 16)).astype("uint16")
    scene = open_scene(write_raster(tmp_path / "s.tif", data, transform=transform, crs=crs, nodata=0))
    said = resolution_warning(scene)
    assert (said is None) if warned is None else (said.code == "S2N-PIXELS-NOT-10M"
                                                  and said.values["metres"] == pytest.approx(warned, rel=0.01))


@pytest.mark.parametrize("values, dtype, warned", [
    ((200, 4000), "uint16", None),  # reflectance x 10000
    ((0.02, 0.4), "float32", None),  # float reflectance, read with scale 1
    ((1, 10), "uint16", "S2N-SCALE-IMPLAUSIBLE"),  # median reflectance 0.0005
    ((3, 250), "uint16", "S2N-SCALE-EIGHT-BIT"),  # no value above 249: an 8-bit picture (0-255)
])
def test_values_of_another_scale_are_warned_of(tmp_path, values, dtype, warned):
    """A display stretch to 0-255 saved as uint16 (median reflectance 0.013 read x 10000, above
    the median test's 0.002) was mapped as dark water almost everywhere without a word."""
    from s2s2net_cli.sources.checks import scene_warnings

    rng = np.random.default_rng(0)
    data = (rng.uniform(*values, size=(6, 32, 32)) if dtype == "float32" else rng.integers(*values, size=(6, 32, 32)))
    scene = open_scene(write_raster(tmp_path / "s.tif", data.astype(dtype), transform=Affine(10, 0, 500000, 0, -10, 4e6),
                                    crs="EPSG:32633"), SceneOptions(bands=(1, 2, 3, 4, 5, 6)))
    said = [w for w in scene_warnings(scene, BandSpec()) if w.code != "S2N-PIXELS-NOT-10M"]
    assert [w.code for w in said] == ([] if warned is None else [warned])
    assert all(str(w).startswith(f"{tmp_path / 's.tif'}: ") for w in said)


def test_an_offset_the_dns_do_not_carry_is_warned_of(tmp_path):
    """--offset -1000 on a stack made before processing baseline 04.00 darkened every band by 0.1
    (the Virginia crop mapped 8.5 km2 of water against 7.2) and was told only that its values
    looked like another scale."""
    from s2s2net_cli.sources.checks import scene_warnings

    rng = np.random.default_rng(0)
    dns = rng.integers(100, 4000, size=(6, 32, 32))  # reflectance x 10000, dark water's SWIR among them
    options = dict(transform=Affine(10, 0, 500000, 0, -10, 4e6), crs="EPSG:32633")
    before = open_scene(write_raster(tmp_path / "old.tif", dns.astype("uint16"), **options),
                        SceneOptions(bands=(1, 2, 3, 4, 5, 6), offset=-1000))
    said = scene_warnings(before, BandSpec())
    assert [w.code for w in said] == ["S2N-OFFSET-NOT-CARRIED"] and said[0].values["offset"] == "-1000"
    # the same reflectance stored as baseline 04.00 stores it, read with its offset: nothing to say
    after = open_scene(write_raster(tmp_path / "new.tif", (dns + 1000).astype("uint16"), **options),
                       SceneOptions(bands=(1, 2, 3, 4, 5, 6), offset=-1000))
    assert scene_warnings(after, BandSpec()) == []


@pytest.mark.parametrize("how", ["internal_mask", "alpha_band", "sidecar_mask"])
def test_what_gdal_masks_as_empty_is_nodata(tmp_path, how, random_weights):
    """A stack's own mask band (internal or .msk beside it) or an alpha band marks pixels empty
    whose values look like data: they are nodata in the scene read and in predict's mask."""
    from rasterio.enums import ColorInterp
    from rasterio.windows import Window

    from s2s2net_cli.sources.scene import SceneReader

    from ..conftest import run_cli

    data = np.random.default_rng(0).integers(300, 3000, (6, 32, 32)).astype("uint16")
    empty = np.zeros((32, 32), bool)
    empty[:, :12] = True  # the left 12 columns: no data, though their values are ordinary
    path = tmp_path / "s.tif"
    bands = 7 if how == "alpha_band" else 6
    profile = dict(driver="GTiff", width=32, height=32, count=bands, dtype="uint16", crs="EPSG:32633",
                   transform=Affine(10, 0, 500000, 0, -10, 4000000))
    with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=how == "internal_mask"):
        with rasterio.open(path, "w", **profile) as dst:
            dst.write(data, indexes=list(range(1, 7)))
            dst.descriptions = ("B02", "B03", "B04", "B08", "B11", "B12") + (("alpha",) if bands == 7 else ())
            if how == "alpha_band":
                dst.write(np.where(empty, 0, 255).astype("uint16"), 7)
                dst.colorinterp = [ColorInterp.gray] * 6 + [ColorInterp.alpha]
            else:
                dst.write_mask(~empty)
    assert (tmp_path / "s.tif.msk").exists() == (how == "sidecar_mask")
    scene = open_scene(path)
    assert scene.indexes == (1, 2, 3, 4, 5, 6)
    with SceneReader(scene) as reader:
        _, valid, keep = reader.read(Window(0, 0, 32, 32))
    assert np.array_equal(valid, ~empty) and np.array_equal(keep, ~empty)
    r = run_cli("predict", path, "-o", tmp_path / "w.tif", "--weights", random_weights, "--tile-size", 32)
    assert r.returncode == 0, r.stderr
    with rasterio.open(tmp_path / "w.tif") as src:
        out = src.read(1)
    assert (out[:, :60] == 255).all() and (out[:, 60:] != 255).all()


def test_what_a_labels_mask_band_marks_empty_is_left_out(tmp_path):
    from s2s2net_cli.labels import open_label, warp_label

    water = np.zeros((20, 20), "uint8")
    water[:, 10:] = 1
    seen = np.ones((20, 20), bool)
    seen[:5] = False  # unlabelled rows, stored as land 0 under the mask band
    t = Affine(10, 0, 500000, 0, -10, 4000000)
    with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=True):
        with rasterio.open(tmp_path / "label.tif", "w", driver="GTiff", width=20, height=20, count=1, dtype="uint8",
                           crs="EPSG:32633", transform=t) as dst:
            dst.write(water, 1)
            dst.write_mask(seen)
    out = warp_label(open_label(tmp_path / "label.tif"), t, "EPSG:32633", (20, 20), finer=False)
    assert np.isnan(out[:5]).all() and np.array_equal(out[5:], water[5:].astype("float32"))


@pytest.mark.parametrize("layout", [dict(tiled=True, blockxsize=256, blockysize=256), dict(blockysize=3)])
def test_a_large_scenes_sample_is_gdals_decimation_read_block_by_block(tmp_path, layout):
    """Without overviews the sample is read window by window (GDAL's own decimated read of such
    a file is four times slower): the same pixels as GDAL's nearest decimation, of the whole
    scene and of a part of it, and a file cut short is refused before any output."""
    from dataclasses import replace

    from s2s2net_cli.sources.scene import read_sample

    data = np.random.default_rng(3).integers(1, 4000, (6, 700, 610)).astype("uint16")
    path = tmp_path / "large.tif"
    with rasterio.open(path, "w", driver="GTiff", width=610, height=700, count=6, dtype="uint16", compress="deflate",
                       crs="EPSG:32633", transform=Affine(10, 0, 500000, 0, -10, 4000000), **layout) as dst:
        dst.write(data)
    scene = open_scene(path)
    part = replace(scene, origin=(37, 51), height=500, width=470)
    with rasterio.open(path) as src:
        assert not src.overviews(1)
        whole = src.read(out_shape=(6, 256, 256))
        windowed = src.read(out_shape=(6, 256, 256), window=Window(51, 37, 470, 500))
    assert np.array_equal(read_sample(scene), whole)
    assert np.array_equal(read_sample(part), windowed)
    assert read_sample(scene, size=1000).shape == (6, 700, 610)  # small enough: the whole scene
    cut = tmp_path / "cut.tif"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size * 2 // 3])
    with raises_rule("S2N-SCENE-DAMAGED", "cut.tif"):
        read_sample(replace(scene, path=cut, dataset=str(cut)))


def test_a_bbox_given_latitude_first_or_in_metres_is_told_how_it_is_taken(tmp_path):
    """--bbox takes W,S,E,N in degrees. A box copied latitude first (S,W,N,E, as map sites give
    coordinates) missed the scene and was told only where the scene is: it is told that read
    latitude first it would overlap, with the box as it is taken, which then reads the scene.
    A box in the scene's own metres is told it is not degrees."""
    from s2s2net_cli.sources.aoi import restrict_to_aoi

    t = Affine(10, 0, 420000, 0, -10, 4175000)  # Chesapeake Bay, UTM 18N: longitudes within -90..90
    scene = open_scene(write_raster(tmp_path / "s.tif", np.ones((6, 40, 40), "uint16") * 500, transform=t,
                                    crs="EPSG:32618", nodata=0))
    with raises_rule("S2N-AOI-NO-OVERLAP") as info:
        restrict_to_aoi(scene, bbox="0,0,1,1")
    assert "latitude first" not in str(info.value)  # elsewhere altogether: where the scene is, only
    covers = str(info.value).split("which covers ")[1].split(" ")[0]
    west, south, east, north = (float(v) for v in covers.split(","))
    with raises_rule("S2N-AOI-NO-OVERLAP") as info:
        restrict_to_aoi(scene, bbox=f"{south},{west},{north},{east}")
    hinted = str(info.value).split("read latitude first it would: give longitude first, bbox=")[1]
    assert restrict_to_aoi(scene, bbox=ast.literal_eval(hinted)).width == 40  # as Python takes it, typed as said
    with raises_rule("S2N-BBOX-LONGITUDE") as info:
        restrict_to_aoi(scene, bbox="420000,4174600,420400,4175000")
    assert "not a projected CRS's metres" in str(info.value)


def test_a_band_empty_where_the_others_hold_data_is_warned_of(tmp_path):
    """A stack whose B11 was all 0 (a band file that failed to read) was mapped without a word,
    as if its SWIR were black: 13 % more water on the Virginia crop. A band that is 0 in more
    than 5 % of the pixels where the others show land is named; a swath edge's sliver is not,
    nor a lake's SWIR of 0 in an L2A product of before 2022 (negative reflectance clipped)."""
    from s2s2net_cli.sources.checks import scene_warnings

    from ..conftest import codes, run_cli

    t = Affine(10, 0, 420000, 0, -10, 4175000)
    dn = np.full((6, 40, 40), 500, "uint16")
    dn[3] = 3000
    names = ("B02", "B03", "B04", "B08", "B11", "B12")
    whole = dn.copy()
    whole[4] = 0
    sliver = dn.copy()
    sliver[4:, :, :1] = 0  # one column of 40: 2.5 %
    lake = dn.copy()
    lake[:, :, :20] = np.array([300, 400, 250, 150, 0, 0])[:, None, None]  # dark water, its SWIR clipped to 0
    cases = (("whole", whole, [("B11", 5, 1.0)]), ("sliver", sliver, []), ("plain", dn, []), ("lake", lake, []))
    for name, data, said in cases:
        scene = open_scene(write_raster(tmp_path / f"{name}.tif", data, transform=t, crs="EPSG:32618", nodata=0,
                                        descriptions=names))
        found = [w for w in scene_warnings(scene, BandSpec()) if w.code == "S2N-BAND-EMPTY"]
        assert [(w.values["band"], w.values["index"], w.values["share"]) for w in found] == said, name
    r = run_cli("predict", tmp_path / "whole.tif", "-o", tmp_path / "w.tif", "--tile-size", 40, "--overlap", 8)
    assert r.returncode == 0 and "S2N-BAND-EMPTY" in codes(r.stderr), r.stderr
    assert "whole.tif: B11 (band 5 of its file) holds no data (0) in 100% of the pixels where its other" in r.stderr
