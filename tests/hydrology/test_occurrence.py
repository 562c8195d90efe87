import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import rasterio
from affine import Affine

from s2s2net_cli.world import free_port

from ..conftest import SMALL, codes, refused, run_cli, write_raster

T2 = Affine(2, 0, 600000, 0, -2, 5000000)
N = 96  # px a side


def series(tmp_path, n_dates=6):
    """Masks of one place: a lake whose radius shrinks by 4 px a date, a river whose width grows
    by 2 px a date (a flood), a cloud (nodata) over one corner on date 3. Their exact counts."""
    yy, xx = np.mgrid[0:N, 0:N]
    paths, water, valid = [], np.zeros((N, N), int), np.zeros((N, N), int)
    for k in range(n_dates):
        lake = (yy - 30) ** 2 + (xx - 30) ** 2 <= (24 - 4 * k) ** 2
        river = np.abs(xx - 70) <= 2 + k
        mask = (lake | river).astype("uint8")
        seen = np.ones((N, N), bool)
        if k == 3:
            seen[60:, :20] = False
            mask[~seen] = 255
        water += (mask == 1)
        valid += seen
        path = write_raster(tmp_path / f"date{k}_2021-0{k + 1}-15_water.tif", mask, transform=T2, nodata=255)
        paths.append(path)
    return paths, water, valid


def read(path):
    with rasterio.open(path) as src:
        return src.read(), src.profile, src.descriptions


def test_masks_of_a_shrinking_lake_and_a_flooding_river_give_the_exact_counts(tmp_path):
    paths, water, valid = series(tmp_path)
    r = run_cli("occurrence", *paths, "--from-masks", "-o", tmp_path / "occ.tif", "--classes", "--json",
                "--plot", tmp_path / "area.png")
    assert r.returncode == 0, r.stderr
    bands, profile, descriptions = read(tmp_path / "occ.tif")
    assert profile["transform"] == T2 and profile["count"] == 4 and profile["nodata"] == 255
    assert np.array_equal(bands[1], water) and np.array_equal(bands[2], valid)
    expected = np.round(100 * water / valid).astype(int)
    assert np.array_equal(bands[0], expected)
    # the cloud lowered the valid count there and nowhere else
    assert (valid[60:, :20] == 5).all() and (valid[:60] == 6).all() and (valid[:, 20:] == 6).all()
    # permanent: the lake's core and the river's first bed; seasonal: the rest that was ever wet
    assert bands[3][30, 30] == 2 and bands[3][30, 70] == 2 and bands[3][30, 74] == 1 and bands[3][5, 90] == 0
    summary = json.loads(r.stdout)
    assert [d["date"] for d in summary["dates"]] == [f"2021-0{k + 1}-15" for k in range(6)]
    for d, path in zip(summary["dates"], paths):  # each date's water in km2 (2 m pixels: 4e-6 km2 on the map,
        # their ground's area within UTM's areal scale of it)
        assert d["water_km2"] == pytest.approx(float((rasterio.open(path).read(1) == 1).sum()) * 4e-6, rel=2e-3)
    assert summary["dates"][3]["valid_share"] == pytest.approx(1 - 36 * 20 / N ** 2)
    assert summary["dates"][0]["valid_share"] == 1.0
    assert (tmp_path / "area.png").stat().st_size > 1000
    assert "occurrence" in descriptions[0]


def test_masks_in_zips_or_at_gdal_paths_are_counted_as_the_files(tmp_path):
    """Masks given as a zip of one raster each (as Google Earth Engine downloads them) or as a
    /vsizip/ path were taken as Paths: the zip unreadable as a mask, the path's // made one. Both
    are read as GDAL reads them, dated by the names given, and counted as the files are."""
    import zipfile

    paths, water, valid = series(tmp_path, n_dates=3)
    given = []
    for k, path in enumerate(paths):
        archive = path.with_suffix(".zip")
        with zipfile.ZipFile(archive, "w") as zf:
            zf.write(path, path.name)
        given.append(f"/vsizip/{archive}/{path.name}" if k == 0 else archive)
    r = run_cli("occurrence", *given, "--from-masks", "-o", tmp_path / "occ.tif", "--json")
    assert r.returncode == 0, r.stderr
    bands, profile, _ = read(tmp_path / "occ.tif")
    assert profile["transform"] == T2 and np.array_equal(bands[1], water) and np.array_equal(bands[2], valid)
    assert sorted(d["date"] for d in json.loads(r.stdout)["dates"]) == ["2021-01-15", "2021-02-15", "2021-03-15"]

def test_the_area_plot_marks_a_date_seen_in_part_as_a_floor():
    """A date half under cloud showed as half the water, drawn as every other date: its dot is
    hollow now, with its seen share beside it and a legend saying its area is a floor."""
    import matplotlib.pyplot as plt

    from s2s2net_cli.hydrology.occurrence import DateMask
    from s2s2net_cli.hydrology.plot import water_area_figure

    dates = [DateMask("a.tif", "2021-01-15", water_km2=0.14, valid_share=1.0),
             DateMask("b.tif", "2021-02-15", water_km2=0.07, valid_share=0.444)]
    fig = water_area_figure(dates)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.texts] == ["44% seen"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "seen whole", "seen in part (clouds, nodata): the water seen, a floor"]
    whole, part = ax.collections
    assert whole.get_offsets().tolist() == [[0, 0.14]] and part.get_offsets().tolist() == [[1, 0.07]]
    plt.close(fig)
    fig = water_area_figure(dates[:1])  # every date seen whole: no legend to read
    assert fig.axes[0].get_legend() is None and not fig.axes[0].texts
    plt.close(fig)


def test_masks_on_another_grid_are_warped_onto_the_first(tmp_path):
    paths, water, valid = series(tmp_path, 3)
    # the third date as a 4 m mask: every 2 m cell of the output reads its 4 m parent
    coarse = rasterio.open(paths[2]).read(1)[::2, ::2]
    write_raster(tmp_path / "coarse.tif", coarse, transform=T2 * Affine.scale(2), nodata=255)
    r = run_cli("occurrence", paths[0], paths[1], tmp_path / "coarse.tif", "--from-masks", "-o", tmp_path / "o.tif")
    assert r.returncode == 0, r.stderr
    bands, profile, _ = read(tmp_path / "o.tif")
    up = np.repeat(np.repeat(coarse, 2, 0), 2, 1)
    first_two = sum((rasterio.open(p).read(1) == 1).astype(int) for p in paths[:2])
    assert np.array_equal(bands[1], first_two + (up == 1))
    assert (bands[2] == 3).all()


def test_an_undated_mask_is_counted_warned_of_listed_last_and_gives_no_grid(tmp_path):
    """A mask with no date was listed first as date `-` and lent the series its grid; it is
    counted, warned of, listed after the dated ones, and the grid is the earliest dated mask's."""
    paths, water, valid = series(tmp_path, 3)
    undated = write_raster(tmp_path / "extra_water.tif", rasterio.open(paths[1]).read(1)[: N // 2],
                           transform=T2 * Affine.translation(0, -N // 4), nodata=255)  # a quarter inside, a quarter north of it
    r = run_cli("occurrence", undated, paths[2], paths[0], paths[1], "--from-masks", "-o", tmp_path / "o.tif", "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert [d["date"] for d in summary["dates"]] == ["2021-01-15", "2021-02-15", "2021-03-15", None]
    assert [w["code"] for w in summary["dates"][-1]["warnings"]] == ["S2N-OCCURRENCE-UNDATED"]
    assert "S2N-OCCURRENCE-UNDATED" in codes(r.stderr) and "extra_water.tif" in r.stderr
    bands, profile, _ = read(tmp_path / "o.tif")
    assert (profile["width"], profile["height"]) == (N, N) and profile["transform"] == T2  # the first date's grid
    assert bands[2].max() == 4 and bands[2].min() == 3  # the undated mask seen where it lies


def test_an_untagged_mask_on_part_of_the_grid_is_seen_where_it_lies_and_unseen_outside(tmp_path):
    paths, _, _ = series(tmp_path, 1)
    part = np.zeros((N, N // 2), "uint8")
    part[:, :10] = 1  # no nodata tag: every pixel of it says water or land
    write_raster(tmp_path / "part.tif", part, transform=T2 * Affine.translation(N // 2, 0))
    r = run_cli("occurrence", paths[0], tmp_path / "part.tif", "--from-masks", "-o", tmp_path / "o.tif")
    assert r.returncode == 0, r.stderr
    bands, _, _ = read(tmp_path / "o.tif")
    assert (bands[2][:, : N // 2] == 1).all() and (bands[2][:, N // 2:] == 2).all()
    first = rasterio.open(paths[0]).read(1) == 1
    assert np.array_equal(bands[1][:, N // 2:], first[:, N // 2:] + part)
    assert np.array_equal(bands[1][:, : N // 2], first[:, : N // 2].astype(int))


def test_areas_are_in_km2_on_a_grid_in_degrees(tmp_path):
    mask = np.zeros((100, 100), "uint8")
    mask[:, :30] = 1  # 3000 pixels of about 2 x 2 m at the equator
    path = write_raster(tmp_path / "m.tif", mask, crs="EPSG:4326", transform=Affine(1.8e-5, 0, 10, 0, -1.8e-5, 0.001),
                        nodata=255)
    r = run_cli("occurrence", path, "--from-masks", "-o", tmp_path / "o.tif", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    expected = 3000 * (1.8e-5 * 111_320) ** 2 / 1e6  # a degree of the equator is 111.32 km
    assert doc["dates"][0]["water_km2"] == pytest.approx(expected, rel=0.01)
    assert doc["ever_water_km2"] == pytest.approx(expected, rel=0.01)


def test_areas_are_the_grounds_in_a_projection_that_stretches_it(tmp_path):
    """In Web Mercator a map's square metre at 60 degrees north is a quarter of one on the
    ground: the water area was said in map units, 4 times too large (1.6 times at Virginia's
    latitude). It is the ground's now, as in degrees; UTM's areal scale moves it by 0.06 %."""
    from rasterio.crs import CRS

    from s2s2net_cli.grid import row_pixel_areas

    mask = np.zeros((100, 100), "uint8")
    mask[:, :30] = 1  # 3000 pixels of 2 x 2 map metres
    y60 = 8_399_737.89  # Web Mercator's y of 60 degrees north, where its areal scale is 1 / cos(60)^2 = 4
    path = write_raster(tmp_path / "m.tif", mask, crs="EPSG:3857", transform=Affine(2, 0, 1_000_000, 0, -2, y60),
                        nodata=255)
    r = run_cli("occurrence", path, "--from-masks", "-o", tmp_path / "o.tif", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["dates"][0]["water_km2"] == pytest.approx(3000 * 4 / 4 / 1e6, rel=0.005)
    utm = row_pixel_areas(CRS.from_epsg(32618), Affine(2, 0, 420000, 0, -2, 4175000), 0, 3, 100)
    assert utm == pytest.approx(4 / 0.99936, rel=1e-4) and utm[0] > 4  # 80 km from the central meridian
    assert row_pixel_areas(CRS.from_epsg(3035), Affine(2, 0, 4e6, 0, -2, 3e6), 0, 2) == pytest.approx(4)  # equal area


def test_a_probability_raster_counts_from_its_threshold_and_a_mask_of_other_values_is_refused(tmp_path):
    paths, water, valid = series(tmp_path, n_dates=2)
    with rasterio.open(paths[1]) as src:
        mask = src.read(1)
    percent = np.where(mask == 1, 64, 30).astype("uint8")  # water at 64 %, land at 30 %: wet at 0.6, dry at 0.7
    percent[:4] = 59  # just under the threshold: land
    percent[mask == 255] = 255
    prob = write_raster(tmp_path / "prob.tif", percent, transform=T2, nodata=255)
    with rasterio.open(prob, "r+") as dst:
        dst.update_tags(values="probability percent 0-100, 255 nodata", threshold="0.6")
    r = run_cli("occurrence", paths[0], prob, "--from-masks", "-o", tmp_path / "occ.tif", "--json")
    assert r.returncode == 0, r.stderr
    wet_then = mask == 1
    wet_then[:4] = False
    bands, _, _ = read(tmp_path / "occ.tif")
    with rasterio.open(paths[0]) as src:
        assert np.array_equal(bands[1], (src.read(1) == 1).astype(int) + wet_then)
    assert {d["source"]: d["water_km2"] for d in json.loads(r.stdout)["dates"]}[str(prob)] == pytest.approx(wet_then.sum() * 4e-6, rel=2e-3)
    classes = write_raster(tmp_path / "classes.tif", mask * 255, transform=T2)  # water 255, no nodata tag
    r = run_cli("occurrence", paths[0], classes, "--from-masks", "-o", tmp_path / "occ2.tif")  # not a date to skip
    assert refused(r, "S2N-MASK-VALUES", 1, classes) and len(r.stderr.strip().splitlines()) == 1
    assert "holds values 255 besides water 1, land 0: tag the value that means nodata (rio edit-info" in r.stderr
    assert not (tmp_path / "occ2.tif").exists()


def test_a_date_that_fails_is_named_skipped_and_counted_exit_1_or_stops_with_strict(tmp_path):
    paths, water, valid = series(tmp_path, 3)
    broken = tmp_path / "broken_water.tif"
    broken.write_bytes(b"not a tiff")
    far = write_raster(tmp_path / "far.tif", np.ones((10, 10), "uint8"), transform=Affine(2, 0, 0, 0, -2, 0), nodata=255)
    with rasterio.open(paths[0]) as src:  # a GDAL tool's nodata 0: its land would be unseen, water wherever seen
        land_unseen = write_raster(tmp_path / "nodata0.tif", src.read(1), transform=T2, nodata=0)
    r = run_cli("occurrence", *paths, broken, far, land_unseen, "--from-masks", "-o", tmp_path / "o.tif", "--json")
    assert r.returncode == 1, r.stderr  # written from the three dates, and a script told that three failed
    summary = json.loads(r.stdout)
    assert summary["counted"] == 3 and len(summary["skipped"]) == 3
    errors = {Path(s["source"]).name: s["error"] for s in summary["skipped"]}
    assert "broken_water.tif" in errors["broken_water.tif"]
    assert "does not overlap the output grid" in errors["far.tif"]
    assert errors["nodata0.tif"].startswith(f"{land_unseen}: its nodata value is 0, which a mask means as land")
    assert f"skipped: {far}: does not overlap the output grid [S2N-OCCURRENCE-NO-OVERLAP]" in r.stderr.splitlines()
    assert (read(tmp_path / "o.tif")[0][2] == 3).all()
    r = run_cli("occurrence", *paths, broken, "--from-masks", "-o", tmp_path / "strict.tif", "--strict")
    assert r.returncode == 1 and "broken_water.tif" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "strict.tif").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_an_existing_output_is_kept_and_an_empty_run_fails(tmp_path):
    paths, _, _ = series(tmp_path, 2)
    (tmp_path / "o.tif").write_text("keep")
    r = run_cli("occurrence", *paths, "--from-masks", "-o", tmp_path / "o.tif")
    assert refused(r, "S2N-OUTPUT-EXISTS", 1, tmp_path / "o.tif") and (tmp_path / "o.tif").read_text() == "keep"


def test_occurrence_from_scenes_counts_what_predict_writes(tmp_path):
    from s2s2net_cli.synthetic.scenes import make_pair, write_pair

    scenes = []
    for k, seed in enumerate((5, 6)):
        p = make_pair(32, seed=seed, nodata_margin=False)
        p.transform = Affine(10, 0, 500000, 0, -10, 4000000)  # one place
        p.crs = rasterio.crs.CRS.from_epsg(32633)
        write_pair(p, tmp_path / f"s{k}.tif", tmp_path / f"m{k}.tif")
        scenes.append(tmp_path / f"s{k}.tif")
    with rasterio.open(scenes[1], "r+") as dst:  # a stack whose bands say nothing: read in order, and said so
        for band in range(1, 7):
            dst.set_band_description(band, "")
    args = ["--tile-size", 32, "--precision", 32]
    r = run_cli("occurrence", *scenes, "-o", tmp_path / "occ.tif", "--json", *args)
    assert r.returncode == 0, r.stderr
    said = {Path(d["source"]).name: d["warnings"] for d in json.loads(r.stdout)["dates"]}
    # neither scene has a date, and s1's bands say nothing
    assert {name: [w["code"] for w in found] for name, found in said.items()} == {
        "s0.tif": ["S2N-OCCURRENCE-UNDATED", SMALL],
        "s1.tif": ["S2N-OCCURRENCE-UNDATED", "S2N-BANDS-UNDESCRIBED", SMALL]}
    assert said["s1.tif"][1]["message"].startswith(f"{scenes[1]}: ")
    assert sorted(codes(r.stderr)) == ["S2N-BANDS-UNDESCRIBED", *["S2N-OCCURRENCE-UNDATED"] * 2]
    masks = []
    for k, s in enumerate(scenes):
        assert run_cli("predict", s, "-o", tmp_path / f"p{k}.tif", *args).returncode == 0
        masks.append(rasterio.open(tmp_path / f"p{k}.tif").read(1))
    bands, profile, _ = read(tmp_path / "occ.tif")
    assert profile["width"] == 160 and profile["transform"] == Affine(2, 0, 500000, 0, -2, 4000000)
    assert np.array_equal(bands[1], sum((m == 1).astype(int) for m in masks))
    assert np.array_equal(bands[2], sum((m != 255).astype(int) for m in masks))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def torchrun_nodes(tmp_path, paths, output):
    """Two torchrun nodes on this machine running occurrence over ``paths``: their (stdout, stderr)
    and exit codes."""
    port = free_port()
    torchrun = Path(sys.executable).parent / "torchrun"
    procs = []
    for node in (0, 1):
        cmd = [str(torchrun), "--nnodes", "2", "--nproc_per_node", "1", "--node_rank", str(node), "--rdzv_backend",
               "c10d", "--rdzv_endpoint", f"localhost:{port}", "--rdzv_id", "occ", "-m", "s2s2net_cli", "occurrence",
               *map(str, paths), "--from-masks", "-o", str(output), "--json"]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env={**os.environ, "OMP_NUM_THREADS": "1"}))
    outs = [p.communicate(timeout=300) for p in procs]
    return outs, [p.returncode for p in procs]


@pytest.mark.slow
def test_two_torchrun_nodes_share_the_dates_and_sum_the_counts(tmp_path):
    paths, water, valid = series(tmp_path, 5)
    outs, codes = torchrun_nodes(tmp_path, paths, tmp_path / "occ.tif")
    assert codes == [0, 0], outs
    documents = [json.loads(o) for o, _ in outs if o.strip()]
    assert len(documents) == 1 and documents[0]["counted"] == 5  # one summary, from rank 0
    bands, _, _ = read(tmp_path / "occ.tif")
    assert np.array_equal(bands[1], water) and np.array_equal(bands[2], valid)


@pytest.mark.slow
def test_a_mask_one_node_cannot_count_stops_both_nodes_not_one(tmp_path):
    paths, _, _ = series(tmp_path, 3)
    with rasterio.open(paths[0]) as src:
        classes = write_raster(tmp_path / "classes.tif", src.read(1) * 2, transform=T2)  # 0 and 2: no 0/1 mask
    outs, codes = torchrun_nodes(tmp_path, [*paths, classes], tmp_path / "occ.tif")  # would wait forever in a sum
    assert all(code != 0 for code in codes), outs
    errors = "".join(err for _, err in outs)
    assert f"{classes}: holds values 2 besides water 1, land 0" in errors
    assert not (tmp_path / "occ.tif").exists()


@pytest.mark.parametrize("case, code", [("missing_mask", "S2N-FILE-NOT-FOUND"),
                                        ("missing_like", "S2N-FILE-NOT-FOUND"),  # was "not a raster rasterio can read"
                                        ("not_a_raster_like", "S2N-RASTER-UNREADABLE"),
                                        # these three ended in rasterio's traceback ("CRS is invalid: None")
                                        ("like_without_crs", "S2N-OCCURRENCE-LIKE-NO-GRID"),
                                        ("rotated_like", "S2N-OCCURRENCE-LIKE-NO-GRID"),
                                        ("first_mask_without_crs", "S2N-MASK-NO-CRS")])
def test_bad_input_gets_one_line(tmp_path, case, code):
    paths, _, _ = series(tmp_path, 2)
    args = [*paths, "--from-masks", "-o", tmp_path / "o.tif"]
    named = {"missing_mask": "nothere.tif", "missing_like": "nolike.tif",
             "first_mask_without_crs": "early_2020-12-15_water.tif"}.get(case, "like.tif")
    if case == "missing_mask":
        args = [tmp_path / "nothere.tif", *args]
    elif case == "missing_like":
        args += ["--like", tmp_path / "nolike.tif"]
    elif case == "not_a_raster_like":
        (tmp_path / "like.tif").write_text("x")
        args += ["--like", tmp_path / "like.tif"]
    elif case == "first_mask_without_crs":  # the earliest date: its grid is the output's
        args = [write_raster(tmp_path / named, np.zeros((N, N), "uint8"), transform=T2, crs=None, nodata=255), *args]
    else:
        rotated = T2 * Affine.rotation(10) if case == "rotated_like" else T2
        write_raster(tmp_path / "like.tif", np.zeros((8, 8), "uint8"), transform=rotated,
                     crs=None if case == "like_without_crs" else "EPSG:32631")
        args += ["--like", tmp_path / "like.tif"]
    r = run_cli("occurrence", *args)
    assert r.returncode == 1 and "Traceback" not in r.stderr and "Warning" not in r.stderr, r.stderr
    assert len([line for line in r.stderr.splitlines() if line.startswith("Error")]) == 1
    assert codes(r.stderr) == [code] and named in r.stderr
    assert not (tmp_path / "o.tif").exists()


def test_options_of_predicting_are_refused_with_masks_already_made(tmp_path):
    """--from-masks counted the masks as they were, whatever --bbox (no cut to its area),
    --threshold or --weights said, without a word: such options are refused, named."""
    import s2s2net_cli as s2n

    paths, _, _ = series(tmp_path, 2)
    r = run_cli("occurrence", *paths, "--from-masks", "-o", tmp_path / "o.tif", "--bbox", "3,45,3.1,45.1",
                "--threshold", 0.3, "--weights", "default")
    assert refused(r, "S2N-OCCURRENCE-MASKS-OPTIONS", 2, "Error: --weights default, --threshold 0.3, --bbox 3,45,3.1,45.1 "
                   "set how scenes are read and predicted, and --from-masks counts masks already made")
    with pytest.raises(s2n.UsageError, match=r"^bands=\(3, 2, 1, 4, 5, 6\) set how .* and from_masks=True counts .* like=PATH"):
        s2n.occurrence(paths, tmp_path / "o.tif", from_masks=True, bands="3,2,1,4,5,6")
    assert not (tmp_path / "o.tif").exists()


def test_a_mask_without_crs_is_named_and_skipped(tmp_path):
    paths, _, valid = series(tmp_path, 2)
    loose = write_raster(tmp_path / "loose.tif", np.zeros((N, N), "uint8"), transform=T2, crs=None, nodata=255)
    r = run_cli("occurrence", *paths, loose, "--from-masks", "-o", tmp_path / "o.tif", "--json")
    assert r.returncode == 1, r.stderr  # written from the two dates; a script is told one failed
    summary = json.loads(r.stdout)
    assert summary["counted"] == 2 and [s["code"] for s in summary["skipped"]] == ["S2N-MASK-NO-CRS"]
    assert np.array_equal(read(tmp_path / "o.tif")[0][2], valid)


def test_one_file_or_one_acquisition_named_twice_is_refused(tmp_path):
    """Counted twice, a date weighs twice in every pixel's occurrence: the same file by two
    names (a shell glob that overlaps another), and one acquisition's products (its L1C and its
    L2A, its .zip and its .SAFE) are refused; two tiles of one pass are two places, counted."""
    paths, water, valid = series(tmp_path, 3)
    r = run_cli("occurrence", *paths, tmp_path / "." / paths[0].name, "--from-masks", "-o", tmp_path / "o.tif")
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    again = tmp_path / "." / paths[0].name
    assert refused(r, "S2N-INPUT-TWICE", 1, again) and len(lines) == 1 and f"(also as {paths[0]})" in r.stderr
    l2a, l1c, next_tile = (shutil.copy(source, tmp_path / name) for name, source in (
        ("S2A_MSIL2A_20210315T103021_N0509_R108_T31UFU_20210315T140000_water.tif", paths[1]),
        ("S2A_MSIL1C_20210315T103021_N0500_R108_T31UFU_20210315T120000_water.tif", paths[1]),
        ("S2A_MSIL2A_20210315T103021_N0509_R108_T31UFV_20210315T140000_water.tif", paths[2])))
    r = run_cli("occurrence", paths[0], l2a, l1c, "--from-masks", "-o", tmp_path / "o.tif")
    said = f"{l1c}: holds the same acquisition as {l2a} (S2A 20210315T103021 R108 T31UFU)"
    assert refused(r, "S2N-OCCURRENCE-ACQUISITION-TWICE", 1, said)
    assert not (tmp_path / "o.tif").exists()
    item = shutil.copy(paths[1], tmp_path / "S2A_MSIL2A_20210315T103021_R108_T31UFU_20210316T000000.tif")  # an MPC id
    r = run_cli("occurrence", paths[0], l2a, item, "--from-masks", "-o", tmp_path / "o.tif")
    assert refused(r, "S2N-OCCURRENCE-ACQUISITION-TWICE", 1, f"{item}: holds the same acquisition as {l2a}")
    r = run_cli("occurrence", paths[0], l2a, next_tile, "--from-masks", "-o", tmp_path / "o.tif", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["counted"] == 3
    assert np.array_equal(read(tmp_path / "o.tif")[0][1], water)


def test_dates_from_a_csv_order_the_dates_and_a_date_that_is_not_iso_is_refused(tmp_path):
    """Masks whose names say no date, dated by --dates (by file name or path; an ISO date and time
    is its date). A 15/03/2021 was taken as text and ordered as text, a scene given two dates kept
    the last, without a word; now each is one line naming the file and line."""
    paths, _, _ = series(tmp_path, 3)
    named = [shutil.copy(p, tmp_path / f"lake_{k}.tif") for k, p in enumerate(paths)]  # names with no date
    good = tmp_path / "dates.csv"
    good.write_text(f"scene,date\nlake_0.tif,2021-03-15\n{named[1]},2021-01-15T10:20:30Z\nlake_2.tif,2021-02-15\n")
    r = run_cli("occurrence", *named, "--from-masks", "-o", tmp_path / "occ.tif", "--dates", good, "--json")
    assert r.returncode == 0, r.stderr
    assert [(Path(d["source"]).name, d["date"]) for d in json.loads(r.stdout)["dates"]] == [
        ("lake_1.tif", "2021-01-15"), ("lake_2.tif", "2021-02-15"), ("lake_0.tif", "2021-03-15")]
    # the same file named another way is dated; a row that names no scene (misspelt) leaves it undated,
    # which is said of the CSV, not as "give it one with --dates"
    other = tmp_path / "other.csv"
    other.write_text(f"scene,date\n{tmp_path / 'sub' / '..' / 'lake_0.tif'},2021-03-15\nlake_l.tif,2021-01-15\n"
                     f"lake_2.tif,2021-02-15\n")
    (tmp_path / "sub").mkdir()
    r = run_cli("occurrence", *named, "--from-masks", "-o", tmp_path / "occ3.tif", "--dates", other, "--json")
    assert r.returncode == 0, r.stderr
    dates = {Path(d["source"]).name: (d["date"], [w["code"] for w in d["warnings"]]) for d in json.loads(r.stdout)["dates"]}
    assert dates == {"lake_0.tif": ("2021-03-15", []), "lake_2.tif": ("2021-02-15", []),
                     "lake_1.tif": (None, ["S2N-DATES-NOT-NAMED"])}
    assert f"lake_1.tif: has no date, and {other} does not name it" in r.stderr
    for text, code, says in (("scene,date\nlake_0.tif,15/03/2021\n", "S2N-DATES-NOT-ISO", "line 2: '15/03/2021'"),
                             ("scene,date\nlake_0.tif,2021-03-15\nlake_1.tif,\n", "S2N-DATES-NOT-ISO", "line 3: ''"),
                             ("scene,date\nlake_0.tif,2021-03-15\nlake_0.tif,2021-04-15\n", "S2N-DATES-TWICE",
                              "line 3: lake_0.tif is given two dates, 2021-03-15 and 2021-04-15"),
                             ("name,when\nlake_0.tif,2021-03-15\n", "S2N-DATES-COLUMNS", "")):
        bad = tmp_path / "bad.csv"
        bad.write_text(text)
        r = run_cli("occurrence", *named, "--from-masks", "-o", tmp_path / "occ2.tif", "--dates", bad)
        assert refused(r, code, 1, f"{bad}: {says}") and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "occ2.tif").exists()


def test_a_renamed_product_is_dated_and_known_by_its_metadata(tmp_path, random_weights):
    """A product saved under another name (a download tool's id, a copy) was "undated" and
    counted beside its own original as a second date: its metadata (PRODUCT_START_TIME,
    PRODUCT_URI) says its date and acquisition, whatever its file or folder is called."""
    from ..sources.product_factory import read_stack, virginia_window, write_product

    zipped = write_product(tmp_path, *read_stack(window=virginia_window(300, 121, 32)), as_zip=True)
    renamed = shutil.copy(zipped, tmp_path / "download_7f3a.zip")
    folder = write_product(tmp_path / "unzipped", *read_stack(window=virginia_window(300, 121, 32)))
    folder = folder.rename(tmp_path / "unzipped" / "lake_scene")  # a folder holding MTD_MSIL2A.xml
    fast = ("--weights", random_weights, "--tile-size", 32, "--overlap", 8)
    for product in (renamed, folder):
        r = run_cli("occurrence", product, "-o", tmp_path / "o.tif", *fast, "--json", "--overwrite")
        assert r.returncode == 0, r.stderr
        [date] = json.loads(r.stdout)["dates"]
        assert (date["date"], [w["code"] for w in date["warnings"]]) == ("2023-08-23", ["S2N-SCENE-SMALL"]), r.stdout
    r = run_cli("occurrence", renamed, "-o", tmp_path / "o.tif", *fast, "--overwrite")  # its summary line
    assert r.returncode == 0 and f"{tmp_path / 'o.tif'}: 1 date, water ever" in r.stderr, r.stderr
    r = run_cli("occurrence", zipped, renamed, "-o", tmp_path / "both.tif", *fast)
    assert refused(r, "S2N-OCCURRENCE-ACQUISITION-TWICE", 1, f"{renamed}: holds the same acquisition as {zipped} "
                                                             "(S2B 20230823T155559 R122 T18SVG)")
    assert not (tmp_path / "both.tif").exists()
    # predict writes the date on the mask, so its masks are dated whatever they are called
    r = run_cli("predict", renamed, "-o", tmp_path / "masks" / "lake.tif", *fast)
    assert r.returncode == 0, r.stderr
    with rasterio.open(tmp_path / "masks" / "lake.tif") as src:
        assert src.tags()["ACQUISITION_DATE"] == "2023-08-23"
        assert src.tags()["source_product"] == zipped.name.removesuffix(".SAFE.zip")  # the renamed zip's product
    r = run_cli("occurrence", tmp_path / "masks" / "lake.tif", "--from-masks", "-o", tmp_path / "m.tif", "--json")
    assert r.returncode == 0, r.stderr
    [date] = json.loads(r.stdout)["dates"]
    assert (date["date"], date["warnings"]) == ("2023-08-23", [])
    # and a second mask of the same product, its probability under yet another name, is that acquisition again
    r = run_cli("predict", zipped, "-o", tmp_path / "masks" / "p.tif", "--probability", *fast)
    assert r.returncode == 0, r.stderr
    r = run_cli("occurrence", tmp_path / "masks" / "lake.tif", tmp_path / "masks" / "p.tif", "--from-masks", "-o",
                tmp_path / "m2.tif")
    assert refused(r, "S2N-OCCURRENCE-ACQUISITION-TWICE", 1, f"{tmp_path / 'masks' / 'p.tif'}: holds the same "
                                                             f"acquisition as {tmp_path / 'masks' / 'lake.tif'}")
    assert not (tmp_path / "m2.tif").exists()


def test_two_stac_items_of_one_acquisition_are_refused_by_their_product_names(tmp_path, random_weights):
    """Earth Search names its items S2A_31UFU_20210315_0_L2A and _L1C: no orbit or time, so the
    two items of one pass were counted as two dates. Their ``s2:product_uri`` names the product;
    by it they are one acquisition, as the product's own .zip is; the next pass is another."""
    from ..sources.product_factory import write_band_files, write_item

    data = np.random.default_rng(0).integers(300, 3000, (6, 32, 32))
    bands = write_band_files(tmp_path / "bands", data, Affine(10, 0, 600000, 0, -10, 5000000), "EPSG:32631")
    uri = "S2A_MSIL{}_20210315T103021_N0509_R108_T31UFU_20210315T140000.SAFE"
    l2a = write_item(tmp_path / "S2A_31UFU_20210315_0_L2A.json", bands, {"s2:product_uri": uri.format("2A")})
    l1c = write_item(tmp_path / "S2A_31UFU_20210315_0_L1C.json", bands, {"s2:product_uri": uri.format("1C")})
    later = write_item(tmp_path / "S2A_31UFU_20210325_0_L2A.json", bands,
                       {"s2:product_uri": "S2A_MSIL2A_20210325T103021_N0509_R108_T31UFU_20210325T140000.SAFE",
                        "datetime": "2021-03-25T10:30:21Z"})
    fast = ("--weights", random_weights, "--tile-size", 32, "--overlap", 8)
    r = run_cli("occurrence", l2a, l1c, "-o", tmp_path / "o.tif", *fast)
    assert refused(r, "S2N-OCCURRENCE-ACQUISITION-TWICE", 1, f"{l1c}: holds the same acquisition as {l2a} (S2A "
                                                             "20210315T103021 R108 T31UFU)")
    product = tmp_path / uri.format("2A")
    product.mkdir()  # an empty .SAFE folder: refused by its name before it is read
    r = run_cli("occurrence", l2a, product, "-o", tmp_path / "o.tif", *fast)
    assert refused(r, "S2N-OCCURRENCE-ACQUISITION-TWICE", 1, f"{product}: holds the same acquisition as {l2a}")
    zipped = tmp_path / uri.format("2A").replace(".SAFE", ".SAFE.zip")  # a name that is no file: said so first
    assert refused(run_cli("occurrence", l2a, zipped, "-o", tmp_path / "o.tif", *fast), "S2N-FILE-NOT-FOUND", 1, zipped)
    r = run_cli("occurrence", l2a, later, "-o", tmp_path / "o.tif", *fast, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["counted"] == 2, r.stderr
