import json

import numpy as np
import pytest
import rasterio
from affine import Affine
from rasterio.warp import transform_bounds

from s2s2net_cli.evaluation.evaluate import score_pair
from s2s2net_cli.indices import bilinear_to_fine
from s2s2net_cli.inference.baselines import IndexBaseline
from s2s2net_cli.inference.predictor import Predictor
from s2s2net_cli.manifest import Pair
from s2s2net_cli.metrics import Counts, count

from ..conftest import refused, run_cli, write_polygons, write_raster

T10 = Affine(10, 0, 500000, 0, -10, 4000000)
T2 = T10 @ Affine.scale(1 / 5)


def test_counts_and_scores_on_hand_made_cases():
    pred = np.array([[1, 1, 0, 0]], bool)
    ref = np.array([[1, 0, 1, 0]], bool)
    valid = np.ones_like(pred)
    c = count(pred, ref, valid)
    assert (c.tp, c.fp, c.fn, c.tn) == (1, 1, 1, 1)
    s = c.scores()
    assert s["f1"] == pytest.approx(0.5) and s["iou"] == pytest.approx(1 / 3)
    assert s["precision"] == 0.5 and s["recall"] == 0.5 and s["pixels"] == 4
    # nodata pixels are not counted at all
    c = count(pred, ref, np.array([[True, False, False, True]]))
    assert (c.tp, c.fp, c.fn, c.tn) == (1, 0, 0, 1)
    # all land everywhere: F1, IoU, precision and recall are undefined, not 0 or 1
    c = count(np.zeros((3, 3), bool), np.zeros((3, 3), bool), np.ones((3, 3), bool))
    assert c.scores()["f1"] is None and c.scores()["iou"] is None and c.scores()["recall"] is None
    # pooled counts add up
    total = Counts()
    total += Counts(1, 2, 3, 4)
    total += Counts(1, 0, 0, 0)
    assert total.scores()["f1"] == pytest.approx(4 / (4 + 2 + 3))


@pytest.fixture
def truth_pair(tmp_path):
    """A 20 x 24 px scene and a 2 m truth with thin features, plus the same truth as a
    perfect 2 m prediction file."""
    rng = np.random.default_rng(0)
    scene = write_raster(tmp_path / "scene.tif", rng.integers(100, 3000, (6, 20, 24)).astype("uint16"), transform=T10, nodata=0)
    truth = np.zeros((100, 120), np.float32)
    truth[10:40, 10:60] = 1  # a lake
    truth[:, 77:80] = 1  # a 6 m wide canal
    truth[60:63, :] = 1
    pred = write_raster(tmp_path / "pred.tif", truth.astype("uint8"), transform=T2, nodata=255)
    return scene, truth, pred


def test_a_perfect_prediction_scores_perfect_on_a_10m_reference(tmp_path, truth_pair):
    scene, truth, pred = truth_pair
    fraction = truth.reshape(20, 5, 24, 5).mean(axis=(1, 3))
    label10 = (fraction >= 0.5).astype(np.int16)
    label10[0, 0] = -1  # int16 with -1 for nodata
    ref = write_raster(tmp_path / "label10.tif", label10, transform=T10, nodata=-1)
    c = score_pair(pred, Pair(scene, ref, "x"))
    assert c.fp == 0 and c.fn == 0 and c.pixels == 20 * 24 - 1
    assert c.scores()["f1"] == 1.0


def test_same_grid_finer_and_other_crs_references(tmp_path, truth_pair):
    scene, truth, pred = truth_pair
    same = write_raster(tmp_path / "same.tif", truth, transform=T2, nodata=None)
    c = score_pair(pred, Pair(scene, same, "x"))
    assert (c.fp, c.fn, c.pixels) == (0, 0, truth.size)
    # a 1 m reference (each 2 m cell split in four) scored by nearest
    fine = np.repeat(np.repeat(truth, 2, 0), 2, 1)
    fine[:10] = np.nan
    ref = write_raster(tmp_path / "fine.tif", fine, transform=T2 @ Affine.scale(0.5), nodata=float("nan"))
    c = score_pair(pred, Pair(scene, ref, "x"))
    assert (c.fp, c.fn) == (0, 0) and c.pixels == fine.size - 10 * fine.shape[1]
    # a reference with a nodata value given by the user
    marked = np.where(truth == 1, 7, 0).astype("uint8")
    marked[:5] = 99
    ref = write_raster(tmp_path / "marked.tif", marked, transform=T2)
    c = score_pair(pred, Pair(scene, ref, "x"), nodata=99)
    assert (c.fp, c.fn) == (0, 0) and c.pixels == truth.size - 5 * 120


def test_water_polygons_are_scored_on_the_predictions_grid(tmp_path, truth_pair):
    """A vector reference has no grid: it is drawn on the 2 m prediction's, land wherever no
    polygon lies, and scores as the raster it traces; a lake left out of it is that many misses."""
    scene, truth, pred = truth_pair
    polygons = write_polygons(tmp_path / "water.gpkg", truth, T2)
    c = score_pair(pred, Pair(scene, polygons, "x"))
    assert (c.tp, c.fp, c.fn, c.pixels) == (int(truth.sum()), 0, 0, truth.size)
    assert c.scores()["boundary_f1"] == 1.0
    no_lake = truth.copy()
    no_lake[10:40, 10:60] = 0
    no_lake[10:40, 77:80] = 1  # the canal crossed the lake
    c = score_pair(pred, Pair(scene, write_polygons(tmp_path / "canals.shp", no_lake, T2), "x"))
    assert (c.fp, c.fn, c.pixels) == (int(truth.sum() - no_lake.sum()), 0, truth.size)


def test_compare_draws_and_scores_a_vector_reference_as_its_raster(tmp_path, truth_pair):
    scene, truth, _ = truth_pair
    raster = write_raster(tmp_path / "water.tif", truth.astype("uint8"), transform=T2, nodata=255)
    polygons = write_polygons(tmp_path / "water.geojson", truth, T2, to_crs="EPSG:4326")
    rows = {}
    for label in (raster, polygons):
        r = run_cli("compare", "--pair", scene, label, "--baseline", "mndwi", "--baseline", "ndwi", "--json",
                    "--plot", tmp_path / f"{label.suffix[1:]}.png")
        assert r.returncode == 0, r.stderr
        rows[label] = {row["model"]: row for row in json.loads(r.stdout)["rows"]}
        assert (tmp_path / f"{label.suffix[1:]}.png").stat().st_size > 0
    for model, row in rows[raster].items():
        assert rows[polygons][model]["pixels"] == row["pixels"] == truth.size
        assert rows[polygons][model]["f1"] == pytest.approx(row["f1"], abs=0.01)


def test_a_reference_in_a_zip_or_at_a_url_is_read_as_gdal_reads_it(tmp_path, truth_pair):
    """A reference given as a GDAL path (/vsizip/labels.zip/water.tif) or a URL was taken for a
    local file, its // made one ("https:/host/...: file not found"), as a scene's is not: it is
    read as GDAL reads it, scored as the same file, and an unreachable one says so."""
    import zipfile

    scene, truth, _ = truth_pair
    raster = write_raster(tmp_path / "water.tif", truth.astype("uint8"), transform=T2, nodata=255)
    with zipfile.ZipFile(tmp_path / "labels.zip", "w") as z:
        z.write(raster, "labels/water.tif")
    zipped = f"/vsizip/{tmp_path / 'labels.zip'}/labels/water.tif"
    (tmp_path / "m.csv").write_text(f"image,mask\nscene.tif,{zipped}\n")
    rows = []
    for given in (["--pair", scene, raster], ["--pair", scene, zipped], ["--manifest", tmp_path / "m.csv"]):
        r = run_cli("evaluate", *given, "--baseline", "ndwi", "--json")
        assert r.returncode == 0, r.stderr
        rows.append([{k: v for k, v in row.items() if k != "images"} for row in json.loads(r.stdout)["rows"]])
    assert rows[1] == rows[0] == rows[2]
    r = run_cli("evaluate", "--pair", scene, "https://example.invalid/water.tif", "--baseline", "ndwi")
    assert refused(r, "S2N-MASK-UNREADABLE", 1, "https://example.invalid/water.tif: ")
    # one line, without GDAL's "RuntimeWarning: HTTP response code on ...: 0" of the vector driver's try
    r = run_cli("predict", "https://example.invalid/scene.tif", "-o", tmp_path / "w.tif", process=True)
    assert refused(r, "S2N-SCENE-UNREADABLE", 1) and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_nodata_in_the_image_is_left_out(tmp_path, truth_pair):
    scene, truth, _ = truth_pair
    data = rasterio.open(scene).read()
    data[:, :4, :] = 0  # four 10 m rows without data
    scene2 = write_raster(tmp_path / "holes.tif", data, transform=T10, nodata=0)
    ref = write_raster(tmp_path / "ref.tif", truth, transform=T2)
    out = tmp_path / "p.tif"
    Predictor(IndexBaseline("mndwi")).predict_scene(scene2, out)
    c = score_pair(out, Pair(scene2, ref, "x"))
    assert c.pixels == truth.size - 4 * 5 * 120


def test_baselines_agree_with_numpy(tmp_path):
    rng = np.random.default_rng(5)
    data = rng.integers(100, 4000, (6, 15, 17)).astype("uint16")
    data[:, 3, 3] = 0
    scene = write_raster(tmp_path / "s.tif", data, transform=T10, nodata=0)
    g, nir, swir = (data[i].astype(np.float64) for i in (1, 3, 4))
    valid = (data != 0).any(axis=0)
    with np.errstate(invalid="ignore"):
        ndwi, mndwi = (g - nir) / (g + nir), (g - swir) / (g + swir)
    from skimage.filters import threshold_otsu

    expected = {"ndwi": ndwi > 0, "mndwi": mndwi > 0, "mndwi-otsu": mndwi > threshold_otsu(mndwi[valid], nbins=2000)}
    for name, want in expected.items():
        out = tmp_path / f"{name}.tif"
        Predictor(IndexBaseline(name)).predict_scene(scene, out)
        got = rasterio.open(out).read(1)
        want2 = np.repeat(np.repeat(np.where(valid, want, 255), 5, 0), 5, 1)
        mismatch = (got != want2).mean()
        assert mismatch <= (0.02 if "otsu" in name else 0)  # Otsu: histogram bins may move a pixel or two
    # the -bilinear baselines: each index interpolated to the 2 m cell centres, then > 0
    for name, index in (("ndwi-bilinear", ndwi), ("mndwi-bilinear", mndwi)):
        out = tmp_path / f"{name}.tif"
        Predictor(IndexBaseline(name)).predict_scene(scene, out)
        got = rasterio.open(out).read(1)
        fine = bilinear_to_fine(index.astype(np.float32), valid)
        defined = got != 255
        assert defined.mean() > 0.9 and np.array_equal(got[defined], (fine[defined] > 0).astype(got.dtype))
    # bilinear: at the centre 2 m cell of each 10 m pixel the value is the pixel's own index
    fine = bilinear_to_fine(mndwi.astype(np.float32), valid)
    assert np.allclose(fine[2::5, 2::5][valid], mndwi[valid], atol=1e-5)
    # 2 m cell (7, 10) lies on 10 m row 1, 60 % of the way from column 1 to column 2
    assert fine[7, 10] == pytest.approx(mndwi[1, 1] * 0.4 + mndwi[1, 2] * 0.6, abs=1e-5)


def test_compare_json_has_one_row_per_model_and_writes_csv_and_plot(tmp_path, random_weights):
    from s2s2net_cli.synthetic.scenes import make_pair, write_pair

    p = make_pair(40, seed=12, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    r = run_cli("compare", "--weights", random_weights, "--baseline", "mndwi", "--baseline", "mndwi-bilinear",
                "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "--tile-size", 32, "--json",
                "--csv", tmp_path / "t.csv", "--plot", tmp_path / "t.png", "--save-predictions", tmp_path / "preds")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [row["model"] for row in doc["rows"]] == ["random.safetensors", "mndwi", "mndwi-bilinear"]
    for row in doc["rows"]:
        assert set(row) >= {"model", "f1", "iou", "precision", "recall", "pixels", "images"}
        assert row["pixels"] == 200 * 200 and len(row["images"]) == 1
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
    # a legend under the panels says what the colours of the masks mean (there was none)
    from PIL import Image

    from s2s2net_cli.evaluation.report import MASK_COLOURS

    with Image.open(tmp_path / "t.png") as png:
        strip = np.asarray(png.convert("RGB"))[-30:]
    below = {tuple(int(c) for c in rgb) for rgb in strip.reshape(-1, 3)}
    assert all(tuple(bytes.fromhex(colour[1:])) in below for colour in MASK_COLOURS.values())
    assert len((tmp_path / "t.csv").read_text().splitlines()) == 1 + 2 * 3
    assert len(list((tmp_path / "preds").glob("*.tif"))) == 3
    r = run_cli("evaluate", "--baseline", "mndwi", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "--json")
    doc = json.loads(r.stdout)["rows"][0]  # evaluate's JSON has compare's shape, one row
    assert doc["model"] == "mndwi" and set(doc) >= {"f1", "iou", "precision", "recall", "pixels"}
    assert set(doc["images"][0]) >= {"image", "reference", "f1", "iou", "precision", "recall", "pixels"}


def test_a_plot_of_many_images_draws_those_the_models_differ_most_on(tmp_path):
    """compare --plot drew a row of 3 inches an image: 230 images made a PNG 69040 px high. It
    draws PLOT_MAX_IMAGES of them, those whose F1 differ most between models, and says so."""
    from PIL import Image

    from s2s2net_cli.evaluation.evaluate import ModelScores
    from s2s2net_cli.evaluation.report import PLOT_MAX_IMAGES, plotted_pairs
    from s2s2net_cli.synthetic.scenes import make_pair, write_pair

    n = PLOT_MAX_IMAGES + 3
    pairs = [Pair(f"s{k}.tif", f"m{k}.tif", id=f"p{k}") for k in range(n)]
    spread = {n - 3: 0.5, n - 2: 0.2, n - 1: 0.1}  # the others agree, or one model's F1 is undefined
    results = [ModelScores("a", images=[{"id": p.id, "f1": 0.5} for p in pairs]),
               ModelScores("b", images=[{"id": p.id, "f1": None if k == 1 else 0.5 + spread.get(k, 0.0)}
                                        for k, p in enumerate(pairs)])]
    chosen = [p.id for p in plotted_pairs(pairs, results)]
    # the three that differ, then on ties the first ones, in the table's order
    assert chosen == [f"p{k}" for k in [*range(PLOT_MAX_IMAGES - 3), n - 3, n - 2, n - 1]]
    assert [p.id for p in plotted_pairs(pairs[:5], results)] == [p.id for p in pairs[:5]]
    rows = ["image,mask"]
    for k in range(n):
        write_pair(make_pair(40, seed=100 + k, nodata_margin=False), tmp_path / f"s{k}.tif", tmp_path / f"m{k}.tif")
        rows.append(f"s{k}.tif,m{k}.tif")
    (tmp_path / "pairs.csv").write_text("\n".join(rows) + "\n")
    r = run_cli("compare", "--baseline", "ndwi", "--baseline", "mndwi", "--manifest", tmp_path / "pairs.csv",
                "--plot", tmp_path / "t.png", "--json")
    assert r.returncode == 0, r.stderr
    assert all(len(row["images"]) == n for row in json.loads(r.stdout)["rows"])  # the table scores all
    with Image.open(tmp_path / "t.png") as png:
        assert png.height == round(100 * (3.5 * PLOT_MAX_IMAGES + 0.8))  # was 3 inches an image, all of them


def test_the_plots_titles_name_each_model_inside_the_picture(tmp_path, monkeypatch):
    """Rows of 3 inches held square panels of 3 inches: each prediction's two-line title (the
    model's name over its F1) lost its first line above the top row, and lay over the images of
    the row above. Each title lies inside the picture, above its panel and under the row above."""
    import matplotlib.figure
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from s2s2net_cli.synthetic.scenes import make_pair, write_pair

    figures = []
    savefig = matplotlib.figure.Figure.savefig

    def kept(self, *args, **kwargs):
        figures.append(self)
        return savefig(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", kept)
    rows = ["image,mask"]
    for k in range(2):
        write_pair(make_pair(40, seed=30 + k, nodata_margin=False), tmp_path / f"s{k}.tif", tmp_path / f"m{k}.tif")
        rows.append(f"s{k}.tif,m{k}.tif")
    (tmp_path / "pairs.csv").write_text("\n".join(rows) + "\n")
    window = rasterio.windows.Window(0, 0, 34, 40)  # a tall scene and its label: panels taller than wide
    for name, factor in (("s0", 1), ("m0", 5)):
        with rasterio.open(tmp_path / f"{name}.tif") as src:
            part = rasterio.windows.Window(0, 0, window.width * factor, window.height * factor)
            profile = {**src.profile, "width": part.width, "height": part.height,
                       "transform": src.window_transform(part)}
            with rasterio.open(tmp_path / f"tall_{name}.tif", "w", **profile) as dst:
                dst.write(src.read(window=part))
    (tmp_path / "tall.csv").write_text("image,mask\ntall_s0.tif,tall_m0.tif\n")
    (tmp_path / "one.csv").write_text("\n".join(rows[:2]) + "\n")
    for manifest in ("pairs.csv", "one.csv", "tall.csv"):  # one row: its titles against the picture's top
        r = run_cli("compare", "--baseline", "ndwi", "--baseline", "mndwi", "--manifest", tmp_path / manifest,
                    "--plot", tmp_path / "t.png", "--overwrite")
        assert r.returncode == 0, r.stderr
        if manifest == "tall.csv":  # and with one model: three panels a row
            r = run_cli("compare", "--baseline", "ndwi", "--manifest", tmp_path / manifest, "--plot",
                        tmp_path / "t.png", "--overwrite")
            assert r.returncode == 0, r.stderr
            figures.pop(-2)
        fig = figures.pop()
        canvas = FigureCanvasAgg(fig)  # drawn again as it was saved (pyplot's canvas went with the figure)
        canvas.draw()
        renderer = canvas.get_renderer()
        grid = [ax for ax in fig.axes]
        titles = [ax.title.get_text() for ax in grid]
        assert [t.split("\n")[0] for t in titles[2:4]] == (["ndwi"] if manifest == "tall.csv" else ["ndwi", "mndwi"])
        for ax in grid:
            if not ax.title.get_text():
                continue
            title, panel = ax.title.get_window_extent(renderer), ax.get_window_extent(renderer)
            assert 0 <= title.y0 and title.y1 <= fig.bbox.y1, ax.title.get_text()  # inside the picture
            assert title.y0 >= panel.y1 - 1  # above its own panel
            above = [other.get_window_extent(renderer) for other in grid
                     if other.get_window_extent(renderer).y0 > panel.y1]
            assert all(title.y1 <= box.y0 for box in above), ax.title.get_text()  # under the row above


def test_the_plots_reference_is_drawn_over_the_predictions_extent(tmp_path):
    """The reference panel read the whole reference file into the panel: under --bbox or --aoi,
    or for a reference of more (or less) ground than the scene, or in another CRS, it was drawn
    stretched beside predictions of another extent. It is drawn over the prediction's."""
    from s2s2net_cli.evaluation.report import _mask_preview

    water = np.zeros((100, 100), "uint8")
    water[:, :50] = 1  # the western half is water
    reference = write_raster(tmp_path / "ref.tif", water, transform=T2, nodata=255)
    prediction = write_raster(tmp_path / "pred.tif", np.zeros((100, 40), "uint8"), transform=T2, nodata=255)
    assert np.array_equal(_mask_preview(reference, (50, 20), grid=prediction), np.ones((50, 20)))  # the west alone
    east = write_raster(tmp_path / "east.tif", np.zeros((100, 40), "uint8"),
                        transform=T2 * Affine.translation(60, 0), nodata=255)
    assert np.array_equal(_mask_preview(reference, (50, 20), grid=east), np.zeros((50, 20)))
    assert _mask_preview(reference, (50, 50)).mean() == 0.5  # without a grid, the file as it is


def test_a_reference_of_part_of_its_scene_is_told_the_bbox_that_predicts_only_that(tmp_path):
    """A label of one lake in a whole tile had the whole tile predicted (minutes) without a word.
    Where a raster reference covers under half of its scene, evaluate and compare say so with
    the --bbox of what it covers; given, every labelled pixel is scored, and nothing is said."""
    import re

    from s2s2net_cli.synthetic.scenes import make_pair, write_pair

    write_pair(make_pair(64, seed=21, nodata_margin=False), tmp_path / "s.tif", tmp_path / "m.tif")
    with rasterio.open(tmp_path / "m.tif") as src:  # the north-west quarter of the label
        part = rasterio.windows.Window(0, 0, src.width // 2, src.height // 2)
        profile = {**src.profile, "width": part.width, "height": part.height, "transform": src.window_transform(part)}
        with rasterio.open(tmp_path / "quarter.tif", "w", **profile) as dst:
            dst.write(src.read(window=part))
    whole = run_cli("evaluate", "--baseline", "ndwi", "--pair", tmp_path / "s.tif", tmp_path / "quarter.tif", "--json")
    assert whole.returncode == 0, whole.stderr
    part_of = [w for w in json.loads(whole.stdout)["rows"][0]["images"][0]["warnings"]
               if w["code"] != "S2N-SCENE-SMALL"]  # (a test scene's size)
    (said,) = part_of
    assert said["code"] == "S2N-REFERENCE-PART-OF-SCENE" and "covers 25% of its scene s.tif" in said["message"]
    bbox = re.search(r"--bbox (\S+) ", said["message"]).group(1)
    cut = run_cli("compare", "--baseline", "ndwi", "--pair", tmp_path / "s.tif", tmp_path / "quarter.tif",
                  f"--bbox={bbox}", "--json")
    assert cut.returncode == 0, cut.stderr
    row, first = json.loads(cut.stdout)["rows"][0], json.loads(whole.stdout)["rows"][0]
    assert said_codes(row) == [] and row["pixels"] == first["pixels"] == (64 * 5 // 2) ** 2
    assert row["f1"] == pytest.approx(first["f1"])  # an index reads each pixel alone: the same scores
    full = run_cli("evaluate", "--baseline", "ndwi", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "--json")
    assert said_codes(json.loads(full.stdout)["rows"][0]) == []


def said_codes(row: dict) -> list:
    """The codes of the warnings of a JSON row's first image, without a test scene's size's."""
    return [w["code"] for w in row["images"][0]["warnings"] if w["code"] != "S2N-SCENE-SMALL"]


def test_evaluate_with_flips_scores_what_predict_with_flips_writes(tmp_path, random_weights):
    from s2s2net_cli.synthetic.scenes import make_pair, write_pair

    p = make_pair(40, seed=13, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    r = run_cli("evaluate", "--weights", random_weights, "--flips", "--pair", tmp_path / "s.tif", tmp_path / "m.tif",
                "--tile-size", 32, "--overlap", 8, "--json", "--save-predictions", tmp_path / "preds")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)["rows"][0]
    assert doc["model"] == "random.safetensors+flips" and doc["pixels"] == 200 * 200
    assert doc["images"][0]["prediction"].endswith("__random_flips.tif")  # not the plain model's file
    r = run_cli("predict", tmp_path / "s.tif", "-o", tmp_path / "p.tif", "--weights", random_weights, "--flips",
                "--tile-size", 32, "--overlap", 8)
    assert r.returncode == 0, r.stderr
    with rasterio.open(doc["images"][0]["prediction"]) as a, rasterio.open(tmp_path / "p.tif") as b:
        assert np.array_equal(a.read(), b.read()) and a.tags()["model"] == "random.safetensors+flips"


@pytest.mark.parametrize("case", ["no_overlap", "empty_reference", "unknown_baseline", "other_bands"])
def test_bad_input_gets_one_line(tmp_path, truth_pair, random_weights, case):
    scene, truth, _ = truth_pair
    ref = write_raster(tmp_path / "ref.tif", truth, transform=T2)
    args = ["--baseline", "mndwi"]
    if case == "no_overlap":
        ref = write_raster(tmp_path / "far.tif", truth, transform=Affine(2, 0, 0, 0, -2, 0))
    elif case == "empty_reference":
        ref = write_raster(tmp_path / "empty.tif", np.full_like(truth, np.nan), transform=T2, nodata=float("nan"))
    elif case == "unknown_baseline":
        args = ["--baseline", "magic"]
    elif case == "other_bands":
        from s2s2net_cli.bands import BandSpec
        from s2s2net_cli.checkpoint import WeightsCard, save_weights
        from s2s2net_cli.model import ModelConfig, S2S2Net

        card = WeightsCard(model=ModelConfig(in_channels=4), bands=BandSpec(("B02", "B03", "B04", "B08"), 10000, (0.1,) * 4, (0.1,) * 4))
        w = save_weights(tmp_path / "rgbn.safetensors", S2S2Net(config=card.model).state_dict(), card)
        args = ["--weights", w]
    r = run_cli("evaluate", *args, "--pair", scene, ref)
    assert r.returncode == (2 if case == "unknown_baseline" else 1)
    lines = r.stderr.strip().splitlines()
    assert "Traceback" not in r.stderr
    if case != "unknown_baseline":  # Click's usage errors carry the usage line too
        assert len(lines) == 1 and lines[0].startswith("Error: "), r.stderr
    expected = {"no_overlap": "far.tif", "empty_reference": "empty.tif", "unknown_baseline": "magic",
                "other_bands": "rgbn.safetensors"}[case]
    assert expected in r.stderr


def test_a_model_given_twice_is_the_one_named(tmp_path, truth_pair, random_weights):
    """compare --weights A --baseline ndwi --baseline ndwi named A (the first model, not the one
    given twice) and asked whether a weights file was given twice."""
    scene, truth, _ = truth_pair
    ref = write_raster(tmp_path / "ref.tif", truth, transform=T2)
    r = run_cli("compare", "--weights", random_weights, "--baseline", "ndwi", "--baseline", "ndwi", "--pair", scene, ref)
    assert refused(r, "S2N-EVALUATE-MODEL-TWICE", 1, "Error: ndwi: two models have the same name (one given twice?)")
    r = run_cli("compare", "--baseline", "ndwi", "--weights", random_weights, "--weights", random_weights, "--pair",
                scene, ref)
    assert refused(r, "S2N-EVALUATE-MODEL-TWICE", 1, f"Error: {random_weights}: two models")
    # one file by two paths was scored twice, under two names
    import shutil

    shutil.copy(random_weights, tmp_path / "w.safetensors")
    r = run_cli("compare", "--weights", "w.safetensors", "--weights", tmp_path / "w.safetensors", "--pair", scene, ref,
                cwd=tmp_path)
    assert refused(r, "S2N-EVALUATE-MODEL-TWICE", 1, f"Error: {(tmp_path / 'w.safetensors').resolve()}: two models")
    # said before any weights load: a file that is no weights file, given twice, is named as given twice
    (tmp_path / "notes.safetensors").write_text("not weights")
    r = run_cli("compare", "--weights", "notes.safetensors", "--weights", "notes.safetensors", "--pair", scene, ref,
                cwd=tmp_path)
    assert refused(r, "S2N-EVALUATE-MODEL-TWICE", 1, "two models")


def test_network_options_beside_water_indices_alone_are_refused(tmp_path, truth_pair, random_weights):
    """compare --baseline ndwi --threshold 0.3 scored NDWI as without it: the threshold, flips,
    precision and full head are the network's, and no network ran. With a model they apply."""
    import s2s2net_cli as s2n

    scene, truth, _ = truth_pair
    ref = write_raster(tmp_path / "ref.tif", truth, transform=T2)
    r = run_cli("compare", "--baseline", "ndwi", "--baseline", "mndwi", "--threshold", 0.3, "--flips", "--pair",
                scene, ref)
    assert refused(r, "S2N-NETWORK-OPTIONS-NO-MODEL", 2, "Error: --flips, --threshold 0.3 set how the network runs, "
                   "and only water indices are scored (ndwi, mndwi): give --weights too, or leave them out")
    r = run_cli("evaluate", "--baseline", "ndwi", "--precision", 32, "--pair", scene, ref)
    assert refused(r, "S2N-NETWORK-OPTIONS-NO-MODEL", 2, "--precision 32 set how")
    with pytest.raises(s2n.UsageError, match=r"^full_head=True set how the network runs"):
        s2n.evaluate((scene, ref), baselines="ndwi", full_head=True)
    r = run_cli("compare", "--weights", random_weights, "--baseline", "ndwi", "--threshold", 0.3, "--precision", 32,
                "--pair", scene, ref, "--json")
    assert r.returncode == 0, r.stderr
    assert [row["model"] for row in json.loads(r.stdout)["rows"]] == ["random.safetensors", "ndwi"]


def test_pairs_a_manifest_marks_for_training_are_warned_of_as_no_hold_out(tmp_path, truth_pair):
    """A manifest chip reads its splits from (split=train, val, test) scored every row as if held
    out, the scenes chip trained on too, without a word: those rows are warned of."""
    scene, truth, _ = truth_pair
    for name in "abc":  # three labels of one scene (one pair given twice is refused)
        write_raster(tmp_path / f"ref_{name}.tif", truth, transform=T2)
    (tmp_path / "pairs.csv").write_text(f"image,mask,id,split\n{scene},ref_a.tif,a,train\n{scene},ref_b.tif,b,test\n"
                                        f"{scene},ref_c.tif,c,val\n")
    r = run_cli("compare", "--manifest", tmp_path / "pairs.csv", "--baseline", "ndwi", "--baseline", "mndwi", "--json")
    assert r.returncode == 0, r.stderr
    images = json.loads(r.stdout)["rows"][0]["images"]
    warned = {img["id"]: "S2N-EVALUATE-TRAINING-PAIR" in [w["code"] for w in img["warnings"]] for img in images}
    assert warned == {"a": True, "b": False, "c": True}
    lines = [line for line in r.stderr.splitlines() if "S2N-EVALUATE-TRAINING-PAIR" in line]
    assert len(lines) == 2 and "split=train" in lines[0] and "split=val" in lines[1]  # once each, not once a model


def test_evaluate_and_compare_read_an_area_of_interest_as_predict_does(tmp_path):
    import geopandas as gpd
    from shapely.geometry import box

    from s2s2net_cli.synthetic.scenes import make_pair, write_pair

    p = make_pair(40, seed=12, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    t = p.transform
    aoi = tmp_path / "aoi.gpkg"  # the bottom-right 8 x 8 px, its corner on the 32 px lattice
    gpd.GeoDataFrame(geometry=[box(t.c + 320, t.f - 400, t.c + 400, t.f - 320)], crs=p.crs).to_file(aoi)
    r = run_cli("evaluate", "--baseline", "mndwi", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "--aoi", aoi,
                "--json")
    assert r.returncode == 0, r.stderr
    overall = json.loads(r.stdout)["rows"][0]
    refl = p.scene.astype(np.float32) / 10000
    water = np.repeat(np.repeat((refl[1] - refl[4]) / (refl[1] + refl[4]) > 0, 5, 0), 5, 1)[160:, 160:]
    truth = p.mask[160:, 160:] == 1
    assert overall["pixels"] == 40 * 40
    assert (overall["tp"], overall["fp"], overall["fn"]) == (int((water & truth).sum()), int((water & ~truth).sum()),
                                                             int((~water & truth).sum()))
    r = run_cli("compare", "--baseline", "mndwi", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "--aoi", aoi,
                "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["rows"][0]["pixels"] == 40 * 40
    r = run_cli("evaluate", "--baseline", "mndwi", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "--bbox", "0,0,1,1")
    assert refused(r, "S2N-AOI-NO-OVERLAP", 1, "the scene s.tif")
    with rasterio.open(tmp_path / "s.tif") as src:  # where the scene is, for a mistyped box
        covers = ",".join(f"{v:.4f}" for v in transform_bounds(src.crs, "EPSG:4326", *src.bounds))
    assert f"the scene s.tif, which covers {covers} (W,S,E,N in longitude/latitude) [" in r.stderr
    # the scene's own metres, where degrees are taken
    r = run_cli("evaluate", "--baseline", "mndwi", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "--bbox",
                f"{t.c:.0f},{t.f - 400:.0f},{t.c + 400:.0f},{t.f:.0f}")
    assert refused(r, "S2N-BBOX-LONGITUDE", 2, "not a projected CRS's metres")


def test_compare_scores_every_model_on_the_same_pixels(tmp_path, random_weights):
    # where green + SWIR1 is 0 MNDWI is undefined (the baseline writes nodata there) while
    # the network still maps the pixel: compare leaves it out of every model's counts
    from s2s2net_cli.synthetic.scenes import make_pair, write_pair

    p = make_pair(40, seed=12, nodata_margin=False)
    p.scene[1, 5:9, 5:25] = 0
    p.scene[4, 5:9, 5:25] = 0
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    r = run_cli("compare", "--weights", random_weights, "--baseline", "mndwi", "--baseline", "ndwi", "--pair",
                tmp_path / "s.tif", tmp_path / "m.tif", "--tile-size", 32, "--json")
    assert r.returncode == 0, r.stderr
    pixels = {row["model"]: row["pixels"] for row in json.loads(r.stdout)["rows"]}
    assert pixels == dict.fromkeys(("random.safetensors", "mndwi", "ndwi"), 200 * 200 - 4 * 20 * 25)
    r = run_cli("evaluate", "--weights", random_weights, "--pair", tmp_path / "s.tif", tmp_path / "m.tif",
                "--tile-size", 32, "--json")
    assert json.loads(r.stdout)["rows"][0]["pixels"] == 200 * 200  # scored alone, the network counts them all


def test_boundary_f1_counts_edges_within_the_tolerance():
    from s2s2net_cli.metrics import boundary_counts, boundary_f1

    ref = np.zeros((40, 40), bool)
    ref[10:30, 10:30] = True
    valid = np.ones_like(ref)
    assert boundary_f1(boundary_counts(ref, ref, valid)) == 1.0
    shifted = np.roll(ref, 2, axis=1)  # edges 2 px off: within the tolerance of 2
    assert boundary_f1(boundary_counts(shifted, ref, valid, 2)) == 1.0
    assert boundary_f1(boundary_counts(shifted, ref, valid, 1)) < 0.7
    far = np.roll(ref, 6, axis=1)
    assert boundary_f1(boundary_counts(far, ref, valid, 2)) < 0.6
    # no edge found where the reference has them scores 0, as does an edge where it has none;
    # only two masks without any edge leave it undefined
    assert boundary_f1(boundary_counts(np.zeros_like(ref), ref, valid)) == 0.0
    assert boundary_f1(boundary_counts(ref, np.zeros_like(ref), valid)) == 0.0
    elsewhere = np.zeros_like(ref)
    elsewhere[33:38, 33:38] = True
    assert boundary_f1(boundary_counts(elsewhere, ref, valid)) == 0.0
    assert boundary_f1(boundary_counts(np.zeros_like(ref), np.zeros_like(ref), valid)) is None


def test_scores_read_block_by_block_keep_the_whole_images_boundary_f1(tmp_path):
    # the reference is read in blocks; each is grown by 3 px so that an edge beside a block's
    # side, and the edge 2 px beyond it in the next block, count as in the whole image
    from scipy import ndimage

    from s2s2net_cli.evaluation.evaluate import score_predictions
    from s2s2net_cli.metrics import boundary_counts, boundary_f1

    rng = np.random.default_rng(4)
    ref = ndimage.gaussian_filter(rng.random((70, 90)), 3) > 0.5
    pred = np.roll(ref, (1, 2), axis=(0, 1)) ^ (rng.random(ref.shape) > 0.97)
    ref_u8 = ref.astype("uint8")
    ref_u8[:4, :10] = 255  # nodata
    write_raster(tmp_path / "ref.tif", ref_u8, transform=T2, nodata=255)
    write_raster(tmp_path / "pred.tif", pred.astype("uint8"), transform=T2, nodata=255)
    pair = Pair(tmp_path / "s.tif", tmp_path / "ref.tif", "a")
    valid = ref_u8 != 255
    whole = boundary_counts(pred, ref, valid)
    expected = count(pred, ref, valid)
    for block in (1024, 16, 7):
        c = score_predictions([tmp_path / "pred.tif"], pair, block=block)[0]
        assert (c.tp, c.fp, c.fn, c.tn) == (expected.tp, expected.fp, expected.fn, expected.tn)
        assert c.edges == tuple(int(n) for n in whole)
    assert 0.5 < c.scores()["boundary_f1"] == boundary_f1(whole) < 1
    # two pixels off is within the tolerance: a copy moved by 2 scores 1, one moved by 3 less
    assert boundary_f1(boundary_counts(np.roll(ref, 2, axis=1), ref, np.ones_like(ref))) > 0.97
    assert boundary_f1(boundary_counts(np.roll(ref, 3, axis=1), ref, np.ones_like(ref))) < 0.9


def test_compare_reports_each_models_boundary_f1_in_json_csv_and_table(tmp_path):
    from s2s2net_cli.synthetic.scenes import make_pair, write_pair

    p = make_pair(40, seed=12, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    r = run_cli("compare", "--baseline", "mndwi", "--baseline", "ndwi", "--pair", tmp_path / "s.tif", tmp_path / "m.tif",
                "--json", "--csv", tmp_path / "scores.csv")
    assert r.returncode == 0, r.stderr
    rows = {row["model"]: row for row in json.loads(r.stdout)["rows"]}
    for row in rows.values():
        assert 0 < row["boundary_f1"] < 1 and 0 < row["images"][0]["boundary_f1"] < 1
    assert rows["mndwi"]["boundary_f1"] != rows["ndwi"]["boundary_f1"]
    with open(tmp_path / "scores.csv", newline="") as fh:
        import csv

        table = list(csv.DictReader(fh))
    overall = {row["model"]: float(row["boundary_f1"]) for row in table if row["image"] == "overall"}
    assert overall == pytest.approx({name: row["boundary_f1"] for name, row in rows.items()})
    assert list(table[0]) == ["model", "image", "f1", "iou", "precision", "recall", "boundary_f1", "pixels", "degrade"]
    assert {row["degrade"] for row in table} == {""}
    # evaluate writes the same table of its one model (it had no --csv)
    r = run_cli("evaluate", "--baseline", "ndwi", "--pair", tmp_path / "s.tif", tmp_path / "m.tif",
                "--csv", tmp_path / "ndwi.csv")
    assert r.returncode == 0, r.stderr
    with open(tmp_path / "ndwi.csv", newline="") as fh:
        assert list(csv.DictReader(fh)) == [row for row in table if row["model"] == "ndwi"]


def test_compare_tables_in_a_log_keep_whole_names(tmp_path):
    """Written to a log or a pipe (no terminal, so no width), the tables keep each model's and
    each image's whole name: rich alone cut them to 80 columns ("shanghai_esw_…")."""
    from s2s2net_cli.synthetic.scenes import make_pair, write_pair

    name = "Bolivia_103757_s2_6band_10m_a_scene_with_a_long_name"
    write_pair(make_pair(40, seed=12, nodata_margin=False), tmp_path / f"{name}.tif", tmp_path / "m.tif")
    r = run_cli("compare", "--baseline", "mndwi-bilinear", "--baseline", "ndwi-bilinear", "--pair",
                tmp_path / f"{name}.tif", tmp_path / "m.tif")
    assert r.returncode == 0, r.stderr
    rows = [line for line in r.stderr.splitlines() if line.startswith("│")]
    assert sum(line.split("│")[1].strip() in ("mndwi-bilinear", "ndwi-bilinear") for line in rows) == 2
    assert sum(line.split("│")[1].strip() == name for line in rows) == 2  # one table per model
    assert "…" not in r.stderr and max(map(len, rows)) > 80
    # baselines alone, said so: a user comparing the model with NDWI wrote --baseline ndwi and got NDWI's table
    assert r.stderr.strip().splitlines()[-1] == ("baselines alone, as no --weights was given: --weights default "
                                                 "adds the bundled model")


def test_nodata_adds_to_the_labels_own_nodata_in_evaluate_and_chip(tmp_path):
    """The README's Sen1Floods11 form (--nodata -1) on a derived label tagged nodata 255: both
    values are nodata, as --help says (it replaced the tag, and 255 was refused as a value)."""
    rng = np.random.default_rng(1)
    scene = write_raster(tmp_path / "s.tif", rng.integers(100, 3000, (6, 40, 40)).astype("uint16"), transform=T10,
                         nodata=0, descriptions=("B02", "B03", "B04", "B08", "B11", "B12"))
    label = (rng.random((40, 40)) < 0.3).astype("int16")
    label[:10] = -1
    label[10:20] = 255
    path = write_raster(tmp_path / "label.tif", label, transform=T10, nodata=255)
    result = run_cli("evaluate", "--baseline", "ndwi", "--pair", scene, path, "--nodata", "-1", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["rows"][0]["pixels"] == 20 * 40  # neither -1 nor 255 is counted
    chips = run_cli("chip", "--pair", scene, path, "--nodata", "-1", "-o", tmp_path / "chips", "--size", "40",
                    "--max-nodata", "1", "--val-fraction", "0", "--json")
    assert chips.returncode == 0, chips.stderr
    with rasterio.open(tmp_path / "chips" / "masks" / "s_r0_c0.tif") as src:
        mask = src.read(1)
        assert (mask[:20] == 255).all() and (mask[20:] != 255).all()  # both values are nodata (kept at 10 m)
    # a value that neither the file nor --nodata declares is still refused, naming both that are
    label[0, 0] = 7
    other = write_raster(tmp_path / "other.tif", label, transform=T10, nodata=255)
    result = run_cli("evaluate", "--baseline", "ndwi", "--pair", scene, other, "--nodata", "-1")
    assert refused(result, "S2N-MASK-VALUES", 1, other) and "nodata 255 and -1" in result.stderr


def test_saved_predictions_are_checked_before_the_first_is_written(tmp_path):
    """One existing prediction of the second pair was refused after the first pair's were
    written: every prediction's file is now checked first, and nothing is written."""
    from s2s2net_cli.synthetic.scenes import make_pair, write_pair

    args = []
    for k in (1, 2):
        write_pair(make_pair(32, seed=20 + k, nodata_margin=False), tmp_path / f"s{k}.tif", tmp_path / f"m{k}.tif")
        args += ["--pair", tmp_path / f"s{k}.tif", tmp_path / f"m{k}.tif"]
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "s2__ndwi.tif").write_text("keep")
    r = run_cli("compare", *args, "--baseline", "ndwi", "--baseline", "mndwi", "--save-predictions", tmp_path / "keep")
    assert refused(r, "S2N-OUTPUT-EXISTS", 1, tmp_path / "keep" / "s2__ndwi.tif")
    assert [p.name for p in (tmp_path / "keep").iterdir()] == ["s2__ndwi.tif"]
    r = run_cli("compare", *args, "--baseline", "ndwi", "--baseline", "mndwi", "--save-predictions", tmp_path / "keep",
                "--overwrite")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "keep").iterdir()) == ["s1__mndwi.tif", "s1__ndwi.tif", "s2__mndwi.tif",
                                                                     "s2__ndwi.tif"]


def test_the_plots_scene_panels_draw_no_data_black_degraded_or_not(tmp_path):
    """The degraded scene's panel drew the scene's nodata white (NaN in its float reflectance),
    beside the native panel's black: both draw it black, and only it."""
    from s2s2net_cli.evaluation.report import degraded_colour, false_colour
    from s2s2net_cli.synthetic.scenes import make_pair, write_pair

    write_pair(make_pair(60, seed=5, nodata_margin=False), tmp_path / "s.tif", tmp_path / "m.tif")
    with rasterio.open(tmp_path / "s.tif", "r+") as src:  # the western third without data
        data = src.read()
        data[:, :, :20] = 0
        src.write(data)
    native = false_colour(tmp_path / "s.tif", max_side=60)
    degraded = degraded_colour(tmp_path / "s.tif", 5, native.shape[:2])
    for rgb in (native, degraded):
        assert np.isfinite(rgb).all() and (rgb[:, :20] == 0).all()
        assert (rgb[:, 20:].max(axis=-1) > 0).mean() > 0.95  # the scene itself is drawn
