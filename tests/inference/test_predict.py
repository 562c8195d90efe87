import json
import os
import signal
import subprocess
import sys
import time

import geopandas as gpd
import numpy as np
import pytest
import rasterio
import torch
from affine import Affine
from rasterio.features import rasterize

from s2s2net_cli.inference.predictor import PredictOptions, Predictor
from s2s2net_cli.inference.stream import Forward
from s2s2net_cli.tiling import blend_weights

from ..conftest import default_sigint, run_cli, write_raster


def read(path):
    with rasterio.open(path) as src:
        return src.read(1), src.profile, src.tags()


@pytest.mark.parametrize("h,w,origin", [(37, 45, (500003.0, 4000007.5)), (13, 70, (-12345.0, 98.0)), (64, 33, (0.0, 0.0))])
def test_output_grid_is_exact(tmp_path, scene_factory, random_weights, h, w, origin):
    transform = Affine(10, 0, origin[0], 0, -10, origin[1])
    scene = scene_factory(h, w, transform=transform)
    out = tmp_path / "out.tif"
    r = run_cli("predict", scene, "-o", out, "--weights", random_weights, "--tile-size", 32, "--overlap", 8)
    assert r.returncode == 0, r.stderr
    mask, profile, tags = read(out)
    assert profile["transform"] == transform @ Affine.scale(1 / 5)
    assert (profile["width"], profile["height"]) == (5 * w, 5 * h)
    assert profile["crs"] == "EPSG:32633" and profile["dtype"] == "uint8" and profile["nodata"] == 255
    assert profile["tiled"] and profile["compress"] == "deflate"
    assert set(np.unique(mask)) <= {0, 1}
    assert tags["model"] == "random.safetensors" and tags["source_scene"] == scene.name


class PointwiseModel(Forward):
    """A stand-in network for the real tiling and blending: its output at each 2 m pixel
    depends only on the 10 m pixel below it, so the exact answer is known everywhere."""

    name = "pointwise"

    def __call__(self, batch, box):
        top, left, h, w = box
        p = 1 / (1 + np.exp(-(batch[:, 3, top: top + h, left: left + w] - batch[:, 1, top: top + h, left: left + w])))
        return np.repeat(np.repeat(p, 5, axis=1), 5, axis=2).astype(np.float32)


@pytest.mark.parametrize("tile,overlap,blend", [(32, 0, 0), (32, 8, 8), (40, 13, 5), (64, 32, 8), (200, 50, 0), (32, 16, 16)])
def test_tiling_blending_and_streaming_reassemble_the_scene_exactly(tmp_path, tile, overlap, blend):
    rng = np.random.default_rng(tile + overlap + blend)
    data = rng.integers(100, 5000, size=(6, 71, 83)).astype("uint16")
    data[:, 30:35, 10:50] = 0  # a nodata hole
    scene = write_raster(tmp_path / "s.tif", data, nodata=0)
    out = tmp_path / "p.tif"
    predictor = Predictor(PointwiseModel(), PredictOptions(tile_size=tile, overlap=overlap, blend=blend, probability=True))
    predictor.predict_scene(scene, out)
    got, _, _ = read(out)
    refl = data.astype(np.float32) / 10000
    norm = [(refl[b] - m) / s for b, m, s in zip(range(6), predictor.forward.spec.mean, predictor.forward.spec.std)]
    expected = np.rint(100 / (1 + np.exp(-(norm[3] - norm[1])))).astype(np.uint8)
    expected[(data == 0).all(axis=0)] = 255
    expected = np.repeat(np.repeat(expected, 5, 0), 5, 1)
    assert np.abs(got.astype(int) - expected.astype(int)).max() <= 1  # rounding of blended floats


@pytest.mark.parametrize("threshold", [0.55, 0.7, 0.555])
def test_a_probability_raster_cut_at_its_tagged_threshold_is_the_mask(tmp_path, threshold):
    """Rounding alone would put the half percent below the threshold on the water's side (and
    0.55 x 100 is 55.00000000000001 in floats): the percent raster read back as rivers, occurrence
    and --vector read it must give the mask's water, pixel for pixel."""
    from s2s2net_cli.formats import probability_cut

    class Threshold(PointwiseModel):
        pass

    Threshold.threshold = threshold
    rng = np.random.default_rng(5)
    data = rng.integers(100, 5000, size=(6, 60, 70)).astype("uint16")
    data[:, 20:25, 5:40] = 0
    scene = write_raster(tmp_path / "s.tif", data, nodata=0)
    outputs = {}
    for probability in (False, True):
        out = tmp_path / f"p{int(probability)}.tif"
        Predictor(Threshold(), PredictOptions(tile_size=32, overlap=8, probability=probability)).predict_scene(scene, out)
        with rasterio.open(out) as src:
            outputs[probability] = (src.read(1), src.tags())
    mask, (percent, tags) = outputs[False][0], outputs[True]
    cut = probability_cut(tags)
    assert cut == {0.55: 55, 0.7: 70, 0.555: 56}[threshold]
    near = np.abs(percent.astype(int) - cut) <= 1
    assert near.sum() > 100  # pixels within a percent of the cut, where rounding would decide
    assert np.array_equal((percent >= cut) & (percent != 255), mask == 1)
    assert np.array_equal(percent == 255, mask == 255)


def test_blend_weights_sum_to_one_everywhere():
    for size, T, O in [(100, 32, 8), (33, 32, 16), (500, 64, 64), (7, 32, 0)]:
        weights = blend_weights(size, T, O)
        total = np.zeros(5 * (len(weights) * T + 2 * O))
        for i, w in enumerate(weights):
            total[5 * i * T: 5 * i * T + len(w)] += w
        inside = total[5 * O: 5 * (O + size)]
        assert np.allclose(inside, 1.0, atol=1e-6)


def test_constant_scene_gives_constant_output_across_tile_borders(tmp_path, random_weights):
    data = np.empty((6, 70, 90), "uint16")
    data[:] = np.array([500, 700, 600, 2500, 1800, 1200])[:, None, None]
    scene = write_raster(tmp_path / "c.tif", data, nodata=0)
    outs = []
    for tile, overlap in [(32, 8), (96, 0)]:
        out = tmp_path / f"c{tile}.tif"
        r = run_cli("predict", scene, "-o", out, "--weights", random_weights, "--tile-size", tile, "--overlap", overlap, "--probability")
        assert r.returncode == 0, r.stderr
        outs.append(read(out)[0].astype(int))
    for o in outs:
        assert o.max() - o.min() <= 1
    assert np.abs(outs[0] - outs[1]).max() <= 1


def test_nodata_stays_nodata(tmp_path, random_weights):
    rng = np.random.default_rng(1)
    data = rng.integers(100, 3000, size=(6, 40, 50)).astype("float32")
    data[:, :7, :] = np.nan
    data[2, 20, 20] = np.nan
    data[:, 30:, 45:] = -9999
    scene = write_raster(tmp_path / "f.tif", data, nodata=-9999)
    out = tmp_path / "o.tif"
    r = run_cli("predict", scene, "-o", out, "--weights", random_weights, "--tile-size", 32, "--overlap", 8)
    assert r.returncode == 0, r.stderr
    mask, _, _ = read(out)
    invalid = np.isnan(data).any(axis=0) | (data == -9999).all(axis=0)
    assert np.array_equal(mask == 255, np.repeat(np.repeat(invalid, 5, 0), 5, 1))


def test_cog_vector_and_json(tmp_path, random_weights):
    scene = "sample_data/synth_11_scene.tif"
    out, vec = tmp_path / "w.tif", tmp_path / "w.gpkg"
    r = run_cli("predict", scene, "-o", out, "--weights", random_weights, "--tile-size", 64, "--overlap", 16,
                "--cog", "--vector", vec, "--threshold", 0.45, "--json", cwd=os.getcwd())
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)["scenes"][0]
    with rasterio.open(scene) as src:
        scene_crs = src.crs
    with rasterio.open(out) as src:
        assert src.tags(ns="IMAGE_STRUCTURE")["LAYOUT"] == "COG"
        assert src.overviews(1) and src.profile["tiled"]
        mask, transform = src.read(1), src.transform
        assert src.tags()["threshold"] == "0.45"
        # a GIS opened the mask as a grey stretch of 0 to 1; its palette says land, water, nodata
        assert src.colorinterp[0].name == "palette"
        palette = src.colormap(1)
        assert palette[0] == (217, 200, 158, 255) and palette[1] == (31, 95, 191, 255) and palette[255][3] == 0
    r = run_cli("predict", scene, "-o", tmp_path / "p.tif", "--weights", random_weights, "--probability", cwd=os.getcwd())
    with rasterio.open(tmp_path / "p.tif") as src:  # percents keep their grey ramp
        assert r.returncode == 0 and src.colorinterp[0].name == "gray"
    water = mask == 1
    assert water.any() and summary["water_km2"] == pytest.approx(water.sum() * 4 / 1e6, rel=2e-3)  # UTM's scale
    assert summary["water_km2"] == round(summary["water_km2"], 6)  # to the square metre, not 92.91949787653957
    polys = gpd.read_file(vec)
    assert polys.crs == scene_crs and polys["area_m2"].sum() / 1e6 == pytest.approx(summary["water_km2"], abs=1e-6)
    burned = rasterize(polys.geometry, out_shape=mask.shape, transform=transform)
    assert np.array_equal(burned == 1, water)


def test_strips_of_vectorizing_merge(tmp_path):
    from s2s2net_cli.vectorize import water_polygons

    mask = np.zeros((50, 40), "uint8")
    mask[5:45, 10:20] = 1  # one lake crossing strip borders
    mask[2:4, 30:33] = 1
    path = write_raster(tmp_path / "m.tif", mask, transform=Affine(2, 0, 0, 0, -2, 100), nodata=255)
    polys = water_polygons(path, strip_rows=7)
    # UTM's areal scale 500 km west of its central meridian (x = 0) is 1.0054: the ground's area
    assert len(polys) == 2 and sorted(polys.area_m2) == pytest.approx([6 * 4 / 1.0054, 400 * 4 / 1.0054], rel=1e-4)
    feet = write_raster(tmp_path / "ft.tif", mask, crs="EPSG:2263", transform=Affine(2, 0, 900000, 0, -2, 200000),
                        nodata=255)  # pixels of 2 x 2 US survey feet
    assert sorted(water_polygons(feet).area_m2) == pytest.approx([6 * 4 * 0.3048006 ** 2, 400 * 4 * 0.3048006 ** 2],
                                                                 rel=1e-3)


def test_polygon_areas_are_the_grounds_in_a_projection_that_stretches_it(tmp_path):
    """In Web Mercator at 60 degrees north a map's square metre is a quarter of one on the
    ground: the polygons' area_m2 was the map's, 4 times predict's water_km2 for the same water."""
    from s2s2net_cli.vectorize import water_polygons

    mask = np.zeros((100, 100), "uint8")
    mask[10:40, 10:40] = 1  # 900 pixels of 2 x 2 map metres
    mask[60:61, 70:73] = 1
    y60 = 8_399_737.89  # Web Mercator's y of 60 degrees north, where its areal scale is 1 / cos(60)^2 = 4
    path = write_raster(tmp_path / "m.tif", mask, crs="EPSG:3857", transform=Affine(2, 0, 1_000_000, 0, -2, y60 + 100),
                        nodata=255)
    polys = water_polygons(path)
    assert sorted(polys.area_m2) == pytest.approx([3 * 4 / 4, 900 * 4 / 4], rel=0.005)
    assert water_polygons(write_raster(tmp_path / "e.tif", mask * 0, crs="EPSG:3857", nodata=255)).empty


@pytest.mark.parametrize("suffix", [".gpkg", ".geojson", ".fgb"])
def test_water_polygons_are_one_layer_named_water_in_every_format(tmp_path, suffix):
    """A GeoJSON's and a FlatGeobuf's layer was named after the hidden file they were written
    to (".w.tmp1234"), which GIS software shows as the layer's name."""
    import pyogrio

    from s2s2net_cli.vectorize import write_water_polygons

    mask = np.zeros((20, 20), "uint8")
    mask[5:9, 5:12] = 1
    path = write_raster(tmp_path / "m.tif", mask, transform=Affine(2, 0, 500000, 0, -2, 4000000), nodata=255)
    out = write_water_polygons(path, tmp_path / f"w{suffix}")
    assert pyogrio.list_layers(out).tolist() == [["water", "Polygon"]]
    assert gpd.read_file(out).area_m2.tolist() == pytest.approx([28 * 4 / 0.9992], rel=1e-4)  # UTM's scale there
    assert not [p for p in tmp_path.iterdir() if p.name[0] == "."]


def test_several_scenes_go_to_a_folder_and_a_bad_one_does_not_stop_the_rest(tmp_path, scene_factory, random_weights):
    good1, good2 = scene_factory(20, 20), scene_factory(25, 30)
    bad = tmp_path / "bad.tif"
    bad.write_text("nope")
    outdir = tmp_path / "masks"
    r = run_cli("predict", good1, bad, good2, "-o", outdir, "--weights", random_weights, "--tile-size", 32, "--overlap", 4, "--json")
    errors = [line for line in r.stderr.splitlines() if line.startswith("Error: ")]
    assert r.returncode == 1 and len(errors) == 1 and errors[0].startswith(f"Error: {bad}: ")
    assert errors[0].endswith("[S2N-SCENE-UNREADABLE]")
    assert sorted(p.name for p in outdir.iterdir()) == sorted([f"{good1.stem}_water.tif", f"{good2.stem}_water.tif"])
    assert len(json.loads(r.stdout)["failures"]) == 1


@pytest.mark.parametrize("case", ["not_raster", "no_crs", "rotated", "three_bands", "all_nodata", "exists", "bad_weights"])
def test_bad_input_gets_one_line_and_nothing_at_output(tmp_path, scene_factory, random_weights, case):
    out = tmp_path / "out.tif"
    weights = random_weights
    if case == "not_raster":
        scene = tmp_path / "x.tif"
        scene.write_bytes(b"II*\x00garbage")
    elif case == "no_crs":
        scene = scene_factory(crs=None)
    elif case == "rotated":
        scene = scene_factory(transform=Affine(10, 1, 0, 1, -10, 0))
    elif case == "three_bands":
        scene = scene_factory(count=3)
    elif case == "all_nodata":
        scene = write_raster(tmp_path / "z.tif", np.zeros((6, 20, 20), "uint16"), nodata=0)
    elif case == "exists":
        scene = scene_factory()
        out.write_text("keep me")
    elif case == "bad_weights":
        scene = scene_factory()
        weights = tmp_path / "w.safetensors"
        weights.write_bytes(b"\x80\x04K\x01.")
    r = run_cli("predict", scene, "-o", out, "--weights", weights, "--tile-size", 32, "--overlap", 4)
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in r.stderr
    assert (scene.name if case != "bad_weights" else "w.safetensors") in lines[0] or case == "exists"
    if case == "exists":
        assert out.read_text() == "keep me" and "--overwrite" in lines[0]
    else:
        assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == []


@pytest.mark.parametrize("args,option", [(["--tile-size", 32, "--overlap", 40], "--overlap"), (["--threshold", 1.5], "--threshold"),
                                         (["--device", "tpu"], "--device"), (["--bands", "1,2,3"], "--bands"),
                                         (["--overlap", -1], "--overlap")])
def test_bad_options_are_usage_errors(tmp_path, scene_factory, random_weights, args, option):
    r = run_cli("predict", scene_factory(), "-o", tmp_path / "o.tif", "--weights", random_weights, *args)
    assert r.returncode == 2 and option in r.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL, signal.SIGINT])
@pytest.mark.slow
def test_interrupted_predict_leaves_no_file_at_output(tmp_path, random_weights, sig):
    rng = np.random.default_rng(0)
    scene = write_raster(tmp_path / "big.tif", rng.integers(100, 3000, size=(6, 256, 256)).astype("uint16"), nodata=0)
    out = tmp_path / "out.tif"
    proc = subprocess.Popen([sys.executable, "-m", "s2s2net_cli", "predict", str(scene), "-o", str(out), "--weights",
                             str(random_weights), "--tile-size", "32", "--overlap", "8"],
                            stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    deadline = time.time() + 120
    while time.time() < deadline and not any(".tmp" in p.name for p in tmp_path.iterdir()):
        time.sleep(0.1)
    if not any(".tmp" in p.name for p in tmp_path.iterdir()):  # say what predict said
        proc.kill()
        out_text, err_text = proc.communicate(timeout=60)
        raise AssertionError(f"predict never started writing (exit {proc.returncode}): {err_text[-2000:]}")
    time.sleep(0.5)
    proc.send_signal(sig)
    proc.wait(timeout=60)
    assert proc.returncode != 0
    assert not out.exists()
    if sig != signal.SIGKILL:  # a catchable signal also removes the temporary file
        assert [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == []


def test_the_bundled_model_maps_the_sample_scene_without_weights(tmp_path):
    from s2s2net_cli.checkpoint import read_card
    from s2s2net_cli.weights_header import default_weights

    card = read_card(default_weights())
    assert card.training["recipe"] == "scripts/train_default.sh" and card.training["steps"] > 0
    assert default_weights().stat().st_size < 30 * 2 ** 20
    out = tmp_path / "water.tif"
    r = run_cli("predict", "sample_data/virginia_shoreline_s2_6band_10m.tif", "-o", out, "--json", cwd=os.getcwd())
    assert r.returncode == 0, r.stderr
    mask, profile, tags = read(out)
    assert tags["model"] == "default.safetensors" and profile["width"] == 2560
    # a third of the crop is Chesapeake Bay water, which MNDWI > 0 finds too
    with rasterio.open("sample_data/virginia_shoreline_s2_6band_10m.tif") as src:
        g, swir = src.read(2).astype(float), src.read(5).astype(float)
    mndwi_water = ((g - swir) / (g + swir) > 0)
    model_water = mask.reshape(512, 5, 512, 5).mean(axis=(1, 3)) >= 0.5
    assert 0.2 < model_water.mean() < 0.4
    assert (model_water == mndwi_water).mean() > 0.9


def test_tiles_at_the_scenes_edges_run_only_what_lies_inside_and_give_the_same_mask(tmp_path, monkeypatch):
    # the bundled network (water gates, NDWI prior) on a crop whose last tiles lie mostly outside it
    from rasterio.windows import Window

    from s2s2net_cli.tiling import TileGrid

    with rasterio.open("sample_data/virginia_shoreline_s2_6band_10m.tif") as src:
        data, profile = src.read(window=Window(100, 150, 280, 300)), src.profile
    profile.update(height=300, width=280, transform=src.window_transform(Window(100, 150, 280, 300)))
    scene = tmp_path / "crop.tif"
    with rasterio.open(scene, "w", **profile) as dst:
        dst.write(data)
    predictor = Predictor("default", PredictOptions(tile_size=128, overlap=32, precision="32"))
    boxes, forward = [], predictor.forward.__class__.__call__
    monkeypatch.setattr(predictor.forward.__class__, "__call__",
                        lambda self, batch, box: boxes.append(box) or forward(self, batch, box))
    predictor.predict_scene(scene, tmp_path / "cut.tif")
    full = TileGrid.for_scene(300, 280, 128, 32, 8).output_box
    assert boxes[0] == (32, 32, 136, 136) and boxes[-1] == (24, 24, 52, 32) and full == (24, 24, 144, 144)
    monkeypatch.setattr(TileGrid, "box_of", lambda self, i, cols: self.output_box)
    predictor.predict_scene(scene, tmp_path / "whole.tif")
    cut, whole = read(tmp_path / "cut.tif")[0], read(tmp_path / "whole.tif")[0]
    assert cut.shape == (1500, 1400) and 0.05 < (cut == 1).mean() < 0.95
    assert (cut != whole).mean() < 1e-5  # float rounding of convolutions over other shapes at most


def test_reads_and_writes_in_threads_give_the_same_mask(tmp_path, monkeypatch):
    # the GPU path reads and writes beside the network in threads; force it on the CPU
    from concurrent.futures import ThreadPoolExecutor

    import s2s2net_cli.inference.stream as stream_module

    rng = np.random.default_rng(3)
    data = rng.integers(100, 5000, size=(6, 97, 83)).astype("uint16")
    data[:, 40:47, 5:60] = 0
    scene = write_raster(tmp_path / "s.tif", data, nodata=0)
    opts = PredictOptions(tile_size=32, overlap=8, probability=True)
    Predictor(PointwiseModel(), opts).predict_scene(scene, tmp_path / "inline.tif")
    monkeypatch.setattr(stream_module, "InlineExecutor", ThreadPoolExecutor)
    Predictor(PointwiseModel(), opts).predict_scene(scene, tmp_path / "threads.tif")
    inline, threads = read(tmp_path / "inline.tif")[0], read(tmp_path / "threads.tif")[0]
    assert np.array_equal(inline, threads) and (inline == 255).any()


def test_mean_over_flips_commutes_with_every_flip_and_turn():
    import torch

    from s2s2net_cli.inference.runtime import mean_over_flips
    from s2s2net_cli.model import S2S2Net

    torch.manual_seed(1)
    model = S2S2Net().eval()

    def forward(y, *box):
        return model.forward_window(y, *box)  # logits: an untrained network's are small, but not all alike

    x = torch.rand(1, 6, 64, 48)
    box = (4, 10, 40, 30)  # top, left, height, width: off centre, so each flip moves it
    turns = {  # a flip or turn of the input, the window turned with it, and the same on the 5x output
        "flip rows": (lambda t: t.flip(-2), (64 - 4 - 40, 10, 40, 30)),
        "flip columns": (lambda t: t.flip(-1), (4, 48 - 10 - 30, 40, 30)),
        "transpose": (lambda t: t.transpose(-2, -1), (10, 4, 30, 40)),
        "quarter turn": (lambda t: t.transpose(-2, -1).flip(-1), (10, 64 - 4 - 40, 30, 40)),
    }
    with torch.inference_mode():
        mean = mean_over_flips(forward, x, box)
        plain = forward(x, *box)
        assert mean.shape == plain.shape == (1, 1, 200, 150)
        for name, (turn, turned_box) in turns.items():
            gap = (mean_over_flips(forward, turn(x), turned_box) - turn(mean)).abs().max()
            # the network alone does not commute with them: the test would see a wrong turn back
            plain_gap = (forward(turn(x), *turned_box) - turn(plain)).abs().max()
            assert gap < 1e-6 and plain_gap > 100 * max(gap, 1e-7), name


def test_flips_map_a_mirrored_scene_to_the_mirrored_mask(tmp_path):
    with rasterio.open("sample_data/virginia_shoreline_s2_6band_10m.tif") as src:
        data = src.read(window=((128, 192), (416, 480)))  # across the shore, half water; one tile, context alike on all sides
    scene, mirrored = write_raster(tmp_path / "s.tif", data), write_raster(tmp_path / "m.tif", data[:, :, ::-1])
    outputs = {}
    for flips in ([], ["--flips"]):
        for name, path in (("scene", scene), ("mirrored", mirrored)):
            out = tmp_path / f"{name}{len(flips)}.tif"
            r = run_cli("predict", path, "-o", out, "--probability", "--tile-size", 64, *flips)
            assert r.returncode == 0, r.stderr
            outputs[name, bool(flips)] = read(out)
    prob, profile, tags = outputs["scene", True]
    assert tags["model"] == "default.safetensors+flips" and profile == outputs["scene", False][1]
    assert 0 < (prob > 50).mean() < 1  # water and land both
    mirror_gap = np.abs(prob.astype(int) - outputs["mirrored", True][0][:, ::-1]).max()
    plain_gap = np.abs(outputs["scene", False][0].astype(int) - outputs["mirrored", False][0][:, ::-1]).max()
    assert mirror_gap <= 1 < plain_gap  # equal up to rounding to whole percent; the plain network is not


def test_flips_with_the_water_gate_give_the_full_heads_mask():
    """The bundled weights' gate under --flips: the mask of the full head's mean over the flips,
    on a real shore, with the gate filling part of it."""
    from s2s2net_cli.inference.runtime import ModelRuntime
    from s2s2net_cli.sources.scene import read_scene

    data, _, _ = read_scene("sample_data/virginia_shoreline_s2_6band_10m.tif")
    batch = np.ascontiguousarray(data[None, :, 96:224, 352:480])  # across the shore
    gated = ModelRuntime("default", precision="32", flips=True)
    full = ModelRuntime("default", precision="32", flips=True, full_head=True)
    assert (gated.head, full.head) == ("gated", "full")
    box = (16, 16, 96, 96)
    got, expected = gated(batch, box), full(batch, box)
    filled = (got == 0) | (got == 1)
    assert filled.mean() > 0.2 and 0 < (expected >= gated.threshold).mean() < 1
    assert np.array_equal(got >= gated.threshold, expected >= gated.threshold)
    assert np.abs(got - expected)[~filled].max() < 1e-5


def test_precision_auto_takes_bf16_on_cpus_that_do_it_natively(tmp_path, random_weights, monkeypatch):
    import torch

    from s2s2net_cli.inference import runtime

    cpu = torch.device("cpu")
    for capabilities, kernels, expected in (({"avx512_bf16": True}, "AVX512", torch.bfloat16),
                                            ({"amx_bf16": True}, "AVX512", torch.bfloat16),
                                            ({"avx512_bf16": False, "avx2": True}, "AVX2", None),
                                            # torch held to AVX2 kernels (ATEN_CPU_CAPABILITY=avx2) emulates bf16
                                            ({"avx512_bf16": True}, "AVX2", None)):
        monkeypatch.setattr(torch.cpu, "get_capabilities", lambda c=capabilities: c, raising=False)  # torch >= 2.5
        monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda k=kernels: k)
        assert runtime.autocast_dtype("auto", cpu) == expected
        assert runtime.autocast_dtype("32", cpu) is None and runtime.autocast_dtype("bf16", cpu) == torch.bfloat16
        # int8 where bf16 is not native, on x86 with VNNI, for weights that carry int8 ranges; else as above
        monkeypatch.setattr(runtime, "cpu_runs_int8", lambda: True)
        assert not runtime.cpu_has_vnni() and not runtime.runs_int8("auto", cpu, True)  # plain AVX2: fp32
        assert runtime.runs_int8("int8", cpu, True)  # asked for, it runs
        for vnni in ("avx512_vnni", "avx_vnni"):
            monkeypatch.setattr(torch.cpu, "get_capabilities", lambda c=capabilities, v=vnni: {**c, v: True},
                                raising=False)
            assert runtime.runs_int8("auto", cpu, True) is (expected is None)
            assert not runtime.runs_int8("auto", cpu, False) and not runtime.runs_int8("32", cpu, True)
            monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")  # oneDNN held to AVX2 kernels: no VNNI
            assert not runtime.runs_int8("auto", cpu, True)
            monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")
        monkeypatch.setattr(runtime, "cpu_runs_int8", lambda: False)
        assert not runtime.runs_int8("auto", cpu, True)
        with pytest.raises(Exception, match="x86 CPUs"):
            runtime.runs_int8("int8", cpu, True)
    monkeypatch.undo()
    scene = write_raster(tmp_path / "s.tif", np.random.default_rng(2).integers(100, 3000, (6, 40, 40)).astype("uint16"),
                         nodata=0)
    chosen = "bf16" if runtime.cpu_has_native_bf16() else "fp32"
    for precision, expected in (("auto", chosen), ("32", "fp32")):
        out = tmp_path / f"{precision}.tif"
        r = run_cli("predict", scene, "-o", out, "--weights", random_weights, "--tile-size", 32, "--overlap", 8,
                    "--precision", precision, "--json")
        assert r.returncode == 0, r.stderr
        assert read(out)[2]["precision"] == expected and json.loads(r.stdout)["scenes"][0]["precision"] == expected


def test_a_small_scene_is_planned_one_tile_of_its_size_and_the_json_says_so(tmp_path, scene_factory, random_weights):
    """A 40 px scene ran as one 512 px tile read mostly as reflections of itself (a 640 px window);
    planned, it is one 64 px tile with 64 px of context, and the JSON and -v say the plan."""
    scene = scene_factory(40, 40)
    r = run_cli("-v", "predict", scene, "-o", tmp_path / "w.tif", "--weights", random_weights, "--json")
    assert r.returncode == 0, r.stderr
    (result,) = json.loads(r.stdout)["scenes"]
    assert (result["tiles"], result["tile_size"], result["context"]) == (1, 64, 64)
    assert "1 x 1 tiles of 64 px, 64 px of context" in r.stderr
    big = scene_factory(70, 40)
    r = run_cli("predict", big, "-o", tmp_path / "b.tif", "--weights", random_weights, "--json", "--tile-size", 32)
    (result,) = json.loads(r.stdout)["scenes"]
    assert (result["tiles"], result["tile_size"], result["context"]) == (6, 32, 32)  # as given (context: the tile's)
    # a tile larger than the scene read the scene's reflection out to its side: --tile-size 100000
    # asked 112 GiB of a 512 px scene; it is the one tile that covers the scene, as planned
    r = run_cli("predict", scene, "-o", tmp_path / "t.tif", "--weights", random_weights, "--json", "--tile-size", 1000)
    assert r.returncode == 0, r.stderr
    (result,) = json.loads(r.stdout)["scenes"]
    assert (result["tiles"], result["tile_size"], result["context"]) == (1, 64, 64)
    with rasterio.open(tmp_path / "w.tif") as planned, rasterio.open(tmp_path / "t.tif") as large:
        assert np.array_equal(planned.read(), large.read())
    with rasterio.open(tmp_path / "w.tif") as src:
        assert (src.width, src.height) == (200, 200)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine without a GPU")
def test_a_gpu_asked_for_where_there_is_none_is_refused_saying_why(tmp_path, scene_factory, random_weights):
    """`--device cuda` said "cuda: CUDA was asked for but no GPU is available", not the option,
    nor why (a CPU-only PyTorch is the usual one), nor what runs anywhere."""
    out = tmp_path / "water.tif"
    result = run_cli("predict", scene_factory(), "-o", out, "--weights", random_weights, "--device", "cuda")
    assert result.returncode == 1 and not out.exists(), result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("Error: --device cuda: asks for a GPU") and "[S2N-DEVICE-NO-CUDA]" in line, line
    assert ("built for the CPU only" if torch.version.cuda is None else "finds no GPU or driver") in line
    assert "--device auto runs on a GPU where there is one, else on the CPU" in line


def test_a_gpu_number_past_the_machine_s_gpus_is_refused(monkeypatch):
    """`--device cuda:2` on a machine of two GPUs met torch's own "invalid device ordinal" as the
    weights moved to it; it is refused first, naming the GPUs there are. `cuda` takes the rank's GPU."""
    from s2s2net_cli.inference.runtime import resolve_device

    from ..conftest import raises_rule

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("cuda", local_rank=3) == torch.device("cuda", 1)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    with raises_rule("S2N-DEVICE-NO-SUCH-GPU") as refused:
        resolve_device("cuda:2")
    assert str(refused.value).startswith("device='cuda:2': there is no such GPU: torch sees 2 here, cuda:0 to cuda:1")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)  # a driver that finds none
    monkeypatch.setattr(torch.version, "cuda", None)
    with raises_rule("S2N-DEVICE-NO-CUDA") as refused:
        resolve_device("cuda")
    assert "this PyTorch" in str(refused.value) and "is built for the CPU only" in str(refused.value)
