"""A training run's folder: what may be started or resumed there, its config.json, and its
metrics.jsonl (one JSON record a line, cut back to the checkpoint a run resumes from)."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Callable

import numpy as np
import segmentation_models_pytorch
import torch

from .. import __version__
from ..errors import first_line
from ..formats import RUN_CHECKPOINTS, RUN_LAST
from ..io import atomic_path, check_folder_output, lies_in, make_folder
from ..rulebook import Phrase, option, refuse
from .config import TrainOptions

CHECKPOINTS = RUN_CHECKPOINTS  # the DeepSpeed checkpoints' folder inside the run folder
# What a run's steps, data order and random draws depend on: a resumed run keeps them (only its
# length, --val-every and --num-workers may change), or it would be two runs recorded as one.
KEPT_ON_RESUME = ("lr", "weight_decay", "warmup_steps", "grad_clip", "seed", "augment", "source_weights", "precision",
                  "zero_stage", "offload_optimizer", "boundary_weight")


def check_run_dir(run_dir: Path, options: TrainOptions, inputs=()) -> None:
    """What may happen to ``run_dir``: resumed only from a checkpoint, started only when empty
    or with --overwrite, which empties it, and so is refused when one of ``inputs`` (the chips
    folders, --init-weights: a fine-tune of a run's best.safetensors into its own folder) lies
    in it."""
    check_folder_output(run_dir)
    resumable, started = (run_dir / CHECKPOINTS / "latest").exists(), (run_dir / "config.json").exists()
    if started and not resumable and not options.overwrite:  # failed before it saved one: --resume finds nothing
        raise refuse("S2N-RUN-NO-CHECKPOINT", run_dir)
    if options.resume:
        if not resumable:
            raise refuse("S2N-RESUME-NOTHING", run_dir)
    elif run_dir.exists() and any(run_dir.iterdir()) and not options.overwrite:
        raise refuse("S2N-RUN-EXISTS" if resumable else "S2N-RUN-NOT-A-RUN", run_dir)
    elif run_dir.exists() and options.overwrite:
        inside = next((i for i in inputs if i is not None and lies_in(i, run_dir)), None)
        if inside is not None:
            raise refuse("S2N-RUN-INPUT-INSIDE", inside, run_dir=run_dir)


def prepare_run_dir(run_dir: Path, options: TrainOptions) -> None:
    """The run folder made (emptied first with --overwrite); left as it is to resume."""
    if options.resume:
        return
    if options.overwrite and run_dir.exists():
        shutil.rmtree(run_dir)
    make_folder(run_dir)


def check_resume_matches(run_dir: Path, options: TrainOptions, world: int, chips_dirs: list[Path]) -> None:
    """A run resumes with the world size and global batch it was started with (its ZeRO
    partitions, data order and random draws depend on both), with or without the water
    index inputs as it was started (the network's shape), reading 10 m labels' shores as it
    was started (its loss: a run resumed with the other would be trained on two), on the same
    chips folders (by name) and with the KEPT_ON_RESUME options it was started with. What the
    started run's config.json does not record is not compared."""
    try:
        config = json.loads((run_dir / "config.json").read_text())
        was = int(config["world_size"]), int(config["options"]["batch_size"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise refuse("S2N-RESUME-CONFIG-UNREADABLE", run_dir / "config.json", error=first_line(exc)) from exc
    if was != (world, options.batch_size):
        raise refuse("S2N-RESUME-WORLD", run_dir, ranks=ranks_text(was[0]), batch_was=was[1], ranks_now=ranks_text(world), batch_size=options.batch_size)
    started_with_indices = bool(config["options"].get("water_indices", False))
    if started_with_indices != options.water_indices:  # the network's first layer differs: its checkpoints would not load
        raise refuse("S2N-RESUME-WATER-INDICES", run_dir, with_or_without='with' if started_with_indices else 'without')
    started_edges = config["options"].get("label_edges", "whole")
    if started_edges != options.label_edges:
        raise refuse("S2N-RESUME-LABEL-EDGES", run_dir, started_edges=started_edges)
    started_on = config.get("chips_folders") or config.get("chips", "").split(", ")  # the joined names: before the list
    if any(started_on) and _folder_names(started_on) != _folder_names(chips_dirs):
        raise refuse("S2N-RESUME-CHIPS", run_dir, was=config['chips'], now=', '.join(map(str, chips_dirs)))
    now = asdict(options)
    for name in KEPT_ON_RESUME:
        if name in config["options"] and config["options"][name] != now[name]:
            flag = option("source_weight" if name == "source_weights" else name)
            raise refuse("S2N-RESUME-OPTION", run_dir, flag=flag, was=_shown(config['options'][name]), now=_shown(now[name]), weights=run_dir / 'last.safetensors')


NOT_TAKEN_ON_RESUME = ("resume", "overwrite", "explicit", "init_weights", "deepspeed_config")  # said otherwise


def started_options(run_dir: Path, options: TrainOptions) -> TrainOptions:
    """A resumed run's options: those it was started with (config.json records them) where they
    are not given again (``options.explicit``), its length too where neither --max-steps nor
    --epochs is, so that ``--resume`` alone goes on as it was started; those given again are
    check_resume_matches' to compare. The --init-weights and --deepspeed-config it started with
    are started_network's and started_deepspeed_config's. A config that cannot be read is
    check_resume_matches' to refuse."""
    try:
        was = dict(json.loads((run_dir / "config.json").read_text())["options"])
    except (OSError, ValueError, KeyError, TypeError):
        return options
    length_given = bool({"max_steps", "epochs"} & options.explicit)
    taken = {f.name: was[f.name] for f in fields(options)
             if f.name in was and f.name not in NOT_TAKEN_ON_RESUME and f.name not in options.explicit
             and not (f.name in ("max_steps", "epochs") and length_given)}
    return replace(options, **taken)


def started_network(run_dir: Path, options: TrainOptions) -> tuple[str | None, dict | None]:
    """What a resumed run was started from: its --init-weights (the run's own when none is
    given again) and the network config.json records (``model`` and ``bands``, the shape and
    band statistics its checkpoints hold; None in runs from before it was recorded). A run
    resumed without the --init-weights it started from built the plain network, which its
    checkpoints do not fit. InputError when another --init-weights is given. A config that
    cannot be read is check_resume_matches' to refuse."""
    try:
        config = json.loads((run_dir / "config.json").read_text())
        was = config["options"].get("init_weights")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return options.init_weights, None
    now = options.init_weights
    if now is not None and str(now) != str(was) and not _same_file(was, now):
        raise refuse("S2N-RESUME-OPTION", run_dir, flag=option("init_weights"), was=_shown(was), now=_shown(now),
                     weights=run_dir / RUN_LAST)
    network = {k: config[k] for k in ("model", "bands")} if "model" in config and "bands" in config else None
    return was, network


def source_counts(train: list, val: list, weights: dict | None = None) -> dict:
    """Each source's train and val chips (and its weight), as config.json records them."""
    names = sorted({r.source for r in train + val})
    return {n: {"train": sum(r.source == n for r in train), "val": sum(r.source == n for r in val),
                **({"weight": weights.get(n, 1.0)} if weights is not None else {})} for n in names}


def check_resume_chips(run_dir: Path, train: list, val: list) -> None:
    """A resumed run draws from the chips it was started on: each source's train and val chips
    as many as config.json records (a folder chipped again since, under its old name, would
    change the data order and the validation best.safetensors is chosen on, without a word)."""
    try:
        was = json.loads((run_dir / "config.json").read_text()).get("sources") or {}
    except (OSError, ValueError, AttributeError):
        return  # check_resume_matches refuses a config it cannot read
    now = source_counts(train, val)
    for name, counts in was.items():
        if name in now and (counts.get("train"), counts.get("val")) != (now[name]["train"], now[name]["val"]):
            raise refuse("S2N-RESUME-CHIPS-CHANGED", run_dir, source=name, train_was=counts.get("train"),
                         val_was=counts.get("val"), train=now[name]["train"], val=now[name]["val"],
                         weights=run_dir / RUN_LAST)


def started_deepspeed_config(run_dir: Path, options: TrainOptions) -> dict | None:
    """The --deepspeed-config a resumed run takes: the one given, or else the one it was started
    with (config.json records it), whose keys its checkpoints were saved under."""
    if options.deepspeed_config is not None:
        return options.deepspeed_config
    try:
        return json.loads((run_dir / "config.json").read_text())["options"].get("deepspeed_config")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def adopted_config_source(run_dir: Path) -> Phrase:
    """How a refusal names the --deepspeed-config a resumed run took from its config.json."""
    where = str(Path(run_dir) / "config.json").replace("{", "{{").replace("}", "}}")
    return Phrase(where + " (the {o.deepspeed_config} the run was started with)")


# DeepSpeed keys that follow the device a run is on, not what it trains: a run may resume on another
DEVICE_KEYS = {("zero_optimization", "overlap_comm"), ("zero_optimization", "offload_optimizer", "pin_memory")}


def check_resume_deepspeed(run_dir: Path, ds_config: dict, given: dict | None) -> None:
    """A resumed run builds the DeepSpeed config it was started with (ZeRO stage, precision,
    clipping, optimizer: what its checkpoints and steps depend on), whatever options or
    --deepspeed-config (``given``) made it. A key an older run's config.json lacks is compared
    only when ``given`` sets it."""
    try:
        was = json.loads((run_dir / "config.json").read_text())["deepspeed_config"]
    except (OSError, ValueError, KeyError, TypeError):
        return
    differs = _first_difference(was, ds_config, given or {}, ())
    if differs is not None:
        key, before, now = differs
        raise refuse("S2N-RESUME-DEEPSPEED-CONFIG", run_dir, key=".".join(key), was=json.dumps(before),
                     now=json.dumps(now))


_MISSING = object()


def _first_difference(was, now, given, path: tuple):
    """(key path, was, now) of the first key whose value differs (None for a key one lacks), or None."""
    if path in DEVICE_KEYS:
        return None
    if isinstance(was, dict) and isinstance(now, dict):
        given = given if isinstance(given, dict) else {}
        for key in [*was, *(k for k in now if k not in was and k in given)]:
            found = _first_difference(was.get(key, _MISSING), now.get(key, _MISSING), given.get(key), (*path, key))
            if found is not None:
                return found
        return None
    if was == now:
        return None
    return path, *(None if v is _MISSING else v for v in (was, now))


def _same_file(a, b) -> bool:
    try:
        return a is not None and Path(a).samefile(b)
    except OSError:
        return False


def _folder_names(paths) -> list[str]:
    return [Path(str(p).rstrip("/")).name for p in paths]


def _shown(value) -> str:
    if value is None:
        return "none"
    if isinstance(value, dict):
        return ",".join(f"{k}={v:g}" for k, v in sorted(value.items())) or "none"
    return f"{value:g}" if isinstance(value, float) else str(value)


def ranks_text(n: int) -> str:
    return f"{n} rank{'s' if n > 1 else ''}"


def write_config(run_dir: Path, options: TrainOptions, ds_config: dict, facts: dict) -> None:
    """config.json: the options, the DeepSpeed config, ``facts`` of the run (chips, counts,
    world size, the step it resumed at) and the versions of the libraries that ran it."""
    import deepspeed  # heavy: only training loads it

    data = {
        "options": {k: (sorted(v) if isinstance(v, frozenset) else v) for k, v in asdict(options).items()},
        **facts, "deepspeed_config": ds_config,
        "versions": {"s2s2net": __version__, "torch": torch.__version__, "deepspeed": deepspeed.__version__,
                     "segmentation_models_pytorch": segmentation_models_pytorch.__version__,
                     "numpy": np.__version__},
    }
    with atomic_path(run_dir / "config.json") as tmp:
        tmp.write_text(json.dumps(data, indent=2, default=str))


def truncate_metrics(path: Path, step: int) -> None:
    """Drop records logged after the checkpoint a run resumes from at ``step`` (they will be
    logged again); nothing to do for a run that starts afresh."""
    if not path.exists():
        return
    keep = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            if json.loads(line).get("step", 0) <= step:
                keep.append(line)
        except json.JSONDecodeError:  # a line cut short by a kill
            continue
    with atomic_path(path) as tmp:
        tmp.write_text("".join(line + "\n" for line in keep), encoding="utf-8")


class Records:
    """The records of a run on this rank: kept in a list; on rank 0 also appended to
    metrics.jsonl (flushed line by line) and handed to ``on_record``."""

    def __init__(self, run_dir: Path, leads: bool, on_record: Callable[[dict], None] | None = None):
        self.records: list[dict] = []
        self.fh = open(run_dir / "metrics.jsonl", "a", encoding="utf-8") if leads else None
        self.on_record = on_record if leads else None

    def emit(self, record: dict) -> None:
        self.records.append(record)
        if self.fh:
            self.fh.write(json.dumps(record) + "\n")
            self.fh.flush()
        if self.on_record:
            self.on_record(record)

    def close(self) -> None:
        if self.fh:
            self.fh.close()
