"""The library's face: ``import s2s2net_cli as s2n`` and each command as one call, on real files,
giving what the command gives."""

import json
import subprocess
import sys
import warnings
from pathlib import Path

import geopandas as gpd
import numpy as np
import pytest
import rasterio
import torch
from affine import Affine
from shapely.geometry import box

import s2s2net_cli as s2n

from .conftest import raises_rule, run_cli, said, write_raster

T10 = Affine(10, 0, 500000, 0, -10, 4000000)
BANDS = ("B02", "B03", "B04", "B08", "B11", "B12")


def _flood(tmp_path, size=40):
    rng = np.random.default_rng(3)
    water = rng.random((size, size)) < 0.35
    water[5:15, 5:25] = True
    dn = np.empty((6, size, size), "uint16")
    dn[:] = np.array([600, 700, 600, 3000, 2500, 1500])[:, None, None]
    dn[:, water] = np.array([600, 900, 500, 300, 200, 100])[:, None]
    scene = write_raster(tmp_path / "scene.tif", dn, transform=T10, nodata=0, descriptions=BANDS)
    label = write_raster(tmp_path / "label.tif", water.astype("uint8"), transform=T10, nodata=255)
    return scene, label, water


def test_the_package_lists_its_face_and_importing_it_loads_no_torch():
    assert {"predict", "evaluate", "rivers", "occurrence", "load_model", "ModelOptions", "S2S2NetError"} <= set(
        s2n.__all__)
    assert all(getattr(s2n, name) is not None for name in s2n.__all__)
    for name in ("predict", "evaluate", "rivers", "occurrence", "load_model", "chip", "train", "calibrate", "gate",
                 "synth"):
        doc = getattr(s2n, name).__doc__
        assert "Args:" in doc and "Returns:" in doc, name
    loaded = subprocess.run([sys.executable, "-c", "import sys, s2s2net_cli as s2n; s2n.ModelOptions; "
                             "print('torch' in sys.modules)"], capture_output=True, text=True)
    assert loaded.returncode == 0 and loaded.stdout.strip() == "False", loaded.stderr
    with pytest.raises(AttributeError):
        s2n.no_such_thing


def test_predict_writes_what_the_command_writes(tmp_path, random_weights):
    scene, _, _ = _flood(tmp_path)
    result = s2n.predict(scene, tmp_path / "api.tif", weights=random_weights, tile_size=32, overlap=8)
    assert run_cli("predict", scene, "-o", tmp_path / "cli.tif", "--weights", random_weights, "--tile-size", 32,
                   "--overlap", 8).returncode == 0
    with rasterio.open(tmp_path / "api.tif") as a, rasterio.open(tmp_path / "cli.tif") as c:
        assert np.array_equal(a.read(), c.read()) and a.transform == c.transform and a.shape == (200, 200)
    assert result.output == str(tmp_path / "api.tif") and said(result.warnings) == []
    with raises_rule("S2N-OUTPUT-EXISTS", tmp_path / "api.tif"):
        s2n.predict(scene, tmp_path / "api.tif", weights=random_weights)
    with raises_rule("S2N-OVERLAP-TILE"):
        s2n.predict(scene, tmp_path / "other.tif", weights=random_weights, tile_size=32, overlap=40)
    with pytest.raises(TypeError, match="tile_sise"):
        s2n.predict(scene, tmp_path / "other.tif", tile_sise=32)



@pytest.mark.parametrize("call, misspelt, said", [
    (lambda p, **k: s2n.predict(p / "s.tif", p / "w.tif", **k), "tilesize", "predict() got an unexpected keyword "
     "argument 'tilesize'; did you mean 'tile_size'?"),
    (lambda p, **k: s2n.predict_scenes([p / "s.tif"], p, **k), "skip_exsting", "did you mean 'skip_existing'?"),
    (lambda p, **k: s2n.evaluate([(p / "s.tif", p / "l.tif")], **k), "baseline", "evaluate() got an unexpected "
     "keyword argument 'baseline'; did you mean 'baselines'?"),
    (lambda p, **k: s2n.rivers(p / "w.tif", p / "r.gpkg", **k), "spacing_metres", "did you mean 'spacing_m'?"),
    (lambda p, **k: s2n.occurrence([p / "w.tif"], p / "o.tif", **k), "from_mask", "did you mean 'from_masks'?"),
    (lambda p, **k: s2n.chip([(p / "s.tif", p / "l.tif")], p / "c", **k), "chip_size", "chip() got an unexpected keyword "
     "argument 'chip_size'; did you mean 'size'?"),
    (lambda p, **k: s2n.train([p / "c"], p / "run", **k), "log_every", "train() got an unexpected keyword "
     "argument 'log_every'; did you mean 'val_every'?"),
    (lambda p, **k: s2n.train([p / "c"], p / "run", **k), "learning_rate", "'learning_rate'"),
    (lambda p, **k: s2n.predict(p / "s.tif", p / "w.tif", **k), "mask", "predict() got an unexpected keyword argument "
     "'mask'; the command line's --mask is 'leave_out' here"),
    (lambda p, **k: s2n.rivers(p / "w.tif", p / "r.gpkg", **k), "min_width", "--min-width is 'min_width_m' here"),
    (lambda p, **k: s2n.synth(p / "syn", **k), "background", "synth() got an unexpected keyword argument "
     "'background'; the command line's --background is 'backgrounds' here"),
    (lambda p, **k: s2n.synth(p / "syn", **k), "counts", "did you mean 'count'?"),
])
def test_a_misspelt_keyword_is_named_with_the_nearest_one(tmp_path, call, misspelt, said):
    """Every function names itself and the keyword it does not take, before any file is read
    (train and rivers gave their option bundle's name, TrainOptions.__init__(), and no hint)."""
    with pytest.raises(TypeError) as raised:
        call(tmp_path, **{misspelt: 1})
    assert said in str(raised.value) and "Options" not in str(raised.value)
    assert list(tmp_path.iterdir()) == []



def test_a_dataarray_with_output_is_written_as_its_file_would_be(tmp_path, random_weights):
    """s2n.predict(da, "water.tif") said the DataArray's whole repr and "not found", and
    predict_scenes([da], ...) the same: the mask is now the file's own mask, with its polygons
    beside it, whichever way the array's y runs; what predict says is said of the DataArray."""
    import rioxarray

    scene, _, _ = _flood(tmp_path)
    da = rioxarray.open_rasterio(scene)
    kw = {"weights": random_weights, "tile_size": 32, "overlap": 8}
    from_file = s2n.predict(scene, tmp_path / "file.tif", vector=tmp_path / "file.gpkg", **kw)
    for k, array in enumerate([da, da.sortby("y")]):
        result = s2n.predict(array, tmp_path / f"da{k}.tif", vector=tmp_path / f"da{k}.gpkg", **kw)
        assert result.scene == "DataArray" and result.output == str(tmp_path / f"da{k}.tif")
        assert result.water_km2 == from_file.water_km2
        with rasterio.open(tmp_path / f"da{k}.tif") as a, rasterio.open(tmp_path / "file.tif") as f:
            assert np.array_equal(a.read(), f.read()) and a.transform == f.transform and a.crs == f.crs
            assert a.tags()["source_scene"] == "scene.tif"
        assert len(gpd.read_file(tmp_path / f"da{k}.gpkg")) == len(gpd.read_file(tmp_path / "file.gpkg"))
    with raises_rule("S2N-OUTPUT-EXISTS", tmp_path / "da0.tif"):
        s2n.predict(da, tmp_path / "da0.tif", **kw)
    with raises_rule("S2N-SCENE-ALL-NODATA") as refused:
        s2n.predict(da.copy(data=np.zeros_like(da.values)), tmp_path / "blank.tif", **kw)
    assert str(refused.value).startswith("DataArray: ") and not (tmp_path / "blank.tif").exists()
    unnamed = da.copy()
    del unnamed.attrs["long_name"]  # the band names rioxarray read from the file's descriptions
    with pytest.warns(s2n.S2S2NetWarning, match="^DataArray: its bands are not named"):
        result = s2n.predict(unnamed, tmp_path / "unnamed.tif", **kw)
    assert said(result.warnings) == ["S2N-DATAARRAY-BANDS-UNNAMED"]
    with raises_rule("S2N-SOURCE-TYPE") as refused:
        s2n.predict_scenes([da], tmp_path / "out")
    assert "predict(da, output), one at a time" in str(refused.value) and "Coordinates" not in str(refused.value)

def test_evaluate_scores_dataarrays_as_their_files(tmp_path, random_weights):
    """s2n.evaluate([(da, label)]) was refused ("pairs[0][0] is an xarray.DataArray, not a
    path"), where predict takes the same array: a scene or reference held as a DataArray is
    scored as its file is, named pairs[k][j] in the scores and in what is said of it."""
    import rioxarray

    scene, label, _ = _flood(tmp_path)
    da, reference = rioxarray.open_rasterio(scene), rioxarray.open_rasterio(label)
    kw = {"weights": random_weights, "baselines": "ndwi", "tile_size": 32, "overlap": 8}
    files = s2n.evaluate((scene, label), **kw)
    for pair in [(da, label), (scene, reference.sortby("y")), (da.sortby("y"), reference)]:
        arrays = s2n.evaluate([pair], **kw)
        assert [r.counts for r in arrays] == [r.counts for r in files]  # the same pixels, the same scores
        image = arrays[0].images[0]
        assert image["id"] == "scene"  # named by the file the array was read from
        for j, given in enumerate(pair):
            assert image[("image", "reference")[j]] == (f"pairs[0][{j}]" if not isinstance(given, Path) else str(given))
    unread = da.copy()
    unread.encoding = {}  # an array made in memory: no file to name it by
    assert s2n.evaluate([(unread, label)], **kw)[0].images[0]["id"] == "pairs[0][0]"
    with raises_rule("S2N-DATAARRAY-NO-CRS") as refused:
        s2n.evaluate([(scene, label), (scene, reference.rio.write_crs("EPSG:32631").drop_vars("spatial_ref"))], **kw)
    assert str(refused.value).startswith("pairs[1][1]: has no CRS")
    with raises_rule("S2N-MASK-NO-WATER-VALUE") as refused:
        s2n.evaluate([(da, reference.where(reference != 1, 7))], **kw)
    assert str(refused.value).startswith("pairs[0][1]: holds 7 besides land 0") and "tmp" not in str(refused.value)
    with pytest.warns(s2n.S2S2NetWarning, match=r"^pairs\[0\]\[1\]: covers .* give bbox=\("):
        part = s2n.evaluate([(da, reference.isel(x=slice(0, 8), y=slice(0, 8)))], **kw)
    found = {w.code: str(w) for w in part[0].images[0]["warnings"]}  # said of the arrays, not their files
    assert found["S2N-REFERENCE-PART-OF-SCENE"].startswith("pairs[0][1]: covers ")
    assert found["S2N-SCENE-SMALL"].startswith("pairs[0][0]: is 40 x 40 px")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["label.tif", "scene.tif"]  # no file left beside them


def test_evaluate_scores_a_geodataframe_reference_as_its_file(tmp_path, random_weights):
    """Water polygons drawn or read in a notebook (a GeoDataFrame) were refused as a reference
    ("not a path"), where aoi= takes one: they are scored as the same polygons in a file are,
    named pairs[k][1], in any CRS; one without a CRS is refused naming it."""
    from rasterio.features import shapes
    from shapely.geometry import shape

    scene, label, water = _flood(tmp_path)
    with rasterio.open(label) as src:
        polygons = [shape(g) for g, _ in shapes(water.astype("uint8"), mask=water, transform=src.transform)]
        crs = src.crs
    drawn = gpd.GeoDataFrame(geometry=polygons, crs=crs)
    drawn.to_file(tmp_path / "drawn.gpkg")
    kw = {"weights": random_weights, "baselines": "ndwi", "tile_size": 32, "overlap": 8}
    files = s2n.evaluate((scene, tmp_path / "drawn.gpkg"), **kw)
    for table in (drawn, drawn.to_crs("EPSG:4326").geometry):
        held = s2n.evaluate((scene, table), **kw)
        assert [r.counts for r in held] == [r.counts for r in files] and held[0].images[0]["reference"] == "pairs[0][1]"
    with raises_rule("S2N-GEO-TABLE-NO-CRS") as refused:
        s2n.evaluate([(scene, label), (scene, gpd.GeoDataFrame(geometry=polygons))], **kw)
    assert str(refused.value).startswith("pairs[1][1]: the GeoDataFrame has no CRS")


def test_a_dataset_of_bands_as_odc_stac_loads_it_is_a_scene(tmp_path, random_weights):
    """odc.stac.load gives an xarray.Dataset, one variable per band (red, green, ... each
    (time, y, x)); predict refused it ("is an xarray.Dataset, not a scene"). It is read as the
    DataArray of its bands: the same mask as the stack's, the same scores, one date a cube's."""
    import rioxarray
    import xarray as xr

    scene, label, _ = _flood(tmp_path)
    da = rioxarray.open_rasterio(scene)
    kw = {"weights": random_weights, "tile_size": 32, "overlap": 8}
    names = ("red", "blue", "green", "nir", "swir22", "swir16")  # Earth Search's names, in another order
    order = [2, 0, 1, 3, 5, 4]
    times = np.array(["2021-08-01", "2021-06-01"], dtype="datetime64[ns]")
    ds = xr.Dataset({n: da.isel(band=i, drop=True) for n, i in zip(names, order)}).expand_dims(time=times[:1])
    ds = ds.rio.write_crs(da.rio.crs)
    alone = s2n.predict(da, **kw)
    mask = s2n.predict(ds, **kw)
    assert np.array_equal(mask.values, alone.values) and str(mask.time.values)[:10] == "2021-08-01"
    assert "S2N-BANDS-UNDESCRIBED" not in mask.attrs["warning_codes"]  # its bands named: no order assumed
    assert s2n.evaluate((ds, label), baselines="ndwi", **kw)[0].counts == \
        s2n.evaluate((scene, label), baselines="ndwi", **kw)[0].counts
    assert s2n.chip((ds, label), tmp_path / "c1", size=16, val_fraction=0).chips == \
        s2n.chip((scene, label), tmp_path / "c2", size=16, val_fraction=0).chips
    two = xr.concat([ds, ds.assign_coords(time=times[1:])], dim="time")
    summary = s2n.occurrence(two, tmp_path / "occ.tif", **kw)
    assert [d.date for d in summary.dates] == ["2021-06-01", "2021-08-01"]
    with raises_rule("S2N-DATAARRAY-SEVERAL"):  # two dates given as one scene: which one is the user's to say
        s2n.predict(two, **kw)
    # dimensions named lat and lon (a netCDF's): rioxarray's own error, not a line of the rulebook
    for given, call in ((da, s2n.predict), (two.to_dataarray("band"), lambda c: s2n.occurrence(c, tmp_path / "o2.tif"))):
        with raises_rule("S2N-DATAARRAY-SPATIAL-DIMS") as refused:
            call(given.rename({"x": "lon", "y": "lat"}))
        fix = str(refused.value).split("name them, ")[1]
        assert fix == "da.rename({'lon': 'x', 'lat': 'y'})"
    assert np.array_equal(s2n.predict(da.rename({"x": "lon", "y": "lat"}).rename({"lon": "x", "lat": "y"}), **kw).values,
                          alone.values)


def test_a_dataarray_without_output_refuses_what_only_a_file_takes(tmp_path):
    """Its mask is returned, not written: polygons or rivers asked beside it were dropped silently."""
    import rioxarray

    scene, _, _ = _flood(tmp_path)
    da = rioxarray.open_rasterio(scene)
    with pytest.raises(TypeError, match="vector, rivers with a mask file: give output"):
        s2n.predict(da, vector=tmp_path / "w.gpkg", rivers=tmp_path / "r.gpkg")
    with pytest.raises(TypeError, match="writes cog with a mask file"):
        s2n.predict(da, cog=True)
    # a scene file without output: told how to have its mask in memory
    with pytest.raises(TypeError, match=r"needs an output path .*rioxarray.open_rasterio\(path\)"):
        s2n.predict(scene)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["label.tif", "scene.tif"]


def test_predict_warns_in_pythons_terms(tmp_path, random_weights):
    scene, _, _ = _flood(tmp_path)
    with rasterio.open(scene) as src:
        bare = write_raster(tmp_path / "bare.tif", src.read(), transform=T10, nodata=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = s2n.predict(bare, tmp_path / "w.tif", weights=random_weights, tile_size=32, overlap=8)
    told = [w.message for w in caught if isinstance(w.message, s2n.S2S2NetWarning)]
    assert said(told) == said(result.warnings) == ["S2N-BANDS-UNDESCRIBED"]
    assert {w.filename for w in caught if isinstance(w.message, s2n.S2S2NetWarning)} == {__file__}  # the call's line
    assert "bands=(3, 2, 1, 4, 5, 6)" in str(told[0])


def test_evaluate_scores_as_compare_does(tmp_path):
    scene, label, _ = _flood(tmp_path)
    scores = s2n.evaluate([(scene, label)], baselines=["ndwi", "mndwi"], degrade=5)
    r = run_cli("compare", "--pair", scene, label, "--baseline", "ndwi", "--baseline", "mndwi", "--degrade", 5,
                "--json")
    rows = json.loads(r.stdout)["rows"]
    assert [s.model for s in scores] == [row["model"] for row in rows] == ["ndwi", "mndwi"]
    assert [s.overall["f1"] for s in scores] == [row["f1"] for row in rows]
    with raises_rule("S2N-DEGRADE-FACTOR") as refused:
        s2n.evaluate([(scene, label)], baselines="ndwi", degrade=7)
    assert str(refused.value) == "degrade=7 is not one of 2, 3, 4, 5"  # Python's keyword, not the flag
    small = write_raster(tmp_path / "small.tif", np.full((6, 8, 8), 900, "uint16"), transform=T10, nodata=0)
    with raises_rule("S2N-DEGRADE-SCENE-SMALL", small):
        s2n.evaluate([(small, label)], baselines="ndwi", degrade=5)


def test_rivers_and_occurrence_from_masks(tmp_path):
    water = np.zeros((200, 200), "uint8")
    water[:, 90:110] = 1  # a river 40 m wide
    t2 = Affine(2, 0, 500000, 0, -2, 4000000)
    mask = write_raster(tmp_path / "2021-06-01_water.tif", water, transform=t2, nodata=255)
    summary = s2n.rivers(mask, tmp_path / "rivers.gpkg", spacing_m=20)
    assert summary.reaches >= 1 and summary.width_median_m == pytest.approx(40, abs=4)
    dry = write_raster(tmp_path / "2021-08-01_water.tif", np.zeros_like(water), transform=t2, nodata=255)
    counted = s2n.occurrence([mask, dry], tmp_path / "occ.tif", from_masks=True)
    assert len(counted.dates) == 2 and [d.date for d in counted.dates] == ["2021-06-01", "2021-08-01"]
    assert [d.mask for d in counted.dates] == [mask, dry]  # the user's own masks, named as given
    with rasterio.open(tmp_path / "occ.tif") as src:
        occurrence = src.read(1)
    assert (occurrence[:, 90:110] == 50).all() and (occurrence[:, :80] == 0).all()



def test_rivers_measures_the_mask_predict_returns_for_a_dataarray(tmp_path):
    """A notebook's mask, s2n.predict(da), was refused as no path: its rivers are those of the
    same mask written as a file, whichever way its y runs; its refusals name the DataArray."""
    import rioxarray

    water = np.zeros((200, 200), "uint8")
    water[:, 90:110] = 1  # a river 40 m wide
    water[:5] = 255
    t2 = Affine(2, 0, 500000, 0, -2, 4000000)
    path = write_raster(tmp_path / "water.tif", water, transform=t2, nodata=255)
    da = rioxarray.open_rasterio(path).squeeze("band", drop=True)
    from_file = s2n.rivers(path, tmp_path / "file.gpkg", spacing_m=20)
    for k, mask in enumerate([da, da.sortby("y")]):
        summary = s2n.rivers(mask, tmp_path / f"da{k}.gpkg", spacing_m=20)
        assert (summary.reaches, summary.transects, summary.length_km, summary.width_median_m) == (
            from_file.reaches, from_file.transects, from_file.length_km, from_file.width_median_m)
        assert summary.output == str(tmp_path / f"da{k}.gpkg")
    assert gpd.read_file(tmp_path / "da1.gpkg", layer="widths").geometry.equals(
        gpd.read_file(tmp_path / "file.gpkg", layer="widths").geometry)
    with raises_rule("S2N-DATAARRAY-NO-CRS"):
        s2n.rivers(da.drop_vars("spatial_ref"), tmp_path / "x.gpkg")
    with raises_rule("S2N-RIVERS-NOT-PROJECTED") as refused:
        s2n.rivers(da.rio.reproject("EPSG:4326"), tmp_path / "y.gpkg")
    assert str(refused.value).startswith("DataArray: ")
    # told the line that mends the array, not a rio warp of its temporary file, and it measures
    line = str(refused.value).split("first: ")[1]
    assert line.startswith("da.rio.reproject('EPSG:32") and "tmp" not in str(refused.value)
    mended = eval(line, {"da": da.rio.reproject("EPSG:4326"), "rasterio": rasterio})
    assert s2n.rivers(mended, tmp_path / "z.gpkg", spacing_m=20).width_median_m == pytest.approx(40, abs=3)

def test_occurrence_takes_dates_as_a_dict_of_scenes(tmp_path):
    """dates= took only a CSV file: a dict (the Python form of the table) failed to open as a
    path. It is read as the CSV's rows are: by path or file name, a date or ISO text, and text
    that is no ISO date is refused naming the keyword."""
    import datetime

    t2 = Affine(2, 0, 500000, 0, -2, 4000000)
    wet = write_raster(tmp_path / "a.tif", np.ones((40, 40), "uint8"), transform=t2, nodata=255)
    dry = write_raster(tmp_path / "b.tif", np.zeros((40, 40), "uint8"), transform=t2, nodata=255)
    counted = s2n.occurrence([wet, dry], tmp_path / "occ.tif", from_masks=True,
                             dates={"b.tif": datetime.date(2021, 3, 1), str(wet): "2021-05-01T10:20:00Z"})
    assert [(Path(d.source).name, d.date) for d in counted.dates] == [("b.tif", "2021-03-01"), ("a.tif", "2021-05-01")]
    with pytest.warns(s2n.S2S2NetWarning, match="a.tif: has no date, and dates does not name it"):
        s2n.occurrence([wet, dry], tmp_path / "occ2.tif", from_masks=True, dates={"b.tif": "2021-03-01"})
    with raises_rule("S2N-DATES-NOT-ISO") as refused:
        s2n.occurrence([wet, dry], tmp_path / "occ3.tif", from_masks=True, dates={"b.tif": "01/03/2021"})
    assert str(refused.value) == "dates: '01/03/2021' for b.tif is not an ISO date (YYYY-MM-DD)"



def test_occurrence_counts_the_dates_of_a_dataarray_cube(tmp_path, random_weights):
    """A (time, band, y, x) cube, as odc-stac gives one, was refused as "no path": each date is
    predicted as predict(cube.isel(time=k)) predicts it, dated by its time, on the cube's 2 m
    grid; a date left out (all nodata) is skipped and named as taken from the cube."""
    import rioxarray
    import xarray as xr

    scene, _, _ = _flood(tmp_path)
    da = rioxarray.open_rasterio(scene)
    blank = da.copy(data=np.zeros_like(da.values))  # a date with no valid pixel
    half = da.copy(data=np.where(np.arange(40) < 20, 0, da.values).astype(da.dtype))  # its west half nodata
    times = np.array(["2021-08-01", "2021-06-01", "2021-07-01", "2021-09-01"], dtype="datetime64[ns]")
    cube = xr.concat([da, half, blank, da], dim="time").assign_coords(time=times)
    summary = s2n.occurrence(cube, tmp_path / "occ.tif", weights=random_weights, tile_size=32, overlap=8)
    assert [(d.source, d.date) for d in summary.dates] == [("DataArray.isel(time=1)", "2021-06-01"),
                                                           ("DataArray.isel(time=0)", "2021-08-01"),
                                                           ("DataArray.isel(time=3)", "2021-09-01")]
    assert [d.source for d in summary.skipped] == ["DataArray.isel(time=2)"]
    assert summary.skipped[0].error.startswith("DataArray.isel(time=2): ") and "tmp" not in summary.skipped[0].error
    alone = [s2n.predict(cube.isel(time=k), weights=random_weights, tile_size=32, overlap=8).values for k in (0, 1)]
    with rasterio.open(tmp_path / "occ.tif") as src:
        water, valid = src.read(2), src.read(3)
        assert src.crs == da.rio.crs and src.transform == da.rio.transform() * Affine.scale(1 / 5)
    assert np.array_equal(valid, np.where(alone[1] == 255, 2, 3))
    assert np.array_equal(water, 2 * (alone[0] == 1) + (alone[1] == 1))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".occ")]  # no date's scene or mask left
    assert [d.mask for d in summary.dates + summary.skipped] == [None] * 4  # they named the removed scratch masks
    with raises_rule("S2N-SOURCE-TYPE") as refused:  # a list of dates held as arrays: said how to give them
        s2n.occurrence([da, half], tmp_path / "occ2.tif")
    assert str(refused.value).endswith("(DataArrays: as one (time, band, y, x) cube, xr.concat(dates, dim='time'))")
    with raises_rule("S2N-DATAARRAY-NO-TIME") as refused:
        s2n.occurrence(da, tmp_path / "occ2.tif")
    assert str(refused.value).startswith("DataArray: has dimensions ('band', 'y', 'x'): occurrence counts")
    with raises_rule("S2N-DATAARRAY-NO-TIME") as refused:  # its dates could not be given (dates= is for files)
        s2n.occurrence(cube.assign_coords(time=[1, 2, 3, 4]), tmp_path / "occ2.tif")
    assert str(refused.value).startswith("DataArray: its time holds int64 values, not dates for each: ")
    with pytest.raises(TypeError, match="from_masks is for files"):
        s2n.occurrence(cube, tmp_path / "occ3.tif", from_masks=True)


def test_an_area_of_interest_or_test_regions_may_be_a_geodataframe(tmp_path, random_weights):
    """aoi= and test_regions= took only files, and a GeoDataFrame was refused (with its whole repr):
    a table, or a GeoSeries, is read as the same polygons in a file are, the mask's tag naming its
    kind; one without a CRS, or that a file's rule refuses, is said of its keyword."""
    scene, label, _ = _flood(tmp_path)
    with rasterio.open(scene) as src:
        left, bottom, right, top = src.bounds
    region = gpd.GeoDataFrame(geometry=[box(left, bottom, (left + right) / 2, top)], crs=src.crs).to_crs(4326)
    region.to_file(tmp_path / "region.gpkg")
    kw = {"weights": random_weights, "tile_size": 32, "overlap": 8}
    s2n.predict(scene, tmp_path / "file.tif", aoi=tmp_path / "region.gpkg", **kw)
    for k, table in enumerate([region, region.geometry]):
        s2n.predict(scene, tmp_path / f"table{k}.tif", aoi=table, **kw)
        with rasterio.open(tmp_path / f"table{k}.tif") as a, rasterio.open(tmp_path / "file.tif") as f:
            assert np.array_equal(a.read(), f.read()) and a.shape == (200, 100)  # cut to the west half
            assert a.tags()["area_of_interest"] == type(table).__name__ + ".gpkg"
            assert f.tags()["area_of_interest"] == "region.gpkg"  # the file's name, as left_out names its file
    scores = [s2n.evaluate([(scene, label)], baselines="ndwi", aoi=a)[0].overall for a in (region, tmp_path / "region.gpkg")]
    assert scores[0] == scores[1]
    cut = [s2n.chip([(scene, label)], tmp_path / f"chips{k}", size=16, val_fraction=0, test_regions=r).chips
           for k, r in enumerate((region, tmp_path / "region.gpkg"))]
    assert cut[0] == cut[1] and cut[0]["test"] > 0
    with raises_rule("S2N-GEO-TABLE-NO-CRS") as refused:
        s2n.predict(scene, tmp_path / "x.tif", aoi=gpd.GeoDataFrame(geometry=list(region.geometry)), **kw)
    assert str(refused.value) == "aoi: the GeoDataFrame has no CRS: set the one its coordinates are in (.set_crs(...))"
    with raises_rule("S2N-AOI-NO-OVERLAP") as refused:
        s2n.predict(scene, tmp_path / "x.tif", aoi=region.translate(5, 0), **kw)
    assert str(refused.value).startswith("aoi: AOI does not overlap the scene scene.tif")
    assert not (tmp_path / "x.tif").exists()

def test_chip_cuts_dataarrays_and_polygons_as_their_files(tmp_path):
    """s2n.chip([(da, label_da)]) was refused ("pairs[0][0] is an xarray.DataArray, not a
    path"), where evaluate scores the same arrays: a scene or mask held as a DataArray, a mask
    as a GeoDataFrame of water polygons, is cut into the chips its file would be, named by the
    file it was read from (else pairs[k][j])."""
    import rioxarray

    from s2s2net_cli.vectorize import water_polygons

    scene, label, _ = _flood(tmp_path)
    da, mask = rioxarray.open_rasterio(scene), rioxarray.open_rasterio(label)
    kw = {"size": 16, "val_fraction": 0}

    def chips(folder):
        return {p.relative_to(folder).as_posix(): rasterio.open(p).read() for p in sorted(folder.rglob("*.tif"))}

    s2n.chip([(scene, label)], tmp_path / "files", **kw, test_ids="scene")
    s2n.chip([(da.sortby("y"), mask)], tmp_path / "arrays", **kw, test_ids="scene")
    files, arrays = chips(tmp_path / "files"), chips(tmp_path / "arrays")
    assert files.keys() == arrays.keys() and all(np.array_equal(files[k], arrays[k]) for k in files)
    assert (tmp_path / "arrays" / "test_manifest.csv").read_text() == (tmp_path / "files" / "test_manifest.csv").read_text()
    polygons = water_polygons(write_raster(tmp_path / "m2.tif", rasterio.open(label).read(1) == 1,
                                           transform=rasterio.open(label).transform, crs=rasterio.open(label).crs,
                                           dtype="uint8"))
    unread = da.copy()
    unread.encoding = {}  # an array made in memory: no file to name it by
    held = s2n.chip([(unread, polygons)], tmp_path / "held", **kw)
    assert held.chips["train"] == 9 and sorted(p.name for p in (tmp_path / "held" / "images").iterdir())[0] == \
        "pairs_0__0__r0_c0.tif"
    with raises_rule("S2N-DATAARRAY-NO-CRS") as refused:
        s2n.chip([(scene, mask.drop_vars("spatial_ref"))], tmp_path / "bad", **kw)
    assert str(refused.value).startswith("pairs[0][1]: has no CRS") and not (tmp_path / "bad").exists()


def test_chip_cuts_what_the_command_cuts(tmp_path):
    """The library's chip takes the command's defaults: chips side by side (stride = size)."""
    scene, label, _ = _flood(tmp_path)
    summary = s2n.chip([(scene, label)], tmp_path / "api", size=16, val_fraction=0)
    assert run_cli("chip", "--pair", scene, label, "-o", tmp_path / "cli", "--size", 16, "--val-fraction", 0,
                   "--json").returncode == 0
    names = {d: sorted(p.name for p in (tmp_path / d / "images").iterdir()) for d in ("api", "cli")}
    assert summary.chips["train"] == len(names["api"]) == 9 and names["api"] == names["cli"]  # rows, cols 0, 16, 24
    # a text where the command takes one is read as the command reads it, not as its characters:
    # test_ids="scene" was the ids "s", "c", ... ("no scene with id 'c'"); bands="1,2,3,4,5,6" a ValueError
    held_out = s2n.chip([(scene, label)], tmp_path / "held", size=16, val_fraction=0, test_ids="scene",
                        bands="1,2,3,4,5,6")
    assert held_out.chips == {"train": 0, "val": 0, "test": 9}
    with raises_rule("S2N-BANDS-OPTION-COUNT") as refused:
        s2n.chip([(scene, label)], tmp_path / "bad", size=16, bands="1,2,3")
    assert str(refused.value) == "bands: needs 6 band indexes (B02,B03,B04,B08,B11,B12), got 3"
    with raises_rule("S2N-BANDS-ONE-BASED"):
        s2n.predict(scene, tmp_path / "bad.tif", bands=[0, 1, 2, 3, 4, 5])
    assert not (tmp_path / "bad").exists() and not (tmp_path / "bad.tif").exists()
    with pytest.raises(TypeError, match="chip\\(\\) needs an output folder"):  # not "expected str ... NoneType"
        s2n.chip([(scene, label)], size=16)


def test_synth_makes_what_the_command_makes(tmp_path):
    """Every command was a call but synth: a notebook making training scenes ran the command line."""
    made = []
    summary = s2n.synth(tmp_path / "api", count=2, size=24, seed=7, landscape="rivers",
                        on_pair=lambda scene, mask, water: made.append((scene.name, mask.name, water)))
    assert run_cli("synth", tmp_path / "cli", "--count", 2, "--size", 24, "--seed", 7, "--landscape",
                   "rivers").returncode == 0
    for name in ("synth_7_scene.tif", "synth_8_mask.tif"):
        with rasterio.open(tmp_path / "api" / name) as a, rasterio.open(tmp_path / "cli" / name) as c:
            assert np.array_equal(a.read(), c.read()) and a.transform == c.transform
    assert [r["id"] for r in summary.rows] == ["synth_7", "synth_8"] and summary.warnings == []
    assert summary.manifest == str(tmp_path / "api" / "manifest.csv")
    assert [m[:2] for m in made] == [("synth_7_scene.tif", "synth_7_mask.tif"), ("synth_8_scene.tif", "synth_8_mask.tif")]
    assert all(0 < m[2] < 1 for m in made)
    with raises_rule("S2N-OUTPUT-EXISTS", tmp_path / "api" / "synth_7_scene.tif"):
        s2n.synth(tmp_path / "api", count=1, size=24, seed=7)
    # a background is one path or several, read as predict reads it, warned of in Python's terms
    background, _, _ = _flood(tmp_path)
    with pytest.warns(s2n.S2S2NetWarning, match="give level='L1C'"):
        painted = s2n.synth(tmp_path / "painted", backgrounds=background, size=32)
    assert said(painted.warnings) == ["S2N-BACKGROUND-NO-LEVEL"]
    with rasterio.open(tmp_path / "painted" / "synth_0_scene.tif") as s:
        assert s.shape == (32, 32) and s.crs is not None
    with raises_rule("S2N-SOURCE-TYPE") as refused:
        s2n.synth(tmp_path / "x", backgrounds=[background, np.zeros((6, 8, 8))])
    assert str(refused.value).startswith("backgrounds[1] is a numpy.ndarray, not a scene")
    with raises_rule("S2N-SYNTH-READING-NO-BACKGROUND") as refused:
        s2n.synth(tmp_path / "x", offset=-1000)
    assert str(refused.value).startswith("offset=-1000 say how a scene of backgrounds is read")
    with raises_rule("S2N-OPTION-TYPE"):
        s2n.synth(tmp_path / "x", count="2")
    assert not (tmp_path / "x").exists()


def test_option_bundles_refuse_what_the_command_line_types_refuse(tmp_path):
    """Values the command's types refuse ran from Python (scale=0, val_fraction=2, size=8), failed
    deep inside (spacing_m=-1: "negative dimensions", stride=0, an empty occurrence: IndexError),
    or were half used (bbox with aoi). Each bundle refuses them now, in Python's terms."""
    from s2s2net_cli.errors import said_as

    scene, label, water = _flood(tmp_path)
    mask = write_raster(tmp_path / "mask.tif", np.kron(water, np.ones((5, 5), "uint8")),
                        transform=Affine(2, 0, 500000, 0, -2, 4000000), nodata=255)
    out = tmp_path / "out"
    calls = {
        "scale=0 is out of range: it is not above 0": lambda: s2n.predict(scene, out, scale=0),
        "give bbox or aoi, not both": lambda: s2n.predict(scene, out, bbox=(0, 0, 1, 1), aoi=label),
        "size=8 is out of range: it is under 16": lambda: s2n.chip([(scene, label)], out, size=8),
        "stride=0 is out of range: it is under 1": lambda: s2n.chip([(scene, label)], out, size=16, stride=0),
        "val_fraction=2 is out of range: it is over 1": lambda: s2n.chip([(scene, label)], out, val_fraction=2),
        "give test_ids or test_regions, not both": lambda: s2n.chip([(scene, label)], out, test_ids=("a",),
                                                                   test_regions=label),
        "spacing_m=-1 is out of range: it is not above 0": lambda: s2n.rivers(mask, out, spacing_m=-1),
        "window=10 is out of range: it is under 256": lambda: s2n.rivers(mask, out, window=10),
        "no scenes given": lambda: s2n.occurrence([], out),
        # an empty list (a glob that matched nothing) wrote nothing without a word; train: IndexError
        "no scenes given ": lambda: s2n.predict_scenes([], out),  # (its space tells the keys apart)
        "no chips folder given": lambda: s2n.train([], out),
        "chips_dirs is None, not a path (str or Path)": lambda: s2n.train(None, out),
        # a narrowest channel not under the widest measured nothing, silently (0 reaches)
        "min_width_m=50 is not below max_width_m=10: no channel could be measured":
            lambda: s2n.rivers(mask, out, min_width_m=50, max_width_m=10),
        # source_weights as --source-weight takes them failed deep inside ("'str' object has no attribute 'items'")
        "source_weights: 'x' is not a number (NAME=W)": lambda: s2n.train(out, out, source_weights={"a": "x"}),
        "source_weights: 'a' is not NAME=VALUE": lambda: s2n.train(out, out, source_weights="a"),
        # a seed numpy's legacy generator does not take failed after DeepSpeed had started
        "seed=-1 is out of range: it is under 0": lambda: s2n.train(out, out, seed=-1),
        "seed=4294967296 is out of range: it is over 4294967295": lambda: s2n.train(out, out, seed=2 ** 32),
        "seed=-5 is out of range: it is under 0": lambda: s2n.chip([(scene, label)], out, seed=-5),
        # ZeRO-Offload without ZeRO: DeepSpeed kept the optimizer states on the device, without a word
        "offload_optimizer=True moves ZeRO's partitioned optimizer states to the CPU, and zero_stage=0 partitions "
        "none (DeepSpeed would keep them on the device without a word): give zero_stage=1 or 2":
            lambda: s2n.train(out, out, zero_stage=0, offload_optimizer=True),
    }
    for message, call in calls.items():
        with pytest.raises(s2n.UsageError) as refused:
            call()
        assert str(refused.value) == message.strip()
        if message.startswith("spacing_m"):
            with said_as("cli"):  # the same rule on the command line names the flag
                assert str(refused.value) == "--spacing -1 is out of range: it is not above 0"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["label.tif", "mask.tif", "scene.tif"]


def test_train_options_take_what_the_flags_take(tmp_path):
    """From Python, source_weights="a=2" (as --source-weight) and deepspeed_config="ds.json" (a
    file, as --deepspeed-config) were kept as text, and failed deep inside a run."""
    from s2s2net_cli.training.config import TrainOptions

    config = tmp_path / "ds.json"
    config.write_text(json.dumps({"gradient_clipping": 0.5}))
    options = TrainOptions(source_weights=["chips_a/=2", "chips_b=0.5"], deepspeed_config=config)
    assert options.source_weights == {"chips_a": 2.0, "chips_b": 0.5}
    assert options.deepspeed_config == {"gradient_clipping": 0.5}
    assert TrainOptions(source_weights="chips_a=3").source_weights == {"chips_a": 3.0}
    with raises_rule("S2N-DEEPSPEED-CONFIG-NOT-FOUND"):
        TrainOptions(deepspeed_config=tmp_path / "none.json")


def test_scene_options_take_what_the_flags_take():
    """bbox="W,S,E,N" (as --bbox) was refused as "needs four numbers", being 14 characters."""
    assert s2n.SceneOptions(bbox="-75.62, 37.75,-75.6,37.77").bbox == (-75.62, 37.75, -75.6, 37.77)
    assert s2n.SceneOptions(bands="3,2,1,4,5,6").bands == (3, 2, 1, 4, 5, 6)
    with raises_rule("S2N-BBOX-NOT-NUMBERS") as refused:
        s2n.SceneOptions(bbox="a,b,c,d")
    assert str(refused.value) == "bbox: 'a,b,c,d' is not four numbers W,S,E,N"
    with raises_rule("S2N-BBOX-WEST-EAST"):
        s2n.SceneOptions(bbox="10,0,9,1")


def test_option_bundles_refuse_values_of_another_kind_and_take_precision_as_a_number(tmp_path, random_weights):
    """A string where a number belongs failed deep inside (tile_size="256": "'<' not supported",
    nodata="x" in evaluate and chip), offset="-1000" ran, and a bool field's "no" ran as True
    (flips="no" made eight times the work). precision=32, as Python callers write it, was
    refused as not one of "auto, 32, ...": it is "32"."""
    scene, label, _ = _flood(tmp_path)
    out = tmp_path / "out.tif"
    calls = {
        "tile_size='256' is not a whole number": lambda: s2n.predict(scene, out, tile_size="256"),
        "threshold='0.5' is not a number": lambda: s2n.predict(scene, out, threshold="0.5"),
        "offset='-1000' is not a number": lambda: s2n.predict(scene, out, offset="-1000"),
        "flips='no' is not True or False": lambda: s2n.predict(scene, out, flips="no"),
        "size=64.0 is not a whole number": lambda: s2n.chip([(scene, label)], tmp_path / "chips", size=64.0),
        "nodata='x' is not a number": lambda: s2n.chip([(scene, label)], tmp_path / "chips", nodata="x"),
        "leave_out=5 is not a string or path": lambda: s2n.predict(scene, out, leave_out=5),
        "batch_size='8' is not a whole number": lambda: s2n.train([tmp_path], tmp_path / "run", batch_size="8"),
        "window=4096.5 is not a whole number": lambda: s2n.rivers(label, tmp_path / "r.gpkg", window=4096.5),
        # a table or a geometry named by its type, not its repr's lines; an array of numbers refused, not
        # "can only convert an array of size 1 to a Python scalar"
        "leave_out=<geopandas.GeoDataFrame> is not a string or path": lambda: s2n.predict(
            scene, out, leave_out=gpd.GeoDataFrame(geometry=[box(0, 0, 1, 1)] * 3, crs="EPSG:4326")),
        "offset=<numpy.ndarray> is not a number": lambda: s2n.predict(scene, out, offset=np.full(12, -1000.0)),
    }
    for message, call in calls.items():
        with raises_rule("S2N-OPTION-TYPE") as refused:
            call()
        assert str(refused.value) == message
    with raises_rule("S2N-OPTION-TYPE") as refused:
        s2n.evaluate((scene, label), baselines="ndwi", nodata="x")
    assert str(refused.value) == "nodata='x' is not a number"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["label.tif", "scene.tif"]
    result = s2n.predict(scene, out, weights=random_weights, precision=32, threshold=np.float32(0.5),
                         tile_size=np.int64(48))  # numpy's numbers are numbers
    assert Path(result.output) == out and result.precision == "fp32"
    assert json.loads(json.dumps(result.to_dict()))["tile_size"] == 48


@pytest.mark.filterwarnings("ignore::s2s2net_cli.S2S2NetWarning")  # a small scene, the largest gain chosen
def test_calibrate_scores_each_gain_and_threshold_as_predict_maps_them(tmp_path, random_weights):
    """calibrate runs each scene's network once and adds every gain's prior to its logits: its F1
    at each gain and threshold is that of predict's own mask, made with the weights annotated
    with that gain and cut at that threshold, to the pixel: across a blended seam between tiles
    (a scene two planned tiles wide), on a 10 m label cell by cell and a 2 m label pixel by pixel.
    Until then it counted a percent raster, rounded, at every threshold but the model's own."""
    from s2s2net_cli.checkpoint import annotate_weights

    rng = np.random.default_rng(5)
    water = rng.random((40, 540)) < 0.35
    dn = np.empty((6, *water.shape), "uint16")
    dn[:] = np.array([600, 700, 600, 3000, 2500, 1500])[:, None, None]
    dn[:, water] = np.array([600, 900, 500, 300, 200, 100])[:, None]
    dn = (dn * rng.uniform(0.8, 1.2, dn.shape)).astype("uint16")  # NDWI of every value, not two
    scene = write_raster(tmp_path / "scene.tif", dn, transform=T10, nodata=0, descriptions=BANDS)
    labels = {"10 m": write_raster(tmp_path / "label.tif", water.astype("uint8"), transform=T10, nodata=255),
              "2 m": write_raster(tmp_path / "label2.tif", np.kron(water, np.ones((5, 5))).astype("uint8"),
                                  transform=T10 * Affine.scale(1 / 5), nodata=255)}
    weights = {0: random_weights, 16: annotate_weights(random_weights, tmp_path / "g16.safetensors", {}, ndwi_prior=16)}
    for grid, label in labels.items():
        found = s2n.calibrate(random_weights, tmp_path / f"c{grid[0]}.safetensors", pairs=(scene, label),
                              gains=(0, 16), synthetic_scenes=1, synthetic_size=48)
        assert len({round(f, 6) for f in found.scores[16]["pairs"]}) > 5  # the thresholds cut apart
        truth = rasterio.open(label).read(1)
        for gain in (0, 16):
            for k in (0, 5, 8, 11, 14):
                t = found.thresholds[k]
                result = s2n.predict(scene, tmp_path / "mask.tif", weights=weights[gain], threshold=t, precision=32,
                                     overwrite=True)
                assert result.tiles == 2
                mask = rasterio.open(tmp_path / "mask.tif").read(1)
                if grid == "10 m":  # a cell is water where at least half its 2 m pixels are
                    mask = (mask.reshape(40, 5, 540, 5) == 1).sum(axis=(1, 3)) >= 13
                pred, ref = mask == 1, truth == 1
                tp, fp, fn = (pred & ref).sum(), (pred & ~ref).sum(), (~pred & ref).sum()
                assert found.scores[gain]["pairs"][k] == 2 * tp / (2 * tp + fp + fn), (grid, gain, t)


def test_calibrate_and_gate_write_what_the_weights_commands_write(tmp_path, random_weights):
    """A run's weights made ready for predict from Python: calibrated, then gated, as the
    command line does it (the same choice, the same card), and refused in Python's terms."""
    from safetensors.numpy import load_file

    from s2s2net_cli.weights_header import header_metadata

    scene, label, _ = _flood(tmp_path)
    found = s2n.calibrate(random_weights, tmp_path / "api.safetensors", pairs=(scene, label), gains=(0, 16),
                          synthetic_scenes=1, synthetic_size=48)
    r = run_cli("weights", "calibrate", random_weights, tmp_path / "cli.safetensors", "--pair", scene, label,
                "--gains", "0,16", "--synthetic-scenes", 1, "--synthetic-size", 48, "--json")
    assert r.returncode == 0, r.stderr
    assert found.to_dict() == json.loads(r.stdout)
    assert header_metadata(tmp_path / "api.safetensors") == header_metadata(tmp_path / "cli.safetensors")
    # the pair held in a notebook (a DataArray scene, a GeoDataFrame label) is scored as its files
    import rioxarray

    from s2s2net_cli.vectorize import water_polygons

    polygons = water_polygons(write_raster(tmp_path / "m2.tif", rasterio.open(label).read(1) == 1,
                                           transform=rasterio.open(label).transform, crs=rasterio.open(label).crs,
                                           dtype="uint8"))
    scores = {}
    for name, pair in (("files", (scene, tmp_path / "m2.tif")), ("held", (rioxarray.open_rasterio(scene), polygons))):
        scores[name] = s2n.calibrate(random_weights, tmp_path / f"{name}.safetensors", pairs=pair, gains=(0,),
                                     synthetic_scenes=1, synthetic_size=48).scores
    assert scores["held"] == scores["files"]
    fit = s2n.gate(tmp_path / "api.safetensors", tmp_path / "gated.safetensors", scenes=scene, synthetic_scenes=1)
    assert fit.inputs == 2 and "gate" in header_metadata(tmp_path / "gated.safetensors")["training"]
    held = s2n.gate(tmp_path / "api.safetensors", tmp_path / "gated2.safetensors", scenes=rioxarray.open_rasterio(scene),
                    synthetic_scenes=1)  # a scene held as a DataArray: fitted as its file
    assert held.to_dict() == fit.to_dict()
    assert any(name.startswith("gate.") for name in load_file(tmp_path / "gated.safetensors"))
    with raises_rule("S2N-OUTPUT-EXISTS") as refused:
        s2n.calibrate(random_weights, tmp_path / "api.safetensors", synthetic_scenes=1, synthetic_size=48)
    assert "(use overwrite to replace it)" in str(refused.value)
    with raises_rule("S2N-OPTION-RANGE") as refused:
        s2n.calibrate(random_weights, tmp_path / "x.safetensors", synthetic_size=8)
    assert str(refused.value) == "synthetic_size=8 is out of range: it is under 32"
    with raises_rule("S2N-GAINS-RANGE"):
        s2n.calibrate(random_weights, tmp_path / "x.safetensors", gains=(0, 500))
    # no gain failed deep inside ("argmax of an empty sequence"); gains="16" tried 1 and 6, its characters
    with raises_rule("S2N-GAINS-NOT-NUMBERS") as refused:
        s2n.calibrate(random_weights, tmp_path / "x.safetensors", gains=[])
    assert str(refused.value) == "gains: '' is not a comma-separated list of numbers"
    one = s2n.calibrate(random_weights, tmp_path / "one.safetensors", pairs=(scene, label), gains="16",
                        synthetic_scenes=1, synthetic_size=48)
    assert list(one.scores) == [16.0] and one.gain == 16.0
    # the scores were numpy's floats, np.float64(0.47) in every one of 17 x 2 places of the repr
    assert all(type(f) is float for source in one.scores[16.0].values() for f in source)
    assert len(one.scores[16.0]["synthetic"]) == len(one.thresholds) and one.threshold in one.thresholds
    assert repr(one).startswith("Calibration(threshold=") and "scores" not in repr(one)
    with raises_rule("S2N-GATE-NO-INPUT") as refused:
        s2n.gate(random_weights, tmp_path / "x.safetensors", synthetic_scenes=0)
    assert "give scenes=PATH or synthetic_scenes=N" in str(refused.value)
    assert not (tmp_path / "x.safetensors").exists()


def test_outputs_named_for_another_format_or_existing_are_refused_from_python_too(tmp_path, random_weights):
    """Only the command line's callbacks checked a name's suffix: the library wrote a GeoPackage
    called rivers.txt, a GeoTIFF called occ.png, a PNG called plot.jpg, and replaced an
    existing plot without overwrite."""
    scene, label, water = _flood(tmp_path)
    mask = write_raster(tmp_path / "mask.tif", np.kron(water, np.ones((5, 5), "uint8")),
                        transform=Affine(2, 0, 500000, 0, -2, 4000000), nodata=255)
    calls = {"rivers.txt: rivers are written as a GeoPackage: name it .gpkg":
             lambda: s2n.rivers(mask, tmp_path / "rivers.txt"),
             "occ.png: occurrence writes a GeoTIFF: name it .tif or .tiff":
             lambda: s2n.occurrence(mask, tmp_path / "occ.png", from_masks=True),
             "plot.jpg: the plot is a PNG: name it .png": lambda: s2n.evaluate((scene, label), baselines="ndwi",
                                                                              plot=tmp_path / "plot.jpg"),
             "w.kml: polygons are written in the format of their suffix: name it .gpkg, .geojson, .json, .shp or "
             ".fgb": lambda: s2n.predict(scene, tmp_path / "w.tif", vector=tmp_path / "w.kml", weights=random_weights),
             "c.pt: weights are written as safetensors: name it .safetensors":
             lambda: s2n.calibrate(random_weights, tmp_path / "c.pt", synthetic_scenes=1, synthetic_size=48),
             "occ/: occurrence writes a GeoTIFF: name it .tif or .tiff":  # a file called occ was written
             lambda: s2n.occurrence(mask, f"{tmp_path}/occ/", from_masks=True)}
    for message, call in calls.items():
        with raises_rule("S2N-OUTPUT-SUFFIX") as refused:
            call()
        assert str(refused.value) == message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["label.tif", "mask.tif", "scene.tif"]
    (tmp_path / "plot.png").write_text("keep")
    with raises_rule("S2N-OUTPUT-EXISTS", tmp_path / "plot.png"):
        s2n.evaluate((scene, label), baselines="ndwi", plot=tmp_path / "plot.png")
    assert (tmp_path / "plot.png").read_text() == "keep"
    s2n.evaluate((scene, label), baselines="ndwi", plot=tmp_path / "plot.png", overwrite=True)
    assert (tmp_path / "plot.png").read_bytes().startswith(b"\x89PNG")


def test_load_model_gives_the_bundled_model_by_default():
    model, card = s2n.load_model()
    assert not model.training and card.bands.names == BANDS and 0 < card.threshold < 1
    assert next(s2n.load_model(device="auto")[0].parameters()).device.type == ("cuda" if torch.cuda.is_available()
                                                                               else "cpu")
    with raises_rule("S2N-DEVICE-UNKNOWN") as refused:  # it named no keyword: "'tpu' is not auto, ..."
        s2n.load_model(device="tpu")
    assert str(refused.value) == "device: 'tpu' is not auto, cpu, cuda or cuda:N"
    with raises_rule("S2N-DEVICE-UNKNOWN") as refused:
        s2n.predict("scene.tif", "water.tif", device="gpu")
    assert str(refused.value) == "device: 'gpu' is not auto, cpu, cuda or cuda:N"


def test_one_path_or_one_pair_is_one_not_its_characters(tmp_path, random_weights):
    """predict_scenes("a.tif", ...) read each character as a scene ("0 and 0 would both be
    written"); evaluate(("a.tif", "b.tif")) failed to unpack; evaluate() scored nothing."""
    scene, label, _ = _flood(tmp_path)
    summary = s2n.predict_scenes(str(scene), f"{tmp_path / 'masks'}/", weights=random_weights, tile_size=32, overlap=8)
    assert [r["output"] for r in summary.scenes] == [str(tmp_path / "masks" / "scene_water.tif")]
    one = s2n.evaluate((scene, label), baselines="ndwi")
    assert [s.overall for s in one] == [s.overall for s in s2n.evaluate([(scene, label)], baselines="ndwi")]
    with raises_rule("S2N-PAIRS-MISSING") as refused:
        s2n.evaluate(baselines="ndwi")
    assert str(refused.value) == "give pairs=(SCENE, MASK) or manifests=FILE"


def test_what_is_no_path_is_named_by_its_keyword_not_printed_whole(tmp_path):
    """s2n.predict(array, ...) said the whole array's repr and "not found"; predict([a.tif]) said
    "['a.tif']: not found"; a pair given as three paths failed to unpack. Each names its
    keyword, what was given and what is wanted, before any file is read or written."""
    scene, label, _ = _flood(tmp_path)
    with rasterio.open(scene) as src:
        array = src.read()
    wanted_scene = "a scene: a path (str or Path), a URL or an xarray.DataArray with a CRS"
    cases = {
        "scene is a numpy.ndarray, not " + wanted_scene + " (several: predict_scenes)":
            lambda: s2n.predict(array, tmp_path / "w.tif"),
        "scene is a list, not " + wanted_scene + " (several: predict_scenes)": lambda: s2n.predict([scene], tmp_path / "w.tif"),
        "scene is None, not " + wanted_scene + " (several: predict_scenes)": lambda: s2n.predict(None, tmp_path / "w.tif"),
        "scenes[1] is None, not a scene: a path (str or Path) or a URL (an xarray.DataArray: predict(da, output), "
        "one at a time)": lambda: s2n.predict_scenes([scene, None], tmp_path / "out"),
        "mask is a numpy.ndarray, not a path (str or Path) or an xarray.DataArray": lambda: s2n.rivers(array[0], tmp_path / "r.gpkg"),
        "pairs[0] is a path, not a (scene, mask) pair": lambda: s2n.evaluate([scene, label, label], baselines="ndwi"),
        "pairs[0][0] is a numpy.ndarray, not " + wanted_scene: lambda: s2n.chip([(array, label)], tmp_path / "c"),
        "pairs[0][1] is a numpy.ndarray, not a reference: a path (str or Path), an xarray.DataArray or a "
        "GeoDataFrame with a CRS":
            lambda: s2n.evaluate([(scene, array[0])], baselines="ndwi"),
        "scenes is a numpy.ndarray, not " + wanted_scene: lambda: s2n.gate("default", tmp_path / "g.safetensors",
                                                                           scenes=array),
    }
    for message, call in cases.items():
        with raises_rule("S2N-SOURCE-TYPE") as refused:
            call()
        assert str(refused.value) == message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["label.tif", "scene.tif"]
    assert len(s2n.evaluate([Path(scene), Path(label)], baselines="ndwi", weights=None)) == 1  # a pair as a list, weights none
