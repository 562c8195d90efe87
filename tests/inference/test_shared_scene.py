"""One scene's tile rows shared among ranks: the stitched mask equals one process's mask."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import rasterio

from s2s2net_cli.inference.predictor import PredictOptions, Predictor
from s2s2net_cli.inference.shared_scene import predict_share, stitch
from s2s2net_cli.inference.writer import PredictionStats

from ..conftest import raises_rule, write_raster
from .test_predict import PointwiseModel

LAUNCHER = Path(sys.executable).parent / "deepspeed"


def read(path):
    with rasterio.open(path) as src:
        return src.read(1), src.profile, src.tags()


@pytest.mark.parametrize("tile,overlap,blend,world", [(32, 8, 8, 2), (32, 16, 3, 3), (40, 13, 13, 4), (24, 0, 0, 3),
                                                     (24, 12, 12, 6), (24, 12, 0, 5)])
def test_shares_stitched_equal_one_process(tmp_path, tile, overlap, blend, world):
    # Each rank's share run in turn in this process, then stitched: the result must be the
    # mask one process writes, nodata holes across the seams included.
    rng = np.random.default_rng(tile + world)
    data = rng.integers(100, 5000, size=(6, 150, 83)).astype("uint16")
    data[:, 55:75, 10:50] = 0  # nodata across the first seams
    scene_path = write_raster(tmp_path / "s.tif", data, nodata=0)
    opts = PredictOptions(tile_size=tile, overlap=overlap, blend=blend, probability=True)
    predictor = Predictor(PointwiseModel(), opts)
    single = tmp_path / "single.tif"
    predictor.predict_scene(scene_path, single)

    job = predictor.prepare(scene_path, tmp_path / "shared.tif")
    grid = job.grid
    shares = grid.rank_shares(world)
    assert grid.can_share(world)
    parts = tmp_path / "parts"
    parts.mkdir()
    stats = PredictionStats()
    for rank in range(world):
        stats += predict_share(job, parts, rank, shares, None)
    job.writer.write(job.scene, job.output, lambda dst: stitch(job, parts, shares, dst, stats))

    got, profile, _ = read(tmp_path / "shared.tif")
    want, want_profile, _ = read(single)
    assert profile["transform"] == want_profile["transform"] and got.shape == want.shape
    assert np.array_equal(got == 255, want == 255)
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1  # float sums in another order
    assert stats.tiles == grid.n_rows * -(-83 // tile)
    assert stats.nodata == int((want == 255).sum())


def launch(port, *args, timeout=400):
    return subprocess.run([str(LAUNCHER), "--num_gpus", "2", "--master_port", str(port), "--module", "s2s2net_cli",
                           *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1"})


@pytest.mark.slow
def test_two_ranks_share_one_scene_and_write_what_one_process_writes(tmp_path, random_weights):
    rng = np.random.default_rng(5)
    data = rng.integers(100, 5000, size=(6, 97, 71)).astype("uint16")
    data[:, 40:52, 5:30] = 0
    scene = write_raster(tmp_path / "scene.tif", data, nodata=0)
    common = ["--weights", random_weights, "--tile-size", 32, "--overlap", 8, "--probability", "--device", "cpu"]
    r = launch(29801, "predict", scene, "-o", tmp_path / "shared.tif", *common, "--json")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    single = subprocess.run([sys.executable, "-m", "s2s2net_cli", "predict", str(scene), "-o", str(tmp_path / "one.tif"),
                             *map(str, common)], capture_output=True, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert single.returncode == 0, single.stderr
    got, profile, tags = read(tmp_path / "shared.tif")
    want, want_profile, _ = read(tmp_path / "one.tif")
    assert profile["transform"] == want_profile["transform"] and profile["crs"] == want_profile["crs"]
    assert np.array_equal(got == 255, want == 255) and (got == 255).any()
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1
    assert tags["source_scene"] == "scene.tif"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.tif", "scene.tif", "shared.tif"]  # no parts left
    assert r.stdout.count('"tiles": 12') == 1  # rank 0 reports the whole scene, once


@pytest.mark.slow
def test_two_ranks_share_several_scenes(tmp_path, random_weights):
    scenes = [write_raster(tmp_path / f"s{i}.tif", np.random.default_rng(i).integers(100, 5000, size=(6, 40, 50)),
                           nodata=0, dtype="uint16") for i in range(3)]
    common = ["--weights", random_weights, "--tile-size", 32, "--overlap", 8, "--device", "cpu"]
    r = launch(29802, "predict", *scenes, "-o", tmp_path / "masks", *common, "--json")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert r.stdout.count('"scenes"') == 1  # one JSON document, from rank 0
    document, _ = json.JSONDecoder().raw_decode(r.stdout[r.stdout.index('{\n  "scenes"'):])
    assert sorted(s["scene"] for s in document["scenes"]) == sorted(map(str, scenes))
    for s in scenes:
        one = tmp_path / f"{s.stem}_one.tif"
        assert subprocess.run([sys.executable, "-m", "s2s2net_cli", "predict", str(s), "-o", str(one), *map(str, common)],
                              capture_output=True).returncode == 0
        got, _, tags = read(tmp_path / "masks" / f"{s.stem}_water.tif")
        assert tags["source_scene"] == s.name
        assert (got != read(one)[0]).mean() < 1e-3  # the same mask, up to float noise at the threshold


@pytest.mark.slow
def test_two_ranks_one_bad_scene_fail_with_one_line_and_leave_nothing(tmp_path, random_weights):
    bad = tmp_path / "scene.tif"
    bad.write_text("not a raster")
    r = launch(29803, "predict", bad, "-o", tmp_path / "out.tif", "--weights", random_weights, "--tile-size", 32,
               "--overlap", 8)
    assert r.returncode != 0
    assert f"Error: {bad}:" in r.stdout + r.stderr and "Traceback" not in r.stdout + r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scene.tif"]


def test_a_scene_too_small_to_share_runs_on_rank_zero(tmp_path, monkeypatch):
    # One tile row cannot be split: rank 0 predicts it all, through the same agreement steps.
    import torch.distributed as dist

    from s2s2net_cli.inference.shared_scene import predict_scene_shared
    from s2s2net_cli.world import World

    scene = write_raster(tmp_path / "s.tif", np.random.default_rng(1).integers(100, 5000, size=(6, 20, 30)),
                         nodata=0, dtype="uint16")
    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        predictor = Predictor(PointwiseModel(), PredictOptions(tile_size=32, overlap=8))
        result = predict_scene_shared(predictor, scene, tmp_path / "out.tif", World())
        assert result is not None and result.tiles == 1
        assert read(tmp_path / "out.tif")[0].shape == (100, 150)
        with raises_rule("S2N-OUTPUT-EXISTS"):
            predict_scene_shared(predictor, scene, tmp_path / "out.tif", World())
    finally:
        dist.destroy_process_group()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.tif", "s.tif"]
