"""The rulebook: every check is an entry with a code, every code used is an entry, and no
refusal or warning is worded outside it."""

import ast
import json
import pickle
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from s2s2net_cli.errors import InputError, OutputExistsError, UsageError, said_as
from s2s2net_cli.rulebook import RULES, S2S2NetWarning, code_of, finding, refuse, warn

PACKAGE = Path(__file__).resolve().parents[1] / "s2s2net_cli"
CODE = re.compile(r"S2N-[A-Z0-9-]+[A-Z0-9]")
ERROR_CLASSES = {"InputError", "UsageError", "OutputExistsError", "S2S2NetError", "BadParameter", "UsageError"}


def _sources():
    return [p for p in PACKAGE.rglob("*.py") if p.name != "rulebook.py"]


def test_every_code_the_package_uses_is_in_the_rulebook_and_every_rule_is_used():
    used = {code for p in _sources() for code in CODE.findall(p.read_text())}
    assert used - set(RULES) == set()
    assert set(RULES) - used == set()
    assert all(CODE.fullmatch(code) for code in RULES)


def test_no_refusal_is_worded_outside_the_rulebook():
    """An error raised with a message of its own (a string or f-string) is a check the rulebook
    does not list: every refusal comes from refuse() or a finding."""
    worded = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
                name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
                if name in ERROR_CLASSES and node.args and isinstance(node.args[0], (ast.Constant, ast.JoinedStr)):
                    worded.append(f"{path.name}:{node.lineno}")
    # shared_scene says which rank failed around another rank's message, which kept its code
    assert [w for w in worded if not w.startswith("shared_scene.py")] == []


def test_every_template_is_well_formed():
    """Each template parses, and renders once its values are given (each its own name)."""
    for rule in RULES.values():
        shown_cli, shown_python = rule.text("cli"), rule.text("python")
        assert "{o." not in shown_cli and "{o." not in shown_python, rule.code
        for option in rule.options:
            assert f"--{option.replace('_', '-')}" in shown_cli, rule.code


def test_a_finding_names_its_options_in_each_interface():
    found = finding("S2N-OFFSET-MISSING", "scene.tif", limit=0.09)
    assert str(found).startswith("scene.tif: even the darkest 1 % of every band is brighter than 0.09")
    assert str(found).endswith("pass --offset -1000")
    assert found.message("python").endswith("pass offset=-1000")
    assert found.to_dict() == {"code": "S2N-OFFSET-MISSING", "severity": "warning", "message": str(found)}
    assert found.at("DataArray").message().startswith("DataArray: ")
    assert RULES["S2N-OFFSET-MISSING"].settled_by("python") == ("offset",)
    assert RULES["S2N-LEAVE-OUT-NO-CRS"].settled_by("python") == ("leave_out",)
    dropped = finding("S2N-TRAIN-CALIBRATION-DROPPED", "w", threshold=0.7, gain=16, plain=0.5, gate="")
    assert dropped.message().endswith("calibrate them with s2s2net weights calibrate (and fit a gate with s2s2net "
                                      "weights gate)")  # the commands a message points to, in each interface's terms
    assert dropped.message("python").endswith("calibrate them with s2n.calibrate() (and fit a gate with s2n.gate())")
    assert RULES["S2N-CHIPS-NO-INDEX"].text("python") == "has no index.gpkg; make chips with s2n.chip()"


def test_a_python_message_gives_values_as_python_writes_them():
    """``keyword=value`` in a Python message can be typed as said: a list a tuple, a word a string."""
    said = {
        ("S2N-CALIBRATE-GAIN-EDGE", (("gain", 32.0), ("larger", "64,96"))): "gains=(32, 64, 96)",
        ("S2N-BANDS-UNDESCRIBED", ()): "bands=(3, 2, 1, 4, 5, 6)",
        ("S2N-PRECISION-UNKNOWN", (("value", "bf17"), ("choices", "auto, 32"))): "precision='bf17'",
        ("S2N-RESUME-OPTION", (("weights", "run/last.safetensors"),)): "init_weights='run/last.safetensors'",
        ("S2N-PAIRS-MISSING", ()): "pairs=(SCENE, MASK)",
        ("S2N-OFFSET-MISSING", (("limit", 0.09),)): "offset=-1000",
        ("S2N-THRESHOLD-RANGE", (("threshold", 1.5),)): "threshold=1.5",
    }
    for (code, values), keyword in said.items():
        values = dict(values)
        fields = set(re.findall(r"\{(\w+)[}:!]", RULES[code].template))  # its values, in option values too
        text = finding(code, "x.tif", **{f: values.get(f, "") for f in fields}).message("python")
        assert keyword in text, (code, text)
        ast.parse(f"f({keyword})")  # Python takes it as written
        cli = finding(code, "x.tif", **{f: values.get(f, "") for f in fields}).message("cli")
        assert "'" not in cli and "(3, 2" not in cli, cli  # the command line's words are unchanged


def test_refuse_gives_the_error_of_the_rules_kind_with_its_finding():
    assert isinstance(refuse("S2N-SCENE-NO-CRS", "a.tif"), InputError)
    assert isinstance(refuse("S2N-OUTPUT-IS-INPUT", "a.tif", held=""), UsageError)
    assert refuse("S2N-OUTPUT-IS-INPUT", "a.tif", held="").exit_code == 2
    exists = refuse("S2N-OUTPUT-EXISTS", "a.tif")
    assert isinstance(exists, OutputExistsError) and code_of(exists) == "S2N-OUTPUT-EXISTS"
    assert str(exists) == "a.tif: already exists (use overwrite to replace it)"  # in Python's terms
    with said_as("cli"):  # as a command says it
        assert str(exists) == "a.tif: already exists (use --overwrite to replace it)"
    assert pickle.loads(pickle.dumps(exists)).finding == exists.finding  # from a worker process, whole
    with pytest.raises(KeyError):
        refuse("S2N-NO-SUCH-RULE", "a.tif")
    with pytest.raises(KeyError):  # a value the template needs and is not given fails where the check is
        refuse("S2N-SCENE-DTYPE", "a.tif")
    with pytest.raises(ValueError):
        refuse("S2N-OFFSET-MISSING", "a.tif", limit=0.09)


def test_notebooks_get_a_warning_category_with_the_code():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn(finding("S2N-SCALE-IMPLAUSIBLE", "DataArray", median=3.0, scale=10000))
    assert len(caught) == 1 and issubclass(caught[0].category, S2S2NetWarning)
    assert caught[0].message.finding.code == "S2N-SCALE-IMPLAUSIBLE"
    assert "(see scale)" in str(caught[0].message)
    assert caught[0].filename == __file__  # the line outside the package that led to it


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "s2s2net_cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd)


def test_checks_lists_every_rule_and_refuses_an_unknown_code():
    r = _cli("checks", "--json")
    assert r.returncode == 0
    listed = json.loads(r.stdout)
    assert [row["code"] for row in listed] == list(RULES)
    offset = next(row for row in listed if row["code"] == "S2N-OFFSET-MISSING")
    assert offset["severity"] == "warning" and offset["cli"] == ["--offset"] and offset["python"] == ["offset"]
    assert "pass --offset -1000" in offset["message"] and "pass offset=-1000" in offset["python_message"]
    r = _cli("checks", "--severity", "warning")
    assert r.returncode == 0 and {line.split()[0] for line in r.stdout.splitlines()} == {
        c for c, rule in RULES.items() if rule.severity == "warning"}
    r = _cli("checks", "S2N-NOPE")
    assert r.returncode == 2 and "[S2N-CHECK-UNKNOWN]" in r.stderr
    # part of a code shows every rule that holds it ("checks WORLD" was "no rule WORLD")
    r = _cli("checks", "world", "dates-not")
    assert r.returncode == 0 and [line.split()[0] for line in r.stdout.splitlines()] == [
        c for c in RULES if "WORLD" in c or "DATES-NOT" in c] and len(r.stdout.splitlines()) >= 4


def test_a_refusal_prints_its_code_and_json_carries_it(tmp_path):
    missing = tmp_path / "nowhere.safetensors"
    r = _cli("weights", "show", missing)
    assert r.returncode == 1
    assert r.stderr.strip() == f"Error: {missing}: weights file not found [S2N-WEIGHTS-NOT-FOUND]"
    scene = tmp_path / "scene.tif"
    scene.write_bytes(b"not a raster")
    r = _cli("predict", scene, "-o", tmp_path / "out.tif", "--json")
    assert r.returncode == 1
    document = json.loads(r.stdout)
    assert document["failures"][0]["code"] == "S2N-SCENE-UNREADABLE"


def test_commands_that_run_a_model_show_the_same_model_options():
    """predict, evaluate, compare and occurrence take the model's options from one bundle: the
    same flags, defaults and help in each (compare's --weights alone repeats)."""
    from dataclasses import fields

    from s2s2net_cli.cli.main import cli
    from s2s2net_cli.inference.options import ModelOptions

    flags = {"--" + f.name.replace("_", "-") for f in fields(ModelOptions)}
    shown = {}
    for name in ("predict", "evaluate", "compare", "occurrence"):
        command = cli.get_command(None, name)
        shown[name] = {p.opts[0]: (p.default, p.help, p.type.name) for p in command.params
                       if p.opts and p.opts[0] in flags}
        assert set(shown[name]) == flags, name
    weights = {name: shown[name].pop("--weights") for name in shown}
    assert shown["predict"] == shown["evaluate"] == shown["compare"] == shown["occurrence"]
    assert weights["predict"] == weights["evaluate"] == weights["occurrence"] != weights["compare"]


@pytest.mark.parametrize("options, code", [
    ({"tile_size": 64, "overlap": 65}, "S2N-OVERLAP-TILE"),
    ({"tile_size": 8}, "S2N-TILE-SIZE"),
    ({"threshold": 1.5}, "S2N-THRESHOLD-RANGE"),
    ({"device": "gpu"}, "S2N-DEVICE-UNKNOWN"),
    ({"precision": "fp8"}, "S2N-PRECISION-UNKNOWN"),
    ({"batch_size": 0}, "S2N-BATCH-SIZE"),
])
def test_model_options_are_checked_where_they_are_made(options, code):
    from s2s2net_cli.inference.options import ModelOptions, PredictOptions

    for make in (ModelOptions, PredictOptions.from_flat):
        with pytest.raises(UsageError) as info:
            make(**options)
        assert code_of(info.value) == code
    assert ModelOptions(tile_size=40).overlap == 40 and ModelOptions().overlap == 64


def test_a_model_option_out_of_range_is_a_usage_error_naming_the_options(tmp_path):
    r = _cli("evaluate", "--baseline", "ndwi", "--pair", "a.tif", "b.tif", "--tile-size", 64, "--overlap", 100)
    assert r.returncode == 2 and r.stderr.strip().endswith("[S2N-OVERLAP-TILE]")
    assert "--overlap 100 is larger than the tile (--tile-size 64)" in r.stderr
