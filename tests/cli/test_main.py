import json
import subprocess
import sys

import numpy as np
from click.testing import CliRunner

import s2s2net_cli as s2n
from s2s2net_cli import __version__
from s2s2net_cli.cli.main import cli

from ..conftest import codes, raises_rule, refused, run_cli, write_raster


def test_help_and_version():
    runner = CliRunner()
    result = runner.invoke(cli, ["--help"])
    assert result.exit_code == 0 and "synth" in result.output
    assert "--local_rank" not in result.output  # hidden
    result = runner.invoke(cli, ["--version"])
    assert result.exit_code == 0 and __version__ in result.output
    # after a command's name too, as -q and --debug are taken (it was "No such option")
    result = runner.invoke(cli, ["predict", "--version"])
    assert result.exit_code == 0 and result.output == f"s2s2net, version {__version__}\n"


def test_clicks_own_parse_errors_end_with_a_code_as_every_error_does(tmp_path):
    """The README: every error ends with a code. Click's own parse errors had none, and --json
    gave "code": null for them; each kind now has a rule, Click's words kept."""
    cases = [(["predict"], "S2N-PARSE-MISSING", "Missing argument 'SCENE...'."),
             (["predict", "s.tif", "-o", "w.tif", "--tile-size", "abc"], "S2N-PARSE-BAD-VALUE",
              "Invalid value for '--tile-size': 'abc' is not a valid integer range."),
             (["predict", "s.tif", "-o", "w.tif", "--bogus"], "S2N-PARSE-NO-SUCH-OPTION", "No such option '--bogus'."),
             (["rivers", "m.tif", "-o", "r.gpkg", "extra"], "S2N-PARSE-USAGE", "Got unexpected extra argument (extra)"),
             (["--bogus", "predict"], "S2N-PARSE-NO-SUCH-OPTION", "No such option '--bogus'.")]
    for args, code, said in cases:
        r = run_cli(*args, "--json")
        last = r.stderr.splitlines()[-1]
        assert r.returncode == 2 and last.startswith(f"Error: {said}") and last.endswith(f" [{code}]"), (args, r.stderr)
        if args[0] != "--bogus":  # the group's own options are read before --json is
            failure = json.loads(r.stdout)["failures"][0]
            assert failure["code"] == code and failure["error"].startswith(said), (args, r.stdout)
    r = run_cli()  # help for no arguments is help, not an error with a code
    assert "Commands:" in r.stdout + r.stderr and "[S2N-" not in r.stdout + r.stderr


def test_a_misspelt_command_gets_the_commands_it_may_mean():
    """The commands load lazily, so Click held none to suggest from: "No such command
    'predcit'." said nothing more. The group's own subgroups (weights) were suggested already."""
    runner = CliRunner()
    for given, meant in (("predcit", "'predict'"), ("Predict", "'predict'"), ("occurence", "'occurrence'")):
        result = runner.invoke(cli, [given, "scene.tif"])
        assert result.exit_code == 2
        assert result.output.splitlines()[-1] == f"Error: No such command '{given}'. Did you mean {meant}? [S2N-PARSE-NO-SUCH-COMMAND]"
    result = runner.invoke(cli, ["foo"])
    assert result.exit_code == 2 and result.output.splitlines()[-1] == "Error: No such command 'foo'. [S2N-PARSE-NO-SUCH-COMMAND]"
    # a subgroup's, said alike on every Click the package takes (before 8.4 Click said no more
    # than "No such command 'shwo'." and the line's code was S2N-PARSE-USAGE)
    result = runner.invoke(cli, ["weights", "shwo", "w.safetensors"])
    assert result.exit_code == 2
    assert result.output.splitlines()[-1] == "Error: No such command 'shwo'. Did you mean 'show'? [S2N-PARSE-NO-SUCH-COMMAND]"


def test_python_dash_m_is_the_same_cli_and_takes_the_launchers_local_rank(tmp_path):
    out = subprocess.run([sys.executable, "-m", "s2s2net_cli", "--local_rank=0", "synth", str(tmp_path), "--size", "16"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "synth_0_scene.tif").exists() and (tmp_path / "manifest.csv").exists()
    again = subprocess.run([sys.executable, "-m", "s2s2net_cli", "--local-rank", "1", "synth", str(tmp_path), "--size", "16"],
                           capture_output=True, text=True)
    assert again.returncode == 1
    assert again.stderr.strip().splitlines() == [f"Error: {tmp_path / 'synth_0_scene.tif'}: already exists (use --overwrite to replace it) [S2N-OUTPUT-EXISTS]"]



GDAL_CACHE_PROBE = """
import ctypes, sys
import rasterio
from click.testing import CliRunner
import s2s2net_cli.synthetic.sets as synth_module
from s2s2net_cli.cli.main import cli

path = next(line.split()[-1] for line in open("/proc/self/maps") if "libgdal" in line)
gdal = ctypes.CDLL(path)
gdal.GDALGetCacheMax64.restype = ctypes.c_int64
seen = []
real_write_pair = synth_module.write_pair
def write_pair(*args):
    seen.append(gdal.GDALGetCacheMax64() // 2 ** 20)
    return real_write_pair(*args)
synth_module.write_pair = write_pair
before = gdal.GDALGetCacheMax64() // 2 ** 20
r = CliRunner().invoke(cli, ["synth", sys.argv[1], "--size", "8", "--no-manifest"])
print(r.exit_code, seen[0], gdal.GDALGetCacheMax64() // 2 ** 20 == before)
"""


def test_gdal_block_cache_is_capped_during_a_command_unless_the_user_sets_it(tmp_path):
    # GDAL's block cache defaults to 5 % of RAM: a command holds it at 256 MB (read from GDAL
    # itself while the command runs), a user's GDAL_CACHEMAX wins, and the process has its own
    # cache back afterwards.
    import os

    env = {k: v for k, v in os.environ.items() if k != "GDAL_CACHEMAX"}
    for user_value, expected in ((None, "256"), ("1024", "1024")):
        run_env = env if user_value is None else {**env, "GDAL_CACHEMAX": user_value}
        out = subprocess.run([sys.executable, "-c", GDAL_CACHE_PROBE, str(tmp_path / str(user_value))],
                             capture_output=True, text=True, env=run_env)
        assert out.stdout.split() == ["0", expected, "True"], out.stderr


def test_every_command_given_json_prints_one_document_on_stdout_when_it_fails(tmp_path):
    """A script reading `evaluate --json` got nothing on stdout when it failed (predict printed its
    document with failures): every command now prints one, naming the failure and its status."""
    import json

    from ..conftest import run_cli

    missing = tmp_path / "missing.tif"
    for args, status in [
        (["evaluate", "--baseline", "ndwi", "--pair", missing, missing, "--json"], 1),
        (["compare", "--baseline", "ndwi", "--pair", missing, missing, "--json"], 1),
        (["chip", "--pair", missing, missing, "-o", tmp_path / "chips", "--json"], 1),
        (["rivers", missing, "-o", tmp_path / "r.gpkg", "--json"], 1),
        (["evaluate", "--baseline", "ndwi", "--pair", missing, missing, "--degrade", "9", "--json"], 2),
        (["evaluate", "--baseline", "ndwi", "--json"], 2),
    ]:
        result = run_cli(*args)
        assert result.returncode == status, (args, result.stderr)
        doc = json.loads(result.stdout)
        (failure,) = doc["failures"]
        assert failure["exit_code"] == status and failure["error"], args
        assert "Traceback" not in result.stderr
    # without --json, stdout stays empty
    assert run_cli("evaluate", "--baseline", "ndwi", "--pair", missing, missing).stdout == ""


STARTUP_PROBE = """
import sys
from s2s2net_cli.cli.main import cli
try:
    cli(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(code, sorted(m for m in ("torch", "deepspeed", "geopandas", "matplotlib") if m in sys.modules))
"""


def test_help_and_usage_errors_load_no_torch(tmp_path):
    """Every command's --help, and a usage error found in its options, answer without importing
    torch, DeepSpeed, geopandas or matplotlib (seconds of start-up before a word)."""
    runs = [["--help"], *([name, "--help"] for name in ("checks", "chip", "compare", "evaluate", "occurrence",
                                                         "predict", "rivers", "synth", "train", "weights"))]
    runs += [["weights", "calibrate", "--help"], ["predict", "s.tif", "-o", "o.tif", "--tile-size", "64", "--overlap", "99"],
             ["evaluate", "--pair", "a.tif", "b.tif", "--device", "gpu"]]
    for args in runs:
        r = subprocess.run([sys.executable, "-c", STARTUP_PROBE, *args], capture_output=True, text=True, cwd=tmp_path)
        code, loaded = r.stdout.strip().splitlines()[-1].split(" ", 1)
        assert loaded.strip() == "[]", (args, loaded)
        assert code in ("0", "2"), (args, r.stdout, r.stderr)


def test_missing_scenes_and_finished_masks_load_no_model(tmp_path, random_weights):
    """`predict missing.tif` says so before torch loads, and a re-run with --skip-existing of
    masks already made checks them from the weights' header and the scenes alone (no torch),
    as a batch loop over finished scenes expects: file-check speed."""
    r = subprocess.run([sys.executable, "-c", STARTUP_PROBE, "predict", "missing.tif", "-o", "m.tif"],
                       capture_output=True, text=True, cwd=tmp_path)
    code, loaded = r.stdout.strip().splitlines()[-1].split(" ", 1)
    assert code == "1" and loaded.strip() == "[]", (r.stdout, r.stderr)
    assert codes(r.stderr) == ["S2N-FILE-NOT-FOUND"] and "missing.tif" in r.stderr
    rng = np.random.default_rng(0)
    scenes = [write_raster(tmp_path / f"s{k}.tif", rng.integers(200, 4000, (6, 24, 24)).astype("uint16"), nodata=0)
              for k in range(3)]
    made = run_cli("predict", *scenes, "-o", tmp_path / "out", "--weights", random_weights, "--tile-size", 32)
    assert made.returncode == 0, made.stderr
    args = ["predict", *map(str, scenes), "-o", "out", "--weights", str(random_weights), "--tile-size", "32",
            "--skip-existing", "--json"]
    r = subprocess.run([sys.executable, "-c", STARTUP_PROBE, *args], capture_output=True, text=True, cwd=tmp_path)
    code, loaded = r.stdout.strip().splitlines()[-1].split(" ", 1)
    assert code == "0" and loaded.strip() == "[]", (r.stdout, r.stderr)
    document = json.loads(r.stdout[: r.stdout.rindex("}") + 1])
    assert len(document["skipped"]) == 3 and not document["scenes"] and not document["failures"]
    # another threshold is another mask: refused, not skipped, and still without a model
    r = subprocess.run([sys.executable, "-c", STARTUP_PROBE, *args, "--threshold", "0.3"], capture_output=True,
                       text=True, cwd=tmp_path)
    assert codes(r.stderr) == ["S2N-OUTPUT-OTHER-MODEL"] * 3, r.stderr
    assert r.stdout.strip().splitlines()[-1].endswith("[]")


def test_scoring_water_indices_loads_no_network(tmp_path):
    """`evaluate --baseline ndwi` and `compare` of baselines run no network, but imported torch
    and the model's libraries to make the Predictor that runs them: 6 s of a 7 s command on an
    AVX2 CPU. They score as before, and torch is not loaded."""
    from affine import Affine

    rng = np.random.default_rng(3)
    scene = write_raster(tmp_path / "scene.tif", rng.integers(100, 3000, (6, 20, 24)).astype("uint16"), nodata=0)
    truth = np.zeros((100, 120), np.uint8)
    truth[10:40, 10:60] = 1
    mask = write_raster(tmp_path / "mask.tif", truth, transform=Affine(2, 0, 500000, 0, -2, 4000000), nodata=255)
    for args in (["evaluate", "--pair", scene, mask, "--baseline", "ndwi", "--json"],
                 ["compare", "--pair", scene, mask, "--baseline", "ndwi", "--baseline", "mndwi", "--json"]):
        r = subprocess.run([sys.executable, "-c", STARTUP_PROBE, *map(str, args)], capture_output=True, text=True,
                           cwd=tmp_path)
        code, loaded = r.stdout.strip().splitlines()[-1].split(" ", 1)
        assert code == "0" and "torch" not in loaded, (args, r.stdout[-500:], r.stderr[-2000:])
        rows = json.loads(r.stdout[: r.stdout.rindex("}") + 1])["rows"]
        assert {row["model"] for row in rows} >= {"ndwi"} and all(0 <= row["f1"] <= 1 for row in rows), rows


def test_a_scene_and_mask_or_an_output_given_as_arguments_are_named_with_the_option_they_need(tmp_path):
    """A newcomer's `evaluate scene.tif label.tif` got Click's "Got unexpected extra arguments",
    and `rivers mask.tif r.gpkg` "Missing option '-o'": each now says which option takes what
    was given, with its code, also in --json (where Click's coded usage errors had code null)."""
    scene = write_raster(tmp_path / "scene.tif", np.ones((6, 8, 8), dtype=np.uint16))
    mask = write_raster(tmp_path / "mask.tif", np.zeros((1, 8, 8), dtype=np.uint8))
    for args, code, told in [
        (["evaluate", scene, mask], "S2N-PAIR-AS-ARGUMENTS", f"--pair {scene} {mask}"),
        (["compare", scene, mask, scene, mask], "S2N-PAIR-AS-ARGUMENTS", f"--pair {scene} {mask} --pair {scene}"),
        (["chip", scene, mask, "-o", tmp_path / "chips"], "S2N-PAIR-AS-ARGUMENTS", f"--pair {scene} {mask}"),
        (["chip", "--pair", scene, mask, "chips/"], "S2N-OUTPUT-AS-ARGUMENT", "--output chips/"),
        (["rivers", mask, "r.gpkg"], "S2N-OUTPUT-AS-ARGUMENT", "--output r.gpkg"),
        (["predict", scene, "water.tif"], "S2N-OUTPUT-AS-ARGUMENT", "--output water.tif"),
        (["train", tmp_path, "run/"], "S2N-OUTPUT-AS-ARGUMENT", "--output run/"),
        (["occurrence", scene, scene, "occ.tif"], "S2N-OUTPUT-AS-ARGUMENT", "--output occ.tif"),
    ]:
        result = run_cli(*args, cwd=tmp_path)
        assert result.returncode == 2, (args, result.stderr)
        assert codes(result.stderr) == [code] and told in result.stderr, (args, result.stderr)
        (failure,) = json.loads(run_cli(*args, "--json", cwd=tmp_path).stdout)["failures"]
        assert failure["code"] == code, args
    assert not (tmp_path / "water.tif").exists() and not (tmp_path / "run").exists()
    # where no reading fits, Click's own line: the last of two scenes exists, so it is a scene
    result = run_cli("predict", scene, mask, cwd=tmp_path)
    assert result.returncode == 2 and "Missing option '-o'" in result.stderr and codes(result.stderr) == ["S2N-PARSE-MISSING"]
    # a rule's usage error said as Click says a bad value carries its code in --json too
    (failure,) = json.loads(run_cli("predict", scene, "-o", "w.tif", "--bbox", "11,10,10,11", "--json",
                                    cwd=tmp_path).stdout)["failures"]
    assert failure["code"] == "S2N-BBOX-WEST-EAST"


def test_a_quoted_pattern_is_said_to_be_one_not_a_missing_file(tmp_path, random_weights):
    """`predict "scenes/*.tif"` (quoted, so no shell expanded it; or from Python) is told that it
    is a pattern that files match, a usage error; a pattern no file matches, or a plain name that
    is not there, is not found as before. Nothing is written."""
    rng = np.random.default_rng(0)
    for k in range(2):
        write_raster(tmp_path / f"s{k}.tif", rng.integers(200, 4000, (6, 24, 24)).astype("uint16"), nodata=0)
    pattern = tmp_path / "s*.tif"
    r = run_cli("predict", pattern, "-o", tmp_path / "out/", "--weights", random_weights)
    assert refused(r, "S2N-FILE-IS-PATTERN", 2, pattern) and "2 file(s) match it" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()
    for missing in (tmp_path / "t*.tif", tmp_path / "s9.tif"):
        assert refused(run_cli("predict", missing, "-o", tmp_path / "m.tif"), "S2N-FILE-NOT-FOUND", 1, missing)
    with raises_rule("S2N-FILE-IS-PATTERN", pattern):
        s2n.predict(str(pattern), tmp_path / "m.tif", weights=random_weights)
