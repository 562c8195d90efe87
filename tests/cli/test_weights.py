"""``s2s2net weights``: a card shown from the header alone, notes added to a copy; bad input gets one line."""

import json
import pickle

import pytest
import torch

from ..conftest import codes, refused, run_cli


def test_show_and_annotate(tmp_path, random_weights):
    card = json.loads(run_cli("weights", "show", random_weights).stdout)
    assert card["model"]["architecture"] == "s2s2net" and card["training"] == {"note": "random init for tests"}
    out = tmp_path / "noted.safetensors"
    r = run_cli("weights", "annotate", random_weights, out, "--set", "recipe=x.sh", "--threshold", 0.6)
    assert r.returncode == 0, r.stderr
    noted = json.loads(run_cli("weights", "show", out).stdout)
    assert noted["threshold"] == 0.6 and noted["training"] == {"note": "random init for tests", "recipe": "x.sh"}
    r = run_cli("weights", "annotate", random_weights, tmp_path / "noted.pt")  # the name of a pickle, never loaded
    assert r.returncode == 2 and codes(r.stderr) == ["S2N-OUTPUT-SUFFIX"] and "noted.pt" in r.stderr
    assert not (tmp_path / "noted.pt").exists()
    # a note named for a field of the card (--set threshold=0.1) left the card's threshold as it was,
    # beside a note that said otherwise; it is refused, with how the field is set
    for note, how in (("threshold=0.1", "(set it with --threshold)"), ("ndwi_prior=3", "(set it with --ndwi-prior)"),
                      ("bands=B02", "(training sets it)")):
        r = run_cli("weights", "annotate", random_weights, tmp_path / "field.safetensors", "--set", note)
        assert refused(r, "S2N-WEIGHTS-NOTE-IS-FIELD", 2) and how in r.stderr, r.stderr
    assert not (tmp_path / "field.safetensors").exists()



@pytest.mark.parametrize("command", ["annotate", "calibrate", "gate"])
def test_the_weights_written_are_named_as_dst_or_by_output(tmp_path, random_weights, command):
    """Every other command names what it writes with -o: here it was "No such option '-o'",
    with no code. DST or -o/--output, one of them; neither or both get one line with a code."""
    out = tmp_path / "out.safetensors"
    extra = {"annotate": ["--set", "a=b"], "calibrate": ["--synthetic-scenes", 1, "--synthetic-size", 64,
                                                        "--gains", "0"],
             "gate": ["--synthetic-scenes", 1]}[command]
    r = run_cli("weights", command, random_weights, "-o", out, *extra)
    assert r.returncode == 0, r.stderr
    assert json.loads(run_cli("weights", "show", out).stdout)["model"]["architecture"] == "s2s2net"
    r = run_cli("weights", command, random_weights, tmp_path / "dst.safetensors", "--output", tmp_path / "o.safetensors")
    assert refused(r, "S2N-OPTIONS-EXCLUSIVE", 2, "give DST or --output, not both")
    r = run_cli("weights", command, random_weights)
    assert refused(r, "S2N-WEIGHTS-DST-MISSING", 2, "give the weights file to write: DST, after SRC, or --output")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.safetensors"]

def test_an_ndwi_prior_annotated_is_what_predict_runs(tmp_path, random_weights, scene_factory):
    import numpy as np
    import rasterio

    scene = scene_factory(24, 28, seed=3)
    with_prior, without = tmp_path / "with.safetensors", tmp_path / "without.safetensors"
    assert run_cli("weights", "annotate", random_weights, with_prior, "--ndwi-prior", 20).returncode == 0
    assert json.loads(run_cli("weights", "show", with_prior).stdout)["ndwi_prior"] == 20.0
    assert run_cli("weights", "annotate", with_prior, without, "--ndwi-prior", 0).returncode == 0  # taken off again
    probabilities = {}
    for weights in (random_weights, with_prior, without):
        out = tmp_path / f"{weights.stem}.tif"
        r = run_cli("predict", scene, "-o", out, "--weights", weights, "--probability", "--precision", "32")
        assert r.returncode == 0, r.stderr
        with rasterio.open(out) as src:
            probabilities[weights.stem] = src.read(1).astype(int)
            assert src.tags()["ndwi_prior"] == ("20" if weights == with_prior else "0")
    assert np.array_equal(probabilities["without"], probabilities["random"])
    changed = probabilities["with"] != probabilities["random"]
    assert changed.any()
    # only towards water: the prior never lowers a probability
    assert (probabilities["with"][changed] > probabilities["random"][changed]).all()


def test_bad_input_gets_one_line(tmp_path, random_weights):
    missing = tmp_path / "missing.safetensors"
    r = run_cli("weights", "show", missing)
    assert refused(r, "S2N-WEIGHTS-NOT-FOUND", 1, missing) and len(r.stderr.strip().splitlines()) == 1
    pickled = tmp_path / "model.pt"
    pickled.write_bytes(pickle.dumps({"weight": [1, 2, 3]}))
    r = run_cli("weights", "annotate", pickled, tmp_path / "out.safetensors")
    assert refused(r, "S2N-WEIGHTS-PICKLE", 1, pickled)
    assert not (tmp_path / "out.safetensors").exists()
    existing = tmp_path / "existing.safetensors"
    existing.write_bytes(b"keep me")
    r = run_cli("weights", "annotate", random_weights, existing, "--set", "a=b")
    assert refused(r, "S2N-OUTPUT-EXISTS", 1, existing)
    assert existing.read_bytes() == b"keep me"
    r = run_cli("weights", "annotate", random_weights, existing, "--set", "no-equals-sign")
    assert r.returncode == 2 and codes(r.stderr) == ["S2N-NAME-VALUE"] and "no-equals-sign" in r.stderr
    from s2s2net_cli.bands import BandSpec
    from s2s2net_cli.checkpoint import WeightsCard, save_weights
    from s2s2net_cli.model import ModelConfig, S2S2Net

    card = WeightsCard(model=ModelConfig(in_channels=4), bands=BandSpec(("B02", "B03", "B04", "B08"), 10000, (0.1,) * 4, (0.1,) * 4))
    rgbn = save_weights(tmp_path / "rgbn.safetensors", S2S2Net(config=card.model).state_dict(), card)
    r = run_cli("weights", "annotate", rgbn, tmp_path / "rgbn_prior.safetensors", "--ndwi-prior", 8)
    assert r.returncode == 1 and not (tmp_path / "rgbn_prior.safetensors").exists()
    assert refused(r, "S2N-WEIGHTS-ANNOTATE-INVALID", 1, f"{rgbn}: weights of bands B02, B03, B04, B08: an NDWI prior")
    r = run_cli("weights", "annotate", random_weights, tmp_path / "huge.safetensors", "--ndwi-prior", 500)
    assert r.returncode == 2 and "--ndwi-prior" in r.stderr and not (tmp_path / "huge.safetensors").exists()
    assert run_cli("weights", "annotate", random_weights, existing, "--overwrite").returncode == 0
    assert json.loads(run_cli("weights", "show", existing).stdout)["model"]["architecture"] == "s2s2net"


@pytest.mark.parametrize("command", ["predict", "evaluate", "compare"])
def test_a_missing_or_unreadable_weights_file_gets_one_line_from_every_command(tmp_path, command):
    from s2s2net_cli.synthetic.scenes import make_pair, write_pair

    write_pair(make_pair(40, seed=3), tmp_path / "s.tif", tmp_path / "m.tif")
    pickled = tmp_path / "model.pt"
    pickled.write_bytes(pickle.dumps({"weight": [1, 2, 3]}))
    args = {"predict": [tmp_path / "s.tif", "-o", tmp_path / "out.tif"],
            "evaluate": ["--pair", tmp_path / "s.tif", tmp_path / "m.tif"],
            "compare": ["--pair", tmp_path / "s.tif", tmp_path / "m.tif"]}[command]
    for weights, says in ((tmp_path / "missing.safetensors", "weights file not found"),
                          (pickled, "not a safetensors weights file")):
        r = run_cli(command, *args, "--weights", weights)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 1 and len(lines) == 1 and lines[0].startswith(f"Error: {weights}: {says}"), r.stderr
    assert not (tmp_path / "out.tif").exists()


def test_default_names_the_bundled_weights_wherever_a_weights_file_is_taken(tmp_path):
    """After `pip install` the bundled file lies in site-packages: `default` names it."""
    from s2s2net_cli.checkpoint import load_weights, read_card
    from s2s2net_cli.weights_header import BUNDLED_WEIGHTS

    shown = run_cli("weights", "show", "default", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == read_card(BUNDLED_WEIGHTS).to_dict()
    out = tmp_path / "v6_again.safetensors"
    assert run_cli("weights", "annotate", "default", out, "--set", "note=copy", cwd=tmp_path).returncode == 0
    assert read_card(out).threshold == read_card(BUNDLED_WEIGHTS).threshold
    state, _ = load_weights("default")
    assert set(state) == set(load_weights(BUNDLED_WEIGHTS)[0])
    # a file of that name in the working folder is what it names there
    (tmp_path / "default").write_bytes(b"not weights")
    result = run_cli("weights", "show", "default", cwd=tmp_path)
    assert result.returncode == 1 and result.stderr.startswith("Error: default:")


def test_predict_weights_default_is_the_bundled_model(tmp_path):
    import numpy as np
    import rasterio

    from ..conftest import write_raster

    rng = np.random.default_rng(0)
    scene = write_raster(tmp_path / "s.tif", rng.integers(200, 3000, (6, 32, 32)).astype("uint16"), nodata=0,
                         descriptions=("B02", "B03", "B04", "B08", "B11", "B12"))
    for name, args in (("named.tif", ["--weights", "default"]), ("bundled.tif", [])):
        result = run_cli("predict", scene, "-o", tmp_path / name, "--precision", "32", *args, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
    with rasterio.open(tmp_path / "named.tif") as a, rasterio.open(tmp_path / "bundled.tif") as b:
        assert a.tags()["model_sha256"] == b.tags()["model_sha256"] and (a.read() == b.read()).all()
    label = write_raster(tmp_path / "l.tif", rng.integers(0, 2, (32, 32)).astype("uint8"), nodata=255)
    names = []  # compare called it "default" when named, "default.safetensors" (as the masks' tags) when not
    for args in (["--weights", "default"], []):
        result = run_cli("compare", "--pair", scene, label, "--precision", "32", "--json", *args, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        names.append(json.loads(result.stdout)["rows"][0]["model"])
    assert names == ["default.safetensors", "default.safetensors"]


def _water_scene(path, seed: int):
    """A 40 x 40 px scene whose random water pixels (30 %) have water's spectra: (scene, water, t10)."""
    import numpy as np
    from affine import Affine

    from ..conftest import write_raster

    water = np.random.default_rng(seed).random((40, 40)) < 0.3
    dn = np.where(water, np.array([600, 900, 500, 300, 200, 100])[:, None, None],
                  np.array([600, 700, 600, 3000, 2500, 1500])[:, None, None]).astype("uint16")
    t10 = Affine(10, 0, 500000, 0, -10, 4000000)
    return write_raster(path, dn, transform=t10, nodata=0, descriptions=("B02", "B03", "B04", "B08", "B11", "B12")), \
        water, t10


def test_calibrate_chooses_the_best_threshold_and_gain_and_writes_them(tmp_path, random_weights):
    """The threshold and NDWI prior written are those whose mean F1 (synthetic scenes, labelled
    pairs) is the best of the table calibrate prints; a label on no grid of its scene is refused."""
    import numpy as np

    from ..conftest import write_raster

    scene, water, t10 = _water_scene(tmp_path / "scene.tif", seed=1)
    label = write_raster(tmp_path / "label.tif", water.astype("uint8"), transform=t10, nodata=255)
    out = tmp_path / "calibrated.safetensors"
    (tmp_path / "labels.csv").write_text("image,mask\nscene.tif,label.tif\n")
    r = run_cli("weights", "calibrate", random_weights, out, "--pair", scene, label, "--manifest", tmp_path / "labels.csv",
                "--gains", "0,16",
                "--synthetic-scenes", 2, "--synthetic-size", 48, "--json")
    assert r.returncode == 0, r.stderr
    found = json.loads(r.stdout)
    means = {(g, t): np.mean([s[k] for s in found["scores"][g].values()])
             for g in found["scores"] for k, t in enumerate(found["thresholds"])}
    assert set(found["scores"]["0"]) == {"synthetic", "pairs", "labels"}
    best = max(means.values())
    assert means[(f"{found['ndwi_prior']:g}", found["threshold"])] == best
    # the largest gain tried chosen: a larger one may score better, and the command says so
    said = [w["code"] for w in found["warnings"]]
    warned = "S2N-CALIBRATE-GAIN-EDGE" in said
    assert warned == (found["ndwi_prior"] == 16) == ("S2N-CALIBRATE-GAIN-EDGE" in codes(r.stderr))
    # how its scene was read, as predict says it: once, though two sources hold it
    assert [c for c in said if c != "S2N-CALIBRATE-GAIN-EDGE"] == ["S2N-SCENE-SMALL"]
    # a run of minutes said nothing until it ended: each scene scored (every gain at once) is a step of its progress
    assert all(f"calibrate: scenes: {k}/4 ({k / 4:.0%})" in r.stderr for k in range(1, 5)), r.stderr
    card = json.loads(run_cli("weights", "show", out).stdout)
    assert card["threshold"] == found["threshold"] and card["ndwi_prior"] == found["ndwi_prior"]
    assert "weights calibrate" in card["training"]["calibration"]
    r = run_cli("weights", "calibrate", random_weights, out, "--synthetic-scenes", 1, "--synthetic-size", 48)
    assert refused(r, "S2N-OUTPUT-EXISTS", 1, out)
    off_grid = write_raster(tmp_path / "off.tif", water[:30].astype("uint8"), transform=t10, nodata=255)
    r = run_cli("weights", "calibrate", random_weights, tmp_path / "x.safetensors", "--pair", scene, off_grid,
                "--synthetic-scenes", 1, "--synthetic-size", 48)
    assert refused(r, "S2N-CALIBRATE-GRID", 1, off_grid) and not (tmp_path / "x.safetensors").exists()
    r = run_cli("weights", "calibrate", random_weights, tmp_path / "x.safetensors", "--gains", "0,500")
    assert r.returncode == 2 and codes(r.stderr) == ["S2N-GAINS-RANGE"]
    r = run_cli("weights", "calibrate", tmp_path / "nowhere.safetensors", tmp_path / "x.safetensors",
                "--synthetic-scenes", 1, "--synthetic-size", 48)
    assert refused(r, "S2N-WEIGHTS-NOT-FOUND", 1, tmp_path / "nowhere.safetensors")
    assert not (tmp_path / "x.safetensors").exists() and not list(tmp_path.glob(".*"))


def test_calibrate_warns_of_test_rows_it_chooses_on(tmp_path, random_weights):
    """A manifest's split=test rows were calibrated on without a word: the threshold chosen on a
    hold-out makes its later scores no hold-out's. Each is named; the other rows are not."""
    from ..conftest import write_raster

    scene, water, t10 = _water_scene(tmp_path / "scene.tif", seed=1)
    for name in ("label.tif", "label_b.tif"):  # one pair twice is refused: two labels of one scene
        write_raster(tmp_path / name, water.astype("uint8"), transform=t10, nodata=255)
    (tmp_path / "labels.csv").write_text("image,mask,id,split\nscene.tif,label.tif,a,test\nscene.tif,label_b.tif,b,train\n")
    r = run_cli("weights", "calibrate", random_weights, tmp_path / "c.safetensors", "--manifest", tmp_path / "labels.csv",
                "--gains", "0", "--synthetic-scenes", 1, "--synthetic-size", 48, "--json")
    assert r.returncode == 0, r.stderr
    warned = [w for w in json.loads(r.stdout)["warnings"] if w["code"] == "S2N-CALIBRATE-TEST-PAIR"]
    assert len(warned) == 1 and warned[0]["message"].startswith(f"{scene}: is marked split=test")
    assert codes(r.stderr) == ["S2N-CALIBRATE-TEST-PAIR"]


def test_calibrate_refuses_a_label_of_other_values_as_evaluate_does(tmp_path, random_weights):
    """calibrate never read its labels' values: a 0/255 mask's water (255, untagged) was left out
    as unseen, its F1 0.0 at every threshold, and a threshold chosen on the synthetic scenes
    alone without a word. Its labels are checked as evaluate's are, in the terms of a command
    without --nodata."""
    from ..conftest import write_raster

    scene, water, t10 = _water_scene(tmp_path / "scene.tif", seed=1)
    write_raster(tmp_path / "label.tif", water.astype("uint8") * 255, transform=t10)
    r = run_cli("weights", "calibrate", random_weights, tmp_path / "c.safetensors", "--pair", scene,
                tmp_path / "label.tif", "--gains", "0", "--synthetic-scenes", 1, "--synthetic-size", 48)
    assert refused(r, "S2N-MASK-NO-WATER-VALUE", 1, tmp_path / "label.tif"), r.stderr
    assert "make it 1; if it means nodata, tag the value that means nodata (rio edit-info" in r.stderr
    assert not (tmp_path / "c.safetensors").exists()


def test_calibrate_warns_when_the_largest_gain_tried_scores_best():
    """Calibrate chose the largest gain it tried without a word (fold models scored better at
    100 than at 32, the default list's last): it says to try larger ones, and how."""
    from s2s2net_cli.errors import said_as
    from s2s2net_cli.evaluation.calibrate import gain_edge

    (edge,) = gain_edge(32.0, (0.0, 4.0, 8.0, 16.0, 32.0), "w.safetensors")
    assert edge.code == "S2N-CALIBRATE-GAIN-EDGE"
    with said_as("cli"):
        assert str(edge).endswith("try it with --gains 32,64,96")
    assert str(gain_edge(50.0, (0.0, 50.0), "w")[0]).endswith(" 50,100")  # up to the largest allowed
    # a gain inside the range, the only one tried, none, or the largest allowed: nothing to say
    assert gain_edge(16.0, (0.0, 16.0, 32.0), "w") == gain_edge(16.0, (16.0,), "w") == []
    assert gain_edge(0.0, (0.0,), "w") == gain_edge(100.0, (0.0, 100.0), "w") == []


def test_calibrate_scores_water_polygons_as_the_2m_label_they_trace(tmp_path, random_weights):
    import numpy as np
    from affine import Affine

    from ..conftest import write_polygons, write_raster

    scene, water, t10 = _water_scene(tmp_path / "scene.tif", seed=2)
    fine = np.repeat(np.repeat(water, 5, 0), 5, 1).astype("uint8")
    label = write_raster(tmp_path / "label2m.tif", fine, transform=t10 @ Affine.scale(1 / 5), nodata=255)
    polygons = write_polygons(tmp_path / "water.gpkg", fine, t10 @ Affine.scale(1 / 5))
    found = []
    for k, mask in enumerate((label, polygons)):
        r = run_cli("weights", "calibrate", random_weights, tmp_path / f"c{k}.safetensors", "--pair", scene, mask,
                    "--gains", "0,16", "--synthetic-scenes", 1, "--synthetic-size", 48, "--json")
        assert r.returncode == 0, r.stderr
        found.append(json.loads(r.stdout))
    assert found[1]["scores"] == found[0]["scores"] and found[1]["threshold"] == found[0]["threshold"]


def _mask_and_tags(path):
    import rasterio

    with rasterio.open(path) as src:
        return src.read(1), src.tags()


def test_a_fitted_water_gate_skips_the_head_and_keeps_the_mask(tmp_path, random_weights, scene_factory):
    """weights gate writes a gate into a copy; predict then runs the head where the gate cannot
    rule water out (head=gated), and its mask is --full-head's; probabilities run the full head."""
    from s2s2net_cli.checkpoint import load_model

    scene = scene_factory(48, 40, seed=5)
    gated = tmp_path / "gated.safetensors"
    r = run_cli("weights", "gate", random_weights, gated, "--synthetic-scenes", 2, "--scene", scene, "--json")
    assert r.returncode == 0, r.stderr
    fit = json.loads(r.stdout)
    assert fit["inputs"] == 3 and fit["margin"] >= 0.5 and 0 <= fit["missed_fraction"] <= 1e-6
    # its progress: 3 windows, then the fit's 12 bounds (the fit alone held the bar for minutes)
    steps = [line for line in r.stderr.splitlines() if line.startswith("gate: windows read, then the fit: ")]
    assert steps[-1].startswith("gate: windows read, then the fit: 15/15 (100%)"), r.stderr
    assert fit["water_margin"] >= 0.5 and 0 <= fit["wrong_water_fraction"] <= 1e-6
    assert 0 <= fit["filled_fraction"] and fit["active_fraction"] + fit["filled_fraction"] <= 1
    fine = fit["fine"]  # the fine gate, fitted alike on the head's 10 m features
    assert fine["margin"] >= 0.5 and 0 <= fine["missed_fraction"] <= 1e-6 and 0 <= fine["wrong_water_fraction"] <= 1e-6
    assert 0 <= fit["both_active_fraction"] <= min(fit["active_fraction"], fine["active_fraction"])
    model, card = load_model(gated)
    assert model.gate.bounds == 2 and load_model(random_weights)[0].gate is None
    assert model.fine_gate.bounds == 2 and load_model(random_weights)[0].fine_gate is None
    assert "a fine gate on the head's 10 m features" in card.training["gate"]
    assert "water gate by s2s2net weights gate (2 synthetic scenes and 1 given with --scene" in card.training["gate"]
    masks = {}
    for name, extra in (("gated", []), ("full", ["--full-head"]), ("prob", ["--probability"])):
        out = tmp_path / f"{name}.tif"
        r = run_cli("predict", scene, "-o", out, "--weights", gated, "--precision", "32", "--json", *extra)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["scenes"][0]["head"] == ("gated" if name == "gated" else "full")
        masks[name], tags = _mask_and_tags(out)
        assert tags["head"] == json.loads(r.stdout)["scenes"][0]["head"]
    assert (masks["gated"] == masks["full"]).mean() >= 0.999
    # the same fit records each head step's input range: what --precision int8 rounds to 8 bits
    assert card.int8_ranges == [tuple(r) for r in fit["int8_ranges"]] and len(card.int8_ranges) == 4
    assert all(low < high for low, high in card.int8_ranges)
    r = run_cli("predict", scene, "-o", tmp_path / "int8.tif", "--weights", gated, "--precision", "int8", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["scenes"][0]["precision"] == "int8"
    mask, tags = _mask_and_tags(tmp_path / "int8.tif")
    assert tags["precision"] == "int8" and (mask == masks["gated"]).mean() >= 0.99


def test_weights_with_a_land_bound_only_still_load_and_skip_the_head(tmp_path, random_weights, scene_factory):
    """A gate fitted before the water bound (its tensors those of one bound, and no fine gate)
    loads as a one-bound gate: predict skips the head where it rules water out and fills no cell
    as water."""
    from s2s2net_cli.checkpoint import FINE_GATE_PREFIX, GATE_PREFIX, load_model, load_weights, save_weights
    from s2s2net_cli.model import GATE_HIDDEN

    scene = scene_factory(48, 40, seed=5)
    gated = tmp_path / "gated.safetensors"
    assert run_cli("weights", "gate", random_weights, gated, "--synthetic-scenes", 1).returncode == 0
    state, card = load_weights(gated)
    for name in ("reduce.weight", "reduce.bias"):
        state[GATE_PREFIX + name] = state[GATE_PREFIX + name][:GATE_HIDDEN].clone()
    for name in ("score.weight", "score.bias"):
        state[GATE_PREFIX + name] = state[GATE_PREFIX + name][:1].clone()
    state = {name: t for name, t in state.items() if not name.startswith(FINE_GATE_PREFIX)}
    older = tmp_path / "older.safetensors"
    save_weights(older, state, card)
    assert load_model(older)[0].gate.bounds == 1 and load_model(older)[0].fine_gate is None
    masks = {}
    for name, weights in (("older", older), ("gated", gated)):
        out = tmp_path / f"{name}.tif"
        r = run_cli("predict", scene, "-o", out, "--weights", weights, "--precision", "32", "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["scenes"][0]["head"] == "gated"
        masks[name] = _mask_and_tags(out)[0]
    assert (masks["older"] == masks["gated"]).mean() >= 0.999


def test_weights_whose_gate_has_a_bound_too_many_are_refused(tmp_path, random_weights, scene_factory):
    from s2s2net_cli.checkpoint import GATE_PREFIX, load_weights, save_weights

    gated = tmp_path / "gated.safetensors"
    assert run_cli("weights", "gate", random_weights, gated, "--synthetic-scenes", 1).returncode == 0
    state, card = load_weights(gated)
    for name in ("reduce.weight", "reduce.bias", "score.weight", "score.bias"):
        tensor = state[GATE_PREFIX + name]
        state[GATE_PREFIX + name] = torch.cat([tensor, tensor[: len(tensor) // 2]])  # a third bound
    odd = tmp_path / "odd.safetensors"
    save_weights(odd, state, card)
    out = tmp_path / "out.tif"
    r = run_cli("predict", scene_factory(40, 40, seed=3), "-o", out, "--weights", odd)
    assert r.returncode == 1 and codes(r.stderr) == ["S2N-WEIGHTS-TENSOR-SHAPE"] and str(odd) in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not out.exists()


def test_int8_needs_weights_with_int8_ranges(tmp_path, random_weights, scene_factory):
    scene, out = scene_factory(40, 40, seed=2), tmp_path / "out.tif"
    r = run_cli("predict", scene, "-o", out, "--weights", random_weights, "--precision", "int8")
    assert r.returncode == 1 and codes(r.stderr) == ["S2N-INT8-NO-RANGES"] and str(random_weights) in r.stderr
    assert "weights gate" in r.stderr and len(r.stderr.strip().splitlines()) == 1 and not out.exists()
    r = run_cli("train", tmp_path, "-o", tmp_path / "run", "--precision", "int8")
    assert r.returncode == 2 and "int8" in r.stderr  # a precision to run in, not to train in


def test_the_bundled_gate_keeps_the_bundled_mask(tmp_path):
    from s2s2net_cli.synthetic.scenes import make_pair, write_pair

    scene = tmp_path / "scene.tif"
    write_pair(make_pair(128, seed=9001), scene, tmp_path / "truth.tif")
    masks = {}
    for name, extra in (("gated", []), ("full", ["--full-head"])):
        out = tmp_path / f"{name}.tif"
        r = run_cli("predict", scene, "-o", out, "--precision", "32", *extra)
        assert r.returncode == 0, r.stderr
        masks[name], tags = _mask_and_tags(out)
        assert tags["head"] == name
    assert (masks["gated"] == masks["full"]).mean() >= 0.999 and (masks["full"] == 1).any()
    r = run_cli("predict", scene, "-o", tmp_path / "int8.tif", "--precision", "int8")
    assert r.returncode == 0, r.stderr
    assert (_mask_and_tags(tmp_path / "int8.tif")[0] == masks["gated"]).mean() >= 0.999
    r = run_cli("predict", scene, "-o", tmp_path / "all.tif", "--precision", "32", "--threshold", 0, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["scenes"][0]["head"] == "full"  # every pixel water: no gate


def test_a_gate_needs_something_to_fit_on(tmp_path, random_weights):
    out = tmp_path / "gated.safetensors"
    r = run_cli("weights", "gate", random_weights, out, "--synthetic-scenes", 0)
    assert r.returncode == 2 and codes(r.stderr) == ["S2N-GATE-NO-INPUT"] and "--scene" in r.stderr
    assert not out.exists()
    out.write_bytes(b"kept")
    r = run_cli("weights", "gate", random_weights, out, "--synthetic-scenes", 1)
    assert r.returncode != 0 and out.read_bytes() == b"kept"


def test_a_run_folder_given_as_weights_names_its_weights(tmp_path, random_weights, scene_factory):
    """--weights run/ (the folder train wrote) was Click's "File 'run' is a directory"; the
    folder is told apart from a weights file by every command that reads weights, and a run's
    folder is answered with its two weights files. Nothing is written."""
    import shutil

    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(random_weights, run / "best.safetensors")
    shutil.copy(random_weights, run / "last.safetensors")
    (tmp_path / "empty").mkdir()
    scene = scene_factory(24, 28, seed=3)
    out = tmp_path / "out"
    for args in (["predict", scene, "-o", out / "w.tif", "--weights", run],
                 ["weights", "show", run],
                 ["weights", "annotate", run, out / "a.safetensors"],
                 ["weights", "calibrate", run, out / "c.safetensors"]):
        r = run_cli(*args)
        assert refused(r, "S2N-WEIGHTS-IS-RUN", 1, run), (args, r.stderr)
        assert f"give {run / 'best.safetensors'} or {run / 'last.safetensors'}" in r.stderr
    r = run_cli("predict", scene, "-o", out / "w.tif", "--weights", tmp_path / "empty")
    assert refused(r, "S2N-WEIGHTS-IS-FOLDER", 1, tmp_path / "empty")
    assert not out.exists()


def test_a_runs_checkpoint_given_as_weights_names_the_runs_weights(tmp_path, random_weights, scene_factory):
    """--weights run/checkpoints/stepN (or its DeepSpeed pickle) was "is a folder" or "looks like
    a PyTorch zip pickle ... export to .safetensors", with no word of how: the run's own weights
    files are named, for every path inside its checkpoints folder."""
    import shutil

    run = tmp_path / "run"
    step = run / "checkpoints" / "step00000006"
    step.mkdir(parents=True)
    (step / "mp_rank_00_model_states.pt").write_bytes(b"PK\x03\x04" + bytes(60))
    (run / "checkpoints" / "latest").write_text("step00000006")
    shutil.copy(random_weights, run / "last.safetensors")
    scene = scene_factory(24, 28, seed=3)
    out = tmp_path / "out"
    for weights in (run / "checkpoints", step, step / "mp_rank_00_model_states.pt", run / "checkpoints" / "latest"):
        for args in (["predict", scene, "-o", out / "w.tif", "--weights", weights], ["weights", "show", weights]):
            r = run_cli(*args)
            assert refused(r, "S2N-WEIGHTS-IS-CHECKPOINT", 1, weights), (args, r.stderr)
            assert f"give {run / 'last.safetensors'}" in r.stderr
    assert not out.exists()
    other = tmp_path / "checkpoints"  # a folder of that name, but no run's
    other.mkdir()
    (other / "model.pt").write_bytes(b"PK\x03\x04" + bytes(60))
    r = run_cli("weights", "show", other / "model.pt")
    assert refused(r, "S2N-WEIGHTS-ZIP-PICKLE", 1, other / "model.pt")


SAMPLE_PRODUCT = "sample_data/S2B_MSIL2A_20230823T155559_N0509_R122_T18SVG_20230823T184759.SAFE.zip"
SAMPLE_CROP = "sample_data/virginia_shoreline_s2_6band_10m.tif"


def _calibrated(tmp_path, scene, label, *options):
    """calibrate's JSON for the bundled weights on one labelled pair, and its stderr."""
    r = run_cli("weights", "calibrate", "default", tmp_path / "c.safetensors", "--pair", scene, label, "--gains", "0,16",
                "--synthetic-scenes", 1, "--synthetic-size", 48, "--json", "--overwrite", *options)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), r.stderr


def test_calibrate_reads_scenes_as_predict_does_with_its_options_and_warnings(tmp_path):
    """calibrate opened each pair's scene with rasterio to check its label's grid, so a product
    (what evaluate and chip take) failed with GDAL's "not recognized as being in a supported
    file format" and no code; it took no scene options (a 2022+ stack's --offset -1000) and said
    nothing of how its scenes were read (S2N-OFFSET-MISSING), so it chose on scenes read wrongly
    without a word. Each score is that of predict's mask, here scored against itself."""
    import numpy as np
    import rasterio
    from affine import Affine

    from ..conftest import write_raster

    at = None
    for scene in (SAMPLE_PRODUCT, SAMPLE_CROP):
        label = tmp_path / f"{len(scene)}_label.tif"  # the bundled model's own mask, as calibrate runs it
        r = run_cli("predict", scene, "-o", label, "--precision", 32, "--full-head")
        assert r.returncode == 0, r.stderr
        found, said = _calibrated(tmp_path, scene, label)
        at = found["thresholds"].index(0.7)  # the bundled weights' threshold and gain: their mask exactly
        assert found["scores"]["16"]["pairs"][at] == 1.0 and found["scores"]["0"]["pairs"][at] < 1.0
        assert "S2N-OFFSET-MISSING" not in codes(said)
    # the crop as a stack of processing baseline 04.00 on stores it: DN + 1000
    with rasterio.open(SAMPLE_CROP) as src:
        plus = write_raster(tmp_path / "plus.tif", src.read() + 1000, transform=src.transform, crs=src.crs, nodata=0,
                            descriptions=src.descriptions)
    found, said = _calibrated(tmp_path, plus, label)
    assert "S2N-OFFSET-MISSING" in [w["code"] for w in found["warnings"]] and "S2N-OFFSET-MISSING" in codes(said)
    assert found["scores"]["16"]["pairs"][at] < 0.99
    found, said = _calibrated(tmp_path, plus, label, "--offset", -1000)
    assert found["scores"]["16"]["pairs"][at] == 1.0 and "S2N-OFFSET-MISSING" not in codes(said)
    # an area of interest: the label read where it lies under the window predict reads (a 10 m label
    # here, the 2 m mask's cells at least half water), scored as evaluate scores the same window
    with rasterio.open(label) as src:
        fine, t2, crs = src.read(1), src.transform, src.crs
    cells = fine.reshape(fine.shape[0] // 5, 5, fine.shape[1] // 5, 5).mean((1, 3)) >= 0.5
    label10 = write_raster(tmp_path / "label10.tif", cells.astype("uint8"), transform=t2 @ Affine.scale(5), crs=crs,
                           nodata=255)
    bbox = "-75.61039,37.72396,-75.58115,37.74718"  # the crop's middle, its window 30 % in from the west
    found, _ = _calibrated(tmp_path, SAMPLE_CROP, label10, "--bbox", bbox)
    r = run_cli("evaluate", "--pair", SAMPLE_CROP, label10, "--bbox", bbox, "--precision", 32, "--full-head", "--json")
    assert r.returncode == 0, r.stderr
    scored = json.loads(r.stdout)["rows"][0]
    assert found["scores"]["16"]["pairs"][at] == scored["f1"] < 1.0
    assert np.count_nonzero(cells) > scored["tp"] + scored["fn"] > 0  # the window's water, not the crop's


def test_gate_reads_its_scenes_as_predict_does_with_its_options_and_warnings(tmp_path):
    """weights gate read its --scene files with no scene options and said nothing of them: a 2022+
    stack (DN + 1000) was fitted on read 0.1 too bright, and no --offset could say otherwise."""
    import rasterio
    from rasterio.windows import Window

    from ..conftest import write_raster

    with rasterio.open(SAMPLE_CROP) as src:
        window = Window(0, 0, 192, 192)
        plus = write_raster(tmp_path / "plus.tif", src.read(window=window) + 1000, transform=src.window_transform(window),
                            crs=src.crs, nodata=0, descriptions=src.descriptions)
    for options, warned in (((), ["S2N-OFFSET-MISSING"]), (("--offset", -1000), [])):
        out = tmp_path / "gated.safetensors"
        r = run_cli("weights", "gate", "default", out, "--scene", plus, "--synthetic-scenes", 0, "--json", "--overwrite",
                    *options)
        assert r.returncode == 0, r.stderr
        assert [w["code"] for w in json.loads(r.stdout)["warnings"]] == warned == codes(r.stderr)
        assert "water gate by s2s2net weights gate" in json.loads(run_cli("weights", "show", out).stdout)["training"]["gate"]
