"""Scripted use without surprises: output folders, re-runs, band identity, label values,
multi-file vectors, one JSON document, exit codes, stale temporary files (each case of the
issue, run through the CLI on real files)."""

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import rasterio
from affine import Affine

import s2s2net_cli as s2n
from s2s2net_cli.rulebook import S2S2NetWarning
from s2s2net_cli.synthetic.scenes import make_pair, write_pair

from ..conftest import codes, raises_rule, refused, run_cli, write_raster
from ..conftest import said as said_codes
from ..sources.product_factory import write_band_files, write_item

FAST = ("--tile-size", 32, "--overlap", 8)
T10 = Affine(10, 0, 500000, 0, -10, 4000000)


def scene(tmp_path, name="s.tif", seed=0, size=40):
    data = np.random.default_rng(seed).integers(200, 4000, size=(6, size, size)).astype("uint16")
    return write_raster(tmp_path / name, data, transform=T10, nodata=0)


def read(path):
    with rasterio.open(path) as src:
        return src.read(1), src.tags()


def test_an_output_folder_is_a_folder_whatever_the_number_of_scenes(tmp_path, random_weights):
    s = scene(tmp_path)
    r = run_cli("predict", s, "-o", f"{tmp_path / 'masks'}/", "--weights", random_weights, *FAST)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "masks").iterdir()) == ["s_water.tif"]
    (tmp_path / "existing").mkdir()
    r = run_cli("predict", s, "-o", tmp_path / "existing", "--weights", random_weights, *FAST)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "existing").iterdir()) == ["s_water.tif"]
    # a scene named in capitals (a camera's or Windows' SCENE.TIF) is named after its stem too,
    # not "s2.TIF_water.tif", nor its polygons and rivers
    upper = s.rename(tmp_path / "s2.TIF")
    r = run_cli("predict", upper, "-o", f"{tmp_path / 'upper'}/", "--vector", "w.gpkg", "--weights", random_weights, *FAST)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "upper").iterdir()) == ["s2_water.gpkg", "s2_water.tif"]
    s = upper.rename(tmp_path / "s.tif")
    r = run_cli("predict", s, "-o", tmp_path / "file.tif", "--weights", random_weights, *FAST)
    assert r.returncode == 0 and (tmp_path / "file.tif").is_file()


def test_a_rerun_with_skip_existing_skips_finished_scenes(tmp_path, random_weights):
    a, b = scene(tmp_path, "a.tif", 1), scene(tmp_path, "b.tif", 2)
    r = run_cli("predict", a, "-o", f"{tmp_path / 'out'}/", "--weights", random_weights, *FAST, "--json")
    assert r.returncode == 0, r.stderr
    before = (tmp_path / "out" / "a_water.tif").stat().st_mtime_ns
    r = run_cli("predict", a, b, "-o", tmp_path / "out", "--weights", random_weights, *FAST, "--json", "--skip-existing")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [s["scene"] for s in doc["skipped"]] == [str(a)] and [s["scene"] for s in doc["scenes"]] == [str(b)]
    assert doc["failures"] == [] and (tmp_path / "out" / "a_water.tif").stat().st_mtime_ns == before
    r = run_cli("predict", a, "-o", tmp_path / "out", "--weights", random_weights, "--skip-existing", "--overwrite")
    assert r.returncode == 2 and "not both" in r.stderr


def test_a_rerun_without_skip_existing_is_told_of_it(tmp_path, random_weights):
    """A batch run again after it stopped refused each finished mask on its own line, naming
    --overwrite only: one closing line says that --skip-existing predicts the rest."""
    a, b, c = (scene(tmp_path, f"{name}.tif", k) for k, name in enumerate("abc", start=1))
    assert run_cli("predict", a, b, "-o", f"{tmp_path / 'out'}/", "--weights", random_weights, *FAST).returncode == 0
    r = run_cli("predict", a, b, c, "-o", tmp_path / "out", "--weights", random_weights, *FAST)
    assert r.returncode == 1 and (tmp_path / "out" / "c_water.tif").exists()
    assert r.stderr.splitlines()[-1] == ("2 of the masks exist already: --skip-existing keeps the finished ones and "
                                         "predicts the rest (--overwrite replaces them)")
    r = run_cli("predict", a, "-o", tmp_path / "out" / "a_water.tif", "--weights", random_weights, *FAST)
    assert r.returncode == 1 and "--skip-existing" not in r.stderr  # one scene: its own line says it


def test_skip_existing_skips_only_a_mask_of_the_same_scene(tmp_path, random_weights):
    a, b = scene(tmp_path, "a.tif", 1), scene(tmp_path, "b.tif", 2)
    out = tmp_path / "masks"  # a loop's -o without a slash: one file, not a folder
    assert run_cli("predict", a, "-o", out, "--weights", random_weights, *FAST, "--skip-existing").returncode == 0
    before, tags = out.stat().st_mtime_ns, read(out)[1]
    r = run_cli("predict", b, "-o", out, "--weights", random_weights, *FAST, "--skip-existing", "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["skipped"] == [] and doc["scenes"] == [] and doc["failures"][0]["scene"] == str(b)
    assert refused(r, "S2N-OUTPUT-OTHER-SCENE", 1, f"{out}: holds the mask of a.tif, not of b.tif")
    assert len(r.stderr.strip().splitlines()) == 1
    assert out.stat().st_mtime_ns == before and read(out)[1] == tags and tags["source_scene"] == "a.tif"
    r = run_cli("predict", a, "-o", out, "--weights", random_weights, *FAST, "--skip-existing", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["skipped"] == [{"scene": str(a), "output": str(out)}]
    other = tmp_path / "notes.tif"
    other.write_text("not a mask")
    r = run_cli("predict", a, "-o", other, "--weights", random_weights, *FAST, "--skip-existing")
    assert refused(r, "S2N-OUTPUT-NOT-A-MASK", 1, other)
    assert other.read_text() == "not a mask"


def test_skip_existing_skips_only_a_mask_made_with_the_same_model_and_settings(tmp_path, random_weights):
    """A batch re-run with other weights (the same file name: two runs' best.safetensors), another
    threshold or --probability would have kept the first run's masks beside the new ones."""
    import shutil

    from s2s2net_cli.checkpoint import annotate_weights

    a = scene(tmp_path, "a.tif", 1)
    out = tmp_path / "out" / "a_water.tif"
    assert run_cli("predict", a, "-o", out, "--weights", random_weights, *FAST).returncode == 0
    before, tags = out.stat().st_mtime_ns, read(out)[1]
    (tmp_path / "copy").mkdir()
    copy = shutil.copy(random_weights, tmp_path / "copy" / random_weights.name)  # the same weights elsewhere: skipped
    r = run_cli("predict", a, "-o", out, "--weights", copy, *FAST, "--skip-existing", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["skipped"] == [{"scene": str(a), "output": str(out)}]
    (tmp_path / "run2").mkdir()
    other = annotate_weights(random_weights, tmp_path / "run2" / random_weights.name, {}, threshold=0.3)
    r = run_cli("predict", a, "-o", out, "--weights", other, *FAST, "--skip-existing")
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode == 1 and len(lines) == 1 and lines[0].startswith(
        f"Error: {out}: holds a.tif's mask made with model_sha256 {tags['model_sha256']}, threshold 0.5; this run makes "
        "it with model_sha256 ") and lines[0].endswith(", threshold 0.3: not skipped (--overwrite replaces it) [S2N-OUTPUT-OTHER-MODEL]")
    r = run_cli("predict", a, "-o", out, "--weights", random_weights, *FAST, "--skip-existing", "--probability")
    assert r.returncode == 1 and "made with values 0 land, 1 water, 255 nodata; this run makes it with values " \
                                 "probability percent 0-100, 255 nodata" in r.stderr
    assert out.stat().st_mtime_ns == before and read(out)[1] == tags


def test_skip_existing_skips_only_a_mask_of_the_scene_read_the_same_way(tmp_path, random_weights):
    """A batch re-run with --offset -1000 (the stacks were baseline 04.00's), other bands or an
    area of interest would have kept the masks made from the scenes read the first way."""
    a = scene(tmp_path, "a.tif", 1)
    out = tmp_path / "out" / "a_water.tif"
    assert run_cli("predict", a, "-o", out, "--weights", random_weights, *FAST).returncode == 0
    before, tags = out.stat().st_mtime_ns, read(out)[1]
    r = run_cli("predict", a, "-o", out, "--weights", random_weights, *FAST, "--skip-existing", "--json",
                "--bands", "1,2,3,4,5,6")  # the order it was read in: the same mask
    assert r.returncode == 0 and json.loads(r.stdout)["skipped"] == [{"scene": str(a), "output": str(out)}]
    r = run_cli("predict", a, "-o", out, "--weights", random_weights, *FAST, "--skip-existing", "--offset", "-1000")
    lines = [l for l in r.stderr.splitlines() if l.strip() and not l.startswith("Warning")]
    assert refused(r, "S2N-OUTPUT-OTHER-MODEL", 1, f"{out}: holds a.tif's mask made with offset 0,0,0,0,0,0; this run "
                                                  "makes it with offset -1000,-1000,-1000,-1000,-1000,-1000")
    assert len(lines) == 1, r.stderr
    r = run_cli("predict", a, "-o", out, "--weights", random_weights, *FAST, "--skip-existing", "--bands", "3,2,1,4,5,6")
    assert refused(r, "S2N-OUTPUT-OTHER-MODEL", 1, "made with bands 1,2,3,4,5,6; this run makes it with bands 3,2,1,4,5,6")
    r = run_cli("predict", a, "-o", out, "--weights", random_weights, *FAST, "--skip-existing",
                "--bbox", "15.0005,36.1427,15.003,36.1445")  # its south-east part
    assert refused(r, "S2N-OUTPUT-OTHER-MODEL", 1, "made with area_of_interest none; this run makes it with area_of_interest")
    assert out.stat().st_mtime_ns == before and read(out)[1] == tags


def test_skip_existing_makes_the_vectors_and_rivers_a_skipped_mask_lacks(tmp_path, random_weights):
    """A batch killed between a mask and its polygons, or run first without --vector: re-run with
    --skip-existing it skipped the mask and never made its polygons, exit 0. Now what is missing
    beside a skipped mask is made from it; what exists is kept."""
    a, b = scene(tmp_path, "a.tif", 1), scene(tmp_path, "b.tif", 2)
    out = tmp_path / "out"
    assert run_cli("predict", a, "-o", f"{out}/", "--weights", random_weights, *FAST).returncode == 0
    mask_time = (out / "a_water.tif").stat().st_mtime_ns
    r = run_cli("predict", a, b, "-o", out, "--weights", random_weights, *FAST, "--skip-existing", "--json",
                "--vector", "water.gpkg", "--rivers", "rivers.gpkg")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert [s["scene"] for s in summary["skipped"]] == [str(a)]
    assert [(s["output"], s["vector"], s["rivers"]) for s in summary["skipped"] + summary["scenes"]] == [
        (str(out / f"{n}_water.tif"), str(out / f"{n}_water.gpkg"), str(out / f"{n}_water_rivers.gpkg")) for n in "ab"]
    made = {p.name for p in out.iterdir()}
    assert {"a_water.gpkg", "b_water.gpkg", "a_water_rivers.gpkg", "b_water_rivers.gpkg"} <= made, made
    assert (out / "a_water.tif").stat().st_mtime_ns == mask_time
    import geopandas as gpd

    polygons = gpd.read_file(out / "a_water.gpkg")
    with rasterio.open(out / "a_water.tif") as src:
        water_m2 = float((src.read(1) == 1).sum()) * 4
    assert abs(polygons.area.sum() - water_m2) < 1e-6 * max(water_m2, 1)
    times = {n: (out / n).stat().st_mtime_ns for n in ("a_water.gpkg", "a_water_rivers.gpkg")}
    r = run_cli("predict", a, "-o", out, "--weights", random_weights, *FAST, "--skip-existing", "--vector", "water.gpkg",
                "--rivers", "rivers.gpkg")
    assert r.returncode == 0 and {n: (out / n).stat().st_mtime_ns for n in times} == times


def test_a_file_name_of_another_format_or_one_mask_for_several_scenes_is_refused(tmp_path, random_weights):
    a, b = scene(tmp_path, "a.tif", 1), scene(tmp_path, "b.tif", 2)
    r = run_cli("predict", a, "-o", tmp_path / "water.png", "--weights", random_weights, *FAST)
    assert refused(r, "S2N-OUTPUT-NOT-TIF", 2, tmp_path / "water.png") and len(r.stderr.strip().splitlines()) == 1
    r = run_cli("predict", a, b, "-o", tmp_path / "water.tif", "--weights", random_weights, *FAST)
    assert refused(r, "S2N-OUTPUT-NEEDS-FOLDER", 2, tmp_path / "water.tif"), r.stderr
    assert "2 scenes (a.tif, b.tif)" in r.stderr  # a value given to a flag (--probability p.tif) shows as a scene
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tif", "b.tif"]
    (tmp_path / "notes.txt").write_text("kept")
    r = run_cli("predict", a, b, "-o", tmp_path / "notes.txt", "--weights", random_weights, *FAST)
    assert refused(r, "S2N-OUTPUT-IS-FILE", 2, tmp_path / "notes.txt") and "scenes (a.tif, b.tif)" in r.stderr
    assert (tmp_path / "notes.txt").read_text() == "kept"


@pytest.mark.parametrize("command, option, name, writes", [
    ("compare", "--plot", "scores.jpg", "the plot is a PNG: name it .png"),
    ("compare", "--csv", "scores.xlsx", "the table is written as CSV: name it .csv or .txt"),
    ("rivers", "-o", "rivers.shp", "rivers are written as a GeoPackage: name it .gpkg"),
    ("occurrence", "-o", "occurrence.png", "occurrence writes a GeoTIFF: name it .tif or .tiff"),
    ("occurrence", "--plot", "area.tif", "the plot is a PNG: name it .png"),
    ("predict", "--vector", "water.kml", "polygons are written in the format of their suffix: "
                                         "name it .gpkg, .geojson, .json, .shp or .fgb"),
    # named as a folder, where one file is written: occurrence wrote a GeoTIFF called "occ" (the /
    # lost), and an existing folder was Click's uncoded "is a directory"
    ("occurrence", "-o", "occ/", "occurrence writes a GeoTIFF: name it .tif or .tiff"),
    ("compare", "--csv", "tables/", "the table is written as CSV: name it .csv or .txt"),
    ("rivers", "-o", "made_folder", "rivers are written as a GeoPackage: name it .gpkg"),
])
def test_an_output_named_for_another_format_is_refused_in_one_line(tmp_path, random_weights, command, option, name,
                                                                     writes):
    s = scene(tmp_path)
    water = np.zeros((200, 200), "uint8")
    water[:, 90:110] = 1  # a river 40 m wide on the 2 m grid
    mask = write_raster(tmp_path / "mask.tif", water, transform=Affine(2, 0, 500000, 0, -2, 4000000), nodata=255)
    label = write_raster(tmp_path / "label.tif", water[::5, ::5], nodata=255)
    args = {"compare": ["--pair", s, label, "--baseline", "ndwi"], "rivers": [mask, "-o", tmp_path / "r.gpkg"],
            "occurrence": [mask, "--from-masks", "-o", tmp_path / "o.tif"],
            "predict": [s, "-o", tmp_path / "w.tif", "--weights", random_weights, *FAST]}[command]
    if option == "-o":
        args = args[: args.index("-o")] + args[args.index("-o") + 2:]
    if name.startswith("made_"):
        (tmp_path / name).mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    r = run_cli(command, *args, option, f"{tmp_path}/{name}")  # as typed: a Path would lose a trailing /
    assert r.returncode == 2
    shown = name + "/" if name.startswith("made_") else name
    assert r.stderr.strip().splitlines()[-1] == f"Error: Invalid value for {_hint(option)}: {shown}: {writes} [S2N-OUTPUT-SUFFIX]"
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def _hint(option: str) -> str:
    return "'-o' / '--output'" if option == "-o" else f"'{option}'"


def test_json_is_one_document_when_the_one_scene_fails(tmp_path, random_weights):
    bad = tmp_path / "bad.tif"
    bad.write_text("not a raster")
    r = run_cli("predict", bad, "-o", tmp_path / "o.tif", "--weights", random_weights, "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["scenes"] == [] and doc["failures"][0]["scene"] == str(bad)
    assert r.stderr.strip().splitlines() == [f"Error: {doc['failures'][0]['error']} [{doc['failures'][0]['code']}]"]


@pytest.mark.parametrize("descriptions", [None, ("B1", "B2", "B3", "B4", "B5", "B6", "B7", "B8", "B8A", "B9")])
def test_a_stack_of_ten_bands_is_read_by_its_descriptions_or_refused(tmp_path, random_weights, descriptions):
    six = np.random.default_rng(3).integers(200, 4000, size=(6, 40, 40)).astype("uint16")
    ten = np.zeros((10, 40, 40), "uint16") + 500
    for pos, band in zip((1, 2, 3, 7, 8, 9), six):  # B2, B3, B4, B8 and, in the last two, stand-ins for B11, B12
        ten[pos] = band
    names = descriptions and descriptions[:8] + ("B11", "B12")
    path = write_raster(tmp_path / "ten.tif", ten, transform=T10, nodata=0, descriptions=names)
    r = run_cli("predict", path, "-o", tmp_path / "ten_water.tif", "--weights", random_weights, *FAST)
    if descriptions is None:
        assert refused(r, "S2N-BANDS-AMBIGUOUS", 1, path) and "--bands" in r.stderr
        assert not (tmp_path / "ten_water.tif").exists()
        return
    assert r.returncode == 0, r.stderr
    ref = write_raster(tmp_path / "six.tif", six, transform=T10, nodata=0)
    assert run_cli("predict", ref, "-o", tmp_path / "six_water.tif", "--weights", random_weights, *FAST).returncode == 0
    got, tags = read(tmp_path / "ten_water.tif")
    assert np.array_equal(got, read(tmp_path / "six_water.tif")[0]) and tags["bands"] == "2,3,4,8,9,10"
    # the index baselines read the same bands: the same scores as on the six-band stack
    label = write_raster(tmp_path / "label.tif", (six[1] > six[4]).astype("uint8"), transform=T10, nodata=255)
    rows = [json.loads(run_cli("evaluate", "--baseline", "mndwi", "--pair", p, label, "--json").stdout)["rows"][0]
            for p in (path, ref)]
    assert rows[0]["f1"] == rows[1]["f1"] == 1.0


@pytest.mark.parametrize("value,nodata_tag", [(255, None), (-1, None)])
def test_label_values_other_than_0_and_1_are_refused_unless_declared(tmp_path, value, nodata_tag):
    p = make_pair(40, seed=4, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    label = (p.mask.reshape(40, 5, 40, 5).mean(axis=(1, 3)) >= 0.5).astype("int16")
    label[:5] = value  # a cloud the labellers could not see through
    path = write_raster(tmp_path / "label.tif", label, transform=p.transform, crs=p.crs, nodata=nodata_tag)
    r = run_cli("evaluate", "--baseline", "mndwi", "--pair", tmp_path / "s.tif", path, "--json")
    assert refused(r, "S2N-MASK-VALUES", 1, path) and "--nodata" in r.stderr
    r = run_cli("evaluate", "--baseline", "mndwi", "--pair", tmp_path / "s.tif", path, "--json", "--nodata", value)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["rows"][0]["pixels"] == 35 * 40  # on the label's grid; the declared rows left out
    r = run_cli("chip", "--pair", tmp_path / "s.tif", path, "-o", tmp_path / "chips", "--size", 16)
    assert refused(r, "S2N-MASK-VALUES", 1, path) and not (tmp_path / "chips").exists()


def test_a_label_of_water_shares_is_told_what_made_it(tmp_path):
    """A 2 m mask averaged to 10 m holds shares of water (0.04, 0.08, ...): it was told to give
    --nodata, as if 0.04 meant nodata. It is told what it is and how to make it 0/1."""
    p = make_pair(40, seed=4, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    shares = p.mask.reshape(40, 5, 40, 5).mean(axis=(1, 3)).astype("float32")
    assert ((shares > 0) & (shares < 1)).any()
    path = write_raster(tmp_path / "label.tif", shares, transform=p.transform, crs=p.crs)
    for args in (["evaluate", "--baseline", "ndwi", "--pair", tmp_path / "s.tif", path],
                 ["chip", "--pair", tmp_path / "s.tif", path, "-o", tmp_path / "chips", "--size", 16]):
        r = run_cli(*args)
        assert refused(r, "S2N-MASK-FRACTIONS", 1, path) and "cut it at 0.5" in r.stderr and "--nodata" not in r.stderr
    write_raster(path, (shares >= 0.5).astype("uint8"), transform=p.transform, crs=p.crs, nodata=255)  # as told
    assert run_cli("evaluate", "--baseline", "ndwi", "--pair", tmp_path / "s.tif", path).returncode == 0


def test_a_probability_or_occurrence_raster_given_as_a_reference_or_label_is_named_as_one(tmp_path):
    """predict --probability's raster given where a mask belongs (evaluate's reference, chip's
    label) was refused for "values 4, 5, 6, 7, 8 besides water 1, land 0": the way out, to
    declare a nodata value, was wrong. It is named as a probability raster, with its cut;
    occurrence's raster, refused for its bands, as an occurrence raster."""
    p = make_pair(40, seed=4, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    with rasterio.open(tmp_path / "m.tif") as src:
        mask, profile = src.read(1), src.profile
    percent = np.where(mask == 1, 80, 20).astype("uint8")
    path = write_raster(tmp_path / "water_probability.tif", percent, transform=profile["transform"],
                        crs=profile["crs"], nodata=255)
    with rasterio.open(path, "r+") as dst:
        dst.update_tags(values="probability percent 0-100, 255 nodata", threshold="0.7")
    for command in (["evaluate", "--baseline", "mndwi", "--pair", tmp_path / "s.tif", path],
                    ["chip", "--pair", tmp_path / "s.tif", path, "-o", tmp_path / "chips", "--size", 16]):
        r = run_cli(*command)
        assert refused(r, "S2N-MASK-IS-PROBABILITY", 1, path), r.stderr
        assert "water from 70 %" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "chips").exists()
    r = run_cli("evaluate", "--baseline", "mndwi", "--pair", tmp_path / "s.tif", tmp_path / "m.tif")
    assert r.returncode == 0, r.stderr  # the mask itself
    r = run_cli("occurrence", tmp_path / "m.tif", "--from-masks", "-o", tmp_path / "occ.tif", "-q")
    assert r.returncode == 0, r.stderr
    r = run_cli("evaluate", "--baseline", "mndwi", "--pair", tmp_path / "s.tif", tmp_path / "occ.tif")
    assert refused(r, "S2N-MASK-IS-OCCURRENCE", 1, tmp_path / "occ.tif"), r.stderr


def test_a_0_255_label_is_not_told_to_declare_its_water_nodata(tmp_path):
    """A 0/255 mask (water 255, as many tools write masks): the refusal says 255 may be water
    before it offers --nodata, which would leave all its water out."""
    p = make_pair(40, seed=4, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    label = (p.mask.reshape(40, 5, 40, 5).mean(axis=(1, 3)) >= 0.5).astype("uint8") * 255
    path = write_raster(tmp_path / "label.tif", label, transform=p.transform, crs=p.crs)
    r = run_cli("evaluate", "--baseline", "mndwi", "--pair", tmp_path / "s.tif", path)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert refused(r, "S2N-MASK-NO-WATER-VALUE", 1, path) and len(lines) == 1
    assert lines[0].index("if 255 is water") < lines[0].index("--nodata")  # water first: --nodata would drop it
    # a chip with no water and clouds as -1 (a Sen1Floods11 negative): -1 is not taken for water
    negative = write_raster(tmp_path / "negative.tif", np.where(label > 0, -1, 0).astype("int16"), transform=p.transform,
                            crs=p.crs)
    r = run_cli("evaluate", "--baseline", "mndwi", "--pair", tmp_path / "s.tif", negative)
    assert refused(r, "S2N-MASK-VALUES", 1, negative) and "holds values -1 besides" in r.stderr


def test_a_0_255_label_tagged_nodata_255_is_warned_of(tmp_path, random_weights):
    """A 0/255 mask a GDAL tool tagged nodata 255: all its water is nodata, so it scores and chips
    as a mask with no water, silently. One warning says so (stderr and --json); a mask with
    water, or predict's own mask of a dry scene (255 its nodata), gets none."""
    p = make_pair(40, seed=4, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    water = p.mask.reshape(40, 5, 40, 5).mean(axis=(1, 3)) >= 0.5
    path = write_raster(tmp_path / "label.tif", water.astype("uint8") * 255, transform=p.transform, crs=p.crs,
                        nodata=255)
    said = f"{path}: holds no water 1, and {water.mean():.1%} of it is its nodata 255"
    r = run_cli("evaluate", "--baseline", "mndwi", "--pair", tmp_path / "s.tif", path, "--json")
    warned = json.loads(r.stdout)["rows"][0]["images"][0]["warnings"]
    assert r.returncode == 0 and codes(r.stderr) == ["S2N-MASK-NO-WATER-NODATA"] and said in r.stderr
    assert said_codes(warned) == ["S2N-MASK-NO-WATER-NODATA"] and warned[-1]["message"].startswith(said)
    # every chip window holds some of that nodata: no chip is cut, and the warning says why first
    r = run_cli("chip", "--pair", tmp_path / "s.tif", path, "-o", tmp_path / "chips", "--size", 16)
    assert refused(r, "S2N-CHIP-NONE", 1) and codes(r.stderr)[0] == "S2N-MASK-NO-WATER-NODATA" and said in r.stderr
    with pytest.warns(S2S2NetWarning, match="holds no water 1"), raises_rule("S2N-CHIP-NONE"):
        s2n.chip([(tmp_path / "s.tif", path)], tmp_path / "chips", size=16)
    fine = write_raster(tmp_path / "fine.tif", water.astype("uint8"), transform=p.transform, crs=p.crs, nodata=255)
    r = run_cli("evaluate", "--baseline", "mndwi", "--pair", tmp_path / "s.tif", fine, "--json")
    assert r.returncode == 0 and codes(r.stderr) == [] and said_codes(json.loads(r.stdout)["rows"][0]["images"][0]["warnings"]) == []
    dry = write_raster(tmp_path / "dry.tif", np.full((6, 40, 40), 900, "uint16"), transform=p.transform, crs=p.crs)
    r = run_cli("predict", dry, "-o", tmp_path / "dry_water.tif", "--weights", random_weights, *FAST, "--bands",
                "1,2,3,4,5,6", "--threshold", 1.0)
    assert r.returncode == 0 and read(tmp_path / "dry_water.tif")[0].max() == 0
    with rasterio.open(tmp_path / "dry_water.tif", "r+") as dst:
        dst.write(np.full((1, 50, 200), 255, "uint8"), window=rasterio.windows.Window(0, 0, 200, 50))  # a cloud
    r = run_cli("evaluate", "--baseline", "mndwi", "--pair", tmp_path / "s.tif", tmp_path / "dry_water.tif")
    assert r.returncode == 0 and "no water 1" not in r.stderr, r.stderr


@pytest.mark.parametrize("nodata", [0, 1])
def test_a_label_whose_nodata_is_land_or_water_is_refused(tmp_path, nodata):
    """GDAL tools often tag 0 as a 0/1 mask's nodata: its land was left out of every score (F1
    0.91 with precision 1.0 for the default model against a mask of NDWI > 0) and of every chip."""
    p = make_pair(40, seed=4, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    label = (p.mask.reshape(40, 5, 40, 5).mean(axis=(1, 3)) >= 0.5).astype("uint8")
    path = write_raster(tmp_path / "label.tif", label, transform=p.transform, crs=p.crs, nodata=nodata)
    kind = "land" if nodata == 0 else "water"
    for command in (["evaluate", "--baseline", "mndwi", "--pair", tmp_path / "s.tif", path],
                    ["chip", "--pair", tmp_path / "s.tif", path, "-o", tmp_path / "chips", "--size", 16]):
        r = run_cli(*command)
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        assert refused(r, "S2N-MASK-NODATA-IS-CLASS", 1, path) and len(lines) == 1, r.stderr
        assert f"its nodata value is {nodata}, which a mask means as {kind}" in lines[0]
    assert not (tmp_path / "chips").exists()
    r = run_cli("evaluate", "--baseline", "mndwi", "--pair", tmp_path / "s.tif", path, "--json", "--nodata", 255)
    assert r.returncode == 0 and json.loads(r.stdout)["rows"][0]["pixels"] == 40 * 40  # land and water both counted


def test_a_raster_of_several_bands_given_as_a_mask_is_refused(tmp_path):
    """Only a mask's first band was read: a 0/1 raster of two bands (classes a band each), or the
    occurrence output, was taken for its first band, and a scene given to occurrence
    --from-masks was told its nodata 0 hides land."""
    p = make_pair(40, seed=4, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    two = np.stack([p.mask, 1 - p.mask]).astype("uint8")
    path = write_raster(tmp_path / "two.tif", two, transform=p.transform * Affine.scale(1 / 5), crs=p.crs)

    for command in (["evaluate", "--baseline", "mndwi", "--pair", tmp_path / "s.tif", path],
                    ["chip", "--pair", tmp_path / "s.tif", path, "-o", tmp_path / "chips", "--size", 16],
                    ["rivers", path, "-o", tmp_path / "rivers.gpkg"],
                    ["occurrence", "--from-masks", path, tmp_path / "m.tif", "-o", tmp_path / "occ.tif", "--strict"]):
        r = run_cli(*command)
        assert refused(r, "S2N-MASK-BAND-COUNT", 1, path) and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not [f for f in ("chips", "rivers.gpkg", "occ.tif") if (tmp_path / f).exists()]
    r = run_cli("occurrence", "--from-masks", tmp_path / "s.tif", "-o", tmp_path / "occ.tif", "--strict")
    assert refused(r, "S2N-MASK-IS-SCENE", 1, tmp_path / "s.tif")


def test_compare_plot_draws_declared_nodata_as_left_out(tmp_path):
    from s2s2net_cli.evaluation.report import _mask_preview

    label = np.ones((20, 20), "int16")
    label[:10] = -1
    path = write_raster(tmp_path / "label.tif", label, transform=T10)
    preview = _mask_preview(path, (20, 20), nodata=-1)
    assert np.isnan(preview[:10]).all() and (preview[10:] == 1).all()


def test_a_shapefile_is_written_whole_and_several_scenes_get_one_vector_each(tmp_path, random_weights):
    p = make_pair(40, seed=5, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    r = run_cli("predict", tmp_path / "s.tif", "-o", tmp_path / "o.tif", "--weights", random_weights, *FAST,
                "--vector", tmp_path / "water.shp", "--threshold", 0.01)
    assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("water", ".")))
    assert {"water.shp", "water.shx", "water.dbf", "water.prj"} <= set(names) and not [n for n in names if n[0] == "."]
    import geopandas as gpd

    assert len(gpd.read_file(tmp_path / "water.shp")) > 0
    write_pair(make_pair(40, seed=6, nodata_margin=False), tmp_path / "t.tif", tmp_path / "n.tif")
    r = run_cli("predict", tmp_path / "s.tif", tmp_path / "t.tif", "-o", tmp_path / "masks", "--weights",
                random_weights, *FAST, "--vector", "water.gpkg")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "masks").iterdir()) == ["s_water.gpkg", "s_water.tif", "t_water.gpkg",
                                                                       "t_water.tif"]


def test_a_mask_off_the_scene_is_refused_and_one_on_it_is_in_the_tags(tmp_path, random_weights):
    s = scene(tmp_path)
    far = write_raster(tmp_path / "far.tif", np.ones((10, 10), "uint8"), transform=Affine(10, 0, 900000, 0, -10, 100000))
    r = run_cli("predict", s, "-o", tmp_path / "o.tif", "--weights", random_weights, "--mask", far)
    assert r.returncode == 1 and "far.tif: --mask does not overlap the scene s.tif" in r.stderr
    near = write_raster(tmp_path / "near.tif", np.ones((10, 10), "uint8"), transform=T10)
    r = run_cli("predict", s, "-o", tmp_path / "o.tif", "--weights", random_weights, *FAST, "--mask", near)
    assert r.returncode == 0, r.stderr
    mask, tags = read(tmp_path / "o.tif")
    assert tags["left_out"] == "near.tif" and (mask[:50, :50] == 255).all() and tags["area_of_interest"] == "none"


def test_polygons_given_as_mask_leave_out_the_pixels_they_touch(tmp_path, random_weights):
    """A vector --mask (clouds, a harbour drawn by hand) leaves out every 10 m pixel its polygons
    touch, in any CRS, as a raster of those pixels would; lines are refused, as is one off the scene."""
    import geopandas as gpd
    from shapely.geometry import LineString, box

    s = scene(tmp_path)
    pixels = np.zeros((40, 40), "uint8")
    pixels[5:15, 20:32] = 1  # the box below, and the pixels it only touches
    raster = write_raster(tmp_path / "cloud.tif", pixels, transform=T10)
    polygons = tmp_path / "cloud.geojson"
    x0, y0 = T10 * (20.5, 14.5)  # inside pixel (14, 20) ...
    x1, y1 = T10 * (31.5, 5.5)  # ... to inside pixel (5, 31)
    gpd.GeoDataFrame(geometry=[box(x0, y0, x1, y1)], crs="EPSG:32633").to_crs("EPSG:4326").to_file(polygons)
    masks = {}
    for given in (raster, polygons):
        out = tmp_path / f"o_{given.suffix[1:]}.tif"
        r = run_cli("predict", s, "-o", out, "--weights", random_weights, *FAST, "--mask", given)
        assert r.returncode == 0, r.stderr
        masks[given], tags = read(out)
        assert tags["left_out"] == given.name
    assert np.array_equal(masks[polygons], masks[raster])
    layers = tmp_path / "layers.gpkg"
    gpd.read_file(polygons).to_file(layers, layer="clouds")
    gpd.GeoDataFrame(geometry=[box(*T10 * (0, 40), *T10 * (40, 0))], crs="EPSG:32633").to_file(layers, layer="tile")
    r = run_cli("predict", s, "-o", tmp_path / "o_layers.tif", "--weights", random_weights, *FAST, "--mask", layers)
    assert r.returncode == 0 and "S2N-VECTOR-LAYERS" in codes(r.stderr), r.stderr
    assert np.array_equal(read(tmp_path / "o_layers.tif")[0], masks[raster])  # the clouds, not the whole tile
    assert (masks[raster][25:75, 100:160] == 255).all() and (masks[raster] == 255).sum() == 50 * 60
    line = tmp_path / "line.gpkg"
    gpd.GeoDataFrame(geometry=[LineString([(x0, y0), (x1, y1)])], crs="EPSG:32633").to_file(line)
    r = run_cli("predict", s, "-o", tmp_path / "x.tif", "--weights", random_weights, "--mask", line)
    assert refused(r, "S2N-VECTOR-NOT-POLYGONS", 1, line) and not (tmp_path / "x.tif").exists()
    far = tmp_path / "far.gpkg"
    gpd.GeoDataFrame(geometry=[box(900000, 100000, 900100, 100100)], crs="EPSG:32633").to_file(far)
    r = run_cli("predict", s, "-o", tmp_path / "x.tif", "--weights", random_weights, "--mask", far)
    assert refused(r, "S2N-LEAVE-OUT-NO-OVERLAP", 1, far) and not (tmp_path / "x.tif").exists()
    empty = tmp_path / "empty.geojson"  # was "does not overlap the scene": it holds nothing to
    gpd.GeoDataFrame(geometry=[], crs="EPSG:32633").to_file(empty)
    r = run_cli("predict", s, "-o", tmp_path / "x.tif", "--weights", random_weights, "--mask", empty)
    assert refused(r, "S2N-LEAVE-OUT-EMPTY", 1, empty) and not (tmp_path / "x.tif").exists()


def test_global_flags_anywhere_on_the_line(tmp_path):
    r = run_cli("synth", tmp_path, "--size", 8, "-q")
    assert r.returncode == 0 and r.stderr == ""
    r = run_cli("synth", tmp_path / "nothing", "--size", 8, "--count", 0, "--debug")
    assert r.returncode == 2 and "--count" in r.stderr and "No such option" not in r.stderr  # --debug was taken


def test_synth_writes_no_pair_when_one_exists_and_lists_its_pairs_in_json(tmp_path):
    """A set whose third pair existed was refused after the first two were written (and no
    manifest): every output is checked before the first is written."""
    (tmp_path / "set").mkdir()
    (tmp_path / "set" / "synth_2_scene.tif").write_text("keep")
    r = run_cli("synth", tmp_path / "set", "--count", 3, "--size", 16)
    assert refused(r, "S2N-OUTPUT-EXISTS", 1, tmp_path / "set" / "synth_2_scene.tif")
    assert [p.name for p in (tmp_path / "set").iterdir()] == ["synth_2_scene.tif"]
    r = run_cli("synth", tmp_path / "set", "--count", 2, "--size", 16, "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert [p["id"] for p in summary["pairs"]] == ["synth_0", "synth_1"]
    assert summary["manifest"] == str(tmp_path / "set" / "manifest.csv") and summary["warnings"] == []
    assert (tmp_path / "set" / "manifest.csv").read_text().splitlines()[1] == "synth_0_scene.tif,synth_0_mask.tif,synth_0"


@pytest.mark.parametrize("command", ["synth", "chip", "train"])
def test_a_seed_no_generator_takes_is_refused_as_the_flag_it_is(tmp_path, command):
    """synth --seed -1 and train --seed -1 or 2**32 ended in numpy's traceback ("expected
    non-negative integer", "Seed must be between 0 and 2**32 - 1"); every --seed is 0 to 2**32 - 1."""
    args = {"synth": [tmp_path / "set"], "chip": ["--pair", "a.tif", "b.tif", "-o", tmp_path / "c"],
            "train": [tmp_path, "-o", tmp_path / "run"]}[command]
    for seed in (-1, 2 ** 32):
        r = run_cli(command, *args, "--seed", seed)
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert f"Invalid value for '--seed': {seed} is not in the range 0<=x<=4294967295" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.slow
def test_sigterm_exits_143_and_a_killed_runs_temporary_file_is_cleaned_next_time(tmp_path, random_weights):
    s = write_raster(tmp_path / "big.tif", np.random.default_rng(0).integers(100, 3000, (6, 256, 256)).astype("uint16"),
                     nodata=0)
    out = tmp_path / "out.tif"
    args = [sys.executable, "-m", "s2s2net_cli", "predict", str(s), "-o", str(out), "--weights", str(random_weights),
            "--tile-size", "32", "--overlap", "8", "--json"]
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not any(".tmp" in p.name for p in tmp_path.iterdir()):
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143 and not out.exists(), (proc.returncode, stdout, stderr[-2000:])  # what it said
    assert json.loads(stdout) == {"scenes": [], "skipped": [], "failures": [], "interrupted": True}
    stale = tmp_path / ".out.tmp4194999.tif"  # above any pid this machine hands out: its process is gone
    stale.write_bytes(b"half a GeoTIFF")
    r = run_cli("predict", s, "-o", out, "--weights", random_weights, *FAST)
    assert r.returncode == 0 and out.exists() and not stale.exists()


def test_stac_items_all_named_item_json_are_named_by_their_id(tmp_path, random_weights):
    from ..sources.product_factory import read_stack, virginia_window

    data, transform, crs = read_stack(window=virginia_window(0, 1, 32))
    items = []
    for name in ("S2B_T18SVG_20230823", "S2B_T18SVG_20230902"):
        folder = tmp_path / name
        folder.mkdir()
        item = write_item(folder / "item.json", write_band_files(folder, data, transform, crs))
        doc = json.loads(item.read_text())
        item.write_text(json.dumps({**doc, "id": name}))
        items.append(item)
    r = run_cli("predict", *items, "-o", tmp_path / "masks", "--weights", random_weights, *FAST)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "masks").iterdir()) == ["S2B_T18SVG_20230823_water.tif",
                                                                       "S2B_T18SVG_20230902_water.tif"]


def test_compare_takes_two_best_weights_of_two_run_folders(tmp_path, random_weights):
    p = make_pair(40, seed=12, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    for run in ("run_a", "run_b"):
        (tmp_path / run).mkdir()
        (tmp_path / run / "best.safetensors").write_bytes(Path(random_weights).read_bytes())
    r = run_cli("compare", "--weights", tmp_path / "run_a" / "best.safetensors", "--weights",
                tmp_path / "run_b" / "best.safetensors", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", *FAST,
                "--json", "--save-predictions", tmp_path / "preds")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    assert [row["model"] for row in rows] == ["run_a/best.safetensors", "run_b/best.safetensors"]
    assert rows[0]["f1"] == rows[1]["f1"]  # the same weights, two files
    assert sorted(p.name for p in (tmp_path / "preds").iterdir()) == ["s__run_a_best.tif", "s__run_b_best.tif"]


def test_chip_names_size_when_a_scene_is_smaller_than_a_chip(tmp_path):
    p = make_pair(40, seed=4, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    r = run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "-o", tmp_path / "chips")
    assert r.returncode == 1 and "smaller than one chip of 512 px (give a smaller --size)" in r.stderr


def test_weights_files_are_written_readable_as_any_file(tmp_path, random_weights):
    r = run_cli("weights", "annotate", random_weights, tmp_path / "w.safetensors", "--set", "note=x")
    assert r.returncode == 0, r.stderr
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((tmp_path / "w.safetensors").stat().st_mode) == 0o666 & ~umask
    card = json.loads(run_cli("weights", "show", tmp_path / "w.safetensors").stdout)
    assert card["training"]["note"] == "x"


def test_progress_reaches_a_log_file_as_plain_lines(tmp_path, random_weights):
    s = scene(tmp_path, size=64)
    with open(tmp_path / "log.txt", "w") as log:
        r = subprocess.run([sys.executable, "-m", "s2s2net_cli", "predict", str(s), "-o", str(tmp_path / "o.tif"),
                            "--weights", str(random_weights), "--tile-size", "32", "--overlap", "8", "-v"],
                           stderr=log, stdout=subprocess.PIPE, text=True)
    assert r.returncode == 0
    lines = (tmp_path / "log.txt").read_text().splitlines()
    progress = [line for line in lines if line.startswith("s.tif: ") and "/4 (" in line]
    assert [line.split()[1] for line in progress] == ["1/4", "2/4", "3/4", "4/4"], lines


def test_a_stacks_own_scale_and_offset_metadata_is_read(tmp_path, random_weights):
    # DNs of processing baseline 04.00+ (reflectance x 10000 + 1000) with GDAL scale/offset
    # metadata saying so: read as the same reflectance as the plain stack with --offset -1000
    data = np.random.default_rng(7).integers(1200, 4000, size=(6, 40, 40)).astype("uint16")
    plain = write_raster(tmp_path / "plain.tif", data, transform=T10, nodata=0)
    tagged = write_raster(tmp_path / "tagged.tif", data, transform=T10, nodata=0)
    with rasterio.open(tagged, "r+") as dst:
        dst.scales, dst.offsets = (0.0001,) * 6, (-0.1,) * 6
    r = run_cli("predict", plain, "-o", tmp_path / "p.tif", "--weights", random_weights, *FAST, "--offset", -1000)
    assert r.returncode == 0, r.stderr
    r = run_cli("predict", tagged, "-o", tmp_path / "t.tif", "--weights", random_weights, *FAST, "--json")
    assert r.returncode == 0, r.stderr
    assert np.array_equal(read(tmp_path / "p.tif")[0], read(tmp_path / "t.tif")[0])
    assert read(tmp_path / "t.tif")[1]["offset"] == ",".join(["-1000"] * 6)
    r = run_cli("predict", tagged, "-o", tmp_path / "x.tif", "--weights", random_weights, "--scale", 1)
    assert r.returncode == 1 and "tagged.tif: its band metadata say reflectance = (DN -1000) / 10000" in r.stderr


def test_a_stored_offset_without_a_stored_scale_is_in_dns(tmp_path, random_weights):
    # `gdal_edit.py -offset -1000` on a baseline 04.00 stack stores the offset and leaves GDAL's
    # scale at 1: it was read as reflectance = DN - 1000 (scale 1), warned of as implausible,
    # and the --scale 10000 that warning points to was refused as contradicting the file
    data = np.random.default_rng(7).integers(1200, 4000, size=(6, 40, 40)).astype("uint16")
    plain = write_raster(tmp_path / "plain.tif", data, transform=T10, nodata=0)
    tagged = write_raster(tmp_path / "tagged.tif", data, transform=T10, nodata=0)
    with rasterio.open(tagged, "r+") as dst:
        dst.offsets = (-1000.0,) * 6
    r = run_cli("predict", plain, "-o", tmp_path / "p.tif", "--weights", random_weights, *FAST, "--offset", -1000)
    assert r.returncode == 0, r.stderr
    for name, more in (("t.tif", ()), ("s.tif", ("--scale", 10000, "--offset", -1000))):
        r = run_cli("predict", tagged, "-o", tmp_path / name, "--weights", random_weights, *FAST, *more)
        assert r.returncode == 0 and "S2N-SCALE-IMPLAUSIBLE" not in r.stderr, r.stderr
        mask, tags = read(tmp_path / name)
        assert np.array_equal(read(tmp_path / "p.tif")[0], mask)
        assert tags["scale"] == "10000" and tags["offset"] == ",".join(["-1000"] * 6)
    r = run_cli("predict", tagged, "-o", tmp_path / "x.tif", "--weights", random_weights, "--offset", -900)
    assert r.returncode == 1 and "tagged.tif: its band metadata say reflectance = (DN -1000) / 10000" in r.stderr


def test_chip_says_why_most_chips_were_not_cut(tmp_path):
    p = make_pair(40, seed=4, nodata_margin=False)
    p.scene[:, :10, :10] = 0  # a nodata corner, as a scene reprojected to another grid has
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    r = run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "-o", tmp_path / "new" / "chips", "--size",
                32, "--stride", 8)
    # no chip at all was a warning and exit 0, an empty index that train refused later; now it is
    # refused here, and the folders the run made are gone again
    said = ("chips: no chip was cut of 4 chip windows: 4 hold more nodata than --max-nodata 0 allows (a higher "
            "--max-nodata keeps them); nothing written")
    assert refused(r, "S2N-CHIP-NONE", 1, said) and not (tmp_path / "new").exists()
    # a label with clouds left out (nodata 255) over half of three of the four windows: lost at the default
    p.scene[:, :10, :10] = 1000
    p.mask[:50] = 255
    p.mask[100:150, :100] = 255
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    r = run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "-o", tmp_path / "cloudy", "--size", 20,
                "--val-fraction", 0, "--nodata", 255, "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["skipped"]["nodata"] == 3 and summary["chips"]["train"] == 1
    assert [w["code"] for w in summary["warnings"]] == ["S2N-CHIP-NODATA-SKIPPED"]
    assert "3 of 4 chip windows were skipped" in r.stderr
    r = run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "-o", tmp_path / "kept", "--size", 20,
                "--val-fraction", 0, "--nodata", 255, "--max-nodata", 0.8, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["chips"]["train"] == 4 and "NODATA-SKIPPED" not in r.stderr


def test_a_stacks_scl_band_leaves_clouds_out_as_a_products_does(tmp_path, random_weights):
    data = np.random.default_rng(8).integers(200, 4000, size=(7, 40, 40)).astype("uint16")
    data[6] = 4  # vegetation
    data[6, :10, :10] = 9  # cloud, high probability
    path = write_raster(tmp_path / "l2a.tif", data, transform=T10, nodata=0,
                        descriptions=("B02", "B03", "B04", "B08", "B11", "B12", "SCL"))
    r = run_cli("predict", path, "-o", tmp_path / "o.tif", "--weights", random_weights, *FAST)
    assert r.returncode == 0, r.stderr
    mask, tags = read(tmp_path / "o.tif")
    assert (mask[:50, :50] == 255).all() and (mask[50:] != 255).all() and tags["clouds_left_out"] == "yes"
    r = run_cli("predict", path, "-o", tmp_path / "k.tif", "--weights", random_weights, *FAST, "--keep-clouds")
    assert r.returncode == 0 and (read(tmp_path / "k.tif")[0] != 255).all()


def test_no_output_is_written_over_an_input_even_with_overwrite(tmp_path, random_weights):
    """`predict v.tif -o v.tif --overwrite` replaced the scene with its mask, exit 0; so did a
    batch whose folder held a scene named as another scene's mask, an --aoi named as --vector,
    a CSV written over the manifest it scored, an occurrence over one of its masks."""
    s = scene(tmp_path, "v.tif")
    original = s.read_bytes()
    r = run_cli("predict", s, "-o", s, "--weights", random_weights, *FAST, "--overwrite")
    assert r.returncode == 2 and f"{s}: is also an input" in r.stderr and s.read_bytes() == original
    (tmp_path / "masks").mkdir()
    other = scene(tmp_path / "masks", "v_water.tif", seed=1)  # the name v.tif's mask takes in masks/
    kept = other.read_bytes()
    r = run_cli("predict", s, other, "-o", f"{tmp_path / 'masks'}/", "--weights", random_weights, *FAST, "--overwrite")
    assert r.returncode == 2 and f"{other}: is also an input" in r.stderr and other.read_bytes() == kept
    assert not (tmp_path / "masks" / "v_water_water.tif").exists()  # refused before anything ran
    aoi = tmp_path / "aoi.geojson"
    aoi.write_text('{"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {}, "geometry": '
                   '{"type": "Polygon", "coordinates": [[[500000, 3999600], [500400, 3999600], [500400, 4000000], '
                   '[500000, 4000000], [500000, 3999600]]]}}], "crs": {"type": "name", "properties": {"name": '
                   '"EPSG:32633"}}}')
    geometry = aoi.read_text()
    r = run_cli("predict", s, "-o", tmp_path / "w.tif", "--aoi", aoi, "--vector", aoi, "--weights", random_weights,
                *FAST, "--overwrite")
    assert r.returncode == 2 and f"{aoi}: is also an input" in r.stderr and aoi.read_text() == geometry
    mask = write_raster(tmp_path / "m.tif", (np.arange(200 * 200).reshape(200, 200) % 2).astype("uint8"),
                        transform=Affine(2, 0, 500000, 0, -2, 4000000), nodata=255)
    manifest = tmp_path / "pairs.csv"
    manifest.write_text(f"image,mask\n{s},{mask}\n")
    listed = manifest.read_text()
    r = run_cli("compare", "--manifest", manifest, "--baseline", "ndwi", "--csv", manifest, "--overwrite")
    assert r.returncode == 2 and f"{manifest}: is also an input" in r.stderr and manifest.read_text() == listed
    masks = [write_raster(tmp_path / f"d{k}_water.tif", np.full((20, 20), k % 2, "uint8"), nodata=255,
                          transform=Affine(2, 0, 500000, 0, -2, 4000000)) for k in range(2)]
    dates = tmp_path / "dates.csv"
    dates.write_text("scene,date\n" + "".join(f"{m},2021-0{k + 1}-01\n" for k, m in enumerate(masks)))
    before = masks[0].read_bytes()
    r = run_cli("occurrence", *masks, "--from-masks", "--dates", dates, "-o", masks[0], "--overwrite")
    assert r.returncode == 2 and f"{masks[0]}: is also an input" in r.stderr and masks[0].read_bytes() == before


def test_two_scenes_of_one_name_are_told_apart_by_their_paths(tmp_path):
    """Two --pair scenes of one stem (a/scene.tif, b/scene.tif) share an id; the line names both
    and says how to give them ids (--pair has no id column to give)."""
    mask = write_raster(tmp_path / "m.tif", np.zeros((200, 200), "uint8"), transform=Affine(2, 0, 500000, 0, -2, 4000000),
                        nodata=255)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = scene(tmp_path / "a", "scene.tif"), scene(tmp_path / "b", "scene.tif", seed=1)
    r = run_cli("evaluate", "--pair", a, mask, "--pair", b, mask, "--baseline", "ndwi")
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert f"--pair: scene id 'scene' appears twice ({a} and {b}): list them in a --manifest with an id column" in r.stderr


def test_one_pair_given_twice_is_refused_whatever_its_ids(tmp_path):
    """One scene and mask listed twice under two ids (or by two paths) were scored twice and
    weighed twice in the pooled scores; given twice by --pair, the refusal said to give them
    ids. The pair is named, with where it was given each time."""
    mask = write_raster(tmp_path / "m.tif", np.zeros((200, 200), "uint8"), transform=Affine(2, 0, 500000, 0, -2, 4000000),
                        nodata=255)
    s = scene(tmp_path, "scene.tif")
    manifest = tmp_path / "pairs.csv"
    manifest.write_text("image,mask,id\nscene.tif,m.tif,a\n./scene.tif,m.tif,b\n")
    for args, where in ((["--manifest", manifest], f"(line 2 of {manifest}, then line 3 of {manifest})"),
                        (["--pair", s, mask, "--pair", "scene.tif", "m.tif"], "(--pair, then --pair)")):
        for command in ("evaluate", "chip"):
            out = ["-o", tmp_path / "chips"] if command == "chip" else ["--baseline", "ndwi"]
            r = run_cli(command, *args, *out, cwd=tmp_path)  # scene.tif is s by another path
            assert refused(r, "S2N-PAIR-TWICE", 1), r.stderr
            assert "is given twice with the mask " in r.stderr and where in r.stderr
    assert not (tmp_path / "chips").exists()


def test_a_label_or_mask_off_the_scenes_grid_by_part_of_a_cell_is_warned_of(tmp_path, random_weights):
    """Half a pixel (5 m) off the scene's 10 m grid, a label was scored without a word (F1 0.34
    against 0.39 on the right grid). Every command that lays one raster on another's grid says
    so, with the shift: evaluate and chip of a label, predict of a --mask, occurrence of masks."""
    p = make_pair(40, seed=4, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    label = (p.mask.reshape(40, 5, 40, 5).mean(axis=(1, 3)) >= 0.5).astype("uint8")
    shifted = write_raster(tmp_path / "shifted.tif", label, transform=p.transform * Affine.translation(0.5, 0),
                           crs=p.crs, nodata=255)
    aligned = write_raster(tmp_path / "aligned.tif", label, transform=p.transform, crs=p.crs, nodata=255)
    on_2m = write_raster(tmp_path / "on2m.tif", np.zeros((200, 200), "uint8"),
                         transform=p.transform * Affine.scale(0.2) * Affine.translation(3, 0), crs=p.crs, nodata=255)
    for command in (["evaluate", "--baseline", "ndwi", "--pair", tmp_path / "s.tif"],
                    ["chip", "-o", tmp_path / "chips", "--size", 16, "--overwrite", "--pair", tmp_path / "s.tif"]):
        r = run_cli(*command, shifted)
        assert r.returncode == 0 and codes(r.stderr) == ["S2N-GRID-SHIFT"], r.stderr
        assert f"{shifted}: lies +5, +0 " in r.stderr
        for fine in (aligned, on_2m):  # on the 10 m grid, or whole 2 m cells off it: nothing to say
            r = run_cli(*command, fine)
            assert r.returncode == 0 and "S2N-GRID-SHIFT" not in codes(r.stderr), r.stderr
    r = run_cli("predict", tmp_path / "s.tif", "-o", tmp_path / "w.tif", "--weights", random_weights, *FAST,
                "--mask", shifted)
    assert r.returncode == 0 and "S2N-GRID-SHIFT" in codes(r.stderr)
    masks = [write_raster(tmp_path / f"d{k}_2021-0{k + 1}-01.tif", np.zeros((50, 50), "uint8"), nodata=255,
                          transform=Affine(2, 0, 500000 + k, 0, -2, 4000000), crs=p.crs) for k in range(2)]
    r = run_cli("occurrence", *masks, "--from-masks", "-o", tmp_path / "occ.tif")
    assert r.returncode == 0 and codes(r.stderr) == ["S2N-GRID-SHIFT-OUTPUT"] and str(masks[1]) in r.stderr


def test_an_input_named_twice_is_said_to_be_named_twice(tmp_path):
    """`predict a.tif a.tif -o out/` (a glob and a name that overlap) said both would be written
    to out/a_water.tif and to predict them into separate folders, which would map one scene
    twice; the same file by another name (a link) is the same scene."""
    s = scene(tmp_path)
    (tmp_path / "link.tif").symlink_to(s)
    for again in (s, tmp_path / "link.tif"):
        r = run_cli("predict", s, again, "-o", f"{tmp_path / 'out'}/", *FAST)
        assert refused(r, "S2N-INPUT-TWICE", 1, again) and r.stderr.count("\n") == 1
        assert f"is named twice (also as {s})" in r.stderr and not (tmp_path / "out").exists()
    # a chips folder given twice to train was drawn twice as often, silently
    chips = tmp_path / "chips"
    chips.mkdir()
    (tmp_path / "same_chips").symlink_to(chips)
    r = run_cli("train", chips, tmp_path / "same_chips", "-o", tmp_path / "run")
    assert refused(r, "S2N-INPUT-TWICE", 1, f"same_chips: is named twice (also as {chips}): name each chips folder once")
    assert not (tmp_path / "run").exists()
