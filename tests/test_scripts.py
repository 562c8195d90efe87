import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_score_real_says_so_and_exits_0_without_the_real_scenes(tmp_path):
    r = subprocess.run(["bash", "scripts/score_real.sh", str(tmp_path / "work")], cwd=ROOT, capture_output=True,
                       text=True, env={"PATH": subprocess.os.environ["PATH"], "REALDATA": str(tmp_path / "none")},
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert "no real labelled scenes" in r.stdout and not (tmp_path / "work").exists()


def test_score_real_py_answers_a_wrong_command_line_with_its_usage_and_status_2(tmp_path):
    for args in ([], ["errors", str(tmp_path)], ["figure", str(tmp_path), str(tmp_path)], ["scores", "a", "b"]):
        r = subprocess.run([sys.executable, "scripts/score_real.py", *args], cwd=ROOT, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stderr.startswith("usage:") and "error-figure REALDATA WORK PNG" in r.stderr
        assert "Traceback" not in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_real_scenes_are_found_by_their_label(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    from score_real import labelled_scenes

    for name in ("flood_s2_6band_10m.tif", "flood_water_10m.tif", "coast_a_l2a.tif", "coast_a_water.tif",
                 "lonely_s2.tif", "two_a.tif", "two_b.tif", "two_water.tif"):
        (tmp_path / name).write_bytes(b"")
    found = {name: (image.name, label.name) for name, image, label in labelled_scenes(tmp_path)}
    assert found == {"flood": ("flood_s2_6band_10m.tif", "flood_water_10m.tif"),
                     "coast_a": ("coast_a_l2a.tif", "coast_a_water.tif")}  # "two" is ambiguous: skipped


def _real_scene_with_errors(tmp_path):
    """A 10 x 14 px labelled scene named as the Shanghai one, and a 2 m prediction of it with
    errors on and off the label's shores, listed in tmp_path/real_scores.json."""
    import json

    import numpy as np
    from affine import Affine

    from .conftest import write_raster

    label = np.zeros((10, 14), "uint8")
    label[:, :5] = 1  # water west of a straight shore
    label[:, 12] = 1  # a channel 10 m wide
    label[9, 9] = 255
    image = np.full((6, 10, 14), 1000, "uint16")
    image[:, 0:2, 8:10] = np.arange(1, 7)[:, None, None] * 100  # the dark land the model calls water
    water = np.repeat(np.repeat(label == 1, 5, 0), 5, 1).astype("uint8")
    water[:, 25:30] = 1  # one column of false water on the shore
    water[0:10, 40:50] = 1  # 2 x 2 px of false water away from it
    water[0:5, 0:5] = 0  # one missed water pixel, not on the shore
    water[0:5, 20:25] = 0  # one missed on the shore
    water[45:50, 45:50] = 1  # a 10 m pixel the label leaves out
    water[15:20, 65:70] = 1  # false water beside the channel
    water[25:30, 60:65] = 0  # a missed channel pixel
    (tmp_path / "real").mkdir()
    write_raster(tmp_path / "real" / "shanghai_lake_s2.tif", image)
    write_raster(tmp_path / "real" / "shanghai_lake_water.tif", label, nodata=255)
    prediction = write_raster(tmp_path / "pred.tif", water, transform=Affine(2, 0, 500000, 0, -2, 4000000))  # 2 m
    (tmp_path / "real_scores.json").write_text(json.dumps({"rows": [
        {"model": "m.safetensors", "images": [{"id": "shanghai_lake", "prediction": str(prediction)}]}]}))


def test_real_scene_errors_are_split_into_shore_and_the_rest(tmp_path, capsys):
    sys.path.insert(0, str(ROOT / "scripts"))
    from score_real import errors

    _real_scene_with_errors(tmp_path)
    errors(tmp_path / "real", tmp_path)
    out = capsys.readouterr().out
    assert "shanghai_lake: m.safetensors at 10 m: 57 water found, 15 false, 3 missed" in out
    flat = ", ".join(["0.100"] * 6)
    assert (f"false water: 73% touches labelled water (9% of that beside water under 50 m wide; mean reflectance "
            f"{flat}); the rest (4 px) mean reflectance 0.010, 0.020, 0.030, 0.040, 0.050, 0.060") in out
    # the 2 x 2 px piece's centre is (0.5, 8.5), rounded half to even
    assert "the rest in 1 piece; the largest: 4 px at row 0, col 8: 0.010, 0.020, 0.030, 0.040, 0.050, 0.060" in out
    assert (f"missed water: 67% touches labelled land (50% of that beside water under 50 m wide; mean reflectance "
            f"{flat}); the rest (1 px) mean reflectance {flat}") in out
    assert f"the rest in 1 piece; the largest: 1 px at row 0, col 0: {flat}" in out
    assert "in or beside labelled water 150 m wide or more: 0 missed (0 off the shores), 0 false" in out  # 50 m at most
    assert "F1 were every error off the shores put right: 0.8992" in out  # 2 * 58 / (2 * 58 + 11 + 2)


def test_error_pieces_are_8_connected_and_largest_first():
    import numpy as np

    sys.path.insert(0, str(ROOT / "scripts"))
    from score_real import error_pieces

    wrong = np.zeros((6, 8), bool)
    wrong[0, 6] = True  # 1 px
    wrong[1, 0] = wrong[2, 1] = True  # 2 px, joined at a corner
    wrong[4, 4:7] = True  # 3 px
    wrong[5, 0:2] = True  # 2 px, after the other two of that size in row order
    count, largest = error_pieces(wrong, 3)
    assert count == 4
    assert [(int(p.sum()), c) for p, c in largest] == [(3, (4.0, 5.0)), (2, (1.5, 0.5)), (2, (5.0, 0.5))]
    assert largest[1][0][1, 0] and largest[1][0][2, 1] and largest[1][0].sum() == 2
    assert error_pieces(np.zeros((3, 3), bool), 3) == (0, [])


def test_real_scene_error_figure_has_a_row_per_piece(tmp_path):
    from PIL import Image

    sys.path.insert(0, str(ROOT / "scripts"))
    from score_real import error_figure

    _real_scene_with_errors(tmp_path)
    error_figure(tmp_path / "real", tmp_path, tmp_path / "errors.png", side=8)
    with Image.open(tmp_path / "errors.png") as png:
        assert png.size == (12 * 70, 2 * 3 * 70)  # one piece of false and one of missed water off the shores


def test_real_scene_error_figure_refuses_a_prediction_off_the_labels_sub_grid(tmp_path):
    import json

    import numpy as np
    import pytest
    from affine import Affine

    from .conftest import write_raster

    sys.path.insert(0, str(ROOT / "scripts"))
    from score_real import error_figure

    _real_scene_with_errors(tmp_path)
    shifted = write_raster(tmp_path / "shifted.tif", np.ones((50, 70), "uint8"),
                           transform=Affine(2, 0, 500002, 0, -2, 4000000))  # 2 m east of the sub-grid
    scores = json.loads((tmp_path / "real_scores.json").read_text())
    scores["rows"][0]["images"][0]["prediction"] = str(shifted)
    (tmp_path / "real_scores.json").write_text(json.dumps(scores))
    with pytest.raises(SystemExit, match="not on the 5 x sub-grid"):
        error_figure(tmp_path / "real", tmp_path, tmp_path / "errors.png", side=8)
    assert not (tmp_path / "errors.png").exists()


def test_real_backgrounds_stack_brings_swir_from_its_own_20m_grid_by_nearest(tmp_path):
    # as in the Virginia scene: the 20 m grid starts 10 m west of the 10 m one
    import numpy as np
    import rasterio
    from affine import Affine

    from .conftest import write_raster

    sys.path.insert(0, str(ROOT / "scripts"))
    from real_backgrounds import stack

    from s2s2net_cli.bands import BAND_NAMES

    rng = np.random.default_rng(0)
    files = {}
    for i, band in enumerate(BAND_NAMES):
        coarse = band in ("B11", "B12")
        shape = (6, 7) if coarse else (12, 12)
        transform = Affine(20, 0, 435720, 0, -20, 4179460) if coarse else Affine(10, 0, 435730, 0, -10, 4179460)
        files[band] = write_raster(tmp_path / f"{band}.tif", rng.integers(1, 5000, shape).astype("uint16"),
                                   transform=transform, crs="EPSG:32618")
    stack(files, tmp_path / "stack.tif", "L1C")
    with rasterio.open(tmp_path / "stack.tif") as s, rasterio.open(files["B11"]) as b11, rasterio.open(files["B02"]) as b02:
        data = s.read()
        assert s.shape == (12, 12) and s.transform == b02.transform and s.tags()["level"] == "L1C"
        assert s.descriptions == ("B02", "B03", "B04", "B08", "B11", "B12")
        assert np.array_equal(data[0], b02.read(1))
        coarse = b11.read(1)
        # 10 m column c (centre 435735 + 10 c) lies in 20 m column (c + 1) // 2
        expected = coarse[np.arange(12) // 2][:, (np.arange(12) + 1) // 2]
        assert np.array_equal(data[4], expected)


def test_wide_water_is_what_a_150_m_opening_keeps_grown_by_2_px(tmp_path):
    import numpy as np
    from affine import Affine

    from .conftest import write_raster

    sys.path.insert(0, str(ROOT / "scripts"))
    from score_real import error_maps

    label = np.zeros((20, 30), "uint8")
    label[:, :16] = 1  # a river 160 m wide
    label[:, 25:27] = 1  # a canal 20 m wide
    water = np.repeat(np.repeat(label == 1, 5, 0), 5, 1).astype("uint8")
    water[50:55, 50:55] = 0  # a boat in the river, missed
    write_raster(tmp_path / "image.tif", np.full((6, 20, 30), 1000, "uint16"))
    write_raster(tmp_path / "label.tif", label, nodata=255)
    write_raster(tmp_path / "pred.tif", water, transform=Affine(2, 0, 500000, 0, -2, 4000000))
    e = error_maps(tmp_path / "image.tif", tmp_path / "label.tif", tmp_path / "pred.tif")
    assert e["wide"][:, :18].all() and not e["wide"][:, 18:].any()  # the river and 2 px beside it; not the canal
    assert (e["missed"] & e["wide"]).sum() == 1 and e["missed"][10, 10]


def test_score_real_manifest_lists_the_bolivia_chips_apart(tmp_path):
    import csv
    import subprocess

    real, work = tmp_path / "real", tmp_path / "work"
    (real / "sen1floods11_bolivia" / "orig").mkdir(parents=True)
    for name in ("Bolivia_1_s2_6band_10m.tif", "Bolivia_1_water_10m.tif", "Bolivia_2_s2_6band_10m.tif",
                 "Bolivia_2_water_10m.tif"):
        (real / "sen1floods11_bolivia" / name).write_bytes(b"")
    (real / "sen1floods11_bolivia" / "orig" / "Bolivia_1_LabelHand.tif").write_bytes(b"")
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "score_real.py"), "manifest", str(real), str(work)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(open(work / "bolivia.csv")))
    assert [row["id"] for row in rows] == ["Bolivia_1", "Bolivia_2"] and rows[0]["mask"].endswith("Bolivia_1_water_10m.tif")
    assert list(csv.DictReader(open(work / "real.csv"))) == []  # the chips are not among the validation scenes


def test_holdout_errors_counts_each_class_and_distance_from_the_truths_edge(tmp_path, capsys):
    import numpy as np

    from .conftest import write_raster

    sys.path.insert(0, str(ROOT / "scripts"))
    from holdout_errors import main

    from s2s2net_cli.synthetic.scenes import CLASS, make_pair

    pairs = [make_pair(32, seed=s) for s in (7, 8)]
    classes = np.concatenate([p.classes.ravel() for p in pairs])
    valid = ~np.isnan(np.concatenate([p.mask.ravel() for p in pairs]))
    kinds = np.bincount(classes[valid], minlength=len(CLASS))
    water_kind = max(("turbid_water", "clear_water", "flood_water"), key=lambda k: kinds[CLASS[k]])
    assert kinds[CLASS[water_kind]] > 0 and kinds[CLASS["forest"]] > 0
    for p in pairs:
        truth = np.nan_to_num(p.mask, nan=0).astype("uint8")
        write_raster(tmp_path / f"synth_{p.seed}__right.tif", truth, nodata=255)
        wrong = truth.copy()
        wrong[p.classes == CLASS[water_kind]] = 0  # every pixel of one kind of water missed
        wrong[p.classes == CLASS["forest"]] = 1  # every forest pixel called water
        write_raster(tmp_path / f"synth_{p.seed}__wrong.tif", wrong, nodata=255)
    main([str(tmp_path), "right", "wrong", "--seed", "7", "--count", "2", "--size", "32"])
    right, wrong = capsys.readouterr().out.split("== wrong: ")
    water = int(sum(((p.mask == 1)).sum() for p in pairs))
    assert right.startswith(f"== right: F1 1.0000: {water} water pixels found, 0 false, 0 missed")
    missed, forest = kinds[CLASS[water_kind]], kinds[CLASS["forest"]]
    assert f"{water - missed} water pixels found, {forest} false, {missed} missed" in wrong
    assert f"missed {missed:7d} (100.00%)" in wrong and f"called water {forest:7d} (100.00%)" in wrong
    counts = {line.split()[0]: [int(v) for v in line.split()[1:]] for line in wrong.splitlines()[2:4]}
    assert sum(counts["missed"]) == missed and sum(counts["false"]) == forest


def test_holdout_errors_bands_a_missed_lake_by_its_rings():
    import numpy as np

    sys.path.insert(0, str(ROOT / "scripts"))
    from holdout_errors import Breakdown

    from s2s2net_cli.synthetic.scenes import CLASS

    classes = np.full((20, 20), CLASS["grass"], "uint8")
    classes[5:15, 5:15] = CLASS["clear_water"]  # a 10 x 10 px lake: rings of 36, 28, 20, 12 and 4 px
    truth = (classes == CLASS["clear_water"]).astype("float32")
    truth[0] = np.nan  # nodata, far from the lake
    b = Breakdown()
    b.add(classes, truth, np.zeros((20, 20), bool))  # the lake missed
    assert b.missed_at.tolist() == [36, 28, 20, 16, 0, 0] and b.false_at.sum() == 0
    b.add(classes, truth, np.ones((20, 20), bool))  # everything called water: the land's nodata row left out
    assert b.false[CLASS["grass"]] == 400 - 100 - 20 and b.false_at[0] == 40  # the 4 x 10 px beside the lake
    assert b.pixels[CLASS["grass"]] == 2 * 280 and b.found == 100


def test_holdout_errors_refuses_absent_predictions_in_one_line(tmp_path):
    r = subprocess.run([sys.executable, "scripts/holdout_errors.py", str(tmp_path), "default", "--count", "2"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr == f"{tmp_path}/synth_9000__default.tif: no such prediction (2 of 2 absent)\n"


def test_bolivia_folds_pools_counts_and_boundary_edges_over_the_folds(tmp_path):
    import json

    def doc(tp, fp, fn, edges, chip_bf1):
        images = [{"boundary_f1": b} for b in chip_bf1]
        return {"rows": [{"model": "ndwi", "tp": tp, "fp": fp, "fn": fn, "tn": 10, "edges": edges, "images": images}]}

    paths = []
    for k, (tp, fp, fn, edges, chips) in enumerate([(8, 2, 0, [3, 4, 2, 4], [0.5, None]), (2, 0, 8, [1, 4, 2, 4], [1.0])]):
        paths.append(tmp_path / f"fold{k}.json")
        paths[-1].write_text(json.dumps(doc(tp, fp, fn, edges, chips)))
    r = subprocess.run([sys.executable, "scripts/bolivia_folds.py", "pool", *map(str, paths)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stderr)
    assert row["f1"] == round(2 * 10 / (20 + 2 + 8), 4) and row["pixels"] == 40
    # edges pooled: precision 4/8, recall 4/8 -> 0.5; the chips' mean leaves out the undefined one
    assert row["boundary_f1"] == 0.5 and row["mean_boundary_f1"] == 0.75


def test_wald_ceiling_allocates_each_blocks_count_to_its_highest_keys():
    sys.path.insert(0, str(ROOT / "scripts"))
    import numpy as np
    from wald_ceiling import FACTOR, allocate

    rng = np.random.default_rng(3)
    key = rng.random((2 * FACTOR, 3 * FACTOR))
    counts = np.array([[0, 7, 25], [1, 12, 24]])
    mask = allocate(key, counts)
    for i in range(2):
        for j in range(3):
            block, chosen = key[i * FACTOR:(i + 1) * FACTOR, j * FACTOR:(j + 1) * FACTOR], \
                mask[i * FACTOR:(i + 1) * FACTOR, j * FACTOR:(j + 1) * FACTOR]
            assert chosen.sum() == counts[i, j]
            if 0 < counts[i, j] < FACTOR * FACTOR:
                assert block[chosen].min() > block[~chosen].max()


def test_wald_ceiling_draws_perfect_fractions_back_to_a_blocky_label_exactly():
    sys.path.insert(0, str(ROOT / "scripts"))
    import numpy as np
    from wald_ceiling import FACTOR, by_fraction

    fraction = np.array([[0.0, 1.0, 1.0], [0.0, 0.0, 1.0]])  # whole cells: every rule gives them back
    rows = by_fraction(fraction, np.ones_like(fraction, bool), "perfect")
    truth = np.kron(fraction, np.ones((FACTOR, FACTOR))).astype(bool)
    assert (rows["perfect, nearest >= 0.5"] == truth).all() and (rows["perfect, count"] == truth).all()
    half = by_fraction(np.array([[0.4, 0.0]]), np.ones((1, 2), bool), "half")
    assert half["half, count"][:, :FACTOR].sum() == 10 and not half["half, nearest >= 0.5"].any()


def test_wald_ceiling_says_so_and_exits_0_without_the_bolivia_chips(tmp_path):
    r = subprocess.run([sys.executable, "scripts/wald_ceiling.py", str(tmp_path / "none"), str(tmp_path / "work")],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "nothing to measure" in r.stdout and not (tmp_path / "work").exists()


def test_wald_ceiling_zooms_a_degraded_scene_onto_a_finer_grid_keeping_its_gaps(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    import numpy as np
    import rasterio
    from affine import Affine
    from wald_ceiling import zoomed

    from .conftest import write_raster

    coarse = np.full((6, 4, 6), 0.2, "float32")
    coarse[3] = np.arange(6, dtype="float32") / 10  # B08 rises eastwards
    coarse[:, 1, 2] = np.nan
    transform = Affine(50, 0, 500000, 0, -50, 4000000)
    write_raster(tmp_path / "degraded.tif", coarse, transform=transform, nodata=float("nan"))
    zoomed(tmp_path / "degraded.tif", tmp_path / "zoomed.tif", 5)
    with rasterio.open(tmp_path / "zoomed.tif") as src:
        fine = src.read()
        assert src.transform == transform * Affine.scale(1 / 5) and src.shape == (20, 30)
    assert np.isnan(fine[:, 5:10, 10:15]).all() and np.isfinite(fine).sum() == 6 * (600 - 25)
    assert np.allclose(fine[0][np.isfinite(fine[0])], 0.2)
    row = fine[3, 0]
    assert np.allclose(row[2::5], np.arange(6) / 10)  # the cells' centres keep their values
    assert (np.diff(row[2:-3]) > 0).all()  # and between them it is interpolated


def test_wald_zoomed_pairs_writes_each_chip_zoomed_beside_its_label_and_the_folds(tmp_path):
    import csv

    import numpy as np
    import rasterio

    from .conftest import write_raster

    sys.path.insert(0, str(ROOT / "scripts"))
    from bolivia_folds import FOLDER, FOLDS

    folder = tmp_path / "real" / FOLDER
    folder.mkdir(parents=True)
    rng = np.random.default_rng(5)
    for fold in FOLDS:
        for c in fold:  # 23 x 22 px: cut to 20 x 20, two whole 2N blocks each way
            write_raster(folder / f"Bolivia_{c}_s2_6band_10m.tif",
                         rng.integers(500, 4000, (6, 23, 22)).astype("uint16"), nodata=0)
            write_raster(folder / f"Bolivia_{c}_water_10m.tif", rng.choice([0, 1, 255], (23, 22)).astype("uint8"),
                         nodata=255)
    r = subprocess.run([sys.executable, "scripts/wald_zoomed_pairs.py", str(tmp_path / "real"), str(tmp_path / "w")],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for k, held in enumerate(FOLDS):
        with open(tmp_path / "w" / f"fold{k}_train.csv") as f:
            rows = list(csv.DictReader(f))
        assert len(rows) == 10 and not {row["id"] for row in rows} & {f"Bolivia_{c}" for c in held}
    c = FOLDS[1][2]
    with rasterio.open(folder / f"Bolivia_{c}_water_10m.tif") as src:
        label, transform = src.read(1), src.transform
    with rasterio.open(tmp_path / "w" / "zoomed" / f"{c}_zoom5.tif") as scene, \
            rasterio.open(tmp_path / "w" / "zoomed" / f"{c}_label.tif") as mask:
        assert scene.transform == mask.transform == transform and scene.shape == mask.shape == (20, 20)
        assert (mask.read(1) == label[:20, :20]).all() and mask.nodata == 255
        zoomed = scene.read()
    assert np.isfinite(zoomed).all() and (zoomed > 0).all() and (zoomed < 0.5).all()  # reflectance, no gaps
