"""Sentinel-2 products and STAC items read as users have them, checked against the same
pixels as a stack: products written in ESA's layout from the real Virginia crop."""

import json
import os
import shutil
import zipfile

import geopandas as gpd
import numpy as np
import pytest
import rasterio
from affine import Affine
from click.testing import CliRunner
from rasterio.windows import Window
from shapely.geometry import LineString, Point, Polygon

from s2s2net_cli.cli.main import cli
from s2s2net_cli.errors import S2S2NetError
from s2s2net_cli.formats import gdal_path, source_name, source_stem
from s2s2net_cli.inference.predictor import PredictOptions, Predictor
from s2s2net_cli.rulebook import S2S2NetWarning
from s2s2net_cli.sources.open import open_scene
from s2s2net_cli.sources.scene import SceneReader
from s2s2net_cli.weights_header import BUNDLED_WEIGHTS as DEFAULT_WEIGHTS

from ..conftest import SMALL, raises_rule, said, write_raster
from .product_factory import (
    BANDS,
    read_stack,
    virginia_window,
    write_band_files,
    write_item,
    write_product,
    write_stack,
)

SIZE = 64


@pytest.fixture(scope="module")
def crop():
    """64 x 64 px of the real Virginia crop: creeks, marsh, bay (data, transform, crs)."""
    return read_stack(window=virginia_window(300, 121, SIZE))


@pytest.fixture(scope="module")
def stack(crop, tmp_path_factory):
    return write_stack(tmp_path_factory.mktemp("stack") / "virginia.tif", *crop)


def invoke(*args):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result


def read_mask(path):
    with rasterio.open(path) as src:
        return src.read(1), src.profile, src.tags()


def predict(scene, out, **options):
    options.setdefault("tile_size", SIZE)
    options.setdefault("overlap", 16)
    Predictor(DEFAULT_WEIGHTS, PredictOptions.from_flat(**options)).predict_scene(scene, out)
    return read_mask(out)


@pytest.mark.parametrize("level", ["L1C", "L2A"])
@pytest.mark.parametrize("baseline", ["02.08", "05.09"])
@pytest.mark.parametrize("form", ["folder", "zip", "metadata"])
def test_products_read_exactly_the_stacks_reflectance(tmp_path, crop, stack, level, baseline, form):
    product = write_product(tmp_path, *crop, level=level, baseline=baseline, as_zip=form == "zip")
    source = product / f"MTD_MSI{level}.xml" if form == "metadata" else product
    scene = open_scene(source)
    reference = open_scene(stack)
    assert scene.kind == f"{level} product" and scene.shape == (SIZE, SIZE)
    assert scene.transform == reference.transform and scene.crs == reference.crs
    assert scene.offset == ((-1000.0,) * 6 if baseline == "05.09" else (0.0,) * 6)
    assert (scene.cloud_band is not None) == (level == "L2A")
    if form == "zip":
        assert scene.dataset.count("/vsizip/") == len(scene.descriptions) + (level == "L2A")
    window = Window(-5, -3, SIZE + 9, SIZE + 4)  # reaches past the edges
    with SceneReader(scene) as a, SceneReader(reference) as b:
        raw_a, valid_a, keep_a = a.read(window)
        raw_b, valid_b, keep_b = b.read(window)
    assert np.array_equal(scene.reflectance(raw_a), reference.reflectance(raw_b))
    assert np.array_equal(valid_a, valid_b) and np.array_equal(keep_a, keep_b)


def test_swir_reaches_10m_by_copying_each_20m_pixel_to_its_four(tmp_path, crop):
    scene = open_scene(write_product(tmp_path, *crop))
    with SceneReader(scene) as reader:
        raw, _, _ = reader.read(Window(0, 0, SIZE, SIZE))
    swir = raw[4:].reshape(2, SIZE // 2, 2, SIZE // 2, 2)
    assert (swir == swir[:, :, :1, :, :1]).all()
    assert np.array_equal(raw[4:], crop[0][4:] + 1000)


def test_a_product_gives_the_same_mask_as_its_stack_to_the_pixel(tmp_path, crop, stack):
    expected, profile, _ = predict(stack, tmp_path / "stack.tif")
    assert 0 < (expected == 1).mean() < 1  # a real scene with water and land
    products = [write_product(tmp_path / f"{level}{baseline}{as_zip}", *crop, level=level, baseline=baseline,
                              as_zip=as_zip)
                for level in ("L1C", "L2A") for baseline in ("02.08", "05.09") for as_zip in (False, True)]
    for i, product in enumerate(products):
        got, got_profile, tags = predict(product, tmp_path / f"p{i}.tif")
        assert np.array_equal(got, expected), product.name
        assert got_profile["transform"] == profile["transform"] == crop[1] * Affine.scale(1 / 5)
        assert tags["source_scene"] == product.name
        assert tags["offset"] == ("0,0,0,0,0,0" if "N0208" in product.name else "-1000,-1000,-1000,-1000,-1000,-1000")


def test_predict_command_takes_a_zip_and_reports_json(tmp_path, crop, stack):
    product = write_product(tmp_path, *crop, as_zip=True)
    out = tmp_path / "water.tif"
    r = invoke("predict", product, "-o", out, "--tile-size", SIZE, "--overlap", 16, "--json")
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)["scenes"][0]
    assert summary["masked_fraction"] == 0 and summary["scene"] == str(product)
    _, _, tags = read_mask(out)
    assert tags["offset"] == "-1000,-1000,-1000,-1000,-1000,-1000" and tags["source_kind"] == "L2A product"


def test_a_product_zip_cut_short_is_named_as_one_to_fetch_again(tmp_path, crop):
    """A download cut short has no zip directory at its end: one line names the file and says
    to fetch it again (it said only "File is not a zip file"), and no mask is written."""
    product = write_product(tmp_path, *crop, as_zip=True)
    whole = product.read_bytes()
    product.write_bytes(whole[: len(whole) // 2])
    r = invoke("predict", product, "-o", tmp_path / "water.tif")
    assert r.exit_code == 1 and r.stderr.count("\n") == 1 and not (tmp_path / "water.tif").exists()
    assert r.stderr.startswith(f"Error: {product}: is not a readable zip file (File is not a zip file): ")
    assert "a download cut short" in r.stderr and r.stderr.rstrip().endswith("[S2N-SAFE-ZIP]")


def test_scl_clouds_are_nodata_unless_kept(tmp_path, crop):
    scl = np.full((SIZE // 2, SIZE // 2), 4, np.uint8)
    scl[4:12, 20:30] = 9  # cloud, high probability
    scl[20:24, 2:6] = 3  # cloud shadow
    scl[26:30, 10:14] = 6  # water stays
    product = write_product(tmp_path, *crop, scl=scl)
    mask, _, _ = predict(product, tmp_path / "clouds.tif")
    left_out = np.kron(np.isin(scl, (3, 9)), np.ones((10, 10), bool))  # 20 m -> 2 m
    assert (mask[left_out] == 255).all() and (mask[~left_out] != 255).all()
    kept, _, _ = predict(product, tmp_path / "kept.tif", keep_clouds=True)
    assert (kept != 255).all()
    assert np.array_equal(kept[~left_out], mask[~left_out])  # clouds still seen as context: same elsewhere
    r = invoke("predict", product, "-o", tmp_path / "j.tif", "--tile-size", SIZE, "--json")
    summary = json.loads(r.stdout)["scenes"][0]
    assert summary["masked_fraction"] == pytest.approx(left_out.mean())
    # what left them out is named alone (the line named --mask and an AOI that nobody gave)
    assert summary["masked_by"] == ["clouds"]
    r = invoke("predict", product, "-o", tmp_path / "j.tif", "--tile-size", SIZE, "--overwrite")
    assert f"nodata ({left_out.mean():.1%} left out: clouds)," in r.stderr
    r = invoke("predict", product, "-o", tmp_path / "j.tif", "--tile-size", SIZE, "--json", "--overwrite",
               "--keep-clouds", "--mask", tmp_path / "clouds.tif")
    assert json.loads(r.stdout)["scenes"][0]["masked_by"] == ["left_out"]


def test_evaluate_scores_a_product_exactly_as_the_stack(tmp_path, crop, stack):
    scl = np.full((SIZE // 2, SIZE // 2), 4, np.uint8)
    label = write_raster(tmp_path / "label.tif", (crop[0][1] > crop[0][4]).astype("uint8"), transform=crop[1],
                         crs=crop[2], nodata=255)
    product = write_product(tmp_path, *crop, scl=scl, as_zip=True)
    scores = []
    for scene in (stack, product):
        r = invoke("evaluate", "--pair", scene, label, "--tile-size", SIZE, "--json")
        assert r.exit_code == 0, r.output
        row = json.loads(r.stdout)["rows"][0]
        scores.append({k: v for k, v in row.items() if k != "images"})
    assert scores[0] == scores[1] and scores[0]["pixels"] == SIZE * SIZE
    # clouds leave pixels out of the score
    scl[:16, :16] = 8
    cloudy = write_product(tmp_path / "cloudy", *crop, scl=scl)
    r = invoke("evaluate", "--pair", cloudy, label, "--baseline", "mndwi", "--json")
    assert json.loads(r.stdout)["rows"][0]["pixels"] == SIZE * SIZE - 32 * 32


def test_compare_manifest_and_chip_take_products(tmp_path, crop, stack):
    label = write_raster(tmp_path / "label.tif", (crop[0][1] > crop[0][4]).astype("uint8"), transform=crop[1],
                         crs=crop[2], nodata=255)
    product = write_product(tmp_path, *crop, as_zip=True)
    (tmp_path / "m.csv").write_text(f"image,mask,id\n{product.name},label.tif,prod\nvirginia.tif,label.tif,stack\n")
    (tmp_path / "virginia.tif").write_bytes(stack.read_bytes())
    r = invoke("compare", "--manifest", tmp_path / "m.csv", "--baseline", "mndwi", "--baseline", "ndwi", "--json")
    assert r.exit_code == 0, r.output
    for row in json.loads(r.stdout)["rows"]:
        a, b = row["images"]
        assert {k: a[k] for k in ("f1", "pixels", "tp")} == {k: b[k] for k in ("f1", "pixels", "tp")}
    r = invoke("chip", "--pair", product, label, "-o", tmp_path / "chips", "--size", 32, "--json")
    assert r.exit_code == 0, r.output
    r2 = invoke("chip", "--pair", stack, label, "-o", tmp_path / "chips2", "--size", 32, "--json")
    assert r2.exit_code == 0, r2.output
    chips = sorted((tmp_path / "chips" / "images").iterdir())
    assert len(chips) == 4 and len(list((tmp_path / "chips2" / "images").iterdir())) == 4
    with rasterio.open(chips[0]) as a, rasterio.open(tmp_path / "chips2" / "images" / chips[0].name.replace(
            source_stem(product), "virginia")) as b:
        assert np.array_equal(a.read(), b.read())


@pytest.mark.parametrize("names", ["earthsearch", "planetary"])
def test_stac_item_with_relative_hrefs_gives_the_stacks_mask(tmp_path, crop, stack, names):
    scl = np.full((SIZE // 2, SIZE // 2), 4, np.uint8)
    scl[0:6, 0:6] = 10  # cirrus
    files = write_band_files(tmp_path / "bands", *crop, offset=1000, scl=scl)
    hrefs = {band: f"bands/{path.name}" for band, path in files.items()}
    if names == "earthsearch":
        rb = {b: {"scale": 0.0001, "offset": -0.1, "nodata": 0} for b in files if b != "SCL"}
        item = write_item(tmp_path / "item.json", hrefs, raster_bands=rb, names=names)
    else:
        item = write_item(tmp_path / "item.json", hrefs, {"s2:processing_baseline": "05.09"}, names=names)
    scene = open_scene(item)
    assert scene.kind == "STAC item" and scene.offset == (-1000.0,) * 6 and scene.scale == 10000
    expected, _, _ = predict(stack, tmp_path / "stack.tif")
    got, _, _ = predict(item, tmp_path / "item.tif")
    cirrus = np.zeros_like(got, bool)
    cirrus[:60, :60] = True
    assert (got[cirrus] == 255).all() and np.array_equal(got[~cirrus], expected[~cirrus])


def test_predict_maps_each_item_of_a_saved_stac_search(tmp_path, crop, stack):
    """A saved search (an ItemCollection, as stac-client search --save writes it) stands for its
    items, as it does for occurrence: predict refused it as "not a STAC item"."""
    files = write_band_files(tmp_path / "bands", *crop)
    features = []
    for ident, when in (("late", "2023-09-02T15:55:59Z"), ("early", "2023-08-23T15:55:59Z")):
        item = json.loads(write_item(tmp_path / f"{ident}.json", {b: f"bands/{p.name}" for b, p in files.items()},
                                     {"datetime": when}).read_text())
        features.append(item | {"id": ident})
    search = tmp_path / "search.json"
    search.write_text(json.dumps({"type": "FeatureCollection", "features": features}))
    r = invoke("predict", search, "-o", tmp_path / "masks", "--tile-size", SIZE, "--overlap", 16, "--json")
    assert r.exit_code == 0, r.output
    done = json.loads(r.stdout)["scenes"]
    assert [d["scene"] for d in done] == [f"{search}#early", f"{search}#late"]
    expected, _, _ = predict(stack, tmp_path / "stack.tif")
    for ident in ("early", "late"):
        assert np.array_equal(read_mask(tmp_path / "masks" / f"{ident}_water.tif")[0], expected)
    r = invoke("predict", search, "-o", tmp_path / "one.tif")
    assert r.exit_code == 2 and "2 scenes (search.json#early, search.json#late) need a folder" in r.stderr
    # one item of it as a pair's scene, in a manifest; the whole search where one scene belongs is refused
    label = write_raster(tmp_path / "label.tif", (expected[::5, ::5] == 1).astype("uint8"), transform=crop[1],
                         crs=crop[2], nodata=255)
    (tmp_path / "pairs.csv").write_text("image,mask\nsearch.json#late,label.tif\n")
    r = invoke("evaluate", "--manifest", tmp_path / "pairs.csv", "--baseline", "ndwi", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["rows"][0]["images"][0]["id"] == "search.json#late"
    r = invoke("evaluate", "--pair", search, label, "--baseline", "ndwi")
    assert r.exit_code == 1 and "S2N-STAC-COLLECTION-NOT-ITEM" in r.stderr
    assert "name one of them as FILE#ITEM_ID (e.g. search.json#late)" in r.stderr


def test_stac_offset_already_applied_and_remote_hrefs_are_left_to_gdal(tmp_path, crop):
    files = write_band_files(tmp_path / "b", *crop, offset=0)
    item = write_item(tmp_path / "i.json", {b: p.resolve() for b, p in files.items()},
                      {"earthsearch:boa_offset_applied": True, "s2:processing_baseline": "05.09"},
                      raster_bands={b: {"scale": 0.0001, "offset": -0.1} for b in files})
    assert open_scene(item).offset == (0.0,) * 6
    assert gdal_path("s3://sentinel-cogs/x/B02.tif") == "/vsis3/sentinel-cogs/x/B02.tif"
    assert gdal_path("https://example.com/a/B02.tif") == "/vsicurl/https://example.com/a/B02.tif"
    assert gdal_path("/vsizip//data/p.zip/a.jp2") == "/vsizip//data/p.zip/a.jp2"
    assert source_name("s3://bucket/key.tif") == "key.tif"
    assert source_stem("/d/S2B_MSIL2A_x.SAFE.zip") == "S2B_MSIL2A_x" and source_stem("/d/x.SAFE/MTD_MSIL2A.xml") == "x"
    remote = write_item(tmp_path / "r.json", {b: f"s3://no-such-bucket-s2s2net/{b}.tif" for b in files})
    with raises_rule("S2N-PRODUCT-BAND-UNREADABLE", "r.json"):
        open_scene(remote)


def test_bbox_and_aoi_read_a_window_that_agrees_with_the_whole_scene(tmp_path, crop, stack):
    from pyproj import Transformer

    whole, profile, _ = predict(stack, tmp_path / "whole.tif")
    to_lonlat = Transformer.from_crs(crop[2], "EPSG:4326", always_xy=True)
    t = crop[1]
    west, north = to_lonlat.transform(*(t * (36.5, 34.5)))
    east, south = to_lonlat.transform(*(t * (62.5, 60.5)))
    out = tmp_path / "bbox.tif"
    r = invoke("predict", stack, "-o", out, "--bbox", f"{west},{south},{east},{north}", "--tile-size", SIZE,
               "--overlap", 16, "--json")
    assert r.exit_code == 0, r.output
    part, part_profile, _ = read_mask(out)
    col0 = round((part_profile["transform"].c - profile["transform"].c) / profile["transform"].a)
    row0 = round((part_profile["transform"].f - profile["transform"].f) / profile["transform"].e)
    assert part_profile["transform"].a == profile["transform"].a and col0 % 5 == 0 and row0 % 5 == 0
    assert (col0, row0) == (32 * 5, 32 * 5)  # the corner moves out to a multiple of 32 px
    assert 28 * 5 <= part.shape[0] <= 30 * 5 and 30 * 5 <= part.shape[1] <= 32 * 5  # to the box's far corner
    same = whole[row0: row0 + part.shape[0], col0: col0 + part.shape[1]]
    inside = part != 255
    assert 0.65 < inside.mean() < 0.9  # outside the box (from 36.5, 34.5 on): nodata
    # the tiles differ from the whole scene's (MiT attends to the whole tile), so a pixel at the
    # threshold may flip; nothing is shifted
    assert (same[inside] == part[inside]).mean() > 0.995
    # --aoi: a triangle in another CRS; outside it is nodata
    corners = [t * (40, 40), t * (63, 40), t * (40, 63)]
    aoi = tmp_path / "aoi.gpkg"
    gpd.GeoDataFrame(geometry=[Polygon(corners)], crs=crop[2]).to_crs("EPSG:3857").to_file(aoi)
    tri, tri_profile, _ = predict(stack, tmp_path / "tri.tif", aoi=str(aoi))
    assert min(tri.shape) >= 155 and max(tri.shape) <= 160 and tri_profile["transform"] == t * Affine.translation(32, 32) * Affine.scale(1 / 5)
    assert tri[45, 45] != 255 and tri[-5, -5] == 255 and tri[5, 5] == 255  # the right angle is in
    kept = tri != 255
    assert (tri[kept] == whole[160: 160 + tri.shape[0], 160: 160 + tri.shape[1]][kept]).mean() > 0.995


def test_mask_file_on_another_grid_leaves_pixels_out(tmp_path, crop, stack):
    t = crop[1]
    mask = np.zeros((20, 20), "uint8")
    mask[:10, :10] = 1  # 30 m pixels: the top-left 300 m
    mask_path = write_raster(tmp_path / "m.tif", mask, transform=Affine(30, 0, t.c, 0, -30, t.f), crs=crop[2])
    got, _, _ = predict(stack, tmp_path / "o.tif", leave_out=str(mask_path))
    assert (got[:150, :150] == 255).all() and (got[150:, 150:] != 255).all()


def test_an_offset_stack_warns_and_offset_option_restores_the_mask(tmp_path, crop, stack):
    data, t, crs = crop
    shifted = write_stack(tmp_path / "s2023.tif", np.where(data > 0, data + 1000, 0).astype("uint16"), t, crs)
    expected, _, _ = predict(stack, tmp_path / "e.tif")
    r = invoke("predict", shifted, "-o", tmp_path / "w.tif", "--tile-size", SIZE, "--json")
    assert r.exit_code == 0
    warned = json.loads(r.stdout)["scenes"][0]["warnings"]
    assert said(warned) == ["S2N-OFFSET-MISSING"] and "--offset -1000" in warned[0]["message"]
    r = invoke("predict", shifted, "-o", tmp_path / "f.tif", "--tile-size", SIZE, "--overlap", 16, "--offset", -1000,
               "--json")
    assert said(json.loads(r.stdout)["scenes"][0]["warnings"]) == []
    fixed, _, tags = read_mask(tmp_path / "f.tif")
    assert np.array_equal(fixed, expected) and tags["offset"] == "-1000,-1000,-1000,-1000,-1000,-1000"
    r = invoke("predict", stack, "-o", tmp_path / "n.tif", "--tile-size", SIZE, "--json")
    assert said(json.loads(r.stdout)["scenes"][0]["warnings"]) == []  # the real L1C crop is not taken for offset
    label = write_raster(tmp_path / "label.tif", (expected.reshape(SIZE, 5, SIZE, 5).mean(axis=(1, 3)) >= 0.5)
                         .astype("uint8"), transform=t, crs=crs, nodata=255)
    scores = [json.loads(invoke("evaluate", "--pair", shifted, label, "--tile-size", SIZE, "--json", *extra).stdout)
              ["rows"][0] for extra in ([], ["--offset", -1000])]
    assert said(scores[0]["images"][0]["warnings"]) == ["S2N-OFFSET-MISSING"]
    assert said(scores[1]["images"][0]["warnings"]) == []
    assert scores[1]["f1"] > scores[0]["f1"]


def test_bad_products_items_and_areas_get_one_line_and_leave_nothing(tmp_path, crop, stack):
    broken = write_product(tmp_path / "broken", *crop, drop=("B11",))
    notzip = tmp_path / "holiday.zip"
    import zipfile

    with zipfile.ZipFile(notzip, "w") as zf:
        zf.writestr("photo.txt", "not a product")
    files = write_band_files(tmp_path / "b", *crop)
    no_swir = write_item(tmp_path / "noswir.json", {b: p for b, p in files.items() if b != "B12"})
    dangling = write_item(tmp_path / "dangling.json", {**files, "B03": "gone/B03.tif"})
    far = tmp_path / "far.geojson"
    gpd.GeoDataFrame(geometry=[Polygon([(0, 0), (1, 0), (1, 1)])], crs="EPSG:4326").to_file(far)
    with rasterio.open(stack) as src:
        middle = src.xy(src.height // 2, src.width // 2)
        line, point = tmp_path / "river.gpkg", tmp_path / "gauge.gpkg"
        gpd.GeoDataFrame(geometry=[LineString([src.xy(0, 0), middle])], crs=src.crs).to_file(line)
        gpd.GeoDataFrame(geometry=[Point(middle)], crs=src.crs).to_file(point)
    cases = [
        ([broken], 1, "band file GRANULE/L2A_T18SVG_A033753_20230823T155553/IMG_DATA/R20m/T18SVG_20230823T155559_B11_20m.jp2 is missing"),
        ([notzip], 1, "holiday.zip: is not a Sentinel-2 product: no MTD_MSIL1C.xml or MTD_MSIL2A.xml in the zip, nor "
                      "band files"),
        ([no_swir], 1, "noswir.json: item has no asset for band B12"),
        ([dangling], 1, "dangling.json: asset href gone/B03.tif does not exist"),
        ([stack, "--aoi", far], 1, "far.geojson: AOI does not overlap the scene virginia.tif"),
        ([stack, "--aoi", line], 1, "river.gpkg: holds LineString geometries, where polygons are needed"),
        ([stack, "--aoi", point], 1, "gauge.gpkg: holds Point geometries"),
        ([stack, "--bbox", "10,0,9,1"], 2, "west 10 is not less than east 9"),
        ([stack, "--bbox", "-190,0,9,1"], 2, "longitudes must lie in -180..180"),
        ([stack, "--bbox", "1,2,3"], 2, "needs four numbers"),
        ([broken.parent / "none.SAFE"], 1, "none.SAFE: not found"),
        ([write_product(tmp_path / "ok", *crop), "--offset", -1000], 1, "--offset applies to stacks"),
        # --scale was read past without a word, the product's own taken
        ([write_product(tmp_path / "ok2", *crop), "--scale", 1], 1, "--scale applies to stacks; a L2A product states "
                                                                  "its scale in its metadata (10000)"),
        ([write_product(tmp_path / "ok3", *crop), "--bands", "3,2,1,4,5,6"], 1, "--bands applies to stacks"),
    ]
    for args, code, message in cases:
        out = tmp_path / "out" / "w.tif"
        r = invoke("predict", *args, "-o", out)
        assert r.exit_code == code, (args, r.output)
        assert message in r.stderr, (message, r.stderr)
        assert len(r.stderr.strip().splitlines()) == (1 if code == 1 else r.stderr.count("\n")), r.stderr
        assert "Traceback" not in r.output and not out.exists()
        assert not (out.parent.exists() and any(out.parent.iterdir()))


def test_a_dataarray_in_a_notebook_gives_the_stacks_mask_on_the_5x_grid(tmp_path, crop, stack):
    import rioxarray
    import xarray as xr

    from s2s2net_cli.inference.dataarray import predict_dataarray

    expected, profile, _ = predict(stack, tmp_path / "e.tif")
    names = ["blue", "green", "red", "nir", "swir16", "swir22"]
    da = rioxarray.open_rasterio(stack).assign_coords(band=names)
    da = xr.concat([da.sel(band=["red"]).assign_coords(band=["rededge"]), da], dim="band")  # an extra band first
    water = predict_dataarray(da, tile_size=SIZE, overlap=16)
    assert water.dims == ("y", "x") and water.shape == (5 * SIZE, 5 * SIZE)
    assert water.rio.crs == crop[2] and water.rio.transform() == profile["transform"]
    assert np.array_equal(water.values, expected)
    bands_last = predict_dataarray(da.transpose("y", "x", "band"), tile_size=SIZE, overlap=16)  # as images are held
    assert np.array_equal(bands_last.values, expected) and bands_last.rio.transform() == profile["transform"]
    shifted = (rioxarray.open_rasterio(stack) + 1000).where(rioxarray.open_rasterio(stack) > 0, 0)
    assert np.array_equal(predict_dataarray(shifted.astype("uint16"), offset=-1000, tile_size=SIZE, overlap=16).values,
                          expected)
    with raises_rule("S2N-DATAARRAY-NO-BAND"):
        predict_dataarray(da.sel(band=names[:5]))


def test_a_dataarray_is_warned_of_as_a_scene_is(tmp_path, crop, stack):
    """predict_dataarray dropped predict's warnings: a stack of baseline 04.00 without offset=-1000
    gave a mask from reflectance 0.1 too bright, without a word. Now they are warned of (naming
    the DataArray, not the temporary file) and kept in attrs; bands chosen by name assume nothing."""
    import warnings

    import rioxarray

    from s2s2net_cli.inference.dataarray import predict_dataarray

    names = ["blue", "green", "red", "nir", "swir16", "swir22"]
    plain = rioxarray.open_rasterio(stack)
    shifted = (plain + 1000).where(plain > 0, 0).astype("uint16").assign_coords(band=names)
    with pytest.warns(S2S2NetWarning, match="^DataArray: ") as caught:
        water = predict_dataarray(shifted, tile_size=SIZE, overlap=16)
    told = [w for w in caught if isinstance(w.message, S2S2NetWarning) and w.message.finding.code != SMALL]
    told = [w.message for w in told]
    assert [w.finding.code for w in told] == ["S2N-OFFSET-MISSING"] == [c for c in water.attrs["warning_codes"] if c != SMALL]
    assert str(told[0]).endswith("pass offset=-1000")
    with warnings.catch_warnings(record=True) as caught:  # with its offset, bands by name: nothing to say
        warnings.simplefilter("always")
        assert said(predict_dataarray(shifted, offset=-1000, tile_size=SIZE, overlap=16).attrs["warning_codes"]) == []
    assert not [w for w in caught if isinstance(w.message, S2S2NetWarning) and w.message.finding.code != SMALL]
    unnamed = plain.assign_coords(band=[1, 2, 3, 4, 5, 6])
    unnamed.attrs.pop("long_name", None)  # the stack's band descriptions, which rioxarray writes back
    with pytest.warns(S2S2NetWarning, match="^DataArray: ") as caught:
        water = predict_dataarray(unnamed, tile_size=SIZE, overlap=16)
    assert said(water.attrs["warning_codes"]) == ["S2N-DATAARRAY-BANDS-UNNAMED"]
    assert said([w.message for w in caught if isinstance(w.message, S2S2NetWarning)]) == ["S2N-DATAARRAY-BANDS-UNNAMED"]


def test_a_dataarray_sorted_south_to_north_gives_its_mask_in_its_own_order(tmp_path, stack):
    """A DataArray whose y runs south to north (``sortby("y")``, as netCDF cubes come) was refused
    as "/tmp/s2s2net-da-.../scene.tif: has no usable geotransform": a file the user never named.
    It is read north-up and its mask comes back in its own order, lining up with it; what
    predict refuses of its temporary file is said of the DataArray."""
    import rasterio
    import rioxarray

    from s2s2net_cli.inference.dataarray import predict_dataarray

    da = rioxarray.open_rasterio(stack)
    north_up = predict_dataarray(da, tile_size=SIZE, overlap=16)
    south_up = predict_dataarray(da.sortby("y"), tile_size=SIZE, overlap=16)
    assert np.array_equal(south_up.values, north_up.values[::-1])
    assert np.array_equal(south_up["y"].values, north_up["y"].values[::-1])
    assert np.array_equal(south_up["x"].values, north_up["x"].values)
    south_up.rio.to_raster(tmp_path / "south_up.tif")
    north_up.rio.to_raster(tmp_path / "north_up.tif")
    with rasterio.open(tmp_path / "south_up.tif") as s, rasterio.open(tmp_path / "north_up.tif") as n:
        assert s.transform.e == -n.transform.e == 2.0  # a south-up GeoTIFF, on the same ground
        assert (s.bounds.left, s.bounds.right) == (n.bounds.left, n.bounds.right)
        assert sorted([s.bounds.top, s.bounds.bottom]) == sorted([n.bounds.top, n.bounds.bottom])
    both = predict_dataarray(da.sortby("y").sortby("x", ascending=False), tile_size=SIZE, overlap=16)
    assert np.array_equal(both.values, north_up.values[::-1, ::-1])
    with pytest.raises(S2S2NetError, match="^DataArray: has no valid pixel"):
        predict_dataarray(da * 0, tile_size=SIZE, overlap=16)



def test_a_dataarray_of_one_date_of_a_stack_is_that_dates_scene(stack):
    """odc-stac and stackstac give (time, band, y, x); one date of it kept as a list
    (stack.isel(time=[0]), a sel of one day's slice) was refused as "needs dimensions (band, y, x)".
    A dimension of one value is dropped; of several, the refusal says to pick one."""
    import numpy as np
    import rioxarray
    import xarray as xr

    from s2s2net_cli.inference.dataarray import predict_dataarray

    da = rioxarray.open_rasterio(stack)
    expected = predict_dataarray(da, tile_size=SIZE, overlap=16)
    dated = da.expand_dims(time=[np.datetime64("2023-08-23")])
    for one in (dated, dated.transpose("band", "time", "y", "x")):
        water = predict_dataarray(one, tile_size=SIZE, overlap=16)
        assert water.dims == ("y", "x") and np.array_equal(water.values, expected.values)
        assert water.rio.transform() == expected.rio.transform()
    with raises_rule("S2N-DATAARRAY-SEVERAL") as refused:
        predict_dataarray(xr.concat([dated, dated], "time"))
    assert str(refused.value) == ("DataArray: holds 2 values of time besides (band, y, x): predict them one at a time "
                                  "(da.isel(time=0), ...); occurrence counts a cube's dates")


def test_a_dataarray_of_one_date_gives_a_mask_dated_as_a_files_is(tmp_path, stack):
    """One date of a cube (odc-stac, stackstac) gave a mask with no date and no time: saved with
    .rio.to_raster it was undated in occurrence --from-masks, and could not be put back on the
    cube's time axis; its source_scene named the temporary copy (scene.tif). Its mask keeps the
    time and is tagged with its date, as predict tags a file's; source_scene names the file read."""
    import numpy as np
    import rioxarray
    import xarray as xr

    from s2s2net_cli.inference.dataarray import predict_dataarray
    from s2s2net_cli.sources.dates import scene_date

    da = rioxarray.open_rasterio(stack)
    cube = xr.concat([da, da], "time").assign_coords(time=np.array(["2023-08-23T15:55:59", "2023-09-02T15:55:59"],
                                                                    dtype="datetime64[ns]"))
    masks = [predict_dataarray(cube.sel(time=t), tile_size=SIZE, overlap=16) for t in cube.time.values]
    assert [m.attrs["ACQUISITION_DATE"] for m in masks] == ["2023-08-23", "2023-09-02"]
    assert np.array_equal(xr.concat(masks, "time").time.values, cube.time.values)
    assert predict_dataarray(cube.isel(time=[1]), tile_size=SIZE, overlap=16).attrs["ACQUISITION_DATE"] == "2023-09-02"
    masks[1].rio.to_raster(tmp_path / "second.tif")  # a name that says no date
    assert scene_date(tmp_path / "second.tif") == "2023-09-02"
    undated = predict_dataarray(da, tile_size=SIZE, overlap=16)
    assert "ACQUISITION_DATE" not in undated.attrs and "time" not in undated.coords
    assert undated.attrs["source_scene"] == os.path.basename(stack)
    built = da.copy()  # an array read from no file (a cube's): no scene is named
    built.encoding = {}
    assert "source_scene" not in predict_dataarray(built, tile_size=SIZE, overlap=16).attrs


def test_a_stac_item_given_by_url_is_fetched(tmp_path, crop, stack):
    import functools
    import http.server
    import threading

    files = write_band_files(tmp_path / "b", *crop, offset=1000)
    write_item(tmp_path / "item.json", {b: p.resolve().as_uri() for b, p in files.items()},
               {"s2:processing_baseline": "05.09"})
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/item.json"
        scene = open_scene(url)
        assert scene.kind == "STAC item" and scene.path == url and scene.offset == (-1000.0,) * 6
        with raises_rule("S2N-STAC-UNREADABLE", "missing.json"):
            open_scene(url.replace("item.json", "missing.json"))
    finally:
        server.shutdown()
    expected, _, _ = predict(stack, tmp_path / "e.tif")
    got, _, _ = predict(tmp_path / "item.json", tmp_path / "g.tif")
    assert np.array_equal(got, expected)


def test_vector_polygons_are_the_thresholded_water_also_from_a_probability_raster(tmp_path, stack):
    areas = []
    for extra in ([], ["--probability"]):
        vec = tmp_path / f"w{len(extra)}.gpkg"
        r = invoke("predict", stack, "-o", tmp_path / f"w{len(extra)}.tif", "--tile-size", SIZE, "--vector", vec,
                   "--json", *extra)
        assert r.exit_code == 0, r.output
        areas.append(gpd.read_file(vec)["area_m2"].sum())
        assert abs(areas[-1] / 1e6 - json.loads(r.stdout)["scenes"][0]["water_km2"]) < 0.01 * areas[0] / 1e6 + 1e-4
    assert areas[0] > 0 and areas[1] == pytest.approx(areas[0], rel=1e-9)  # the same pixels, cut at the threshold


def test_float_reflectance_and_geographic_stacks_give_the_right_mask_and_area(tmp_path, crop, stack):
    from rasterio.warp import Resampling, calculate_default_transform, reproject

    data, t, crs = crop
    expected, _, _ = predict(stack, tmp_path / "e.tif")
    floats = write_raster(tmp_path / "refl.tif", (data / 10000).astype("float32"), transform=t, crs=crs, nodata=0)
    r = invoke("predict", floats, "-o", tmp_path / "f.tif", "--tile-size", SIZE, "--overlap", 16, "--json",
               "--bands", "1,2,3,4,5,6")  # its bands are undescribed: said to be in order, no warning is left
    assert r.exit_code == 0 and said(json.loads(r.stdout)["scenes"][0]["warnings"]) == []
    assert np.array_equal(read_mask(tmp_path / "f.tif")[0], expected)
    assert read_mask(tmp_path / "f.tif")[2]["scale"] == "1"
    # the same ground in EPSG:4326: the water area in km2, not in square degrees
    r = invoke("predict", stack, "-o", tmp_path / "utm.tif", "--tile-size", SIZE, "--json")
    utm_km2 = json.loads(r.stdout)["scenes"][0]["water_km2"]
    dst_t, w, h = calculate_default_transform(crs, "EPSG:4326", SIZE, SIZE, *rasterio.transform.array_bounds(SIZE, SIZE, t))
    geo = np.zeros((6, h, w), "uint16")
    reproject(data, geo, src_transform=t, src_crs=crs, dst_transform=dst_t, dst_crs="EPSG:4326",
              resampling=Resampling.nearest, src_nodata=0, dst_nodata=0)
    geo_path = write_raster(tmp_path / "geo.tif", geo, transform=dst_t, crs="EPSG:4326", nodata=0)
    vec = tmp_path / "geo.gpkg"
    r = invoke("predict", geo_path, "-o", tmp_path / "g.tif", "--tile-size", SIZE, "--json", "--vector", vec)
    geo_km2 = json.loads(r.stdout)["scenes"][0]["water_km2"]
    # km2, not square degrees (1e-10 of them here): the same order as the UTM crop's (the mask of
    # a grid resampled by nearest is not the same mask), and exactly the water pixels' geodesic area
    assert utm_km2 > 0.01 and 0.1 * utm_km2 < geo_km2 < 10 * utm_km2
    from pyproj import Geod

    mask, profile, _ = read_mask(tmp_path / "g.tif")
    mt = profile["transform"]
    geod, expected_m2 = Geod(ellps="WGS84"), 0.0
    for row in range(mask.shape[0]):
        top, bottom = mt.f + mt.e * row, mt.f + mt.e * (row + 1)
        pixel_m2 = abs(geod.polygon_area_perimeter([0, mt.a, mt.a, 0], [top, top, bottom, bottom])[0])
        expected_m2 += pixel_m2 * np.count_nonzero(mask[row] == 1)
    assert geo_km2 == pytest.approx(expected_m2 / 1e6, rel=1e-3)
    assert abs(gpd.read_file(vec)["area_m2"].sum() / 1e6 - geo_km2) < 0.01 * geo_km2


def test_several_scenes_of_one_name_or_a_file_as_folder_get_one_line(tmp_path, stack):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one, two = (tmp_path / d / "scene.tif" for d in "ab")
    one.write_bytes(stack.read_bytes())
    two.write_bytes(stack.read_bytes())
    r = invoke("predict", one, two, "-o", tmp_path / "out")
    assert r.exit_code == 2 and "would both be written to" in r.stderr and not (tmp_path / "out").exists()
    (tmp_path / "file.tif").write_bytes(b"x")
    r = invoke("predict", one, stack, "-o", tmp_path / "file.tif")
    assert r.exit_code == 2 and "is a file; with several scenes (scene.tif, virginia.tif) -o names a folder" in r.stderr
    assert "Traceback" not in r.output


def test_cog_of_probabilities_averages_its_overviews_and_keeps_the_creation_options(tmp_path, stack):
    out = tmp_path / "p.tif"
    r = invoke("predict", stack, "-o", out, "--tile-size", SIZE, "--probability", "--cog", "--co", "ZLEVEL=9",
               "--co", "compress=zstd", "--co", "blockxsize=128")
    assert r.exit_code == 0, r.output
    with rasterio.open(out) as src:
        assert src.overviews(1) and src.compression.name.lower() == "zstd"
        full = src.read(1).astype(float)
        half = src.read(1, out_shape=(src.height // 2, src.width // 2)).astype(float)
    means = full[: half.shape[0] * 2, : half.shape[1] * 2].reshape(half.shape[0], 2, half.shape[1], 2).mean(axis=(1, 3))
    assert np.abs(half - means).max() <= 1  # an average of four, not one of them


@pytest.mark.parametrize("as_zip", [False, True])
def test_synth_paints_into_a_product_as_into_its_stack(tmp_path, crop, as_zip):
    """synth --background took a stack alone: a product, as users download it, was refused
    ("must be a stack of DNs of scale 10000 (it is a L2A product of scale 10000)"), a .SAFE
    folder by Click. A product is now read as predict reads it (its offset, its level): its
    pairs are those of the same pixels in a stack tagged with its level, to the DN."""
    from ..conftest import codes, refused, run_cli

    product = write_product(tmp_path, *crop, level="L1C", baseline="05.09", as_zip=as_zip)
    stack = write_stack(tmp_path / "virginia.tif", *crop)
    with rasterio.open(stack, "r+") as dst:
        dst.update_tags(level="L1C")
    for name, background in (("product", product), ("stack", stack)):
        r = run_cli("synth", tmp_path / name, "--background", background, "--size", 48, "--seed", 3)
        assert r.returncode == 0 and codes(r.stderr) == [], r.stderr
    with rasterio.open(tmp_path / "product" / "synth_3_scene.tif") as a, \
            rasterio.open(tmp_path / "stack" / "synth_3_scene.tif") as b:
        assert a.tags()["level"] == "L1C" and np.array_equal(a.read(), b.read()) and a.transform == b.transform
    r = run_cli("synth", tmp_path / "l2a", "--background", product, "--level", "L2A")
    assert refused(r, "S2N-BACKGROUND-LEVEL-CONTRADICTED", 2, f"{product}: is L1C (its metadata), and --level L2A")
    assert not (tmp_path / "l2a").exists()


def test_a_folder_of_band_files_is_read_as_the_item_of_the_same_files(tmp_path, crop, stack):
    """A folder of one raster per band (an unpacked product, Copernicus Browser's downloads) was
    refused as "a folder, not a scene", pointing to gdalbuildvrt, which pip does not install."""
    scl = np.full((SIZE // 2, SIZE // 2), 4, np.uint8)
    scl[0:6, 0:6] = 10  # cirrus
    files = write_band_files(tmp_path / "item_bands", *crop, offset=1000, scl=scl)
    item = write_item(tmp_path / "item.json", {b: f"item_bands/{p.name}" for b, p in files.items()},
                      {"s2:processing_baseline": "05.09"}, names="planetary")
    expected, _, _ = predict(item, tmp_path / "item.tif")
    # the same files under the names users have, beside files of no band or of other bands
    folder = tmp_path / "S2B_20230823_download"
    folder.mkdir()
    names = {"B02": "T18SVG_20230823T155559_B02_10m.tif", "B03": "2023-08-23_Sentinel-2_L2A_B03_(Raw).tiff",
             "B04": "red.tif", "B08": "T18SVG_B08.TIF", "B11": "T18SVG_20230823T155559_B11_20m.tif",
             "B12": "b12.tif", "SCL": "T18SVG_20230823T155559_SCL_20m.tif"}
    for band, name in names.items():
        (folder / name).write_bytes(files[band].read_bytes())
    (folder / "T18SVG_20230823T155559_B8A_20m.tif").write_bytes(files["B11"].read_bytes())  # not B08
    (folder / "T18SVG_20230823T155559_TCI_10m.tif").write_bytes(files["B02"].read_bytes())  # no band
    (folder / "red_edge_B05.tif").write_bytes(files["B04"].read_bytes())  # not red (B04), B05
    (folder / "README.txt").write_text("downloaded by hand")
    data, transform, crs = crop  # and B02 at 20 m as well, as an unpacked L2A's R20m holds it
    write_raster(folder / "T18SVG_20230823T155559_B02_20m.tif", data[0, ::2, ::2].astype(np.uint16) + 1000,
                 transform=transform * Affine.scale(2), crs=crs)
    scene = open_scene(folder)
    assert scene.kind == "band folder" and scene.scale == 10000 and scene.offset == (0.0,) * 6
    assert scene.cloud_band is not None and scene.transform == crop[1]
    r = invoke("predict", folder, "-o", tmp_path / "folder.tif", "--offset", -1000, "--tile-size", SIZE,
               "--overlap", 16, "--json")
    assert r.exit_code == 0, r.output
    got, _, tags = read_mask(tmp_path / "folder.tif")
    assert np.array_equal(got, expected) and (got[:60, :60] == 255).all()
    assert tags["source_kind"] == "band folder" and tags["offset"] == ",".join(["-1000"] * 6)
    r = invoke("predict", folder, "-o", tmp_path / "no_offset.tif", "--tile-size", SIZE, "--json")
    assert r.exit_code == 0 and "[S2N-OFFSET-MISSING]" in r.output  # its +1000 noticed, as a stack's
    # an unpacked L2A product's IMG_DATA: its R10m and R20m folders, each band at its finest
    img = tmp_path / "IMG_DATA"
    for band in (*BANDS, "SCL", "B02_20m"):
        res = "R20m" if band in ("B11", "B12", "SCL", "B02_20m") else "R10m"
        (img / res).mkdir(parents=True, exist_ok=True)
        source = folder / "T18SVG_20230823T155559_B02_20m.tif" if band == "B02_20m" else files[band]
        name = f"T18SVG_{band}.tif" if band == "B02_20m" else f"T18SVG_{band}_{res[1:]}.tif"
        (img / res / name).write_bytes(source.read_bytes())
    assert np.array_equal(predict(img, tmp_path / "img.tif", offset=-1000)[0], expected)
    granule = tmp_path / "L2A_T18SVG_A033753_20230823T155553"  # and the granule's folder above it
    granule.mkdir()
    img.rename(granule / "IMG_DATA")
    assert np.array_equal(predict(granule, tmp_path / "granule.tif", offset=-1000)[0], expected)
    # float reflectance band files are read with scale 1, as a float stack is
    refl = tmp_path / "reflectance"
    refl.mkdir()
    for band, path in files.items():
        with rasterio.open(path) as src:
            pixels, profile = src.read(1), src.profile
        if band != "SCL":
            pixels = np.where(pixels > 0, (pixels.astype(np.float32) - 1000) / 10000, 0).astype(np.float32)
        profile.update(dtype=pixels.dtype)
        with rasterio.open(refl / f"{band}.tif", "w", **profile) as dst:
            dst.write(pixels, 1)
    assert open_scene(refl).scale == 1.0 and open_scene(refl).dtype == "float32"
    assert np.array_equal(predict(refl, tmp_path / "refl.tif")[0], expected)


@pytest.mark.parametrize("level", ["L1C", "L2A"])
def test_a_band_folder_inside_an_unpacked_product_is_read_with_the_products_offset(tmp_path, crop, level):
    """An unpacked product's IMG_DATA (or granule) folder was read as any folder of band files:
    offset 0, its +1000 DNs warned of (pass --offset -1000), though the product beside it
    states the offset. It is read with the product's radiometry now, to the product's mask, and
    named after the product."""
    product = write_product(tmp_path / "unpacked", *crop, level=level, driver="GTiff")
    expected, _, _ = predict(product, tmp_path / "product.tif")
    granule = next((product / "GRANULE").iterdir())
    for source in (granule / "IMG_DATA", granule):
        scene = open_scene(source)
        assert scene.kind == f"band folder of an {level} product" and scene.offset == (-1000.0,) * 6
        assert scene.scale == 10000 and (scene.cloud_band is not None) == (level == "L2A")
        r = invoke("predict", source, "-o", f"{tmp_path / 'out'}/", "--tile-size", SIZE, "--overlap", 16, "--overwrite")
        assert r.exit_code == 0 and "[S2N-OFFSET-MISSING]" not in r.output, r.output
        got, _, tags = read_mask(tmp_path / "out" / f"{product.name[:-5]}_water.tif")
        assert np.array_equal(got, expected)
        assert tags["source_product"] == product.name[:-5] and tags["offset"] == ",".join(["-1000"] * 6)
    # scored, each named after its product too: two products' IMG_DATA were one id, refused as twice
    other = tmp_path / "other" / product.name.replace("20230823T184759", "20230902T184759")
    shutil.copytree(product, other)
    label = write_raster(tmp_path / "label.tif", (expected[::5, ::5] == 1).astype("uint8"), transform=crop[1],
                         crs=crop[2], nodata=255)
    r = invoke("evaluate", "--pair", granule / "IMG_DATA", label, "--pair", other / granule.relative_to(product) /
               "IMG_DATA", label, "--baseline", "ndwi", "--json")
    assert r.exit_code == 0, r.output
    ids = [img["id"] for img in json.loads(r.stdout)["rows"][0]["images"]]
    assert ids == [product.name[:-5], other.name[:-5]]
    r = invoke("predict", granule / "IMG_DATA", "-o", tmp_path / "o.tif", "--offset", -1000)
    assert r.exit_code == 1 and r.output.splitlines()[-1].endswith(
        f"--offset applies to stacks; a band folder of an {level} product states its offset in its metadata "
        "(-1000, -1000, -1000, -1000, -1000, -1000) [S2N-OFFSET-NOT-STACK]"), r.output
    assert not (tmp_path / "o.tif").exists()
    # the same files copied out of the product say nothing of it: --offset, as before
    loose = tmp_path / "loose"
    loose.mkdir()
    for path in (granule / "IMG_DATA").rglob("*.jp2"):
        (loose / path.name).write_bytes(path.read_bytes())
    assert open_scene(loose).kind == "band folder" and open_scene(loose).offset == (0.0,) * 6
    assert np.array_equal(predict(loose, tmp_path / "loose.tif", offset=-1000)[0], expected)


def test_a_zip_of_band_files_is_read_in_place_as_their_folder(tmp_path, crop):
    """Copernicus Browser downloads raw bands as a zip of one GeoTIFF per band: it was refused
    as "not a Sentinel-2 product", to be unpacked by hand. It is read in place, as its folder."""
    scl = np.full((SIZE // 2, SIZE // 2), 4, np.uint8)
    scl[0:6, 0:6] = 9  # cloud
    files = write_band_files(tmp_path / "bands", *crop, scl=scl)
    folder = tmp_path / "2023-08-23_download"
    folder.mkdir()
    for band, path in files.items():
        (folder / f"2023-08-23-00_00_2023-08-23-23_59_Sentinel-2_L2A_{band}_(Raw).tiff").write_bytes(path.read_bytes())
    expected, _, _ = predict(folder, tmp_path / "folder.tif")
    archive = tmp_path / "Sentinel-2 download.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(folder.iterdir()):
            zf.write(path, f"bands/{path.name}")
        zf.writestr("bands/README.txt", "downloaded by hand")
    scene = open_scene(archive)
    assert scene.kind == "band folder" and scene.cloud_band is not None and scene.transform == crop[1]
    r = invoke("predict", archive, "-o", f"{tmp_path / 'out'}/", "--tile-size", SIZE, "--overlap", 16, "--json")
    assert r.exit_code == 0, r.output
    got, _, tags = read_mask(tmp_path / "out" / "Sentinel-2 download_water.tif")
    assert np.array_equal(got, expected) and (got[:30, :30] == 255).all()
    assert tags["ACQUISITION_DATE"] == "2023-08-23" and tags["source_kind"] == "band folder"
    incomplete = tmp_path / "incomplete.zip"  # a band left out: said as for a folder, naming the zip
    with zipfile.ZipFile(incomplete, "w") as zf:
        for path in sorted(folder.iterdir()):
            if "_B12_" not in path.name:
                zf.write(path, path.name)
    r = invoke("predict", incomplete, "-o", tmp_path / "o.tif")
    assert r.exit_code == 1 and r.output.splitlines()[-1].startswith(
        f"Error: {incomplete}: holds band files (B02, B03, B04, B08, B11, SCL) and none named for B12"), r.output
    assert not (tmp_path / "o.tif").exists()


def test_a_zip_of_one_stack_is_read_in_place_as_that_stack(tmp_path, stack):
    """Google Earth Engine downloads a stack as a zip holding one GeoTIFF (download.tif): it was
    refused as "not a Sentinel-2 product". It is read in place as the stack, named as the zip; a
    zip of several such rasters names them and the GDAL path that reads one."""
    expected = invoke("predict", stack, "-o", tmp_path / "stack.tif", "--tile-size", SIZE, "--overlap", 16)
    assert expected.exit_code == 0, expected.output
    archive = tmp_path / "S2_2023-08-23.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(stack, "download.tif")
        zf.writestr("download.tif.aux.xml", "<PAMDataset/>")  # not a raster
    scene = open_scene(archive)
    assert scene.path == str(archive) and scene.dataset == f"/vsizip/{archive}/download.tif"
    assert scene.kind == "stack" and scene.name == "S2_2023-08-23.zip"
    r = invoke("predict", archive, "-o", f"{tmp_path / 'out'}/", "--tile-size", SIZE, "--overlap", 16, "--json")
    assert r.exit_code == 0, r.output
    got, _, tags = read_mask(tmp_path / "out" / "S2_2023-08-23_water.tif")
    assert np.array_equal(got, read_mask(tmp_path / "stack.tif")[0]) and tags["ACQUISITION_DATE"] == "2023-08-23"
    # a mask in a zip of its own is read as it is, wherever a label is taken
    with zipfile.ZipFile(tmp_path / "label.zip", "w") as zf:
        zf.write(tmp_path / "stack.tif", "water.tif")
    scores = []
    for pair in ((stack, tmp_path / "stack.tif"), (archive, tmp_path / "label.zip")):
        r = invoke("evaluate", "--pair", *pair, "--baseline", "ndwi", "--json")
        assert r.exit_code == 0, r.output
        scores.append({k: v for k, v in json.JSONDecoder().raw_decode(r.output[r.output.index("{"):])[0]["rows"][0].items() if k != "images"})
    assert scores[0] == scores[1] and scores[0]["f1"] > 0.5
    several = tmp_path / "two.zip"
    with zipfile.ZipFile(several, "w") as zf:
        zf.write(stack, "a/first.tif")
        zf.write(stack, "a/second.tif")
    r = invoke("predict", several, "-o", tmp_path / "o.tif")
    assert r.exit_code == 1 and r.output.splitlines()[-1] == (
        f"Error: {several}: holds 2 rasters (a/first.tif, a/second.tif): name the one to read as GDAL does, "
        f"/vsizip/{several}/a/first.tif [S2N-ZIP-SEVERAL-RASTERS]"), r.output
    assert not (tmp_path / "o.tif").exists()
    r = invoke("predict", f"/vsizip/{several}/a/second.tif", "-o", tmp_path / "second.tif", "--tile-size", SIZE,
               "--overlap", 16)
    assert r.exit_code == 0 and np.array_equal(read_mask(tmp_path / "second.tif")[0], got), r.output


@pytest.mark.parametrize("as_zip", [False, True])
def test_a_damaged_band_file_is_named_in_the_refusal(tmp_path, crop, as_zip):
    """A band file cut short in a folder (or zip) of band files was refused as "cannot be read,
    damaged or truncated (Read failed. See previous exception for details.)": rasterio's words,
    which name no file. GDAL's own line names the band file to fetch again."""
    files = write_band_files(tmp_path / "bands", *crop)
    whole = files["B11"].read_bytes()
    files["B11"].write_bytes(whole[: len(whole) * 3 // 4])
    source = tmp_path / "bands"
    if as_zip:
        source = tmp_path / "bands.zip"
        with zipfile.ZipFile(source, "w") as zf:
            for path in files.values():
                zf.write(path, path.name)
    r = invoke("predict", source, "-o", tmp_path / "water.tif", "--tile-size", SIZE)
    last = r.output.splitlines()[-1]
    assert r.exit_code == 1 and last.startswith(f"Error: {source}: cannot be read, damaged or truncated (B11.tif"), r.output
    assert last.endswith("[S2N-SCENE-DAMAGED]") and "previous exception" not in last
    assert not (tmp_path / "water.tif").exists()


def test_a_band_folder_that_lacks_a_band_or_holds_one_twice_is_refused_in_one_line(tmp_path, crop):
    files = write_band_files(tmp_path / "bands", *crop)
    files["B12"].unlink()
    r = invoke("predict", tmp_path / "bands", "-o", tmp_path / "o.tif")
    assert r.exit_code == 1 and r.output.splitlines()[-1] == (
        f"Error: {tmp_path / 'bands'}: holds band files (B02, B03, B04, B08, B11) and none named for B12: a folder (or "
        "zip) of band files needs B02, B03, B04, B08, B11 and B12, each named for its band (..._B02_10m.tif) "
        "[S2N-BAND-FOLDER-MISSING]"), r.output
    files = write_band_files(tmp_path / "twice", *crop)
    (tmp_path / "twice" / "B02_copy.tif").write_bytes(files["B02"].read_bytes())
    r = invoke("predict", tmp_path / "twice", "-o", tmp_path / "o.tif")
    assert r.exit_code == 1 and "holds two files for B02 at one pixel size (B02.tif, B02_copy.tif)" in r.output
    with rasterio.open(files["B11"]) as src:  # B11 as float reflectance beside DNs: cut to 0 as UInt16
        pixels, profile = src.read(1).astype(np.float32) / 10000, src.profile
    profile.update(dtype="float32")
    with rasterio.open(tmp_path / "twice" / "B02_copy.tif", "w", **profile) as dst:
        dst.write(pixels, 1)
    (tmp_path / "twice" / "B02_copy.tif").rename(tmp_path / "twice" / "B12.tif")
    r = invoke("predict", tmp_path / "twice", "-o", tmp_path / "o.tif")
    assert r.exit_code == 1 and r.output.splitlines()[-1].endswith(
        "twice: band B12 holds float32 and B02 uint16: the six bands are read as one type, and would not keep their "
        "values (write them as one) [S2N-PRODUCT-BAND-DTYPE]"), r.output
    r = invoke("predict", tmp_path / "bands", "-o", tmp_path / "o.tif", "--bands", "1,2,3,4,5,6")
    assert r.exit_code == 1 and "[S2N-BANDS-NOT-STACK]" in r.output
    assert not (tmp_path / "o.tif").exists()


def test_a_folder_of_scenes_named_for_rivers_is_not_read_as_band_files(tmp_path, crop):
    """Scenes named Red_River_2023.tif and Blue_Nile_2022.tif carry a band's word (red, blue):
    their folder was refused as band files lacking B03, where a folder of scenes is told to name
    each; a band file holds one band."""
    stack = tmp_path / "stack.tif"
    data = np.random.default_rng(0).integers(500, 3000, (6, 40, 40)).astype("uint16")
    write_raster(stack, data, nodata=0, descriptions=("B02", "B03", "B04", "B08", "B11", "B12"))
    (tmp_path / "rivers").mkdir()
    for name in ("Red_River_2023.tif", "Blue_Nile_2022.tif", "Mekong_2021.tif"):
        (tmp_path / "rivers" / name).write_bytes(stack.read_bytes())
    r = invoke("predict", tmp_path / "rivers", "-o", tmp_path / "out")
    assert r.exit_code == 1 and r.output.splitlines()[-1].startswith(
        f"Error: {tmp_path / 'rivers'}: is a folder, not a scene (it holds 3 files that may be scenes: "
        "Blue_Nile_2022.tif, Mekong_2021.tif, ...; name each, as "), r.output
    assert "[S2N-SCENE-IS-FOLDER]" in r.output and not (tmp_path / "out").exists()
    files = write_band_files(tmp_path / "bands", *crop)  # band files of one band each, a band missing: as before
    files["B03"].unlink()
    r = invoke("predict", tmp_path / "bands", "-o", tmp_path / "o.tif")
    assert r.exit_code == 1 and "[S2N-BAND-FOLDER-MISSING]" in r.output
