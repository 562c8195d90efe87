"""A training run's settings: the options, and the DeepSpeed config built from them (ZeRO
stage, precision, batch per rank), with a user's --deepspeed-config merged over it key by key."""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..inference.options import PRECISIONS
from ..option_checks import SEED_BOUNDS, check_bounds, check_exclusive, check_types, precision_text
from ..rulebook import option, refuse

LABEL_EDGES = ("whole", "majority")
AUGMENTATIONS = ("none", "geometric", "full")  # geometric: flips and turns; full: also radiometric
ZERO_STAGES = (0, 1, 2)
DEFAULT_STEPS = 1000  # optimizer steps when neither max_steps nor epochs is given
# The least value of each counted option (``lr`` and ``grad_clip``: above 0).
LEAST = {"max_steps": 1, "epochs": 1, "batch_size": 1, "val_every": 1, "num_workers": 0, "warmup_steps": 0,
         "weight_decay": 0, "boundary_weight": 0}


@dataclass
class TrainOptions:
    max_steps: int | None = None
    epochs: int | None = None
    batch_size: int = 8
    lr: float = 6e-5
    weight_decay: float = 0.01
    precision: str = "auto"
    zero_stage: int = 2
    offload_optimizer: bool = False
    deepspeed_config: dict | None = None
    # the options the user gave: a --deepspeed-config may not contradict them, a resumed run takes the others as it
    # was started
    explicit: frozenset = frozenset()
    val_every: int = 100
    seed: int = 42
    num_workers: int = 0
    resume: bool = False
    init_weights: str | None = None
    overwrite: bool = False
    augment: str = "geometric"  # one of AUGMENTATIONS
    source_weights: dict = field(default_factory=dict)  # chips folder name -> how often its chips are drawn an epoch
    warmup_steps: int = 0
    grad_clip: float = 1.0
    label_edges: str = "whole"  # what a coarse label asks of its edge cells (losses.LABEL_EDGES)
    boundary_weight: float = 0.0  # weight of the soft boundary F1 loss on labels of the prediction's grid
    water_indices: bool = False  # give the network NDWI and MNDWI as inputs (widening --init-weights that lack them)

    def __post_init__(self):
        self.precision = precision_text(self.precision)
        if isinstance(self.deepspeed_config, (str, Path)):  # a file, as --deepspeed-config names one
            self.deepspeed_config = read_deepspeed_config(self.deepspeed_config)
        self.take_config_batch()
        self.source_weights = read_source_weights(self.source_weights)
        check_types(self)
        check_train_options(self)

    def take_config_batch(self) -> None:
        """The --deepspeed-config's global batch is the run's when --batch-size is not given, as
        its other keys are (the loop draws each rank's chips by it)."""
        if "train_batch_size" in (self.deepspeed_config or {}) and "batch_size" not in self.explicit:
            self.batch_size = self.deepspeed_config["train_batch_size"]


def check_train_options(options: TrainOptions) -> None:
    """Refuse options no run can start with, as the rulebook words them (the command line's
    own types refuse them first; the library meets them here)."""
    check_exclusive(options, "max_steps", "epochs")
    if options.resume and options.overwrite:
        raise refuse("S2N-RESUME-OVERWRITE")
    if options.precision not in PRECISIONS:
        raise refuse("S2N-PRECISION-UNKNOWN", None, value=options.precision, choices=", ".join(PRECISIONS))
    if options.label_edges not in LABEL_EDGES:
        raise refuse("S2N-LABEL-EDGES", None, value=options.label_edges, choices=", ".join(LABEL_EDGES))
    for name, choices in {"augment": AUGMENTATIONS, "zero_stage": ZERO_STAGES}.items():
        if getattr(options, name) not in choices:
            raise refuse("S2N-OPTION-CHOICE", None, given=option(name, getattr(options, name)),
                         choices=", ".join(map(str, choices)))
    check_bounds(options, least=LEAST | SEED_BOUNDS["least"], above={"lr": 0, "grad_clip": 0}, most=SEED_BOUNDS["most"])
    if options.offload_optimizer and options.zero_stage == 0:  # DeepSpeed keeps the plain optimizer where it is
        raise refuse("S2N-OFFLOAD-ZERO-STAGE")


def read_source_weights(given) -> dict[str, float]:
    """Chips folder name -> weight, from a dict or from "NAME=W" texts (one, or a list of them, as
    --source-weight takes them); a folder's trailing "/" left out. UsageError for a weight that
    is no number, or under 0."""
    if isinstance(given, str):
        given = [given]
    if not isinstance(given, dict):
        pairs = [str(item).partition("=") for item in given]
        bad = next((item for item, (name, sep, _) in zip(given, pairs) if not sep or not name.strip()), None)
        if bad is not None:
            raise refuse("S2N-NAME-VALUE", option("source_weight"), item=bad)
        given = {name.strip(): value.strip() for name, _, value in pairs}
    weights = {}
    for name, value in given.items():
        try:
            weight = float(value)
        except (TypeError, ValueError):
            raise refuse("S2N-SOURCE-WEIGHT-NUMBER", option("source_weight"), value=value) from None
        if not weight >= 0:
            raise refuse("S2N-SOURCE-WEIGHT-NEGATIVE", option("source_weight"), name=name, value=value)
        weights[str(name).rstrip("/")] = weight
    return weights


def build_ds_config(options: TrainOptions, world_size: int, device_type: str, bf16_supported: bool = False,
                    config_source=None) -> dict:
    """The DeepSpeed config from the options, with --deepspeed-config merged over it key by key
    (``bf16_supported``: whether the GPU has bf16, for precision "auto"). ``config_source`` is
    what a refusal of the config's keys names: --deepspeed-config, or where a resumed run's came from."""
    if options.batch_size % world_size:
        raise refuse("S2N-TRAIN-BATCH-WORLD", option("batch_size"), batch_size=options.batch_size, world_size=world_size)
    precision = options.precision
    if precision == "auto":
        precision = ("bf16" if bf16_supported else "16") if device_type == "cuda" else "32"
    config = {
        "train_batch_size": options.batch_size,
        "train_micro_batch_size_per_gpu": options.batch_size // world_size,
        "gradient_accumulation_steps": 1,
        "gradient_clipping": options.grad_clip,
        "zero_optimization": {"stage": options.zero_stage, "contiguous_gradients": True, "overlap_comm": device_type == "cuda"},
        "zero_allow_untested_optimizer": True,
        "bf16": {"enabled": precision == "bf16"},
        "fp16": {"enabled": precision == "16", "initial_scale_power": 16},
        "steps_per_print": 10 ** 9,
        "wall_clock_breakdown": False,
    }
    if options.offload_optimizer:
        config["zero_optimization"]["offload_optimizer"] = {"device": "cpu", "pin_memory": device_type == "cuda"}
        config["optimizer"] = {"type": "AdamW", "params": {"lr": options.lr, "weight_decay": options.weight_decay}}
    if options.deepspeed_config:
        source = config_source if config_source is not None else option("deepspeed_config")
        if "scheduler" in options.deepspeed_config:  # DeepSpeed drops it for the run's own, without a word
            raise refuse("S2N-DEEPSPEED-CONFIG-SCHEDULER", source, scheduler=options.deepspeed_config["scheduler"])
        _check_contradictions(config, options, source)
        _check_batch_keys(config, options.deepspeed_config, world_size, source)
        config = _merge(config, options.deepspeed_config)
    return config


def _check_batch_keys(config: dict, user: dict, world_size: int, source) -> None:
    """A config's rank batch and gradient accumulation must be the ones --batch-size makes: the
    loop draws each rank's chips and counts its steps by them (DeepSpeed would stop with an
    assertion, or step the optimizer once in several of the run's steps)."""
    for key in ("train_micro_batch_size_per_gpu", "gradient_accumulation_steps"):
        if key in user and user[key] != config[key]:
            raise refuse("S2N-DEEPSPEED-CONFIG-BATCH", source, key=key, theirs=user[key],
                         ours=config[key], batch_size=config["train_batch_size"], world_size=world_size)


def _check_contradictions(config: dict, options: TrainOptions, source) -> None:
    user = options.deepspeed_config
    checks = {
        "batch_size": [("train_batch_size",)],
        "zero_stage": [("zero_optimization", "stage")],
        "precision": [("bf16", "enabled"), ("fp16", "enabled")],
        "lr": [("optimizer", "params", "lr")],
        "weight_decay": [("optimizer", "params", "weight_decay")],
    }
    for name, paths in checks.items():
        if name not in options.explicit:
            continue
        for path in paths:
            ours, theirs = _get(config, path), _get(user, path)
            if name in ("lr", "weight_decay"):
                ours = getattr(options, name)
            if theirs is not None and ours is not None and theirs != ours:
                raise refuse("S2N-DEEPSPEED-CONFIG-CONTRADICTS", source, key='.'.join(path), theirs=theirs,
                             flag=option(name), ours=ours)


def _get(d: dict, path: tuple):
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d


def _merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def read_deepspeed_config(path) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError as exc:
        raise refuse("S2N-DEEPSPEED-CONFIG-NOT-FOUND", path) from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise refuse("S2N-DEEPSPEED-CONFIG-JSON", path, error=exc) from exc
    if not isinstance(data, dict):
        raise refuse("S2N-DEEPSPEED-CONFIG-OBJECT", path)
    return data


def lr_factor(warmup: int, total: int):
    def factor(step: int) -> float:
        if warmup and step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total - warmup)
        return 0.5 * (1 + math.cos(math.pi * min(1.0, progress))) * 0.95 + 0.05

    return factor
