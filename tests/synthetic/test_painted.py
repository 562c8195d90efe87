import csv
import json

import numpy as np
import rasterio
from affine import Affine

from s2s2net_cli.synthetic.painted import (
    BACKGROUND,
    background_truth,
    make_painted_pair,
    paint_pair,
    path_radiance,
    swir_phase,
)
from s2s2net_cli.synthetic.scenes import CLASSES, SPECTRA, WATER_CLASSES, class_fractions

from ..conftest import codes, refused, run_cli, write_raster

LAND = (0.04, 0.08, 0.05, 0.35, 0.20, 0.10)  # green vegetation: MNDWI -0.43, NDVI 0.75
WATER = (0.05, 0.045, 0.03, 0.015, 0.008, 0.005)
MARSH = (0.05, 0.06, 0.05, 0.10, 0.065, 0.04)  # MNDWI -0.04, NDVI 0.33: an index is not sure


def background(h=60, w=80, phase=(0, 0)):
    """Land with a lake (rows 10-29, columns 10-39) and a patch of marsh (rows 40-49, columns
    50-69), uint16 x 10000, B11/B12 constant over the 2 x 2 blocks of a 20 m grid of ``phase``."""
    refl = np.empty((6, h, w), np.float32)
    refl[:] = np.asarray(LAND, np.float32)[:, None, None]
    refl[:, 10:30, 10:40] = np.asarray(WATER, np.float32)[:, None, None]
    refl[:, 40:50, 50:70] = np.asarray(MARSH, np.float32)[:, None, None]
    rng = np.random.default_rng(0)
    refl *= 1 + 0.02 * rng.standard_normal(refl.shape).astype(np.float32)
    dy, dx = phase
    for b in (4, 5):  # copy each 20 m block's first pixel to its four 10 m pixels
        rows = np.clip((np.arange(h) + dy) // 2 * 2 - dy, 0, h - 1)
        cols = np.clip((np.arange(w) + dx) // 2 * 2 - dx, 0, w - 1)
        refl[b] = refl[b][rows][:, cols]
    return np.rint(refl * 10000).astype(np.uint16)


def test_background_truth_is_sure_inside_and_unsure_at_edges_and_marsh():
    data = background()
    truth = background_truth(data / 10000, np.ones(data.shape[1:], bool))
    assert np.all(truth[12:28, 12:38] == 1)  # inside the lake
    assert np.all(truth[:8, :] == 0) and np.all(truth[52:, :] == 0)  # open land
    assert np.all(np.isnan(truth[40:50, 50:70]))  # marsh: not sure
    assert np.all(np.isnan(truth[10, 10:40])) and np.all(np.isnan(truth[9, 10:40]))  # both sides of the shore
    assert np.all(np.isnan(truth[39, 50:70]))  # land next to the marsh
    nodata = np.ones(data.shape[1:], bool)
    nodata[:, :5] = False
    assert np.all(np.isnan(background_truth(data / 10000, nodata)[:, :6]))


def test_painted_scene_is_the_exact_linear_mix_and_its_truth_exact_where_painted():
    data = background()
    for seed in range(4):
        p = paint_pair(data, "L2A", Affine(10, 0, 300000, 0, -10, 5000000), "EPSG:32633", seed,
                       blur=0, noise=0, texture=0)
        painted = p.classes != BACKGROUND
        assert painted.any() and p.mask.shape == (300, 400)
        n = len(CLASSES)
        frac = class_fractions(np.where(painted, p.classes, n).astype(np.uint8), n + 1)
        expected = np.einsum("hwk,kb->bhw", frac[..., :n], p.spectra) + frac[..., n][None] * (data / 10000)
        # B02..B08 mixed at 10 m exactly (to the uint16 rounding)
        assert np.abs(p.scene[:4] / 10000 - expected[:4]).max() <= 0.5e-4 + 1e-7
        # the painted 2 m pixels carry their class's truth; unpainted ones the background's
        assert np.array_equal(p.mask[painted], np.isin(p.classes[painted], WATER_CLASSES).astype(np.float32))
        sure = np.repeat(np.repeat(background_truth(data / 10000, np.ones((60, 80), bool)), 5, 0), 5, 1)
        assert np.array_equal(p.mask[~painted], sure[~painted], equal_nan=True)
        # water (flood water included) is far darker in NIR than the land it was painted over
        cell = p.mask.reshape(60, 5, 80, 5).mean(axis=(1, 3))
        assert np.median(p.scene[3][cell == 1]) < 0.5 * np.median(p.scene[3][cell == 0])


def test_swir_stays_on_the_backgrounds_20m_grid():
    for phase in [(0, 0), (1, 0), (0, 1), (1, 1)]:
        data = background(phase=phase)
        assert swir_phase(data[4]) == phase
        p = paint_pair(data, "L2A", Affine(10, 0, 0, 0, -10, 0), "EPSG:32633", 5)
        dy, dx = phase
        b11 = p.scene[4].astype(np.int64)[dy:, dx:]
        h, w = b11.shape[0] // 2 * 2, b11.shape[1] // 2 * 2
        blocks = b11[:h, :w].reshape(h // 2, 2, w // 2, 2)
        # within a 20 m block only the noise on what was painted differs (sd at most 0.004)
        spread = blocks.max(axis=(1, 3)) - blocks.min(axis=(1, 3))
        assert np.median(spread) == 0 and spread.max() < 200


def test_l1c_background_gets_painted_water_with_its_path_radiance():
    data = background()
    haze = np.array([0.07, 0.04, 0.025, 0.012, 0.002, 0.001], np.float32)
    hazy = np.rint(data + haze[:, None, None] * 10000).astype(np.uint16)
    valid = np.ones(data.shape[1:], bool)
    assert np.array_equal(path_radiance(hazy / 10000, valid, "L2A"), np.zeros(6, np.float32))
    offset = path_radiance(hazy / 10000, valid, "L1C")
    darkest = np.percentile(hazy / 10000, 0.5, axis=(1, 2))
    assert np.allclose(offset, np.clip(darkest - np.asarray(SPECTRA["dark_water"]), 0, None), atol=1e-6)
    assert offset[0] > 0.05 and offset[4] < 0.01
    l1c = paint_pair(hazy, "L1C", Affine(10, 0, 0, 0, -10, 0), "EPSG:32633", 2, blur=0, noise=0, texture=0)
    l2a = paint_pair(hazy, "L2A", Affine(10, 0, 0, 0, -10, 0), "EPSG:32633", 2, blur=0, noise=0, texture=0)
    assert np.allclose(l1c.spectra - l2a.spectra, offset[None], atol=1e-6)


def test_synth_background_writes_pairs_on_the_backgrounds_grid(tmp_path):
    transform = Affine(10, 0, 440000, 0, -10, 4180000)
    bg = write_raster(tmp_path / "real.tif", background(), transform=transform, crs="EPSG:32618", nodata=0)
    with rasterio.open(bg, "r+") as dst:
        dst.update_tags(level="L1C")
    r = run_cli(*["synth", str(tmp_path / "out"), "--background", str(bg), "--count", "2", "--size", "48",
                 "--seed", "7"])
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(open(tmp_path / "out" / "manifest.csv")))
    assert [row["id"] for row in rows] == ["synth_7", "synth_8"]
    for row in rows:
        with rasterio.open(tmp_path / "out" / row["image"]) as s, rasterio.open(tmp_path / "out" / row["mask"]) as m:
            assert s.crs.to_epsg() == 32618 and s.shape == (48, 48) and s.tags()["level"] == "L1C"
            col, r0 = (s.transform.c - transform.c) / 10, (transform.f - s.transform.f) / 10
            assert col == int(col) and r0 == int(r0) and 0 <= col <= 80 - 48 and 0 <= r0 <= 60 - 48
            assert m.transform == s.transform * Affine.scale(0.2) and m.shape == (240, 240)
            mask = m.read(1)
            assert np.isnan(mask).any() and np.nanmax(mask) <= 1
    again = make_painted_pair(bg, 48, 7)
    with rasterio.open(tmp_path / "out" / rows[0]["image"]) as s:
        assert np.array_equal(s.read(), again.scene)  # same seed, same pair
    # --landscape shapes generated landscapes: with a background it was dropped without a word; a
    # --size beyond the background gave pairs of its size, also without a word
    r = run_cli("synth", tmp_path / "shaped", "--background", bg, "--size", 48, "--landscape", "floods")
    assert refused(r, "S2N-SYNTH-BACKGROUND-SHAPED", 2, "--landscape floods shapes generated landscapes")
    assert not (tmp_path / "shaped").exists()
    r = run_cli("synth", tmp_path / "shaped", "--background", bg, "--size", 48, "--level", "L2A")
    assert refused(r, "S2N-BACKGROUND-LEVEL-CONTRADICTED", 2, f"Error: {bg}: is L1C (its tag level), and --level L2A")
    assert not (tmp_path / "shaped").exists()
    # and the other way: --bands and --offset say how a background is read; without one they were
    # taken and dropped (a generated scene is written in the model's order, without an offset)
    r = run_cli("synth", tmp_path / "plain", "--size", 16, "--bands", "3,2,1,4,5,6", "--offset", -1000)
    assert refused(r, "S2N-SYNTH-READING-NO-BACKGROUND", 2, "Error: --bands 3,2,1,4,5,6, --offset -1000 say how a "
                   "scene of --background is read, and none is given")
    assert not (tmp_path / "plain").exists()
    r = run_cli("synth", tmp_path / "large", "--background", bg, "--size", 100, "--json")
    assert r.returncode == 0 and codes(r.stderr) == ["S2N-BANDS-UNDESCRIBED", "S2N-BACKGROUND-SMALL"], r.stderr
    assert f"{bg}: is 80 x 60 px, smaller than --size 100: its pairs are 80 x 60 px" in r.stderr
    assert [w["code"] for w in json.loads(r.stdout)["warnings"]] == ["S2N-BANDS-UNDESCRIBED", "S2N-BACKGROUND-SMALL"]
    with rasterio.open(tmp_path / "large" / "synth_0_scene.tif") as s:
        assert s.shape == (60, 80)


def test_a_background_is_read_as_predict_reads_a_stack(tmp_path):
    """synth --background read a stack's first six bands as B02..B12 and its DNs as 10000 x
    reflectance: a baseline 04.00 background (DN + 1000) was painted 0.1 too bright beside water
    painted without it, and a stack of red, green, blue first painted wrongly, without a word.
    Now its bands are taken by their descriptions, --offset (or its own metadata) is applied,
    and predict's warnings are given: each gives the plain background's pair."""
    transform = Affine(10, 0, 440000, 0, -10, 4180000)
    plain = background()
    bg = write_raster(tmp_path / "real.tif", plain, transform=transform, crs="EPSG:32618", nodata=0,
                      descriptions=("B02", "B03", "B04", "B08", "B11", "B12"))
    shifted = write_raster(tmp_path / "shifted.tif", np.where(plain > 0, plain + 1000, 0).astype("uint16"),
                           transform=transform, crs="EPSG:32618", nodata=0,
                           descriptions=("B02", "B03", "B04", "B08", "B11", "B12"))
    turned = write_raster(tmp_path / "turned.tif", plain[[2, 1, 0, 3, 4, 5]], transform=transform, crs="EPSG:32618",
                          nodata=0, descriptions=("B04", "B03", "B02", "B08", "B11", "B12"))
    pairs = {}
    for name, path, extra in (("plain", bg, []), ("shifted", shifted, ["--offset", "-1000"]), ("turned", turned, []),
                              ("unshifted", shifted, [])):
        r = run_cli("synth", tmp_path / name, "--background", path, "--count", 1, "--size", 48, "--seed", 7,
                    "--level", "L2A", *extra)  # untagged: the level said
        assert r.returncode == 0, r.stderr
        with rasterio.open(tmp_path / name / "synth_7_scene.tif") as src:
            pairs[name] = src.read()
        if name == "unshifted":
            assert codes(r.stderr) == ["S2N-OFFSET-MISSING"]
        else:
            assert "Warning" not in r.stderr and "WARNING" not in r.stderr, r.stderr
    assert np.array_equal(pairs["shifted"], pairs["plain"]) and np.array_equal(pairs["turned"], pairs["plain"])
    assert not np.array_equal(pairs["unshifted"], pairs["plain"])


def test_synth_background_that_is_not_a_6_band_stack_is_one_line(tmp_path, scene_factory):
    bad = scene_factory(count=3)
    r = run_cli(*["synth", str(tmp_path / "out"), "--background", str(bad), "--count", "1", "--size", "16"])
    assert refused(r, "S2N-SCENE-BAND-COUNT", 1, bad) and len(r.stderr.strip().splitlines()) == 1
    assert not list((tmp_path / "out").glob("*.tif"))
    reflectance = write_raster(tmp_path / "reflectance.tif", background().astype("float32") / 10000,
                               transform=Affine(10, 0, 0, 0, -10, 0), crs="EPSG:32633", nodata=0,
                               descriptions=("B02", "B03", "B04", "B08", "B11", "B12"))
    r = run_cli("synth", tmp_path / "out", "--background", reflectance, "--size", 16)  # it said "a stack of scale 1"
    assert refused(r, "S2N-BACKGROUND-SCALE", 1, f"Error: {reflectance}: is read with scale 1, and a background "
                   "holds DNs of scale 10000 (uint16, 10000 x reflectance")
    assert not (tmp_path / "out").exists()


def test_chip_takes_several_manifests(tmp_path):
    for name, seed in (("a", 1), ("b", 20)):
        assert run_cli(*["synth", str(tmp_path / name), "--count", "1", "--size", "64", "--seed", str(seed)]).returncode == 0
    r = run_cli(*["chip", "--manifest", str(tmp_path / "a" / "manifest.csv"), "--manifest",
                 str(tmp_path / "b" / "manifest.csv"), "-o", str(tmp_path / "chips"), "--size", "32",
                 "--max-nodata", "1", "--json"])
    assert r.returncode == 0, r.stderr
    import geopandas

    ids = set(geopandas.read_file(tmp_path / "chips" / "index.gpkg").scene_id)
    assert ids == {"synth_1", "synth_20"}
    same = run_cli(*["chip", "--manifest", str(tmp_path / "a" / "manifest.csv"), "--manifest",
                     str(tmp_path / "a" / "manifest.csv"), "-o", str(tmp_path / "chips2")])
    assert refused(same, "S2N-PAIR-TWICE", 1, f"(line 2 of {tmp_path / 'a' / 'manifest.csv'}, then line 2 of "), \
        same.stderr  # one manifest given twice: each of its pairs twice
    assert not (tmp_path / "chips2").exists()


def test_an_untagged_background_is_painted_at_the_level_given_or_warned_of(tmp_path):
    """A background without a tag level (the bundled L1C sample has none) was painted as L2A
    without a word, its pairs tagged L2A and its water given no haze; --level L1C, refused with
    a background, could not say it. Now --level says it, and without it L2A is warned of."""
    transform = Affine(10, 0, 440000, 0, -10, 4180000)
    bg = write_raster(tmp_path / "real.tif", background(), transform=transform, crs="EPSG:32618", nodata=0,
                      descriptions=("B02", "B03", "B04", "B08", "B11", "B12"))
    tagged = write_raster(tmp_path / "tagged.tif", background(), transform=transform, crs="EPSG:32618", nodata=0,
                          descriptions=("B02", "B03", "B04", "B08", "B11", "B12"))
    with rasterio.open(tagged, "r+") as dst:
        dst.update_tags(level="L1C")
    r = run_cli("synth", tmp_path / "plain", "--background", bg, "--size", 48, "--seed", 3)
    assert r.returncode == 0 and codes(r.stderr) == ["S2N-BACKGROUND-NO-LEVEL"], r.stderr
    assert f"{bg}: has no tag level: painted as L2A (surface reflectance); if it is L1C" in r.stderr
    r = run_cli("synth", tmp_path / "l1c", "--background", bg, "--size", 48, "--seed", 3, "--level", "L1C")
    assert r.returncode == 0 and codes(r.stderr) == [], r.stderr
    r = run_cli("synth", tmp_path / "tagged", "--background", tagged, "--size", 48, "--seed", 3)
    assert r.returncode == 0 and codes(r.stderr) == [], r.stderr
    with rasterio.open(tmp_path / "plain" / "synth_3_scene.tif") as plain, \
            rasterio.open(tmp_path / "l1c" / "synth_3_scene.tif") as l1c, \
            rasterio.open(tmp_path / "tagged" / "synth_3_scene.tif") as same:
        assert plain.tags()["level"] == "L2A" and l1c.tags()["level"] == same.tags()["level"] == "L1C"
        assert np.array_equal(l1c.read(), same.read())  # as if the scene were tagged so
        assert not np.array_equal(plain.read(), l1c.read())  # the painted water's haze
