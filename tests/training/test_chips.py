import csv
import json
import shutil

import geopandas as gpd
import numpy as np
import pytest
import rasterio
from affine import Affine
from rasterio.warp import Resampling, calculate_default_transform, reproject
from shapely.geometry import Polygon, box

from s2s2net_cli.synthetic.scenes import make_pair, write_pair

from ..conftest import codes, refused, run_cli, write_polygons, write_raster


@pytest.fixture
def pairs(tmp_path):
    """Three synthetic pairs (72 x 72 px) with their manifest."""
    rows = []
    for seed in (21, 22, 23):
        p = make_pair(72, seed=seed, nodata_margin=False)
        write_pair(p, tmp_path / f"s{seed}.tif", tmp_path / f"m{seed}.tif")
        rows.append({"image": f"s{seed}.tif", "mask": f"m{seed}.tif", "id": f"scene{seed}"})
    with open(tmp_path / "pairs.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["image", "mask", "id"])
        w.writeheader()
        w.writerows(rows)
    return tmp_path


def read(path):
    with rasterio.open(path) as src:
        return src.read(), src.profile


def test_mask_on_the_five_times_grid_comes_out_cell_for_cell(tmp_path):
    p = make_pair(64, seed=3, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    r = run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "-o", tmp_path / "chips", "--size", 32, "--json")
    assert r.returncode == 0, r.stderr
    index = gpd.read_file(tmp_path / "chips" / "index.gpkg")
    assert len(index) == 4
    for row in index.itertuples():
        img, iprof = read(tmp_path / "chips" / row.image)
        msk, mprof = read(tmp_path / "chips" / row.mask)
        r0, c0 = row.row, row.col
        assert np.array_equal(img, p.scene[:, r0:r0 + 32, c0:c0 + 32])
        assert np.array_equal(msk[0], p.mask[5 * r0:5 * r0 + 160, 5 * c0:5 * c0 + 160].astype("uint8"))
        assert mprof["transform"] == iprof["transform"] @ Affine.scale(1 / 5)
        assert iprof["transform"] == p.transform @ Affine.translation(c0, r0)
        assert iprof["dtype"] == "uint16" and mprof["dtype"] == "uint8" and mprof["nodata"] == 255
        assert iprof["compress"] == "deflate" and iprof["crs"] == p.crs
        assert row.water_fraction == pytest.approx(p.mask[5 * r0:5 * r0 + 160, 5 * c0:5 * c0 + 160].mean())
    summary = json.loads(r.stdout)
    assert sum(summary["chips"].values()) == 4


def test_water_polygons_chip_as_the_2m_mask_they_trace(tmp_path):
    """A vector mask labels the whole scene (water in its polygons, land elsewhere) on the 5x
    sub-grid: the polygons traced from a 2 m mask give that mask back chip for chip, and in
    another CRS all but the pixels that reprojection moves across a shore."""
    p = make_pair(64, seed=3, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    fine = p.transform @ Affine.scale(1 / 5)
    same = write_polygons(tmp_path / "water.gpkg", p.mask, fine, crs=p.crs)
    other = write_polygons(tmp_path / "water.geojson", p.mask, fine, crs=p.crs, to_crs="EPSG:4326")
    for label, out in ((same, "chips"), (other, "chips4326")):
        r = run_cli("chip", "--pair", tmp_path / "s.tif", label, "-o", tmp_path / out, "--size", 32, "--json")
        assert r.returncode == 0, r.stderr
        index = gpd.read_file(tmp_path / out / "index.gpkg")
        assert len(index) == 4 and set(index.label_scale) == {1}
        for row in index.itertuples():
            msk, _ = read(tmp_path / out / row.mask)
            truth = p.mask[5 * row.row:5 * row.row + 160, 5 * row.col:5 * row.col + 160].astype("uint8")
            if label == same:
                assert np.array_equal(msk[0], truth)
            else:
                assert (msk[0] == truth).mean() > 0.99 and (msk[0] != 255).all()
    # --nodata was taken and ignored for polygons, without a word: it is warned of, the chips the same
    r = run_cli("chip", "--pair", tmp_path / "s.tif", same, "-o", tmp_path / "chips255", "--size", 32, "--nodata", 255)
    assert r.returncode == 0 and codes(r.stderr) == ["S2N-NODATA-POLYGONS"], r.stderr
    assert f"{same}: is water polygons, where --nodata (255) means nothing" in r.stderr
    assert [read(tmp_path / "chips255" / "masks" / f.name)[0].tobytes() for f in sorted((tmp_path / "chips" / "masks")
            .iterdir())] == [read(f)[0].tobytes() for f in sorted((tmp_path / "chips" / "masks").iterdir())]


@pytest.mark.parametrize("case", ["lines", "empty", "no_crs", "far", "table"])
def test_a_vector_mask_that_holds_no_water_polygons_near_the_scene_is_refused(tmp_path, pairs, case):
    p = make_pair(72, seed=21, nodata_margin=False)
    fine = p.transform @ Affine.scale(1 / 5)
    mask = write_polygons(tmp_path / "water.gpkg", p.mask, fine, crs=p.crs)
    frame = gpd.read_file(mask)
    if case == "lines":
        mask = tmp_path / "shores.gpkg"
        frame.assign(geometry=frame.boundary).to_file(mask)
    elif case == "empty":
        mask = tmp_path / "none.gpkg"
        frame.iloc[:0].to_file(mask)
    elif case == "no_crs":
        mask = tmp_path / "water.shp"
        frame.to_file(mask)
        (tmp_path / "water.prj").unlink()
    elif case == "far":
        mask = tmp_path / "far.gpkg"
        frame.assign(geometry=frame.translate(200000, 0)).to_file(mask)
    elif case == "table":
        mask = tmp_path / "water.csv"
        mask.write_text("water,area\n1,20\n")
    code = {"lines": "S2N-VECTOR-NOT-POLYGONS", "empty": "S2N-MASK-VECTOR-EMPTY", "no_crs": "S2N-MASK-NO-CRS",
            "far": "S2N-MASK-NO-OVERLAP", "table": "S2N-MASK-UNREADABLE"}[case]
    out = tmp_path / "chips"
    r = run_cli("chip", "--pair", pairs / "s21.tif", mask, "-o", out, "--size", 24)
    assert refused(r, code, 1, mask), r.stderr
    assert r.stderr.count("\n") == 1 and not out.exists()


def test_water_polygons_given_first_are_named_as_a_vector_not_a_scene(tmp_path, pairs):
    p = make_pair(72, seed=21, nodata_margin=False)
    polygons = write_polygons(tmp_path / "water.gpkg", p.mask, p.transform @ Affine.scale(1 / 5), crs=p.crs)
    for command in (["chip", "--pair", polygons, pairs / "s21.tif", "-o", tmp_path / "chips"],
                    ["evaluate", "--pair", polygons, pairs / "s21.tif"],
                    ["predict", polygons, "-o", tmp_path / "w.tif"]):
        r = run_cli(*command)
        assert refused(r, "S2N-SCENE-IS-VECTOR", 1, polygons), r.stderr
        assert "the scene comes first and its mask second" in r.stderr
    assert not (tmp_path / "chips").exists() and not (tmp_path / "w.tif").exists()


def test_a_vector_mask_of_several_layers_is_read_from_its_first_with_a_warning(tmp_path):
    p = make_pair(64, seed=3, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    fine = p.transform @ Affine.scale(1 / 5)
    mask = write_polygons(tmp_path / "water.gpkg", p.mask, fine, crs=p.crs, layer="lakes")
    write_polygons(mask, np.ones((10, 10)), fine, crs=p.crs, layer="zzz")  # a second layer, all water
    r = run_cli("chip", "--pair", tmp_path / "s.tif", mask, "-o", tmp_path / "chips", "--size", 32, "--json")
    assert r.returncode == 0, r.stderr
    assert "S2N-VECTOR-LAYERS" in codes(r.stderr) and "holds 2 layers; the first, lakes, is read" in r.stderr
    index = gpd.read_file(tmp_path / "chips" / "index.gpkg")
    assert index.water_fraction.sum() == pytest.approx(p.mask.mean() * 4, rel=1e-6)


def test_water_polygons_of_several_kinds_are_warned_of(tmp_path):
    """OpenStreetMap's water layer sorts its polygons by fclass (water, wetland, reservoir,
    glacier...): every one was drawn as water without a word. Polygons of two kinds or more
    near the scene, by a column of kinds, are warned of with each kind's count (chip and
    evaluate alike); one kind, kinds far from the scene, or a column of names, are not."""
    p = make_pair(64, seed=3, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    fine = p.transform @ Affine.scale(1 / 5)
    traced = gpd.read_file(write_polygons(tmp_path / "traced.gpkg", p.mask, fine, crs=p.crs))
    far = box(p.transform.c + 1e5, p.transform.f, p.transform.c + 1e5 + 50, p.transform.f + 50)  # 100 km east
    n = len(traced)
    cases = {  # file: (kinds of the traced polygons, kinds of one polygon far away, column, warned)
        "osm.gpkg": (["water"] * (n - 2) + ["wetland"] * 2, [], "FClass", f"(water {n - 2}, wetland 2)"),
        "one.gpkg": (["water"] * n, [], "fclass", None),
        "far.gpkg": (["water"] * n, ["glacier"], "Type", None),
        "names.gpkg": ([f"lake {k}" for k in range(n)], [], "name", None),
    }
    for name, (kinds, far_kinds, column, warned) in cases.items():
        geometry = list(traced.geometry) + [far] * len(far_kinds)
        gpd.GeoDataFrame({column: kinds + far_kinds}, geometry=geometry, crs=p.crs).to_file(tmp_path / name)
        r = run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / name, "-o", tmp_path / name.replace(".", "_"),
                    "--size", 32)
        e = run_cli("evaluate", "--baseline", "ndwi", "--pair", tmp_path / "s.tif", tmp_path / name, "--json")
        assert r.returncode == 0 and e.returncode == 0, (r.stderr, e.stderr)
        in_json = [w for w in json.loads(e.stdout)["rows"][0]["images"][0]["warnings"]
                   if w["code"] == "S2N-MASK-VECTOR-KINDS"]
        for stderr in (r.stderr, e.stderr):
            assert ("S2N-MASK-VECTOR-KINDS" in codes(stderr)) == (warned is not None), (name, stderr)
        if warned:
            (said,) = in_json
            assert f"of 2 kinds by its column FClass {warned}" in said["message"]
        else:
            assert in_json == []


@pytest.mark.parametrize("cell_m", [10, 20, 5])
def test_a_coarse_label_is_kept_at_10m_and_reaches_the_loss_as_its_cells(tmp_path, cell_m):
    from s2s2net_cli.training.data import Augment, ChipDataset, chip_splits

    p = make_pair(64, seed=4, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "fine.tif")
    k = cell_m // 2  # 2 m cells a label cell
    h = p.mask.shape[0] // k
    label = (p.mask[:h * k, :h * k].reshape(h, k, h, k).mean(axis=(1, 3)) >= 0.5).astype("uint8")
    label[:3, :3] = 255
    write_raster(tmp_path / "label.tif", label, transform=p.transform @ Affine.scale(cell_m / 10), crs=p.crs, nodata=255)
    r = run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "label.tif", "-o", tmp_path / "chips", "--size", 32,
                "--json", "--val-fraction", 0, "--max-nodata", 0.5)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["labels_10m"] == 4
    index = gpd.read_file(tmp_path / "chips" / "index.gpkg")
    assert list(index.label_scale) == [5] * 4
    on_10m = label if cell_m == 10 else (
        np.repeat(np.repeat(label, 2, 0), 2, 1) if cell_m == 20 else None)
    for row in index.itertuples():
        msk, mprof = read(tmp_path / "chips" / row.mask)
        _, iprof = read(tmp_path / "chips" / row.image)
        assert msk.shape == (1, 32, 32) and mprof["transform"] == iprof["transform"]  # the scene's own 10 m cells
        if on_10m is not None:
            assert np.array_equal(msk[0], on_10m[row.row:row.row + 32, row.col:row.col + 32])
    if cell_m == 5:  # a 5 m label is averaged to 10 m: water where half a cell is
        first = index[(index.row == 32) & (index.col == 32)].iloc[0]
        msk, _ = read(tmp_path / "chips" / first["mask"])
        expected = label[64:128, 64:128].reshape(32, 2, 32, 2).mean(axis=(1, 3)) >= 0.5
        assert np.array_equal(msk[0].astype(bool), expected)
    train, _ = chip_splits(tmp_path / "chips")
    record = next(t for t in train if t.image.name.endswith("_r0_c0.tif"))
    image, target, label_scale = ChipDataset([record], augment=Augment.none())[0]
    msk, _ = read(record.mask)
    assert label_scale == 5 and image.shape == (6, 32, 32) and target.shape == (1, 160, 160)
    assert np.array_equal(target[0, ::5, ::5].numpy(), msk[0].astype("float32"))
    assert np.array_equal(target[0].numpy(), np.repeat(np.repeat(msk[0], 5, 0), 5, 1).astype("float32"))


def test_val_fraction_one_makes_a_folder_that_only_validates(tmp_path):
    p = make_pair(64, seed=6, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    r = run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "-o", tmp_path / "chips", "--size", 16,
                "--stride", 16, "--val-fraction", 1, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["chips"] == {"train": 0, "val": 16, "test": 0}


def test_a_2m_label_keeps_its_2m_masks(tmp_path):
    p = make_pair(64, seed=3, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    r = run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "-o", tmp_path / "chips", "--size", 32, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["labels_10m"] == 0
    assert list(gpd.read_file(tmp_path / "chips" / "index.gpkg").label_scale) == [1] * 4


def test_a_stack_that_still_carries_the_1000_offset_is_chipped_with_a_warning(tmp_path):
    """Chips keep reflectance x 10000: a baseline 04.00 stack read without --offset -1000 would
    teach every band 0.1 too bright, so chip warns as predict does; with the offset it is quiet
    and its chips hold the stack's reflectance."""
    p = make_pair(64, seed=3, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    with rasterio.open(tmp_path / "s.tif") as src:
        plus = write_raster(tmp_path / "plus.tif", np.where(src.read() > 0, src.read() + 1000, 0).astype("uint16"),
                            transform=src.transform, crs=src.crs, nodata=0, descriptions=src.descriptions)
    r = run_cli("chip", "--pair", plus, tmp_path / "m.tif", "-o", tmp_path / "chips", "--size", 32, "--json")
    assert r.returncode == 0, r.stderr
    said = json.loads(r.stdout)["warnings"]
    assert [w["code"] for w in said] == ["S2N-OFFSET-MISSING"] and said[0]["message"].startswith(f"{plus}: ")
    assert said[0]["message"].endswith("pass --offset -1000")
    r = run_cli("chip", "--pair", plus, tmp_path / "m.tif", "-o", tmp_path / "fixed", "--size", 32, "--json",
                "--offset", -1000)
    assert r.returncode == 0 and json.loads(r.stdout)["warnings"] == []
    r = run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "-o", tmp_path / "plain", "--size", 32)
    assert r.returncode == 0
    plain, fixed = (sorted((tmp_path / run / "images").iterdir()) for run in ("plain", "fixed"))
    assert len(plain) == len(fixed) == 4  # s_r0_c0.tif ... against plus_r0_c0.tif ...
    for a, b in zip(plain, fixed):
        with rasterio.open(a) as one, rasterio.open(b) as other:
            assert a.name[1:] == b.name[4:] and np.array_equal(one.read(), other.read())


def test_a_scene_of_20m_pixels_is_chipped_with_a_warning(tmp_path):
    p = make_pair(64, seed=3, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    r = run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "-o", tmp_path / "chips", "--size", 32, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["warnings"] == []
    with rasterio.open(tmp_path / "s.tif") as src, rasterio.open(tmp_path / "m.tif") as msk:
        t = src.transform  # the same pixels said to be twice as large: a stack resampled to 20 m
        write_raster(tmp_path / "s20.tif", src.read(), transform=t * Affine.scale(2), crs=src.crs, nodata=0)
        write_raster(tmp_path / "m20.tif", msk.read(), transform=msk.transform * Affine.scale(2), crs=msk.crs,
                     nodata=msk.nodata)
    r = run_cli("chip", "--pair", tmp_path / "s20.tif", tmp_path / "m20.tif", "-o", tmp_path / "chips20", "--size", 32,
                "--json")
    assert r.returncode == 0, r.stderr
    said = json.loads(r.stdout)["warnings"]  # s20.tif's bands are undescribed: read in order, and said so
    assert [w["code"] for w in said] == ["S2N-BANDS-UNDESCRIBED", "S2N-PIXELS-NOT-10M"]
    assert all(w["message"].startswith(f"{tmp_path / 's20.tif'}: ") and w["message"] in r.stderr for w in said)
    assert codes(r.stderr) == ["S2N-BANDS-UNDESCRIBED", "S2N-PIXELS-NOT-10M"]


def test_mask_in_web_mercator_at_1_3_m_lands_on_the_sub_grid(tmp_path):
    p = make_pair(64, seed=8, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "truth.tif")
    truth = p.mask
    # the same truth, as a user would get it: EPSG:3857 at about 1.3 m, with a NaN border
    src_t = p.mask_transform
    h, w = truth.shape
    dst_t, dw, dh = calculate_default_transform(p.crs, "EPSG:3857", w, h, *rasterio.transform.array_bounds(h, w, src_t), resolution=1.3)
    merc = np.full((dh, dw), np.nan, np.float32)
    reproject(truth, merc, src_transform=src_t, src_crs=p.crs, dst_transform=dst_t, dst_crs="EPSG:3857",
              resampling=Resampling.nearest, src_nodata=np.nan, dst_nodata=np.nan)
    write_raster(tmp_path / "merc.tif", merc, transform=dst_t, crs="EPSG:3857", nodata=float("nan"))
    r = run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "merc.tif", "-o", tmp_path / "chips", "--size", 32,
                "--max-nodata", 0.5)
    assert r.returncode == 0, r.stderr
    index = gpd.read_file(tmp_path / "chips" / "index.gpkg")
    assert len(index) == 4
    agree = total = 0
    for row in index.itertuples():
        msk, prof = read(tmp_path / "chips" / row.mask)
        assert prof["crs"] == p.crs and prof["transform"].a == 2.0
        ref = truth[5 * row.row:5 * row.row + 160, 5 * row.col:5 * row.col + 160]
        valid = msk[0] != 255
        agree += (msk[0][valid] == ref[valid]).sum()
        total += valid.sum()
    assert total > 0.9 * 4 * 160 * 160
    assert agree / total > 0.98  # only pixels along shorelines may differ after two resamplings


def test_chips_with_nodata_are_skipped(tmp_path):
    p = make_pair(64, seed=4, nodata_margin=False)
    p.mask[:20, :20] = np.nan  # a hole in the mask, inside the first chip only
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    r = run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "-o", tmp_path / "chips", "--size", 32, "--json")
    assert r.returncode == 0, r.stderr
    index = gpd.read_file(tmp_path / "chips" / "index.gpkg")
    assert len(index) == 3 and not ((index.row == 0) & (index.col == 0)).any()
    assert json.loads(r.stdout)["skipped"]["nodata"] == 1
    assert len(list((tmp_path / "chips" / "images").iterdir())) == 3
    # the table names the reasons that could apply: no row of coarse cells without --degrade,
    # nor of overlaps with a test split that was not asked for
    r = run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "-o", tmp_path / "table", "--size", 32)
    table = r.stdout + r.stderr
    assert r.returncode == 0 and "skipped (nodata)" in table, table
    assert "coarse cell" not in table and "overlaps" not in table, table
    r = run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "-o", tmp_path / "chips2", "--size", 32,
                "--max-nodata", 0.1, "--json")
    index = gpd.read_file(tmp_path / "chips2" / "index.gpkg")
    assert len(index) == 4
    first = index[(index.row == 0) & (index.col == 0)].iloc[0]
    msk, _ = read(tmp_path / "chips2" / first["mask"])
    assert (msk[0][:20, :20] == 255).all() and first.nodata_fraction == pytest.approx(400 / 160**2)


def test_test_ids_that_contradict_a_manifest_split_are_refused_before_any_scene_is_read(pairs):
    """--test-ids naming a row marked split=train made it a test scene without a word (the
    manifest's split lost); and --test-ids were checked only after every scene was read (minutes
    for products). Both are refused at once now, in one line, nothing written."""
    with open(pairs / "split.csv", "w") as fh:
        fh.write("image,mask,id,split\ns21.tif,m21.tif,scene21,train\ns22.tif,m22.tif,scene22,val\n"
                 "s23.tif,m23.tif,scene23,\nbroken.tif,m23.tif,broken,\n")
    (pairs / "broken.tif").write_bytes(b"not a raster")  # read first, it would fail first
    for ids, code, said in (("scene21", "S2N-CHIP-TEST-ID-SPLIT", "names 'scene21', which its manifest row "
                                                                  "marks split=train"),
                            ("scene21,scene22", "S2N-CHIP-TEST-ID-SPLIT", "names 'scene21'"),
                            ("scene22", "S2N-CHIP-TEST-ID-SPLIT", "names 'scene22', which its manifest row marks split=val"),
                            ("nosuch", "S2N-CHIP-TEST-ID", "no scene with id 'nosuch'")):
        r = run_cli("chip", "--manifest", pairs / "split.csv", "-o", pairs / "chips", "--size", 24, "--test-ids", ids)
        assert refused(r, code, 2 if code.endswith("SPLIT") else 1, f"--test-ids: {said}"), (ids, r.stderr)
        assert r.stderr.count("\n") == 1
        assert not (pairs / "chips").exists()
    (pairs / "broken.tif").unlink()
    with open(pairs / "split.csv", "w") as fh:
        fh.write("image,mask,id,split\ns21.tif,m21.tif,scene21,test\ns22.tif,m22.tif,scene22,train\n"
                 "s23.tif,m23.tif,scene23,\n")
    r = run_cli("chip", "--manifest", pairs / "split.csv", "-o", pairs / "chips", "--size", 24, "--test-ids",
                "scene21,scene23")  # a row marked test, named again, and an unmarked one
    assert r.returncode == 0, r.stderr
    index = gpd.read_file(pairs / "chips" / "index.gpkg")
    assert set(index[index.split == "test"].scene_id) == {"scene21", "scene23"}
    assert set(index[index.scene_id == "scene22"].split) <= {"train", "val"}


def test_hold_out_by_scene_id(pairs):
    r = run_cli("chip", "--manifest", pairs / "pairs.csv", "-o", pairs / "chips", "--size", 24, "--test-ids", "scene22")
    assert r.returncode == 0, r.stderr
    manifest = pairs / "chips" / "test_manifest.csv"  # said, with how a model is scored on it
    assert f"{manifest}: the test scenes whole, to score models on with s2s2net compare --manifest {manifest}" in r.stderr
    index = gpd.read_file(pairs / "chips" / "index.gpkg")
    assert set(index.columns) >= {"image", "mask", "split", "scene_id", "water_fraction", "nodata_fraction", "geometry"}
    assert (index[index.scene_id == "scene22"].split == "test").all()
    assert set(index[index.scene_id != "scene22"].split) == {"train", "val"}
    with open(pairs / "chips" / "test_manifest.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert rows == [{"image": "test/scene22_image.tif", "mask": "test/scene22_mask.tif", "id": "scene22"}]
    img, iprof = read(pairs / "chips" / rows[0]["image"])
    msk, mprof = read(pairs / "chips" / rows[0]["mask"])
    assert img.shape == (6, 72, 72) and msk.shape == (1, 360, 360)
    assert mprof["transform"] == iprof["transform"] @ Affine.scale(1 / 5)


def test_hold_out_by_region_is_geographically_separate(tmp_path):
    p = make_pair(96, seed=9, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    t = p.transform
    # a region over the middle of the scene, given in WGS84
    region = gpd.GeoDataFrame(geometry=[box(*(t * (40, 60)), *(t * (50, 40)))], crs=p.crs).to_crs("EPSG:4326")
    region.to_file(tmp_path / "holdout.geojson")
    r = run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "-o", tmp_path / "chips", "--size", 16,
                "--stride", 8, "--test-regions", tmp_path / "holdout.geojson", "--json")
    assert r.returncode == 0, r.stderr
    index = gpd.read_file(tmp_path / "chips" / "index.gpkg")
    test = index[index.split == "test"]
    rest = index[index.split != "test"]
    assert len(test) > 0 and len(rest) > 0
    region_utm = region.to_crs(index.crs).union_all()
    assert test.intersects(region_utm).all() and not rest.intersects(region_utm).any()
    for g in rest.geometry:
        assert all(g.intersection(tg).area == 0 for tg in test.geometry)
    assert json.loads(r.stdout)["skipped"]["overlaps_test"] > 0
    kept = {f"images/{p.name}" for p in (tmp_path / "chips" / "images").iterdir()}
    assert kept == set(index.image)
    # the region as the first of two layers: read from it, and said, once
    region.to_file(tmp_path / "regions.gpkg", layer="holdout")
    region.assign(geometry=region.translate(0.001, 0)).to_file(tmp_path / "regions.gpkg", layer="zzz_shifted")
    r = run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "-o", tmp_path / "chips2", "--size", 16,
                "--stride", 8, "--test-regions", tmp_path / "regions.gpkg", "--json")
    assert r.returncode == 0 and "UserWarning" not in r.stderr, r.stderr
    assert [w["code"] for w in json.loads(r.stdout)["warnings"]] == ["S2N-VECTOR-LAYERS"]
    assert sorted(gpd.read_file(tmp_path / "chips2" / "index.gpkg").image) == sorted(index.image)
    # regions of another place (or of coordinates in another CRS than the file says) gave an
    # empty test split without a word
    region.assign(geometry=region.translate(40, 0)).to_file(tmp_path / "elsewhere.geojson")
    r = run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "-o", tmp_path / "chips3", "--size", 16,
                "--stride", 8, "--test-regions", tmp_path / "elsewhere.geojson", "--json")
    summary = json.loads(r.stdout)
    assert r.returncode == 0 and summary["chips"]["test"] == 0 and summary["chips"]["train"] > 0
    assert [w["code"] for w in summary["warnings"]] == ["S2N-CHIP-TEST-REGIONS-MISS"]
    assert f"{tmp_path / 'elsewhere.geojson'}: no chip overlaps these test regions" in r.stderr



@pytest.mark.parametrize("crs", ["scene", "EPSG:4326"])
def test_a_region_on_chip_borders_holds_out_the_chips_it_covers_alone(tmp_path, crs):
    """A region drawn along chip borders (a block of chips, say) held out its neighbours too,
    which only share a border with it, or meet it in the sliver a round trip through WGS 84
    leaves: nine chips of a 4 x 4 scene for the four it covers."""
    p = make_pair(64, seed=9, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    t = p.transform
    region = gpd.GeoDataFrame(geometry=[box(*(t * (0, 64)), *(t * (32, 32)))], crs=p.crs)  # the bottom-left quarter
    (region if crs == "scene" else region.to_crs(crs)).to_file(tmp_path / "holdout.geojson")
    r = run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "-o", tmp_path / "chips", "--size", 16,
                "--val-fraction", 0, "--test-regions", tmp_path / "holdout.geojson", "--json")
    assert r.returncode == 0, r.stderr
    index = gpd.read_file(tmp_path / "chips" / "index.gpkg")
    test = index[index.split == "test"]
    assert sorted(zip(test.row, test.col)) == [(32, 0), (32, 16), (48, 0), (48, 16)]
    assert len(index) == 16 and json.loads(r.stdout)["skipped"]["overlaps_test"] == 0

def test_rerun_is_refused_without_overwrite(pairs):
    args = ["chip", "--manifest", pairs / "pairs.csv", "-o", pairs / "chips", "--size", 36]
    assert run_cli(*args).returncode == 0
    r = run_cli(*args)
    assert refused(r, "S2N-CHIP-FOLDER-HAS-CHIPS", 1, pairs / "chips")
    # a folder of other files (the scenes' own, say) is not called a folder of chips
    r = run_cli("chip", "--manifest", pairs / "pairs.csv", "-o", pairs, "--size", 36)
    assert refused(r, "S2N-CHIP-FOLDER-NOT-EMPTY", 1, pairs)
    r = run_cli(*args, "--overwrite", "--size", 24)
    assert r.returncode == 0, r.stderr
    index = gpd.read_file(pairs / "chips" / "index.gpkg")
    assert len(list((pairs / "chips" / "images").iterdir())) == len(index) == 27


def test_overwrite_never_clears_an_input_before_reading_it(pairs):
    """A run's test pairs chipped again into the same folder with --overwrite were deleted with
    its chips before they were read: the run failed with them gone, the old chips too."""
    chips = pairs / "chips"
    assert run_cli("chip", "--manifest", pairs / "pairs.csv", "-o", chips, "--size", 36, "--test-ids", "scene21").returncode == 0
    held = sorted(p.name for p in chips.rglob("*"))
    r = run_cli("chip", "--manifest", chips / "test_manifest.csv", "-o", chips, "--size", 24, "--overwrite")
    assert refused(r, "S2N-CHIP-INPUT-INSIDE", 2, f"{chips / 'test' / 'scene21_image.tif'}: lies in {chips / 'test'}")
    assert r.stderr.count("\n") == 1
    assert sorted(p.name for p in chips.rglob("*")) == held  # nothing cleared
    # into another folder it is chipped as any pair is
    assert run_cli("chip", "--manifest", chips / "test_manifest.csv", "-o", pairs / "again", "--size", 24).returncode == 0


@pytest.mark.parametrize("case", ["no_overlap", "empty_mask", "three_bands", "missing_file", "missing_column", "bad_crs"])
def test_bad_input_gets_one_line_and_nothing_written(tmp_path, pairs, case):
    scene, mask = pairs / "s21.tif", pairs / "m21.tif"
    manifest = None
    if case == "no_overlap":
        mask = write_raster(tmp_path / "far.tif", np.ones((50, 50), "float32"), transform=Affine(2, 0, 0, 0, -2, 100), crs="EPSG:32633")
    elif case == "empty_mask":
        with rasterio.open(pairs / "m21.tif") as src:
            prof = src.profile
        mask = write_raster(tmp_path / "nan.tif", np.full((prof["height"], prof["width"]), np.nan, "float32"),
                            transform=prof["transform"], crs=prof["crs"], nodata=float("nan"))
    elif case == "three_bands":
        with rasterio.open(scene) as src:
            scene = write_raster(tmp_path / "rgb.tif", src.read([1, 2, 3]), transform=src.transform, crs=src.crs)
    elif case == "missing_file":
        manifest = tmp_path / "m.csv"
        manifest.write_text("image,mask\ns21.tif,nothere.tif\n")
    elif case == "missing_column":
        manifest = tmp_path / "m.csv"
        manifest.write_text("scene,label\ns21.tif,m21.tif\n")  # scene is image; label no mask
    elif case == "bad_crs":
        with rasterio.open(pairs / "m21.tif") as src:
            data, prof = src.read(1), src.profile
        local = 'LOCAL_CS["engineering grid",UNIT["metre",1],AXIS["X",EAST],AXIS["Y",NORTH]]'
        mask = write_raster(tmp_path / "local.tif", data, transform=prof["transform"], crs=local)
    out = tmp_path / "chips"
    args = ["--manifest", manifest] if manifest else ["--pair", scene, mask]
    r = run_cli("chip", *args, "-o", out, "--size", 24)
    assert r.returncode in (1, 2), r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    expected_name = {"no_overlap": "far.tif", "empty_mask": "nan.tif", "three_bands": "rgb.tif", "missing_file": "nothere.tif",
                     "missing_column": "m.csv", "bad_crs": "local.tif"}[case]
    assert expected_name in lines[0]
    if case == "missing_file":  # which row, and how its paths are read (relative to the manifest, not here)
        assert lines[0].endswith(f"nothere.tif: file not found (line 2 of {manifest}, whose paths are read from its "
                                 "own folder) [S2N-MANIFEST-FILE-MISSING]"), lines[0]
    assert not out.exists()


def test_validation_chips_come_in_blocks_apart_from_training_chips(tmp_path):
    # overlapping chips (stride < size): val is drawn in blocks of chip positions and no
    # train chip may overlap a val chip, or best.safetensors is chosen on pixels trained on
    p = make_pair(192, seed=4, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    r = run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "-o", tmp_path / "chips", "--size", 16,
                "--stride", 8, "--json")
    assert r.returncode == 0, r.stderr
    index = gpd.read_file(tmp_path / "chips" / "index.gpkg")
    val, train = index[index.split == "val"], index[index.split == "train"]
    assert len(val) >= 16 and len(train) > len(val)
    for g in train.geometry:
        assert all(g.intersection(v).area == 0 for v in val.geometry)
    assert json.loads(r.stdout)["skipped"]["overlaps_val"] > 0
    blocks = {(row // 32, col // 32) for row, col in zip(val.row, val.col)}  # 4 x 4 positions of stride 8
    assert len(blocks) < len(val) / 4  # whole blocks, not scattered chips


def test_validation_blocks_under_a_short_stride_leave_the_training_chips(tmp_path):
    """At a quarter-chip stride, blocks of 4 x 4 chip positions each dropped a ring of training
    chips five times their own count: validation took 0.39-0.41 of the chips kept and training
    lost half of its own (a Bolivia fold at --size 64 --stride 16: 846 train, 536 val). Blocks
    up to the area of 4 x 4 chips, the side that leaves the most training chips, keep the
    validation share near --val-fraction."""
    summary, _ = _chip_a_synthetic_pair(tmp_path, 256, 5, "chips", "--size", 32, "--stride", 8)
    train, val, dropped = summary["chips"]["train"], summary["chips"]["val"], summary["skipped"]["overlaps_val"]
    assert train + val + dropped == 29 * 29  # every position cut
    assert 0.15 <= val / (train + val) <= 0.3 and train >= 400, summary  # were 0.42 and 235
    index = gpd.read_file(tmp_path / "chips" / "index.gpkg")
    held = index[index.split == "val"].geometry.union_all()
    assert all(g.intersection(held).area == 0 for g in index[index.split == "train"].geometry)


def _chip_a_synthetic_pair(tmp_path, side: int, seed: int, out: str, *options) -> tuple[dict, str]:
    """A synthetic pair of ``side`` px (seed ``seed``) chipped into tmp_path / out with
    ``options``: the JSON summary and what was said on stderr."""
    if not (tmp_path / "s.tif").exists():
        write_pair(make_pair(side, seed=seed, nodata_margin=False), tmp_path / "s.tif", tmp_path / "m.tif")
    r = run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "-o", tmp_path / out, *options, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), r.stderr


def test_chip_reads_an_area_of_interest_as_predict_does(tmp_path):
    # --aoi (any CRS) cuts the scene to the area's window: chips lie inside it, on the scene's
    # grid, and their 2 m masks are nodata outside the polygon
    p = make_pair(64, seed=3, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    t = p.transform
    inside = box(t.c + 10 * 32, t.f - 10 * 64, t.c + 10 * 64, t.f - 10 * 32)  # the bottom-right 32 x 32 px
    triangle = Polygon([(t.c + 320, t.f - 320), (t.c + 640, t.f - 320), (t.c + 640, t.f - 640)])  # its upper right half
    aoi = tmp_path / "aoi.gpkg"
    gpd.GeoDataFrame(geometry=[triangle], crs=p.crs).to_crs("EPSG:4326").to_file(aoi)
    r = run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "-o", tmp_path / "chips", "--size", 16,
                "--aoi", aoi, "--max-nodata", 0.5, "--json")
    assert r.returncode == 0, r.stderr
    index = gpd.read_file(tmp_path / "chips" / "index.gpkg")
    assert len(index) >= 2 and index.geometry.union_all().within(inside.buffer(1))
    cut = 0
    for row in index.itertuples():
        img, iprof = read(tmp_path / "chips" / row.image)
        msk, _ = read(tmp_path / "chips" / row.mask)
        col, top = ~t * (iprof["transform"].c, iprof["transform"].f)
        assert float(col).is_integer() and float(top).is_integer()  # on the scene's own grid
        c0, r0 = int(col), int(top)
        assert np.array_equal(img, p.scene[:, r0:r0 + 16, c0:c0 + 16])
        inner = msk[0] != 255
        truth = p.mask[5 * r0:5 * r0 + 80, 5 * c0:5 * c0 + 80]
        assert np.array_equal(msk[0][inner], truth[inner].astype("uint8"))
        cut += int((~inner).sum())
    assert cut > 0  # some chips reach past the polygon, and those pixels are nodata
    r = run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "-o", tmp_path / "other", "--aoi", aoi,
                "--bbox", "0,0,1,1")
    assert r.returncode == 2 and codes(r.stderr) == ["S2N-OPTIONS-EXCLUSIVE"] and "--aoi" in r.stderr


def test_a_manifest_mixing_2m_and_10m_labels_gives_chips_that_batch_together(tmp_path):
    import torch
    from torch.utils.data import default_collate

    from s2s2net_cli.training.data import Augment, ChipDataset, chip_splits
    from s2s2net_cli.training.losses import WaterLoss

    rows = []
    for seed, coarse in ((31, False), (32, True)):
        p = make_pair(64, seed=seed, nodata_margin=False)
        write_pair(p, tmp_path / f"s{seed}.tif", tmp_path / f"fine{seed}.tif")
        mask = f"fine{seed}.tif"
        if coarse:
            label = (p.mask.reshape(64, 5, 64, 5).mean(axis=(1, 3)) >= 0.5).astype("uint8")
            write_raster(tmp_path / f"coarse{seed}.tif", label, transform=p.transform, crs=p.crs, nodata=255)
            mask = f"coarse{seed}.tif"
        rows.append({"image": f"s{seed}.tif", "mask": mask, "id": f"scene{seed}"})
    with open(tmp_path / "pairs.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["image", "mask", "id"])
        w.writeheader()
        w.writerows(rows)
    r = run_cli("chip", "--manifest", tmp_path / "pairs.csv", "-o", tmp_path / "chips", "--size", 32, "--json",
                "--val-fraction", 0)
    assert r.returncode == 0, r.stderr
    index = gpd.read_file(tmp_path / "chips" / "index.gpkg")
    assert sorted(set(zip(index.scene_id, index.label_scale))) == [("scene31", 1), ("scene32", 5)]
    train, _ = chip_splits(tmp_path / "chips")
    ds = ChipDataset(train, augment=Augment.none())
    batch = default_collate([ds[i] for i in range(len(ds))])
    assert batch[1].shape == (len(ds), 1, 160, 160) and sorted(set(batch[2].tolist())) == [1, 5]
    parts = WaterLoss().parts(torch.zeros(len(ds), 1, 160, 160), batch[1], batch[2])
    assert torch.isfinite(parts["loss"])


def test_a_folder_chipped_without_validation_trains_on_all_its_chips_beside_one_that_validates(pairs):
    from s2s2net_cli.training.data import source_splits

    for name, fraction in (("all_train", 0), ("with_val", 0.3)):
        r = run_cli("chip", "--manifest", pairs / "pairs.csv", "-o", pairs / name, "--size", 24, "--stride", 24,
                    "--val-fraction", fraction)
        assert r.returncode == 0, r.stderr
    index = gpd.read_file(pairs / "all_train" / "index.gpkg")
    assert set(index.split) == {"train"} and len(index) == 27
    train, val = source_splits([pairs / "all_train", pairs / "with_val"])
    assert sum(r.source == "all_train" for r in train) == 27  # not one of them held back
    assert not any(r.source == "all_train" for r in val) and any(r.source == "with_val" for r in val)
    # alone, with nothing else to choose the weights on, a seeded tenth of it validates
    train, val = source_splits([pairs / "all_train"])
    assert (len(train), len(val)) == (24, 3) and not {r.image for r in train} & {r.image for r in val}


def test_two_labels_of_one_place_never_train_where_the_other_validates(tmp_path):
    """Two dates (or two labels) of one place: a validation chip of one must not lie under a
    training chip of the other, in blocks or one by one, or the weights are chosen on pixels
    trained on."""
    p = make_pair(48, seed=4, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    shutil.copy(tmp_path / "s.tif", tmp_path / "s_later.tif")
    (tmp_path / "pairs.csv").write_text("image,mask,id\ns.tif,m.tif,early\ns_later.tif,m.tif,later\n")
    for stride in (16, 8):  # 16: chips side by side, drawn one by one; 8: in blocks
        out = tmp_path / f"chips{stride}"
        r = run_cli("chip", "--manifest", tmp_path / "pairs.csv", "-o", out, "--size", 16, "--stride", stride,
                    "--val-fraction", 0.25, "--json")
        assert r.returncode == 0, r.stderr
        index = gpd.read_file(out / "index.gpkg")
        val, train = index[index.split == "val"], index[index.split == "train"]
        assert len(val) > 0 and len(train) > 0
        for _, t in train.iterrows():
            assert all(t.geometry.intersection(v.geometry).area == 0 for _, v in val.iterrows()
                       if v.scene_id != t.scene_id), (stride, t.image)
        assert json.loads(r.stdout)["skipped"]["overlaps_val"] > 0


def test_a_small_scene_at_a_short_stride_keeps_training_chips_and_says_its_validation_overlaps(tmp_path):
    """A scene hardly larger than a chip, cut at stride 1 for many chips: every validation block
    overlapped every other chip, and it gave 0 training chips of 289 without a word (train then
    refused the folder). Validation chips are drawn one by one instead, and the overlap said."""
    out, stderr = _chip_a_synthetic_pair(tmp_path, 48, 4, "chips", "--size", 32, "--stride", 1)
    assert out["chips"]["train"] > 200 and out["chips"]["val"] > 0 and out["skipped"]["overlaps_val"] == 0
    assert [w["code"] for w in out["warnings"]] == ["S2N-CHIP-VAL-OVERLAPS-TRAIN"]
    assert f"{tmp_path / 'chips'}: {out['chips']['train']} of {out['chips']['train']} training chips overlap" in stderr
    assert "at --stride 1, so validation chips were drawn one by one" in stderr
    # where blocks apart from the training chips fit, they are drawn, and nothing is said
    out, _ = _chip_a_synthetic_pair(tmp_path, 48, 4, "blocks", "--size", 16, "--stride", 2)
    assert out["chips"]["train"] > 0 and out["skipped"]["overlaps_val"] > 0 and out["warnings"] == []


def test_split_train_rows_of_a_manifest_still_lend_validation_chips(pairs):
    """A manifest saying split=train (to keep its scenes out of the test split) switched
    validation off without a word; its rows are drawn from as unsplit ones are, unless a row
    says split=val."""
    text = (pairs / "pairs.csv").read_text().splitlines()
    (pairs / "train.csv").write_text("\n".join([text[0] + ",split", *(line + ",train" for line in text[1:])]) + "\n")
    r = run_cli("chip", "--manifest", pairs / "train.csv", "-o", pairs / "chips", "--size", 24, "--json")
    assert r.returncode == 0, r.stderr
    chips = json.loads(r.stdout)["chips"]
    assert chips["val"] > 0 and chips["train"] > 0 and chips["test"] == 0
    lines = [text[0] + ",split", text[1] + ",val", *(line + ",train" for line in text[2:])]
    (pairs / "val.csv").write_text("\n".join(lines) + "\n")
    r = run_cli("chip", "--manifest", pairs / "val.csv", "-o", pairs / "chips_val", "--size", 24, "--json")
    index = gpd.read_file(pairs / "chips_val" / "index.gpkg")
    assert r.returncode == 0 and set(index[index.split == "val"].scene_id) == {"scene21"}
