"""Wald's protocol: a scene degraded N x exactly as sources/degraded.py says, and scored by it."""

import csv
import json

import geopandas as gpd
import numpy as np
import pytest
import rasterio
from affine import Affine

from s2s2net_cli.sources.degraded import degrade_scene
from s2s2net_cli.sources.open import open_scene
from s2s2net_cli.sources.options import SceneOptions

from ..conftest import UTM, raises_rule, refused, run_cli, write_raster

T10 = Affine(10, 0, 500000, 0, -10, 4000000)
BANDS = ("B02", "B03", "B04", "B08", "B11", "B12")


def expected_degradation(dn: np.ndarray, valid: np.ndarray, n: int) -> np.ndarray:
    """The protocol written out cell by cell, loops and all, to hold the array code to."""
    h, w = (dn.shape[1] // (2 * n)) * 2, (dn.shape[2] // (2 * n)) * 2
    refl = dn.astype(np.float64) / 10000
    out = np.zeros((6, h, w))
    ok = np.zeros((h, w), bool)
    for r in range(h):
        for c in range(w):
            out[:, r, c] = refl[:, r * n:(r + 1) * n, c * n:(c + 1) * n].mean(axis=(1, 2))
            ok[r, c] = valid[r * n:(r + 1) * n, c * n:(c + 1) * n].all()
    swir_out, swir_ok = out.copy(), ok.copy()
    for r in range(h):
        for c in range(w):
            r0, c0 = r // 2 * 2, c // 2 * 2
            swir_out[4:, r, c] = out[4:, r0:r0 + 2, c0:c0 + 2].mean(axis=(1, 2))
            swir_ok[r, c] = ok[r0:r0 + 2, c0:c0 + 2].all()
    swir_out[:, ~swir_ok] = np.nan
    return swir_out


@pytest.mark.parametrize("n", [2, 5])
def test_a_scene_is_degraded_exactly_as_the_protocol_says(tmp_path, n):
    rng = np.random.default_rng(n)
    dn = rng.integers(100, 5000, (6, 23, 31)).astype("uint16")  # not whole blocks: cropped from the top left
    dn[:, 3, 7] = 0  # one nodata pixel: its coarse cell and that cell's SWIR block are invalid
    path = write_raster(tmp_path / "s.tif", dn, transform=T10, nodata=0)
    degraded = degrade_scene(open_scene(path), n, tmp_path / "d.tif")
    with rasterio.open(degraded.path) as src:
        data = src.read()
        assert src.crs.to_string() == UTM and src.transform == T10 * Affine.scale(n)  # same origin, N x coarser
        assert src.descriptions == ("B02", "B03", "B04", "B08", "B11", "B12") and src.dtypes[0] == "float32"
    want = expected_degradation(dn, (dn != 0).all(axis=0), n)
    assert data.shape == want.shape == (6, 23 // (2 * n) * 2, 31 // (2 * n) * 2)
    np.testing.assert_array_equal(np.isnan(data), np.isnan(want))
    np.testing.assert_allclose(data[~np.isnan(data)], want[~np.isnan(want)], rtol=1e-6)
    assert np.isnan(data[:, 0:2, (7 // n) // 2 * 2:(7 // n) // 2 * 2 + 2]).all()
    assert degraded.valid_fraction == pytest.approx(1 - 4 / (data.shape[1] * data.shape[2]))
    # read back as any stack: reflectance as written, no scale to guess
    assert open_scene(degraded.path, SceneOptions(scale=1.0)).scale == 1.0


def test_a_scene_smaller_than_one_block_is_refused_naming_the_option(tmp_path):
    path = write_raster(tmp_path / "s.tif", np.full((6, 9, 40), 900, "uint16"), transform=T10, nodata=0)
    with raises_rule("S2N-DEGRADE-SCENE-SMALL"):
        degrade_scene(open_scene(path), 5, tmp_path / "d.tif")
    assert not (tmp_path / "d.tif").exists()


def flood_pair(tmp_path, size=40):
    """A scene whose water is a ragged 10 m pattern (NDWI > 0 exactly there), its label the same."""
    rng = np.random.default_rng(3)
    water = rng.random((size, size)) < 0.35
    water[5:15, 5:25] = True
    dn = np.empty((6, size, size), "uint16")
    dn[:] = np.array([600, 700, 600, 3000, 2500, 1500])[:, None, None]  # land: NIR above green
    dn[:, water] = np.array([600, 900, 500, 300, 200, 100])[:, None]  # water: green above NIR
    scene = write_raster(tmp_path / "scene.tif", dn, transform=T10, nodata=0, descriptions=BANDS)
    label = write_raster(tmp_path / "label.tif", water.astype("uint8"), transform=T10, nodata=255)
    return scene, label, water, dn


def test_evaluate_degrade_scores_the_degraded_index_against_the_original_label(tmp_path):
    scene, label, water, dn = flood_pair(tmp_path, size=43)  # 43: three rows and columns past the whole blocks
    result = run_cli("evaluate", "--baseline", "ndwi", "--pair", scene, label, "--degrade", "5", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    row = doc["rows"][0]
    assert doc["degrade"] == 5 and row["images"][0]["degrade"] == 5 and row["images"][0]["warnings"] == []
    # by hand: reflectance averaged over 5 x 5, NDWI > 0 on the 50 m cells, copied to the 10 m label's cells
    refl = dn[:, :40, :40].astype(np.float64).reshape(6, 8, 5, 8, 5).mean(axis=(2, 4))
    ndwi = (refl[1] - refl[3]) / (refl[1] + refl[3])
    predicted = np.kron(ndwi > 0, np.ones((5, 5))).astype(bool)
    truth = water[:40, :40]
    assert row["pixels"] == 40 * 40  # the 3 px past the whole blocks are left out
    assert (row["tp"], row["fp"], row["fn"]) == ((predicted & truth).sum(), (predicted & ~truth).sum(),
                                                 (~predicted & truth).sum())
    # without --degrade the index sees every 10 m pixel and is perfect: the protocol is what tells
    native = json.loads(run_cli("evaluate", "--baseline", "ndwi", "--pair", scene, label, "--json").stdout)
    assert native["rows"][0]["f1"] == 1.0 and "degrade" not in native and row["f1"] < 0.9


def test_the_warnings_under_degrade_are_the_users_scenes_not_the_degraded_files(tmp_path):
    _, label, _, dn = flood_pair(tmp_path)
    undescribed = write_raster(tmp_path / "undescribed.tif", dn, transform=T10, nodata=0)
    result = run_cli("evaluate", "--baseline", "ndwi", "--pair", undescribed, label, "--degrade", "5", "--json")
    said = json.loads(result.stdout)["rows"][0]["images"][0]["warnings"]
    assert [w["code"] for w in said] == ["S2N-BANDS-UNDESCRIBED"] and said[0]["message"].startswith(f"{undescribed}: ")


def test_compare_degrade_runs_models_and_baselines_on_the_same_degraded_pixels(tmp_path, random_weights):
    scene, label, _, _ = flood_pair(tmp_path)
    plot = tmp_path / "detail.png"
    result = run_cli("compare", "--weights", random_weights, "--baseline", "ndwi", "--baseline", "mndwi-bilinear",
                     "--pair", scene, label, "--degrade", "5", "--json", "--plot", plot,
                     "--save-predictions", tmp_path / "pred")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["rows"]
    assert len({r["pixels"] for r in rows}) == 1 and rows[0]["pixels"] == 1600
    for r in rows:  # each prediction is on the scene's own 10 m grid: 5x the degraded scene's 50 m
        with rasterio.open(r["images"][0]["prediction"]) as src:
            assert src.transform == T10 and (src.width, src.height) == (40, 40)
            # its tags name the user's scene and the factor (they named the temporary "degraded.tif", scale 1)
            tags = src.tags()
            assert (tags["source_scene"], tags["degraded"], tags["scale"]) == (scene.name, "5x (Wald's protocol)",
                                                                                "10000")
    assert plot.stat().st_size > 0
    assert "pixels are about 50 m" not in result.stderr  # the degraded grid is not the user's scene
    # a CSV of the scores says they are the protocol's (it looked like one at the scene's own pixels)
    result = run_cli("compare", "--baseline", "ndwi", "--pair", scene, label, "--degrade", "5", "--csv",
                     tmp_path / "scores.csv")
    assert result.returncode == 0, result.stderr
    with open(tmp_path / "scores.csv", newline="") as fh:
        assert {row["degrade"] for row in csv.DictReader(fh)} == {"5"}
    assert "overall (pooled over all images) (scenes degraded 5x, Wald's protocol)" in result.stderr


@pytest.mark.parametrize("args, status, said", [
    (["--degrade", "6"], 2, "--degrade"),
    (["--degrade", "1"], 2, "--degrade"),
])
def test_a_factor_outside_2_to_5_is_a_usage_error(tmp_path, args, status, said):
    scene, label, _, _ = flood_pair(tmp_path)
    result = run_cli("evaluate", "--baseline", "ndwi", "--pair", scene, label, *args)
    assert result.returncode == status and said in result.stderr and "Traceback" not in result.stderr



@pytest.mark.parametrize("factor", [0, 1, 6])
def test_a_factor_outside_2_to_5_is_said_first_from_python_too(tmp_path, factor):
    """From Python, degrade=1 was "its pixels (10) are not finer than the scene degraded by
    degrade=1" (the pair checked before the factor), and degrade=0 ran without the protocol
    (evaluate) or with it turned off (chip); each is the factor's refusal, before any pair is read."""
    import s2s2net_cli as s2n

    scene, label, _, _ = flood_pair(tmp_path)
    with raises_rule("S2N-DEGRADE-FACTOR"):
        s2n.evaluate((scene, label), baselines="ndwi", degrade=factor)
    with raises_rule("S2N-DEGRADE-FACTOR"):
        s2n.chip((scene, label), tmp_path / "chips", degrade=factor)
    assert not (tmp_path / "chips").exists()


def test_bad_input_under_degrade_gets_one_line(tmp_path):
    scene, label, water, _ = flood_pair(tmp_path)
    small = write_raster(tmp_path / "small.tif", np.full((6, 8, 8), 900, "uint16"), transform=T10, nodata=0)
    result = run_cli("evaluate", "--baseline", "ndwi", "--pair", small, label, "--degrade", "5")
    assert refused(result, "S2N-DEGRADE-SCENE-SMALL", 1, small) and "--degrade 5" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    # a 60 m reference cannot test a 50 m degraded scene's detail; at --degrade 2 (20 m) it cannot either
    coarse = write_raster(tmp_path / "coarse.tif", water[::6, ::6].astype("uint8"),
                          transform=T10 * Affine.scale(6), nodata=255)
    for n in ("2", "5"):
        result = run_cli("evaluate", "--baseline", "ndwi", "--pair", scene, coarse, "--degrade", n)
        assert refused(result, "S2N-DEGRADE-REFERENCE-COARSE", 1, coarse) and f"--degrade {n}" in result.stderr
    assert run_cli("evaluate", "--baseline", "ndwi", "--pair", scene, coarse).returncode == 0


def test_chip_degrade_cuts_degraded_images_with_the_label_as_exact_truth(tmp_path):
    scene, label, water, dn = flood_pair(tmp_path, size=160)
    out = tmp_path / "chips"
    result = run_cli("chip", "--pair", scene, label, "-o", out, "--degrade", "5", "--size", "16", "--stride", "16",
                     "--val-fraction", "0", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    index = gpd.read_file(out / "index.gpkg")
    assert summary["chips"]["train"] == len(index) == 4 and set(index["degrade"]) == {5}
    assert set(index["label_scale"]) == {1}  # the 10 m label is the degraded scene's 5x grid: exact truth
    first = index.sort_values(["row", "col"]).iloc[0]
    with rasterio.open(out / first["image"]) as img, rasterio.open(out / first["mask"]) as msk:
        assert img.transform == T10 * Affine.scale(5) and (img.width, img.height) == (16, 16)
        assert msk.transform == T10 and (msk.width, msk.height) == (80, 80)
        np.testing.assert_array_equal(msk.read(1), water[:80, :80].astype("uint8"))
        want = dn[:, :80, :80].astype(np.float64).reshape(6, 16, 5, 16, 5).mean(axis=(2, 4))
        want[4:] = np.kron(want[4:].reshape(2, 8, 2, 8, 2).mean(axis=(2, 4)), np.ones((2, 2)))
        np.testing.assert_allclose(img.read(), np.round(want), atol=1)


@pytest.mark.filterwarnings("error::RuntimeWarning")  # the degraded scene's NaN are written as nodata, quietly
def test_chip_degrade_skips_and_counts_chips_with_no_valid_coarse_cell(tmp_path):
    scene, label, _, dn = flood_pair(tmp_path, size=160)
    holed = dn.copy()
    holed[:, :80, :80] = 0
    holed[:, 80:, :80:3] = 0  # a nodata pixel in every coarse cell of the lower left quarter
    holed[:, 0, 80] = 0  # and one in the upper right: its coarse cell's SWIR block is nodata in a chip written
    scene = write_raster(tmp_path / "holed.tif", holed, transform=T10, nodata=0, descriptions=BANDS)
    result = run_cli("chip", "--pair", scene, label, "-o", tmp_path / "chips", "--degrade", "5", "--size", "16",
                     "--val-fraction", "0", "--max-nodata", "0.5", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["skipped"]["no_valid_coarse_cell"] == 2 and summary["chips"]["train"] == 2
    with rasterio.open(tmp_path / "chips" / "images" / "holed_r0_c16.tif") as src:
        assert (src.read()[:, :2, :2] == 0).all() and (src.read()[:, 2:, 2:] > 0).all()
