"""The guarantees of design.md across subcommands: bad input gets one line, exit 1 or 2, and
nothing at the output path; interruptions leave nothing half-written; untrusted files run
nothing; grid, tiling and metric arithmetic hold for any size (hypothesis)."""

import os
import pickle
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import rasterio
import torch
from affine import Affine
from hypothesis import given, settings
from hypothesis import strategies as st

from s2s2net_cli.grid import fine_shape, fine_transform, padded_size
from s2s2net_cli.metrics import count
from s2s2net_cli.tiling import blend_weights

from .conftest import raises_rule, refused, run_cli, write_raster

T10 = Affine(10, 0, 500000, 0, -10, 4000000)


def bad_scene(kind: str, tmp: Path) -> Path:
    """One bad scene file of each kind, named after the kind."""
    path = tmp / f"{kind}.tif"
    rng = np.random.default_rng(0)
    good = rng.integers(100, 3000, (6, 24, 24)).astype("uint16")
    if kind == "not_a_raster":
        path.write_text("this is a text file\n")
    elif kind == "truncated":
        write_raster(tmp / "whole.tif", good, transform=T10, nodata=0)
        data = (tmp / "whole.tif").read_bytes()
        path.write_bytes(data[: len(data) // 3])
    elif kind == "three_bands":
        write_raster(path, good[:3], transform=T10, nodata=0)
    elif kind == "no_crs":
        write_raster(path, good, transform=T10, crs=None, nodata=0)
    elif kind == "rotated":
        write_raster(path, good, transform=Affine(10, 3, 500000, 3, -10, 4000000), nodata=0)
    elif kind == "all_nodata":
        write_raster(path, np.zeros_like(good), transform=T10, nodata=0)
    elif kind == "nan_everywhere":
        write_raster(path, np.full(good.shape, np.nan, "float32"), transform=T10)
    elif kind == "folder":  # a folder of scenes, say (it was "not a readable raster (... format)")
        path = tmp / "scenes_folder"
        path.mkdir()
        write_raster(path / "scene.tif", good, transform=T10, nodata=0)
    elif kind == "band_folder":  # a folder of band files, one of them
        path = tmp / "bands_folder"
        path.mkdir()
        write_raster(path / "B02.tif", good[0], transform=T10, nodata=0)
    return path


SCENE_CASES = ["not_a_raster", "truncated", "three_bands", "no_crs", "rotated", "all_nodata", "nan_everywhere", "folder",
               "band_folder"]


@pytest.fixture(scope="module")
def good_mask(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mask")
    return write_raster(tmp / "mask.tif", (np.arange(120 * 120).reshape(120, 120) % 7 == 0).astype("float32"),
                        transform=T10 @ Affine.scale(0.2))


@pytest.mark.parametrize("kind", SCENE_CASES)
@pytest.mark.parametrize("command", ["predict", "chip", "evaluate"])
def test_bad_scenes_in_every_subcommand(tmp_path, random_weights, good_mask, kind, command):
    scene = bad_scene(kind, tmp_path)
    out = tmp_path / "out"
    if command == "predict":
        r = run_cli("predict", scene, "-o", out, "--weights", random_weights, "--tile-size", 32, "--overlap", 4)
    elif command == "chip":
        r = run_cli("chip", "--pair", scene, good_mask, "-o", out, "--size", 16)
    else:
        r = run_cli("evaluate", "--baseline", "mndwi", "--pair", scene, good_mask, "--save-predictions", out)
    assert r.returncode in (1, 2), r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), r.stderr
    assert scene.name in lines[0]
    if kind in ("folder", "band_folder"):
        code = "[S2N-SCENE-IS-FOLDER]" if kind == "folder" else "[S2N-BAND-FOLDER-MISSING]"
        assert code in lines[0], lines[0]
    assert not out.exists() or not any(out.iterdir())
    assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name]


def test_debug_shows_the_traceback(tmp_path, random_weights):
    scene = bad_scene("no_crs", tmp_path)
    r = run_cli("--debug", "predict", scene, "-o", tmp_path / "o.tif", "--weights", random_weights)
    assert r.returncode != 0 and "Traceback" in r.stderr


def test_vector_file_that_is_not_one_and_an_empty_folder(tmp_path, random_weights):
    scene = tmp_path / "s.tif"
    write_raster(scene, np.random.default_rng(1).integers(100, 3000, (6, 40, 40)).astype("uint16"), transform=T10, nodata=0)
    mask = write_raster(tmp_path / "m.tif", np.zeros((200, 200), "float32"), transform=T10 @ Affine.scale(0.2))
    regions = tmp_path / "regions.gpkg"
    regions.write_text("not a geopackage")
    r = run_cli("chip", "--pair", scene, mask, "-o", tmp_path / "chips", "--size", 16, "--test-regions", regions)
    assert refused(r, "S2N-VECTOR-UNREADABLE", 1, regions) and r.stderr.count("\n") == 1
    assert not (tmp_path / "chips").exists()
    assert "It might help" not in r.stderr  # GDAL's hint of a driver prefix says nothing to a user here
    for args in (["chip", "--pair", scene, mask, "-o", tmp_path / "chips", "--size", 16, "--test-regions", mask],
                 ["predict", scene, "-o", tmp_path / "w.tif", "--aoi", mask, "--weights", random_weights]):
        r = run_cli(*args)  # a raster where polygons are needed: said so, not "not a vector file ... format"
        assert refused(r, "S2N-VECTOR-IS-RASTER", 1, mask) and "is a raster, where a vector file" in r.stderr
        assert not (tmp_path / "chips").exists() and not (tmp_path / "w.tif").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run_cli("train", empty, "-o", tmp_path / "run")
    assert refused(r, "S2N-CHIPS-NO-INDEX", 1, empty)
    r = run_cli("predict", scene, "-o", tmp_path / "o.tif", "--weights", random_weights, "--vector", tmp_path / "w.xyz")
    assert r.returncode == 2 and "--vector" in r.stderr and not (tmp_path / "o.tif").exists()


@pytest.mark.parametrize("args,option", [
    (["--tile-size", 32, "--overlap", 33], "--overlap"), (["--overlap", -2], "--overlap"),
    (["--threshold", -0.1], "--threshold"), (["--device", "gpu0"], "--device"),
    (["--bands", "1,2,3,4,5"], "--bands"), (["--bands", "0,1,2,3,4,5"], "--bands"), (["--bands", "a,b"], "--bands"),
    (["--bands", "1,1,2,3,4,5"], "band 1 is given twice (as B02 and B03)"),
    (["--bands", "B2,B3,B4,B8,B11,B12"], "it takes each band's 1-based position in the stack, not its name"),
    (["--co", "NOEQUALS"], "--co"), (["--precision", "8"], "--precision")])
def test_bad_options_are_usage_errors_naming_the_option(tmp_path, random_weights, args, option):
    scene = write_raster(tmp_path / "s.tif", np.ones((6, 8, 8), "uint16") * 500, transform=T10)
    r = run_cli("predict", scene, "-o", tmp_path / "o.tif", "--weights", random_weights, *args)
    assert r.returncode == 2 and option in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("co, says", [
    ("COMPRESS=banana", "'banana' is an unexpected value for COMPRESS creation option of type string-select"),
    ("NOSUCH=1", "driver GTiff does not support creation option NOSUCH"),
    ("BLOCKXSIZE=7", "The height and width of (TIFF )?dataset blocks must be multiples of 16"),  # GDAL < 3.7: no TIFF
    ("PREDICTOR=9", "PREDICTOR=9 is not supported")])
def test_a_creation_option_gdal_does_not_take_is_refused_not_dropped(tmp_path, random_weights, co, says):
    """GDAL only warns (out of sight) of an unknown option or value and writes the file without
    it: --co COMPRESS=banana gave an uncompressed mask, exit 0. (``says``: GDAL's words, a pattern.)"""
    scene = write_raster(tmp_path / "s.tif", np.ones((6, 8, 8), "uint16") * 500, transform=T10)
    r = run_cli("predict", scene, "-o", tmp_path / "o.tif", "--weights", random_weights, "--co", co)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert re.fullmatch(rf"Error: --co: {says} \[S2N-CREATION-OPTIONS\]", lines[0]), r.stderr
    assert not (tmp_path / "o.tif").exists()
    r = run_cli("predict", scene, "-o", tmp_path / "o.tif", "--weights", random_weights, "--co", "COMPRESS=LZW",
                "--co", "blockxsize=256")
    assert r.returncode == 0, r.stderr
    with rasterio.open(tmp_path / "o.tif") as src:
        assert src.compression.name == "lzw"


@pytest.mark.parametrize("co", [["COMPRESS=JPEG"], ["COMPRESS=jpeg", "JPEG_QUALITY=100"], ["COMPRESS=WEBP"],
                                ["COMPRESS=LERC_DEFLATE", "MAX_Z_ERROR=0.5"]])
def test_a_lossy_compression_is_refused_for_it_changes_the_values(tmp_path, random_weights, co):
    """--co COMPRESS=JPEG wrote a mask in which 0.8 % of the pixels had other values, 2 among
    them, exit 0. Lossy compressions are refused, from the command line and from Python alike;
    LERC without an error allowed keeps every value."""
    import s2s2net_cli as s2n
    from s2s2net_cli.errors import UsageError

    scene = write_raster(tmp_path / "s.tif", np.ones((6, 8, 8), "uint16") * 500, transform=T10)
    given = [a for c in co for a in ("--co", c)]
    for command in (["predict", scene, "-o", tmp_path / "o.tif", "--weights", random_weights],
                    ["occurrence", scene, "-o", tmp_path / "o.tif", "--weights", random_weights]):
        r = run_cli(*command, *given)
        assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith("Error: --co: COMPRESS="), r.stderr
        assert "compresses with loss" in r.stderr and "[S2N-CREATION-LOSSY]" in r.stderr
        assert not (tmp_path / "o.tif").exists()
    options = dict(c.split("=") for c in co)
    with pytest.raises(UsageError, match="^creation_options: COMPRESS=.* compresses with loss"):
        s2n.predict(scene, tmp_path / "o.tif", weights=random_weights, creation_options=options)
    with pytest.raises(UsageError, match="^creation_options: COMPRESS="):
        s2n.occurrence([scene], tmp_path / "o.tif", weights=random_weights, creation_options=options)
    assert not (tmp_path / "o.tif").exists()
    r = run_cli("predict", scene, "-o", tmp_path / "o.tif", "--weights", random_weights, "--co", "COMPRESS=LERC_DEFLATE")
    assert r.returncode == 0, r.stderr


def test_with_cog_the_creation_options_are_the_cog_drivers(tmp_path, random_weights):
    """With --cog the COG driver makes the file kept, and takes its own names (BLOCKSIZE): they
    are checked against it, not refused as the GTiff driver's unknowns."""
    scene = write_raster(tmp_path / "s.tif", np.ones((6, 64, 64), "uint16") * 500, transform=T10)
    r = run_cli("predict", scene, "-o", tmp_path / "o.tif", "--weights", random_weights, "--cog", "--co", "BLOCKSIZE=128")
    assert r.returncode == 0 and "rasterio" not in r.stderr, r.stderr  # GDAL's of its temporary GeoTIFF: not the user's
    with rasterio.open(tmp_path / "o.tif") as src:
        assert src.block_shapes == [(128, 128)]
    for args, says in ((["--co", "BLOCKSIZE=128"], "driver GTiff does not support creation option BLOCKSIZE"),
                       (["--cog", "--co", "NOSUCH=1"], "driver COG does not support creation option NOSUCH"),
                       (["--cog", "--co", "BLOCKXSIZE=64"], "'64' is an unexpected value for BLOCKSIZE creation option "
                                                          "that should be >= 128")):
        r = run_cli("predict", scene, "-o", tmp_path / "p.tif", "--weights", random_weights, *args)
        assert r.returncode == 2 and r.stderr.strip().splitlines()[-1] == f"Error: --co: {says} [S2N-CREATION-OPTIONS]", r.stderr
    assert not (tmp_path / "p.tif").exists()


def test_an_output_under_a_file_is_one_line_in_every_command(tmp_path, random_weights):
    """-o notes.txt/water.tif (a file where a folder would be made) ended in FileExistsError or
    NotADirectoryError tracebacks in every command, a training run's on rank 0; each output now
    names the file in its way, before any work, and the file is left as it was."""
    scene = write_raster(tmp_path / "s.tif", np.random.default_rng(1).integers(100, 3000, (6, 40, 40)).astype("uint16"),
                         transform=T10, nodata=0)
    mask = write_raster(tmp_path / "m.tif", (np.random.default_rng(2).random((40, 40)) < 0.3).astype("uint8"),
                        transform=T10, nodata=255)
    notes = tmp_path / "notes.txt"
    notes.write_text("not a folder")
    r = run_cli("chip", "--pair", scene, mask, "-o", tmp_path / "chips", "--size", 16)
    assert r.returncode == 0 and "1 scene -> " in r.stderr, r.stderr  # it said "1 scene(s)"
    cases = [
        ["predict", scene, "-o", notes / "w.tif", "--weights", random_weights],
        ["predict", scene, "-o", tmp_path / "w.tif", "--vector", notes / "w.gpkg", "--weights", random_weights],
        ["chip", "--pair", scene, mask, "-o", notes / "chips", "--size", 16],
        ["evaluate", "--pair", scene, mask, "--baseline", "ndwi", "--save-predictions", notes / "p"],
        ["compare", "--pair", scene, mask, "--baseline", "ndwi", "--plot", notes / "p.png"],
        ["rivers", mask, "-o", notes / "r.gpkg"],
        ["occurrence", mask, "--from-masks", "-o", notes / "o.tif"],
        ["synth", notes / "s", "--size", 16],
        ["weights", "annotate", random_weights, notes / "w.safetensors"],
        ["train", tmp_path / "chips", "-o", notes / "run"],
    ]
    for args in cases:
        r = run_cli(*args)
        assert refused(r, "S2N-OUTPUT-PARENT-IS-FILE", 2, f"{notes} is a file, not a folder"), (args, r.stderr)
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert notes.read_text() == "not a folder" and not (tmp_path / "w.tif").exists()
    # the folder itself a file: Click's "Directory 'notes.txt' is a file.", without a code
    for args in (["chip", "--pair", scene, mask, "-o", notes, "--size", 16], ["synth", notes, "--size", 16],
                 ["evaluate", "--pair", scene, mask, "--baseline", "ndwi", "--save-predictions", notes],
                 ["train", tmp_path / "chips", "-o", notes]):
        r = run_cli(*args)
        assert refused(r, "S2N-OUTPUT-FOLDER-IS-FILE", 2, f"{notes}: is a file, where a folder is written"), r.stderr
    assert notes.read_text() == "not a folder"
    from s2s2net_cli.io import check_folder_output

    with raises_rule("S2N-OUTPUT-FOLDER-IS-FILE", notes):  # the folder of chips or a run, itself a file
        check_folder_output(notes)


def test_an_output_named_dash_is_refused_not_written_as_a_file_named_dash(tmp_path, random_weights):
    """`-o -` (standard output, to most tools) wrote a GeoTIFF, a folder of chips or of synthetic
    pairs called "-"; every output refuses it in one line."""
    scene = write_raster(tmp_path / "s.tif", np.random.default_rng(1).integers(100, 3000, (6, 40, 40)).astype("uint16"),
                         transform=T10, nodata=0)
    mask = write_raster(tmp_path / "m.tif", (np.random.default_rng(2).random((40, 40)) < 0.3).astype("uint8"),
                        transform=T10, nodata=255)
    r = run_cli("chip", "--pair", scene, mask, "-o", tmp_path / "chips", "--size", 16)
    assert r.returncode == 0 and "1 scene -> " in r.stderr, r.stderr  # it said "1 scene(s)"
    cases = [
        ["predict", scene, "-o", "-", "--weights", random_weights],
        ["chip", "--pair", scene, mask, "-o", "-", "--size", 16],
        ["occurrence", mask, "--from-masks", "-o", "-"],
        ["synth", "-", "--size", 16],
        ["train", tmp_path / "chips", "-o", "-"],
    ]
    for args in cases:
        r = run_cli(*args, cwd=tmp_path)
        assert refused(r, "S2N-OUTPUT-STDOUT", 2, "'-' would be a file named '-'"), (args, r.stderr)
    assert not (tmp_path / "-").exists()


def test_bands_out_of_range_names_the_scene(tmp_path, random_weights):
    scene = write_raster(tmp_path / "s.tif", np.ones((6, 8, 8), "uint16") * 500, transform=T10)
    r = run_cli("predict", scene, "-o", tmp_path / "o.tif", "--weights", random_weights, "--bands", "1,2,3,4,5,7")
    assert refused(r, "S2N-BANDS-INDEX", 1, scene)


class Payload:
    def __reduce__(self):
        return (os.system, (f"touch {os.environ['S2S2NET_PWNED']}",))


@pytest.mark.parametrize("name", ["model.pt", "model.ckpt", "model.safetensors"])
def test_a_malicious_pickle_given_as_weights_runs_nothing(tmp_path, name):
    marker = tmp_path / "PWNED"
    os.environ["S2S2NET_PWNED"] = str(marker)
    weights = tmp_path / name
    weights.write_bytes(pickle.dumps({"state_dict": Payload()}))
    scene = write_raster(tmp_path / "s.tif", np.ones((6, 8, 8), "uint16") * 500, transform=T10)
    for args in (["predict", scene, "-o", tmp_path / "o.tif", "--weights", weights],
                 ["evaluate", "--weights", weights, "--pair", scene, scene],
                 ["train", tmp_path, "-o", tmp_path / "run", "--init-weights", weights]):
        r = run_cli(*args)
        assert refused(r, "S2N-WEIGHTS-PICKLE", 1, weights), r.stderr
    assert not marker.exists()
    # the payload is real: unpickling it would have run it
    pickle.loads(weights.read_bytes())
    assert marker.exists()


def test_disk_errors_while_writing_leave_no_file(tmp_path, monkeypatch):
    from s2s2net_cli.io import atomic_path

    target = tmp_path / "out.tif"
    with raises_rule("S2N-OUTPUT-WRITE-FAILED", "out.tif"):
        with atomic_path(target) as tmp:
            tmp.write_bytes(b"partial")
            raise OSError(28, "No space left on device")
    assert not target.exists() and list(tmp_path.iterdir()) == []
    # a GeoPackage's SQLite journal beside its temporary file (GDAL 3.7's, on a full disk) goes
    # with it; another file of a name alike is left
    vectors = tmp_path / "water.gpkg"
    (tmp_path / ".water.gpkg-notes").write_text("the user's")
    with raises_rule("S2N-OUTPUT-WRITE-FAILED", "water.gpkg"):
        with atomic_path(vectors) as tmp:
            tmp.write_bytes(b"partial")
            tmp.with_name(tmp.name + "-journal").write_bytes(b"journal")
            raise OSError(28, "No space left on device")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".water.gpkg-notes"]


@pytest.mark.slow
def test_sigkill_during_training_loses_at_most_one_validation_interval(tmp_path):
    from s2s2net_cli.synthetic.scenes import make_pair, write_pair

    p = make_pair(64, seed=77, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    assert run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "-o", tmp_path / "chips", "--size", 16).returncode == 0
    run = tmp_path / "run"
    args = [sys.executable, "-m", "s2s2net_cli", "train", str(tmp_path / "chips"), "-o", str(run), "--batch-size", "2",
            "--val-every", "3"]
    proc = subprocess.Popen(args + ["--max-steps", "500"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while time.time() < deadline:
        lines = (run / "metrics.jsonl").read_text().splitlines() if (run / "metrics.jsonl").exists() else []
        if sum('"train"' in line for line in lines) >= 8:
            break
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    latest = int((run / "checkpoints" / "latest").read_text().strip()[4:])
    logged = max(int(line.split('"step": ')[1].split(",")[0]) for line in (run / "metrics.jsonl").read_text().splitlines()
                 if '"step": ' in line)
    assert logged - latest <= 3 + 1
    r = subprocess.run(args + ["--max-steps", str(latest + 2), "--resume"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    import json

    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()
             if json.loads(line)["kind"] == "train"]
    assert steps == list(range(1, latest + 3))


@pytest.mark.slow
def test_a_failing_rank_ends_the_launch_with_its_message(tmp_path):
    from s2s2net_cli.synthetic.scenes import make_pair, write_pair
    from s2s2net_cli.training.data import chip_splits

    p = make_pair(64, seed=78, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    chips = tmp_path / "chips"
    assert run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "-o", chips, "--size", 16).returncode == 0
    train, _ = chip_splits(chips, seed=42)
    g = torch.Generator()
    g.manual_seed(42)
    perm = torch.randperm(len(train), generator=g).tolist()
    victim = train[perm[1]].image  # the first chip rank 1 reads
    victim.write_bytes(b"broken")
    launcher = Path(sys.executable).parent / "deepspeed"
    start = time.time()
    r = subprocess.run([str(launcher), "--num_gpus", "2", "--master_port", "29533", "--module", "s2s2net_cli", "train",
                        str(chips), "-o", str(tmp_path / "run"), "--batch-size", "2", "--max-steps", "5"],
                       capture_output=True, text=True, env={**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1"},
                       timeout=300)
    assert r.returncode != 0
    assert time.time() - start < 240  # no rank hung until the collective timeout
    assert f"Error: {victim}: chip cannot be read" in r.stdout + r.stderr


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3000), st.integers(32, 512), st.integers(0, 128))
def test_blend_weights_cover_every_pixel_once(size, tile, overlap):
    overlap = min(overlap, tile)
    weights = blend_weights(size, tile, overlap)
    total = np.zeros(5 * (len(weights) * tile + 2 * overlap))
    for i, w in enumerate(weights):
        assert (w > 0).all()
        total[5 * i * tile: 5 * i * tile + len(w)] += w
    assert np.allclose(total[5 * overlap: 5 * (overlap + size)], 1.0, atol=1e-5)


@settings(max_examples=100, deadline=None)
@given(st.floats(-1e6, 1e6), st.floats(-1e7, 1e7), st.floats(0.5, 100), st.integers(1, 5000), st.integers(1, 5000))
def test_fine_grid_shares_origin_and_corners(x0, y0, res, w, h):
    t = Affine(res, 0, x0, 0, -res, y0)
    f = fine_transform(t)
    fh, fw = fine_shape(h, w)
    assert (fh, fw) == (5 * h, 5 * w)
    assert f.c == t.c and f.f == t.f
    for col, row in ((w, h), (w // 2, h // 3)):
        x, y = t * (col, row)
        fx, fy = f * (5 * col, 5 * row)
        assert abs(fx - x) <= 1e-9 * max(1, abs(x)) and abs(fy - y) <= 1e-9 * max(1, abs(y))


@given(st.integers(1, 10000))
def test_padding_is_the_smallest_multiple_of_32(n):
    p = padded_size(n)
    assert p % 32 == 0 and p >= n and p - n < 32 or (n < 32 and p == 32)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.integers(1, 40), st.integers(1, 40))
def test_metric_counts_partition_the_valid_pixels(seed, h, w):
    rng = np.random.default_rng(seed)
    pred, ref, valid = (rng.random((h, w)) > 0.5 for _ in range(3))
    c = count(pred, ref, valid)
    assert c.tp + c.fp + c.fn + c.tn == valid.sum()
    assert c.tp == (pred & ref & valid).sum() and c.tn == (~pred & ~ref & valid).sum()
    swapped = count(ref, pred, valid)
    assert (swapped.fp, swapped.fn) == (c.fn, c.fp)
    s = c.scores()
    if s["f1"] is not None:
        assert 0 <= s["iou"] <= s["f1"] <= 1


@pytest.mark.slow
def test_a_poisoned_deepspeed_checkpoint_is_not_unpickled(tmp_path):
    from s2s2net_cli.synthetic.scenes import make_pair, write_pair

    p = make_pair(32, seed=79, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    chips = tmp_path / "chips"
    assert run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "-o", chips, "--size", 16).returncode == 0
    run = tmp_path / "run"
    assert run_cli("train", chips, "-o", run, "--max-steps", 1, "--batch-size", 2, "--val-every", 1, process=True).returncode == 0
    marker = tmp_path / "PWNED"
    os.environ["S2S2NET_PWNED"] = str(marker)
    states = run / "checkpoints" / "step00000001" / "mp_rank_00_model_states.pt"
    torch.save({"module": Payload()}, states)
    r = run_cli("train", chips, "-o", run, "--max-steps", 2, "--batch-size", 2, "--resume", process=True)
    assert refused(r, "S2N-CHECKPOINT-NOT-WEIGHTS", 1), r.stderr[-2000:]
    assert "(it holds posix.system)" in r.stderr  # what it met, not torch's "This file can still be loaded"
    assert not marker.exists()
