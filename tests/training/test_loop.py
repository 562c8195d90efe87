import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from s2s2net_cli.checkpoint import load_model, load_weights
from s2s2net_cli.synthetic.scenes import Sensor, make_pair, write_pair

from ..conftest import codes, raises_rule, refused, run_cli


def run_cli_process(*args, **kwargs):
    """Training sets up a process group and signal handlers: always a real process."""
    return run_cli(*args, process=True, **kwargs)


pytestmark = pytest.mark.slow  # real DeepSpeed training runs

DS_ENV = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def chips(tmp_path_factory):
    """Tiny chips (32 px at 10 m) from four synthetic scenes; one scene is the test split.
    No shadows or thin cloud: these test the training loop, which must learn in 40 steps."""
    root = tmp_path_factory.mktemp("chips")
    args = []
    for seed in (31, 32, 33, 34):
        p = make_pair(64, seed=seed, nodata_margin=False, sensor=Sensor(effects=False))
        write_pair(p, root / f"s{seed}.tif", root / f"m{seed}.tif")
        args += ["--pair", root / f"s{seed}.tif", root / f"m{seed}.tif"]
    r = run_cli("chip", *args, "-o", root / "chips", "--size", 32, "--stride", 16, "--test-ids", "s34", "--val-fraction", 0.25)
    assert r.returncode == 0, r.stderr
    return root / "chips"


def metrics(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def deepspeed(*args, port, timeout=600):
    launcher = Path(sys.executable).parent / "deepspeed"
    return subprocess.run([str(launcher), "--num_gpus", "2", "--master_port", str(port), "--module", "s2s2net_cli", *map(str, args)],
                          capture_output=True, text=True, env=DS_ENV, timeout=timeout)


def test_two_ranks_match_one_rank_and_export_weights_predict_accepts(chips, tmp_path):
    common = ["--max-steps", 4, "--batch-size", 4, "--val-every", 2, "--seed", 5]
    one = run_cli_process("train", chips, "-o", tmp_path / "one", *common, "--json")
    assert one.returncode == 0, one.stderr
    summary = json.loads(one.stdout)  # the summary alone: DeepSpeed's "op built successfully" is not on stdout
    assert summary["steps"] == 4 and summary["world_size"] == 1 and summary["warnings"] == []
    assert Path(summary["last"]) == tmp_path / "one" / "last.safetensors" and 0 <= summary["best_f1"] <= 1
    two = deepspeed("train", chips, "-o", tmp_path / "two", *common, port=29511)
    assert two.returncode == 0, two.stderr[-3000:]
    m1, m2 = metrics(tmp_path / "one"), metrics(tmp_path / "two")
    assert [r["step"] for r in m2 if r["kind"] == "train"] == [1, 2, 3, 4]  # rank 0 alone writes
    # same global batch, same samples: the same loss on step 1 (BatchNorm sees 4 or 2 samples)
    assert m1[0]["loss"] == pytest.approx(m2[0]["loss"], rel=2e-3)
    config = json.loads((tmp_path / "two" / "config.json").read_text())
    assert config["world_size"] == 2 and config["deepspeed_config"]["zero_optimization"]["stage"] == 2
    assert config["deepspeed_config"]["train_micro_batch_size_per_gpu"] == 2
    assert "deepspeed" in config["versions"]
    vals = [r for r in m2 if r["kind"] == "val"]
    assert [v["step"] for v in vals] == [2, 4] and all(0 <= v["f1"] <= 1 for v in vals)
    for name in ("last.safetensors", "best.safetensors"):
        model, card = load_model(tmp_path / "two" / name)
        assert card.training["world_size"] == 2 and card.training["zero_stage"] == 2
    assert card.training["steps"] in (2, 4)
    out = tmp_path / "pred.tif"
    r = run_cli("predict", chips.parent / "s31.tif", "-o", out, "--weights", tmp_path / "two" / "last.safetensors",
                "--tile-size", 32, "--overlap", 8)
    assert r.returncode == 0, r.stderr
    assert out.exists()


def test_resume_continues_at_the_right_step_with_the_same_results(chips, tmp_path):
    common = ["--batch-size", 2, "--val-every", 2, "--seed", 9, "--lr", 1e-3]
    straight = run_cli_process("train", chips, "-o", tmp_path / "straight", "--max-steps", 6, *common)
    assert straight.returncode == 0, straight.stderr
    first = run_cli_process("train", chips, "-o", tmp_path / "resumed", "--max-steps", 6, *common)
    assert first.returncode == 0
    # pretend the run stopped after step 4: drop the last checkpoint and records
    run = tmp_path / "resumed"
    shutil.rmtree(run / "checkpoints" / "step00000006")
    (run / "checkpoints" / "latest").write_text("step00000004")
    lines = [r for r in metrics(run) if r["step"] <= 4]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    # --resume alone, as the interrupted run says: the length and options it was started with are its
    again = run_cli_process("train", chips, "-o", run, "--resume")
    assert again.returncode == 0, again.stderr
    resumed, reference = metrics(run), metrics(tmp_path / "straight")
    assert [r["step"] for r in resumed if r["kind"] == "train"] == [1, 2, 3, 4, 5, 6]
    for a, b in zip(resumed, reference):
        assert a["kind"] == b["kind"] and a["step"] == b["step"]
        assert a.get("loss", a.get("val_loss")) == pytest.approx(b.get("loss", b.get("val_loss")), rel=1e-5)
        if "lr" in a:
            assert a["lr"] == pytest.approx(b["lr"])
    assert json.loads((run / "config.json").read_text())["resumed_at_step"] == 4
    sa, _ = load_weights(run / "last.safetensors")
    sb, _ = load_weights(tmp_path / "straight" / "last.safetensors")
    assert all(torch.allclose(sa[k], sb[k], atol=1e-6) for k in sa)


def test_a_fine_tune_resumes_on_the_network_it_started_from(chips, tmp_path, random_weights):
    """A run started from --init-weights default (the bundled model's lighter head) and resumed
    with --resume alone built the plain network, which its checkpoints did not fit: a traceback
    of size mismatches. It resumes on the network config.json records (or, in a run from before
    it was recorded, from the weights it started from); other --init-weights are refused."""
    from s2s2net_cli.weights_header import default_weights

    common = ["--batch-size", 2, "--val-every", 2, "--seed", 9]
    run = tmp_path / "run"
    r = run_cli_process("train", chips, "-o", run, "--init-weights", "default", "--max-steps", 2, *common)
    assert r.returncode == 0, r.stderr
    _, bundled = load_weights(default_weights())
    assert json.loads((run / "config.json").read_text())["model"] == bundled.model.to_dict()
    r = run_cli_process("train", chips, "-o", run, "--max-steps", 4, "--resume", *common)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert [m["step"] for m in metrics(run) if m["kind"] == "train"] == [1, 2, 3, 4]
    assert load_weights(run / "last.safetensors")[1].model == bundled.model
    config = json.loads((run / "config.json").read_text())
    assert config["options"]["init_weights"] == "default" and config["resumed_at_step"] == 2
    # a run from before config.json recorded its network resumes from the weights it started from
    (run / "config.json").write_text(json.dumps({k: v for k, v in config.items() if k not in ("model", "bands")}))
    r = run_cli_process("train", chips, "-o", run, "--max-steps", 6, "--resume", *common)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    r = run_cli_process("train", chips, "-o", run, "--max-steps", 8, "--resume", "--init-weights", random_weights, *common)
    assert refused(r, "S2N-RESUME-OPTION", 1, "was started with --init-weights default; resume it with the same")


def test_exported_weights_equal_the_engines(chips, tmp_path, monkeypatch):
    import s2s2net_cli.training.loop as train_mod
    from s2s2net_cli.training.config import TrainOptions

    captured = {}
    real_export = train_mod.export_weights

    def spy(engine, *args, **kwargs):
        captured.update({k: v.detach().clone().float() for k, v in engine.module.state_dict().items()})
        return real_export(engine, *args, **kwargs)

    monkeypatch.setattr(train_mod, "export_weights", spy)
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DS_ACCELERATOR", "cpu")
    options = TrainOptions(max_steps=3, batch_size=2, val_every=3, lr=1e-3)
    result = train_mod.train(chips, tmp_path / "run", options)
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        os.environ.pop(var, None)
    assert result.steps == 3 and not result.interrupted
    exported, _ = load_weights(tmp_path / "run" / "last.safetensors")
    assert set(exported) == set(captured)
    for k in captured:
        assert torch.equal(exported[k], captured[k]), k


def test_loss_decreases_on_a_learnable_toy_set(chips, tmp_path):
    r = run_cli_process("train", chips, "-o", tmp_path / "run", "--max-steps", 40, "--batch-size", 4, "--lr", 1e-3,
                "--val-every", 40, "--augment", "none")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "" and "No CUDA runtime" not in r.stderr  # without --json: one line on stderr
    assert "40 steps in " in r.stderr and f"last weights {tmp_path / 'run' / 'last.safetensors'}" in r.stderr
    losses = [m["loss"] for m in metrics(tmp_path / "run") if m["kind"] == "train"]
    assert np.mean(losses[-8:]) < 0.85 * np.mean(losses[:8])


def test_a_notebook_trains_twice_in_one_process(chips, tmp_path):
    """The library's train, called again in the same Python (a notebook's second run), failed
    to broadcast its model: DeepSpeed kept a copy of the first run's destroyed process group."""
    script = (f"import json, os, sys, s2s2net_cli as s2n\n"
              f"world = ('RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT')\n"
              f"before, hook = {{k: os.environ.get(k) for k in world}}, sys.excepthook\n"
              f"runs = [s2n.train([{str(chips)!r}], {str(tmp_path)!r} + f'/run{{i}}', max_steps=2, batch_size=2, "
              f"val_every=2, augment='none', precision='32') for i in (1, 2)]\n"
              f"print(json.dumps([[r.steps, r.best_f1, len(r.records), repr(r)] for r in runs]))\n"
              f"print(json.dumps([{{k: os.environ.get(k) for k in world}} == before, sys.excepthook is hook]))\n"
              f"raise ValueError('the notebook goes on')\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=DS_ENV, timeout=600)
    assert r.returncode == 1 and r.stderr.endswith("ValueError: the notebook goes on\n"), r.stderr[-2000:]
    # the process as it was: no world of one left in its environment (nor in the processes it
    # starts), and its tracebacks without torch.distributed's "[rank0]: " (once more each run)
    assert json.loads(r.stdout.strip().splitlines()[-1]) == [True, True] and "[rank0]" not in r.stderr
    (steps1, f1_1, records, shown), (steps2, f1_2, _, _) = json.loads(r.stdout.strip().splitlines()[-2])
    assert steps1 == steps2 == 2 and f1_1 == f1_2  # the same seed, the same run
    # a notebook shows the run's summary, not every step's record (800 dicts after an 800-step run)
    assert records == 3 and shown.startswith("TrainResult(steps=2") and "'loss'" not in shown and "records" not in shown
    assert load_weights(tmp_path / "run1" / "last.safetensors")[0].keys() == load_weights(
        tmp_path / "run2" / "last.safetensors")[0].keys()


def test_the_library_refuses_what_the_command_line_types_refuse(chips, tmp_path):
    """Options the command's types refuse reached DeepSpeed from Python: a KeyError for an
    unknown augment, a division by zero for batch_size=0, a run for precision="fp8"."""
    import s2s2net_cli as s2n

    told = {"augment": ("wild", "S2N-OPTION-CHOICE", "augment='wild' is not one of none, geometric, full"),
            "batch_size": (0, "S2N-OPTION-RANGE", "batch_size=0 is out of range: it is under 1"),
            "precision": ("fp8", "S2N-PRECISION-UNKNOWN", "precision='fp8' is not one of auto, 32, bf16, 16"),
            "lr": (-1.0, "S2N-OPTION-RANGE", "lr=-1.0 is out of range: it is not above 0"),
            "zero_stage": (3, "S2N-OPTION-CHOICE", "zero_stage=3 is not one of 0, 1, 2"),
            "epochs": (1, "S2N-OPTIONS-EXCLUSIVE", "give max_steps or epochs, not both"),
            "overwrite": (True, "S2N-RESUME-OVERWRITE", "resume continues a run; overwrite starts over: not both")}
    for name, (value, code, message) in told.items():
        extra = {"max_steps": 2} if name == "epochs" else {"resume": True} if name == "overwrite" else {}
        with raises_rule(code) as refused_here:
            s2n.train([chips], tmp_path / "run", **{name: value}, **extra)
        assert str(refused_here.value) == message
    with raises_rule("S2N-TRAIN-SOURCE-WEIGHT") as refused_here:
        s2n.train([chips], tmp_path / "run", source_weights={"floods": 2})
    assert str(refused_here.value).startswith("source_weights: no chips folder named 'floods'")
    assert not (tmp_path / "run").exists()


def test_sigterm_saves_a_checkpoint_and_resume_goes_on(chips, tmp_path):
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "s2s2net_cli", "train", str(chips), "-o", str(run), "--max-steps", "500",
                             "--batch-size", "2", "--val-every", "1000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while time.time() < deadline:
        if (run / "metrics.jsonl").exists() and len(metrics(run)) >= 3:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err  # 128 + SIGTERM, as schedulers expect
    assert "--resume" in err
    stopped_at = max(r["step"] for r in metrics(run))
    assert (run / "checkpoints" / "latest").read_text().strip() == f"step{stopped_at:08d}"
    _, card = load_weights(run / "last.safetensors")
    assert card.training["steps"] == stopped_at
    r = run_cli_process("train", chips, "-o", run, "--max-steps", stopped_at + 2, "--batch-size", 2, "--val-every", 1000, "--resume")
    assert r.returncode == 0, r.stderr
    steps = [m["step"] for m in metrics(run) if m["kind"] == "train"]
    assert steps == list(range(1, stopped_at + 3))


@pytest.fixture(scope="module")
def coarse_chips(tmp_path_factory):
    """Chips of two synthetic scenes whose labels are 10 m (the 2 m truth averaged, water from a half)."""
    from ..conftest import write_raster

    root = tmp_path_factory.mktemp("coarse")
    args = []
    for seed in (41, 42):
        p = make_pair(64, seed=seed, nodata_margin=False, sensor=Sensor(effects=False))
        write_pair(p, root / f"s{seed}.tif", root / f"fine{seed}.tif")
        label = (p.mask.reshape(64, 5, 64, 5).mean(axis=(1, 3)) >= 0.5).astype("uint8")
        write_raster(root / f"m{seed}.tif", label, transform=p.transform, crs=p.crs, nodata=255)
        args += ["--pair", root / f"s{seed}.tif", root / f"m{seed}.tif"]
    r = run_cli("chip", *args, "-o", root / "bolivia_like", "--size", 32, "--stride", 16, "--val-fraction", 0.25)
    assert r.returncode == 0, r.stderr
    r = run_cli("chip", *args[:3], "-o", root / "shanghai_like", "--size", 32, "--stride", 32, "--val-fraction", 1)
    assert r.returncode == 0, r.stderr
    return root / "bolivia_like"


def test_2m_and_10m_chips_train_together_each_source_validated_on_its_own(chips, coarse_chips, tmp_path):
    run = tmp_path / "run"
    validates_only = coarse_chips.parent / "shanghai_like"
    r = run_cli_process("train", chips, coarse_chips, validates_only, "-o", run, "--max-steps", 6, "--batch-size", 4,
                        "--val-every", 3, "--source-weight", "bolivia_like=2", "--label-edges", "majority",
                        "--boundary-weight", 0.5)
    assert r.returncode == 0, r.stderr
    config = json.loads((run / "config.json").read_text())
    assert config["chips_folders"] == [str(chips), str(coarse_chips), str(validates_only)]
    sources = config["sources"]
    assert set(sources) == {"chips", "bolivia_like", "shanghai_like"}
    assert sources["shanghai_like"]["train"] == 0 and sources["shanghai_like"]["val"] == 4
    assert sources["bolivia_like"]["weight"] == 2.0 and sources["chips"]["weight"] == 1.0
    assert sources["bolivia_like"]["train"] > 0 and sources["bolivia_like"]["val"] > 0
    _, card = load_model(run / "best.safetensors")  # the weights say how they were drawn
    assert card.training["source_weights"] == {"bolivia_like": 2.0} and card.training["max_steps"] == 6
    assert card.training["label_edges"] == "majority" and card.training["boundary_weight"] == 0.5
    train = [m for m in metrics(run) if m["kind"] == "train"]
    # the soft boundary term is logged beside the others and counted in the loss
    assert all(m["loss"] == pytest.approx(m["bce"] + m["dice"] + 0.5 * m["boundary"], rel=1e-5) for m in train)
    assert any(m["boundary"] > 0 for m in train)
    val = [m for m in metrics(run) if m["kind"] == "val"]
    assert len(val) == 2
    for m in val:
        per = m["sources"]
        assert set(per) == {"chips", "bolivia_like", "shanghai_like"}
        assert m["f1"] == pytest.approx(sum(p["f1"] for p in per.values()) / 3)
        assert per["shanghai_like"]["pixels"] == 4 * 32 * 32
        # the 10 m source is counted on its 10 m cells: 32 x 32 a chip, 25 times fewer than 2 m pixels
        assert per["bolivia_like"]["pixels"] == sources["bolivia_like"]["val"] * 32 * 32
        assert per["chips"]["pixels"] == sources["chips"]["val"] * 160 * 160
    assert (run / "best.safetensors").exists()
    # what a 10 m label asks of its shores is one of two readings
    r = run_cli_process("train", chips, coarse_chips, "-o", tmp_path / "edges", "--label-edges", "blocks")
    assert r.returncode == 2 and "'blocks' is not one of 'whole', 'majority'" in r.stderr
    # a weight naming no folder is one line
    r = run_cli_process("train", chips, coarse_chips, "-o", tmp_path / "other", "--max-steps", 2,
                        "--source-weight", "bolivia=2")
    assert refused(r, "S2N-TRAIN-SOURCE-WEIGHT", 1, "no chips folder named 'bolivia'")
    # nor does a folder that only validates train alone
    r = run_cli_process("train", validates_only, "-o", tmp_path / "third", "--max-steps", 2)
    assert refused(r, "S2N-CHIPS-NO-TRAIN", 1)
    assert "Traceback" not in r.stderr


def test_water_indices_widen_init_weights_and_the_exported_model_predicts(chips, tmp_path, random_weights):
    import rasterio

    from s2s2net_cli.bands import BandSpec
    from s2s2net_cli.checkpoint import WeightsCard, save_weights
    from s2s2net_cli.model import ModelConfig, S2S2Net

    run = tmp_path / "run"
    r = run_cli_process("train", chips, "-o", run, "--init-weights", random_weights, "--water-indices", "--max-steps", 3,
                        "--batch-size", 4, "--val-every", 3, "--precision", "bf16")
    assert r.returncode == 0, r.stderr
    state, card = load_weights(run / "best.safetensors")
    assert card.model.water_indices and card.bands == BandSpec()
    init, _ = load_weights(random_weights)
    first = state["encoder.patch_embed1.proj.weight"]
    assert first.shape[1] == 8 and init["encoder.patch_embed1.proj.weight"].shape[1] == 6
    assert torch.count_nonzero(first[:, 6:]) > 0  # the index inputs were trained from zero
    out = tmp_path / "pred.tif"
    r = run_cli("predict", chips.parent / "s31.tif", "-o", out, "--weights", run / "best.safetensors", "--tile-size", 32,
                "--overlap", 8)
    assert r.returncode == 0, r.stderr
    with rasterio.open(out) as dst, rasterio.open(chips.parent / "s31.tif") as src:
        assert (dst.width, dst.height) == (5 * src.width, 5 * src.height)
    # weights of other bands cannot be given the indices: one line naming them, nothing written
    card = WeightsCard(model=ModelConfig(in_channels=4), bands=BandSpec(("B02", "B03", "B04", "B08"), 10000, (0.1,) * 4, (0.1,) * 4))
    rgbn = save_weights(tmp_path / "rgbn.safetensors", S2S2Net(config=card.model).state_dict(), card)
    r = run_cli_process("train", chips, "-o", tmp_path / "other", "--init-weights", rgbn, "--water-indices", "--max-steps", 2)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    lines = [l for l in r.stderr.strip().splitlines() if l.strip()]
    assert len(lines) == 1 and "rgbn.safetensors" in lines[0] and "--water-indices needs B02" in lines[0], r.stderr
    assert not (tmp_path / "other").exists()


def test_weights_with_an_ndwi_prior_train_without_it(chips, tmp_path, random_weights):
    # the prior is chosen after training, for the weights it was chosen for: a network trained
    # on from them learns plain, and what it writes carries none until calibrated again
    from s2s2net_cli.checkpoint import annotate_weights

    with_prior = annotate_weights(random_weights, tmp_path / "prior.safetensors", {}, ndwi_prior=32)
    run = tmp_path / "run"
    r = run_cli_process("train", chips, "-o", run, "--init-weights", with_prior, "--max-steps", 1, "--batch-size", 4,
                        "--val-every", 1)
    assert r.returncode == 0, r.stderr
    for name in ("best.safetensors", "last.safetensors"):
        assert load_weights(run / name)[1].ndwi_prior == 0.0
    # and the run says so, naming the weights it started from and the command that calibrates
    assert codes(r.stderr) == ["S2N-TRAIN-CALIBRATION-DROPPED"] and f"{with_prior}: was calibrated" in r.stderr
    assert any(line.startswith("1 step in ") for line in r.stderr.splitlines()), r.stderr  # not "1 steps"


FP16_REFUSED = ("import sys\nfrom deepspeed.accelerator.cpu_accelerator import CPU_Accelerator\n"
                "CPU_Accelerator.is_fp16_supported = lambda self: None  # as DeepSpeed 0.17+ on an AVX2 CPU\n"
                "from s2s2net_cli.cli.main import cli\nsys.exit(cli(sys.argv[1:]))\n")


def test_fp16_where_deepspeed_has_none_on_the_cpu_is_refused_in_one_line(chips, tmp_path):
    """DeepSpeed's CPU accelerator trains no fp16 before 0.17, nor from it on a CPU without
    oneDNN's fp16 (one held to AVX2): --precision 16 stopped in a traceback ("Type fp16 is not
    supported") after the warning. Refused before the run starts, naming the config where the
    fp16 came from one."""
    config = tmp_path / "ds.json"
    config.write_text(json.dumps({"fp16": {"enabled": True}}))
    for given, named in ((["--precision", "16"], None), (["--deepspeed-config", config], "--deepspeed-config:")):
        r = subprocess.run([sys.executable, "-c", FP16_REFUSED, "train", str(chips), "-o", str(tmp_path / "run"),
                            *map(str, given), "--max-steps", "1", "--batch-size", "2"],
                           capture_output=True, text=True, env=DS_ENV, timeout=600)
        assert refused(r, "S2N-TRAIN-FP16-UNSUPPORTED", 2, named), r.stderr[-2000:]
        assert "Traceback" not in r.stderr and "--precision auto trains fp32" in r.stderr
        assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


def test_fp16_on_a_cpu_is_warned_of_as_the_run_starts(chips, tmp_path):
    """--precision 16 on a CPU trained at about a thirtieth of fp32's pace, without a word: a
    run of hours became days. It is warned of before the first step, once; from Python, as the
    run starts (on_record) and when it ends. (Where DeepSpeed has no fp16 on this CPU it is
    refused: the test above.)"""
    has_fp16 = subprocess.run([sys.executable, "-c", "from deepspeed.accelerator import get_accelerator; "
                               "print(bool(get_accelerator().is_fp16_supported()))"],
                              capture_output=True, text=True, env=DS_ENV, timeout=600)
    if has_fp16.stdout.strip().splitlines()[-1:] != ["True"]:
        pytest.skip("DeepSpeed trains no fp16 on this CPU")
    r = run_cli_process("train", chips, "-o", tmp_path / "run", "--precision", 16, "--max-steps", 1,
                        "--val-every", 1, "--batch-size", 2)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    warned = [k for k, line in enumerate(lines) if "[S2N-TRAIN-FP16-ON-CPU]" in line]
    first_step = next(k for k, line in enumerate(lines) if line.startswith("step 1:"))
    assert len(warned) == 1 and warned[0] < first_step, r.stderr
    assert "trains in fp16 on a CPU" in lines[warned[0]] and "--precision auto" in lines[warned[0]]
    # from Python, in a process of its own (a run sets the process group's environment)
    script = (f"import json, warnings, s2s2net_cli as s2n\n"
              f"records = []\n"
              f"with warnings.catch_warnings(record=True) as said:\n"
              f"    warnings.simplefilter('always')\n"
              f"    result = s2n.train({str(chips)!r}, {str(tmp_path / 'run2')!r}, precision='16', max_steps=1, "
              f"val_every=1, batch_size=2, on_record=records.append)\n"
              f"print(json.dumps({{'kinds': [r['kind'] for r in records], 'finding': [r['finding'].code for r in records "
              f"if r['kind'] == 'warning'], 'result': [w.code for w in result.warnings], "
              f"'warned': [w.message.finding.code for w in said if isinstance(w.message, s2n.S2S2NetWarning)]}}))\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=DS_ENV, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert doc["kinds"].index("warning") < doc["kinds"].index("train")  # as the run starts
    assert doc["finding"] == doc["result"] == doc["warned"] == ["S2N-TRAIN-FP16-ON-CPU"]
    assert codes(run_cli_process("train", chips, "-o", tmp_path / "run3", "--max-steps", 1, "--val-every", 1,
                                 "--batch-size", 2).stderr) == []  # auto: fp32 here, no warning


def test_a_deepspeed_configs_global_batch_is_the_runs(chips, tmp_path):
    """--deepspeed-config with train_batch_size and no --batch-size stopped in DeepSpeed's
    assertion (16 != 8 * 1 * 1): the config's other keys were taken, its batch half-taken. It is
    the run's batch now (drawn, recorded, resumed by); beside a --batch-size, or a batch_size
    from Python, that says otherwise it is refused as any contradicting key is."""
    import s2s2net_cli as s2n

    cfg = tmp_path / "ds.json"
    cfg.write_text(json.dumps({"train_batch_size": 4, "gradient_clipping": 0.5}))
    run = tmp_path / "run"
    r = run_cli_process("train", chips, "-o", run, "--deepspeed-config", cfg, "--max-steps", 1, "--val-every", 1)
    assert r.returncode == 0, r.stderr
    config = json.loads((run / "config.json").read_text())
    assert config["options"]["batch_size"] == 4
    assert (config["deepspeed_config"]["train_batch_size"], config["deepspeed_config"]["train_micro_batch_size_per_gpu"],
            config["deepspeed_config"]["gradient_clipping"]) == (4, 4, 0.5)
    with pytest.raises(s2n.InputError, match=r"deepspeed_config: train_batch_size = 4 contradicts batch_size \(2\)"):
        s2n.train(chips, tmp_path / "run2", batch_size=2, deepspeed_config=cfg, max_steps=1)
    assert not (tmp_path / "run2").exists()



def test_a_run_resumes_with_the_deepspeed_config_it_was_started_with(chips, tmp_path):
    """A run started with --deepspeed-config and resumed without it was refused for its batch
    (or, given --batch-size, resumed at another ZeRO stage and clipping without a word); with
    another config, the same. It takes the config it was started with (config.json records
    it), and a DeepSpeed config that differs from the one it was started with is refused."""
    cfg = tmp_path / "ds.json"
    cfg.write_text(json.dumps({"train_batch_size": 4, "gradient_clipping": 0.5, "zero_optimization": {"stage": 1}}))
    run = tmp_path / "run"
    r = run_cli_process("train", chips, "-o", run, "--deepspeed-config", cfg, "--max-steps", 1, "--val-every", 1)
    assert r.returncode == 0, r.stderr
    r = run_cli_process("train", chips, "-o", run, "--resume", "--max-steps", 2, "--val-every", 1, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["steps"] == 2
    config = json.loads((run / "config.json").read_text())
    assert config["options"]["batch_size"] == 4 and config["deepspeed_config"]["gradient_clipping"] == 0.5
    assert config["deepspeed_config"]["zero_optimization"]["stage"] == 1
    kept = (run / "metrics.jsonl").read_text()
    # an option against the adopted config names the run's config.json, not a --deepspeed-config given
    r = run_cli_process("train", chips, "-o", run, "--resume", "--max-steps", 3, "--zero-stage", 2)
    assert refused(r, "S2N-DEEPSPEED-CONFIG-CONTRADICTS", 1,
                   f"{run / 'config.json'} (the --deepspeed-config the run was started with): "
                   "zero_optimization.stage = 1 contradicts --zero-stage (2)"), r.stderr
    other = tmp_path / "other.json"
    for given, said in (({"train_batch_size": 4, "gradient_clipping": 0.7}, "gradient_clipping = 0.5; resume it with "
                                                                             "the same (this run: 0.7)"),
                        ({"train_batch_size": 4, "gradient_clipping": 0.5}, "zero_optimization.stage = 1; resume it "
                                                                             "with the same (this run: 2)"),
                        ({"train_batch_size": 4, "gradient_clipping": 0.5, "zero_optimization": {"stage": 1},
                          "optimizer": {"type": "SGD", "params": {"lr": 0.1}}}, "optimizer = null")):
        other.write_text(json.dumps(given))
        r = run_cli_process("train", chips, "-o", run, "--resume", "--max-steps", 3, "--deepspeed-config", other)
        assert refused(r, "S2N-RESUME-DEEPSPEED-CONFIG", 1, f"{run}: was started with DeepSpeed's {said}"), r.stderr
        assert (run / "metrics.jsonl").read_text() == kept


@pytest.mark.parametrize("case", ["no_index", "empty_train", "exists", "nothing_to_resume", "stopped_early",
                                  "resume_stopped_early", "contradiction",
                                  "config_rank_batch", "config_accumulation", "both_limits",
                                  "resume_other_batch", "resume_other_inputs", "resume_other_label_edges",
                                  "resume_chips_changed",
                                  "resume_other_lr", "resume_other_chips", "overwrite_own_init", "overwrite_own_chips",
                                  "too_few_overwrite", "too_few_weighed", "config_refused_overwrite",
                                  "config_scheduler"])
def test_bad_input_gets_one_line(chips, tmp_path, random_weights, case):
    target, run = chips, tmp_path / "run"
    extra = []
    if case == "no_index":
        target = tmp_path / "empty"
        target.mkdir()
    elif case == "empty_train":
        import geopandas as gpd

        target = tmp_path / "testonly"
        shutil.copytree(chips, target)
        gdf = gpd.read_file(target / "index.gpkg")
        gdf[gdf.split == "test"].to_file(target / "index.gpkg", layer="chips")
    elif case == "exists":
        run.mkdir()
        (run / "something").write_text("x")
    elif case == "nothing_to_resume":
        extra = ["--resume"]
    elif case in ("stopped_early", "resume_stopped_early"):  # a run that failed before its first checkpoint
        run.mkdir()
        (run / "config.json").write_text(json.dumps({"world_size": 1, "options": {"batch_size": 8}}))
        (run / "metrics.jsonl").write_text("")
        extra = ["--resume"] if case == "resume_stopped_early" else []
    elif case == "contradiction":
        cfg = tmp_path / "ds.json"
        cfg.write_text(json.dumps({"zero_optimization": {"stage": 1}}))
        extra = ["--deepspeed-config", cfg, "--zero-stage", 2]
    elif case in ("config_rank_batch", "config_accumulation"):  # DeepSpeed's assertion, or a step in two
        cfg = tmp_path / "ds.json"
        cfg.write_text(json.dumps({"train_micro_batch_size_per_gpu": 4} if case == "config_rank_batch" else
                                  {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2}))
        extra = ["--deepspeed-config", cfg]
    elif case == "both_limits":
        extra = ["--epochs", 1, "--max-steps", 3]
    elif case == "resume_other_batch":  # a run started with 2 ranks and a global batch of 8
        (run / "checkpoints").mkdir(parents=True)
        (run / "checkpoints" / "latest").write_text("step4")
        (run / "config.json").write_text(json.dumps({"world_size": 2, "options": {"batch_size": 8}}))
        extra = ["--resume", "--batch-size", 4]
    elif case == "resume_other_inputs":  # a run started without the water indices as inputs, given them
        (run / "checkpoints").mkdir(parents=True)
        (run / "checkpoints" / "latest").write_text("step4")
        (run / "config.json").write_text(json.dumps({"world_size": 1, "options": {"batch_size": 8, "water_indices": False}}))
        extra = ["--resume", "--water-indices"]
    elif case == "resume_chips_changed":  # a run started on the folder before it was chipped again
        (run / "checkpoints").mkdir(parents=True)
        (run / "checkpoints" / "latest").write_text("step4")
        (run / "config.json").write_text(json.dumps({"world_size": 1, "chips": str(chips), "options": {"batch_size": 8},
                                                     "sources": {"chips": {"train": 999, "val": 1, "weight": 1.0}}}))
        extra = ["--resume"]
    elif case == "resume_other_label_edges":  # a run whose 10 m labels' shores were read by majority
        (run / "checkpoints").mkdir(parents=True)
        (run / "checkpoints" / "latest").write_text("step4")
        (run / "config.json").write_text(json.dumps({"world_size": 1, "options": {"batch_size": 8,
                                                                                  "label_edges": "majority"}}))
        extra = ["--resume", "--label-edges", "whole"]
    elif case in ("resume_other_lr", "resume_other_chips"):  # a run started at lr 2e-4 on a folder called synthetic
        (run / "checkpoints").mkdir(parents=True)
        (run / "checkpoints" / "latest").write_text("step4")
        started_on = chips if case == "resume_other_lr" else tmp_path / "synthetic"
        (run / "config.json").write_text(json.dumps({"world_size": 1, "chips": str(started_on),
                                                     "options": {"batch_size": 8, "lr": 2e-4}}))
        extra = ["--resume", "--lr", 2e-4 if case == "resume_other_chips" else 1e-4]
    elif case == "overwrite_own_init":  # a fine-tune of a run's best weights into its own folder
        run.mkdir()
        shutil.copy(random_weights, run / "best.safetensors")
        extra = ["--init-weights", run / "best.safetensors", "--overwrite"]
    elif case == "overwrite_own_chips":  # chips kept inside the run folder
        target = run / "chips"
        shutil.copytree(chips, target)
        extra = ["--overwrite"]
    elif case == "too_few_overwrite":  # a run folder emptied by --overwrite, then too few chips said
        run.mkdir()
        (run / "best.safetensors").write_text("an earlier run's")
        extra = ["--overwrite", "--batch-size", 512]
    elif case == "too_few_weighed":  # every chip weighed 0: no chip is drawn, though the folder has them
        extra = ["--source-weight", f"{chips.name}=0"]
    elif case == "config_refused_overwrite":  # DeepSpeed's own assertion, once the run folder was emptied
        run.mkdir()
        (run / "best.safetensors").write_text("an earlier run's")
        cfg = tmp_path / "ds.json"
        cfg.write_text(json.dumps({"optimizer": {"type": "NoSuchOptimizer", "params": {"lr": 1e-3}}}))
        extra = ["--overwrite", "--deepspeed-config", cfg]
    elif case == "config_scheduler":  # DeepSpeed drops a config's scheduler for the run's own, without a word
        cfg = tmp_path / "ds.json"
        cfg.write_text(json.dumps({"scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 10}}}))
        extra = ["--deepspeed-config", cfg]
    r = run_cli_process("train", target, "-o", run, *extra)
    assert r.returncode in (1, 2)
    lines = [l for l in r.stderr.strip().splitlines() if l.strip()]
    assert "Traceback" not in r.stderr
    expected = {"no_index": "S2N-CHIPS-NO-INDEX", "empty_train": "S2N-CHIPS-NO-TRAIN-VAL", "exists": "S2N-RUN-NOT-A-RUN",
                "nothing_to_resume": "S2N-RESUME-NOTHING", "stopped_early": "S2N-RUN-NO-CHECKPOINT",
                "resume_stopped_early": "S2N-RUN-NO-CHECKPOINT", "contradiction": "S2N-DEEPSPEED-CONFIG-CONTRADICTS",
                "config_rank_batch": "S2N-DEEPSPEED-CONFIG-BATCH", "config_accumulation": "S2N-DEEPSPEED-CONFIG-BATCH",
                "both_limits": "S2N-OPTIONS-EXCLUSIVE", "resume_other_batch": "S2N-RESUME-WORLD",
                "resume_other_inputs": "S2N-RESUME-WATER-INDICES", "resume_other_label_edges": "S2N-RESUME-LABEL-EDGES",
                "resume_chips_changed": "S2N-RESUME-CHIPS-CHANGED",
                "resume_other_lr": "S2N-RESUME-OPTION", "resume_other_chips": "S2N-RESUME-CHIPS",
                "overwrite_own_init": "S2N-RUN-INPUT-INSIDE", "overwrite_own_chips": "S2N-RUN-INPUT-INSIDE",
                "too_few_overwrite": "S2N-TRAIN-TOO-FEW-CHIPS", "too_few_weighed": "S2N-TRAIN-TOO-FEW-CHIPS",
                "config_refused_overwrite": "S2N-DEEPSPEED-CONFIG-REFUSED",
                "config_scheduler": "S2N-DEEPSPEED-CONFIG-SCHEDULER"}[case]
    assert codes(r.stderr) == [expected], r.stderr
    # the way on that each says, where --resume would find nothing (it said "use --resume to continue")
    named = {"exists": "already exists and holds no training run: give a new or empty folder, or --overwrite to",
             "nothing_to_resume": "nothing to resume: no run was started there (leave out --resume to start one)",
             "stopped_early": "stopped before its first checkpoint, so there is nothing to resume: --overwrite starts",
             "resume_stopped_early": "stopped before its first checkpoint, so there is nothing to resume: --overwrite",
             "resume_other_lr": f"(--init-weights {run / 'last.safetensors'})",
             "resume_other_chips": f"{tmp_path / 'synthetic'}; resume it on the same (this run: {chips})",
             "overwrite_own_init": f"{run / 'best.safetensors'}: lies in {run}",
             "overwrite_own_chips": f"{run / 'chips'}: lies in {run}",
             "config_rank_batch": "train_micro_batch_size_per_gpu = 4, but a run's batch of 8 on 1 rank(s) makes it 8",
             "config_accumulation": "train_micro_batch_size_per_gpu = 4",
             "resume_chips_changed": "was started on chips holding 999 train and 1 val chips, which holds ",
             "too_few_overwrite": "training chips are fewer than one global batch of 512",
             "too_few_weighed": "0 training chips drawn an epoch as --source-weight weighs them are fewer",
             "config_refused_overwrite": "--deepspeed-config: DeepSpeed does not take it: NoSuchOptimizer",
             "config_scheduler": "would not be used: the learning rate follows --lr, --warmup-steps"}.get(case, "")
    assert named in r.stderr
    if case != "both_limits":
        assert len(lines) == 1 and lines[0].startswith("Error:"), r.stderr
    if case.startswith(("resume_other", "resume_chips")):
        assert sorted(p.name for p in run.iterdir()) == ["checkpoints", "config.json"]  # untouched
    elif case in ("too_few_overwrite", "config_refused_overwrite"):  # refused before the folder was emptied
        assert (run / "best.safetensors").read_text() == "an earlier run's" and len(list(run.iterdir())) == 1
    elif case.startswith("overwrite_own"):
        assert sorted(p.name for p in run.iterdir()) == ["best.safetensors" if case == "overwrite_own_init" else "chips"]
    elif case in ("stopped_early", "resume_stopped_early"):
        assert sorted(p.name for p in run.iterdir()) == ["config.json", "metrics.jsonl"]
    elif case != "exists":
        assert not run.exists() or case == "nothing_to_resume" and not any(run.iterdir())


def test_resume_knows_a_chips_folder_whose_name_holds_a_comma(tmp_path):
    """The run's folders are kept as a list: a folder called "floods, 2018" is one folder, not two."""
    from s2s2net_cli.training.config import TrainOptions
    from s2s2net_cli.training.run_folder import check_resume_matches

    folder = tmp_path / "floods, 2018"
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text(json.dumps({
        "world_size": 1, "chips": str(folder), "chips_folders": [str(folder)], "options": {"batch_size": 8}}))
    check_resume_matches(tmp_path / "run", TrainOptions(), 1, [folder])  # the same folder: resumes
    with raises_rule("S2N-RESUME-CHIPS"):
        check_resume_matches(tmp_path / "run", TrainOptions(), 1, [tmp_path / "floods", tmp_path / "2018"])


def test_the_first_deepspeed_op_build_is_announced_only_when_it_is_missing(tmp_path):
    from s2s2net_cli.training.loop import deepspeed_op_built

    assert not deepspeed_op_built(tmp_path)
    built = tmp_path / "py311_cpu" / "deepspeed_shm_comm"
    built.mkdir(parents=True)
    assert not deepspeed_op_built(tmp_path)  # a build that did not finish
    (built / "deepspeed_shm_comm.so").write_bytes(b"")
    assert deepspeed_op_built(tmp_path)
