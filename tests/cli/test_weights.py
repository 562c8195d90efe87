"""``s2s2net weights``: a card shown from the header alone, notes added to a copy; bad input gets one line."""

import json
import pickle

from ..conftest import run_cli


def test_show_and_annotate(tmp_path, random_weights):
    card = json.loads(run_cli("weights", "show", random_weights).stdout)
    assert card["model"]["architecture"] == "s2s2net" and card["training"] == {"note": "random init for tests"}
    out = tmp_path / "noted.safetensors"
    r = run_cli("weights", "annotate", random_weights, out, "--set", "recipe=x.sh", "--threshold", 0.6)
    assert r.returncode == 0, r.stderr
    noted = json.loads(run_cli("weights", "show", out).stdout)
    assert noted["threshold"] == 0.6 and noted["training"] == {"note": "random init for tests", "recipe": "x.sh"}


def test_bad_input_gets_one_line(tmp_path, random_weights):
    missing = tmp_path / "missing.safetensors"
    r = run_cli("weights", "show", missing)
    assert r.returncode == 1 and r.stderr.strip().splitlines() == [f"Error: {missing}: weights file not found"]
    pickled = tmp_path / "model.pt"
    pickled.write_bytes(pickle.dumps({"weight": [1, 2, 3]}))
    r = run_cli("weights", "annotate", pickled, tmp_path / "out.safetensors")
    assert r.returncode == 1 and "model.pt: not a safetensors weights file" in r.stderr and "pickle" in r.stderr
    assert not (tmp_path / "out.safetensors").exists()
    existing = tmp_path / "existing.safetensors"
    existing.write_bytes(b"keep me")
    r = run_cli("weights", "annotate", random_weights, existing, "--set", "a=b")
    assert r.returncode == 1 and "already exists (use --overwrite to replace it)" in r.stderr
    assert existing.read_bytes() == b"keep me"
    r = run_cli("weights", "annotate", random_weights, existing, "--set", "no-equals-sign")
    assert r.returncode == 2 and "'no-equals-sign' is not NAME=VALUE" in r.stderr
    assert run_cli("weights", "annotate", random_weights, existing, "--overwrite").returncode == 0
    assert json.loads(run_cli("weights", "show", existing).stdout)["model"]["architecture"] == "s2s2net"
