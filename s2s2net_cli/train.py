"""The DeepSpeed training loop: ZeRO stage 2, one process or many ranks, same options.

One process sets up a world of one itself; under ``deepspeed --module s2s2net_cli`` or
``torchrun -m s2s2net_cli`` the launcher's environment gives the ranks. ``batch_size`` is
the global batch: each rank takes ``batch_size / world_size`` samples a step, so the same
command gives the same optimisation at any world size.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import math
import os
import shutil
import signal
import socket
import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from . import __version__
from .bands import BandSpec
from .checkpoint import WeightsCard, load_weights, save_weights
from .data import Augment, ChipDataset, chip_splits
from .errors import InputError, OutputExistsError, describe, first_line
from .losses import WaterLoss
from .metrics import scores_from_counts
from .model import ModelConfig, S2S2Net

log = logging.getLogger("s2s2net.train")
CHECKPOINTS = "checkpoints"
KEEP_CHECKPOINTS = 2


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
    explicit: frozenset = frozenset()  # options the user gave, which a --deepspeed-config may not contradict
    val_every: int = 100
    seed: int = 42
    num_workers: int = 0
    resume: bool = False
    init_weights: str | None = None
    overwrite: bool = False
    augment: str = "geometric"  # "none", "geometric" or "full" (geometric and radiometric)
    warmup_steps: int = 0
    grad_clip: float = 1.0


@dataclass
class TrainResult:
    steps: int
    interrupted: bool
    last: str | None
    best: str | None
    best_f1: float | None
    seconds: float
    world_size: int
    records: list = field(default_factory=list)
    optimizer_state_bytes: int = 0  # this rank's Adam moments (ZeRO shards them across ranks)
    master_weight_bytes: int = 0  # this rank's fp32 master copy held by ZeRO (0 without ZeRO)


# ---------------------------------------------------------------------------------------
# configuration


def build_ds_config(options: TrainOptions, world_size: int, device_type: str) -> dict:
    """The DeepSpeed config from the options, with --deepspeed-config merged over it key by key."""
    if options.batch_size % world_size:
        raise InputError(describe("--batch-size", f"{options.batch_size} is not divisible by the world size {world_size}"))
    precision = options.precision
    if precision == "auto":
        precision = ("bf16" if torch.cuda.is_bf16_supported() else "16") if device_type == "cuda" else "32"
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
        _check_contradictions(config, options)
        config = _merge(config, options.deepspeed_config)
    return config


def _check_contradictions(config: dict, options: TrainOptions) -> None:
    user = options.deepspeed_config
    checks = {
        "batch_size": [("train_batch_size",)],
        "zero_stage": [("zero_optimization", "stage")],
        "precision": [("bf16", "enabled"), ("fp16", "enabled")],
        "lr": [("optimizer", "params", "lr")],
        "weight_decay": [("optimizer", "params", "weight_decay")],
    }
    for option, paths in checks.items():
        if option not in options.explicit:
            continue
        for path in paths:
            ours, theirs = _get(config, path), _get(user, path)
            if option in ("lr", "weight_decay"):
                ours = getattr(options, option)
            if theirs is not None and ours is not None and theirs != ours:
                flag = "--" + option.replace("_", "-")
                raise InputError(describe("--deepspeed-config", f"{'.'.join(path)} = {theirs!r} contradicts {flag} ({ours!r})"))


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
        raise InputError(describe(path, "DeepSpeed config not found")) from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(describe(path, f"DeepSpeed config is not valid JSON ({exc})")) from exc
    if not isinstance(data, dict):
        raise InputError(describe(path, "DeepSpeed config must be a JSON object"))
    return data


# ---------------------------------------------------------------------------------------
# distributed set-up


def ensure_world() -> tuple[int, int, int]:
    """Rank, local rank and world size; a world of one when no launcher set them."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
    os.environ.setdefault("LOCAL_RANK", os.environ["RANK"])
    return int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def import_deepspeed():
    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import deepspeed

    for name in ("DeepSpeed", "deepspeed"):
        logging.getLogger(name).setLevel(logging.WARNING)
    return deepspeed


# ---------------------------------------------------------------------------------------
# checks before anything is written


def check_run_dir(run_dir: Path, options: TrainOptions) -> None:
    ckpt = run_dir / CHECKPOINTS
    if options.resume:
        if not (ckpt / "latest").exists():
            raise InputError(describe(run_dir, "nothing to resume (no checkpoints/latest)"))
    elif run_dir.exists() and any(run_dir.iterdir()) and not options.overwrite:
        raise OutputExistsError(describe(run_dir, "already exists (use --resume to continue or --overwrite to start over)"))


def check_resume_matches(run_dir: Path, options: TrainOptions, world: int) -> None:
    """A run resumes with the world size and global batch it was started with: its ZeRO
    partitions, data order and random draws depend on both."""
    try:
        config = json.loads((run_dir / "config.json").read_text())
        was = int(config["world_size"]), int(config["options"]["batch_size"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(describe(run_dir / "config.json", f"cannot be read to resume the run ({first_line(exc)})")) from exc
    if was != (world, options.batch_size):
        raise InputError(describe(run_dir, f"was started with {_ranks(was[0])} and --batch-size {was[1]}; resume it with "
                                           f"the same (this run: {_ranks(world)}, --batch-size {options.batch_size})"))


def _ranks(n: int) -> str:
    return f"{n} rank{'s' if n > 1 else ''}"


def train(chips_dir, run_dir, options: TrainOptions, on_record: Callable[[dict], None] | None = None) -> TrainResult:
    """Train on ``chips_dir`` into ``run_dir``. Call on every rank."""
    start_time = time.perf_counter()
    chips_dir, run_dir = Path(chips_dir), Path(run_dir)
    if options.max_steps is None and options.epochs is None:
        options.max_steps = 1000
    init_state, init_card = (load_weights(options.init_weights) if options.init_weights else (None, None))
    train_records, val_records = chip_splits(chips_dir, options.seed)
    check_run_dir(run_dir, options)
    spec = init_card.bands if init_card else BandSpec()

    rank, local_rank, world = ensure_world()
    if options.resume:
        check_resume_matches(run_dir, options, world)
    deepspeed = import_deepspeed()
    device_type = "cuda" if torch.cuda.is_available() else "cpu"
    ds_config = build_ds_config(options, world, device_type)
    if device_type == "cuda":
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="nccl" if device_type == "cuda" else "gloo", verbose=False,
                               timeout=timedelta(minutes=10))
    import torch.distributed as dist

    run = RunContext(deepspeed, dist, chips_dir, run_dir, options, ds_config, spec, init_state, init_card,
                     train_records, val_records, rank, world, start_time, on_record)
    try:
        return _train(run)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


@dataclass
class RunContext:
    """What one training run was given and set up before its loop: the libraries (DeepSpeed and
    torch.distributed, imported late), folders, options, data splits and this rank's place."""

    deepspeed: Any
    dist: Any
    chips_dir: Path
    run_dir: Path
    options: TrainOptions
    ds_config: dict
    spec: BandSpec
    init_state: dict | None
    init_card: WeightsCard | None
    train_records: list
    val_records: list
    rank: int
    world: int
    start_time: float
    on_record: Callable[[dict], None] | None


def _train(run: RunContext) -> TrainResult:
    deepspeed, dist, chips_dir, run_dir, options = run.deepspeed, run.dist, run.chips_dir, run.run_dir, run.options
    ds_config, spec, rank, world = run.ds_config, run.spec, run.rank, run.world
    init_state, init_card, on_record = run.init_state, run.init_card, run.on_record
    if rank == 0 and not options.resume:
        if options.overwrite and run_dir.exists():
            shutil.rmtree(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
    dist.barrier()
    micro = ds_config["train_micro_batch_size_per_gpu"]
    augment = {"none": Augment.none(), "geometric": Augment(), "full": Augment.radiometric()}[options.augment]
    train_ds = ChipDataset(chips_dir, run.train_records, spec, augment, options.seed)
    val_ds = ChipDataset(chips_dir, run.val_records, spec, Augment.none(), options.seed)
    steps_per_epoch = (len(train_ds) // world) // micro
    if steps_per_epoch == 0:
        raise InputError(describe(chips_dir, f"{len(train_ds)} training chips are fewer than one global batch of {options.batch_size}"))
    max_steps = options.max_steps if options.max_steps is not None else options.epochs * steps_per_epoch

    torch.manual_seed(options.seed)
    np.random.seed(options.seed)
    config = init_card.model if init_card else ModelConfig(in_channels=len(spec.names))
    model = S2S2Net(config=config)
    if init_state is not None:
        model.load_state_dict(init_state)
    optimizer = None
    if "optimizer" not in ds_config:
        optimizer = torch.optim.AdamW(model.parameters(), lr=options.lr, weight_decay=options.weight_decay)
    lr_factor = _lr_lambda(options.warmup_steps, max_steps)
    engine, _, _, scheduler = deepspeed.initialize(
        model=model, optimizer=optimizer, config=ds_config,
        model_parameters=model.parameters() if optimizer is None else None,
        lr_scheduler=lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lr_factor))  # stepped by engine.step()
    dtype = torch.bfloat16 if ds_config["bf16"]["enabled"] else (torch.float16 if ds_config["fp16"]["enabled"] else torch.float32)
    _cast_norm_buffers(engine.module, dtype)
    loss_fn = WaterLoss()
    device = engine.device

    ckpt_dir = run_dir / CHECKPOINTS
    step, best_f1 = 0, None
    if options.resume:
        with weights_only_loading(ckpt_dir):
            _, client = engine.load_checkpoint(str(ckpt_dir), load_optimizer_states=True, load_lr_scheduler_states=True)
        if client is None:
            raise InputError(describe(ckpt_dir, "checkpoint could not be loaded"))
        step, best_f1 = int(client["step"]), client.get("best_f1")
        _cast_norm_buffers(engine.module, dtype)
    if rank == 0:
        _write_config(run_dir, chips_dir, options, ds_config, world, len(train_ds), len(val_ds), max_steps, resumed_at=step)
        if options.resume:
            _truncate_metrics(run_dir / "metrics.jsonl", step)

    stop = {"flag": False}
    handlers = _install_stop_handlers(stop)
    records, interrupted = [], False
    writer = _MetricsWriter(run_dir / "metrics.jsonl") if rank == 0 else None

    def emit(record: dict) -> None:
        records.append(record)
        if writer:
            writer.write(record)
        if on_record and rank == 0:
            on_record(record)

    last_tag = None
    try:
        batches = _batches(train_ds, world, rank, micro, options.seed, step, steps_per_epoch, options.num_workers)
        engine.train()
        tick = time.perf_counter()
        while step < max_steps:
            x, y = next(batches)
            x, y = x.to(device, dtype), y.to(device)
            # stochastic depth draws from torch's RNG: seed it from (seed, step, rank), so that a
            # resumed run draws what the uninterrupted run would have drawn
            torch.manual_seed((options.seed * 1_000_003 + step * 1_009 + rank) % 2 ** 63)
            logits = engine(x)
            parts = loss_fn.parts(logits, y)
            engine.backward(parts["loss"])
            engine.step()
            step += 1
            values = torch.stack([parts["loss"].detach(), parts["bce"].detach(), parts["dice"].detach(),
                                  torch.tensor(float(stop["flag"]), device=device)]).float()
            dist.all_reduce(values)
            values /= world
            now = time.perf_counter()
            emit({"kind": "train", "step": step, "epoch": (step - 1) // steps_per_epoch, "loss": values[0].item(),
                  "bce": values[1].item(), "dice": values[2].item(), "lr": scheduler.get_last_lr()[0],
                  "samples_per_s": options.batch_size / max(now - tick, 1e-9), "total_steps": max_steps})
            tick = now
            stopping = values[3].item() > 0  # any rank was asked to stop
            validating = step % options.val_every == 0 or step == max_steps
            if validating:
                metrics = _validate(engine, val_ds, world, rank, micro, loss_fn, dtype, device, dist)
                engine.train()
                improved = metrics["f1"] is not None and (best_f1 is None or metrics["f1"] > best_f1)
                if improved:
                    best_f1 = metrics["f1"]
                emit({"kind": "val", "step": step, **metrics, "best_f1": best_f1})
            if validating or stopping:
                if not validating:
                    metrics, improved = {}, False
                last_tag = _checkpoint(engine, ckpt_dir, step, best_f1, rank, dist)
                if rank == 0:
                    _export(run, engine, last_tag, config, step, metrics, improved)
                dist.barrier()
            if stopping:
                interrupted = True
                break
    finally:
        _restore_handlers(handlers)
        if writer:
            writer.close()
    best = run_dir / "best.safetensors"
    last = run_dir / "last.safetensors"
    return TrainResult(step, interrupted, str(last) if last.exists() else None, str(best) if best.exists() else None,
                       best_f1, time.perf_counter() - run.start_time, world, records,
                       *optimizer_memory(engine.optimizer))


def optimizer_memory(optimizer) -> tuple[int, int]:
    """Bytes of optimizer state (Adam moments) and of fp32 master weights on this rank."""
    def nbytes(t):
        return t.numel() * t.element_size() if torch.is_tensor(t) else 0

    base = getattr(optimizer, "optimizer", optimizer)  # ZeRO wraps the torch optimizer
    moments = sum(nbytes(v) for state in base.state.values() for v in state.values() if torch.is_tensor(v) and v.dim() > 0)
    master = sum(nbytes(t) for t in getattr(optimizer, "single_partition_of_fp32_groups", []))
    return moments, master


@contextlib.contextmanager
def weights_only_loading(ckpt_dir):
    """Load DeepSpeed checkpoints with torch's weights-only unpickler: tensors, plain
    containers and the few DeepSpeed records a checkpoint holds, never arbitrary code."""
    import pickle

    from deepspeed.runtime.fp16.loss_scaler import DynamicLossScaler, LossScaler
    from deepspeed.runtime.zero.config import ZeroStageEnum
    from deepspeed.utils.tensor_fragment import fragment_address

    torch.serialization.add_safe_globals([LossScaler, DynamicLossScaler, ZeroStageEnum, fragment_address])
    previous = os.environ.get("TORCH_FORCE_WEIGHTS_ONLY_LOAD")
    os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = "1"
    try:
        yield
    except pickle.UnpicklingError as exc:
        raise InputError(describe(ckpt_dir, f"checkpoint holds objects that are not weights; refusing to load it "
                                            f"({first_line(exc)[:200]})")) from exc
    finally:
        if previous is None:
            os.environ.pop("TORCH_FORCE_WEIGHTS_ONLY_LOAD", None)
        else:
            os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = previous


def _lr_lambda(warmup: int, total: int):
    def factor(step: int) -> float:
        if warmup and step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total - warmup)
        return 0.5 * (1 + math.cos(math.pi * min(1.0, progress))) * 0.95 + 0.05

    return factor


def _cast_norm_buffers(model: torch.nn.Module, dtype: torch.dtype) -> None:
    """Under bf16/fp16 DeepSpeed casts parameters but leaves BatchNorm statistics in fp32."""
    if dtype == torch.float32:
        return
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.running_mean.data = m.running_mean.data.to(dtype)
            m.running_var.data = m.running_var.data.to(dtype)


def _batches(dataset, world, rank, micro, seed, start_step, steps_per_epoch, num_workers):
    """Endless batches for this rank, from ``start_step`` on: a seeded permutation per epoch
    split across ranks like DistributedSampler (rank r takes every world-th index)."""
    from torch.utils.data import DataLoader, DistributedSampler

    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=seed, drop_last=True)
    epoch, skip = divmod(start_step, steps_per_epoch)
    while True:
        sampler.set_epoch(epoch)
        dataset.set_epoch(epoch)
        indices = list(iter(sampler))
        batches = [indices[b * micro:(b + 1) * micro] for b in range(steps_per_epoch)][skip:]
        loader = DataLoader(dataset, batch_sampler=batches, num_workers=num_workers)
        yield from loader
        epoch, skip = epoch + 1, 0


@torch.no_grad()
def _validate(engine, val_ds, world, rank, micro, loss_fn, dtype, device, dist) -> dict:
    from torch.utils.data import DataLoader
    from torchmetrics.classification import BinaryStatScores

    engine.eval()
    if len(val_ds) == 0:
        return {"val_loss": None, "f1": None, "iou": None, "precision": None, "recall": None}
    # every chip once: rank r takes chips r, r + world, ... (no padding with repeats; a
    # forward is not a collective under ZeRO-2, so ranks may run different numbers of batches)
    mine = list(range(rank, len(val_ds), world))
    stats = BinaryStatScores(ignore_index=255).to(device)
    loss_sum = torch.zeros(2, device=device)
    for x, y in DataLoader(val_ds, batch_size=micro, sampler=mine):
        x, y = x.to(device, dtype), y.to(device)
        logits = engine(x)
        loss_sum += torch.stack([loss_fn(logits, y).float() * len(x), torch.tensor(float(len(x)), device=device)])
        stats.update(torch.sigmoid(logits.float()), y.long())
    dist.all_reduce(loss_sum)
    tp, fp, tn, fn, _ = (int(v) for v in stats.compute().tolist())  # torchmetrics reduces across ranks
    return {"val_loss": (loss_sum[0] / loss_sum[1]).item(), **scores_from_counts(tp, fp, fn), "pixels": tp + fp + tn + fn}


def _checkpoint(engine, ckpt_dir: Path, step: int, best_f1, rank: int, dist) -> str:
    tag = f"step{step:08d}"
    engine.save_checkpoint(str(ckpt_dir), tag=tag, client_state={"step": step, "best_f1": best_f1})
    dist.barrier()
    if rank == 0:
        tags = sorted(p.name for p in ckpt_dir.iterdir() if p.is_dir() and p.name.startswith("step"))
        for old in tags[:-KEEP_CHECKPOINTS]:
            shutil.rmtree(ckpt_dir / old, ignore_errors=True)
    return tag


def consolidated_state_dict(engine, ckpt_dir: Path, tag: str) -> dict:
    """Full fp32 weights: from the ZeRO checkpoint (the fp32 master copies), else the module."""
    if engine.zero_optimization_stage() >= 1:
        from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
            state = get_fp32_state_dict_from_zero_checkpoint(str(ckpt_dir), tag=tag)
    else:
        state = engine.module.state_dict()
    return {k: v.float() if v.is_floating_point() else v for k, v in state.items()}


def _export(run: RunContext, engine, tag: str, config: ModelConfig, step: int, metrics: dict, improved: bool) -> None:
    """last.safetensors (and best.safetensors when ``improved``) from checkpoint ``tag``."""
    options, run_dir = run.options, run.run_dir
    state = consolidated_state_dict(engine, run_dir / CHECKPOINTS, tag)
    card = WeightsCard(model=config, bands=run.spec, tile_size=512, training={
        "steps": step, "global_batch": options.batch_size, "lr": options.lr, "world_size": run.world,
        "chips": str(run.chips_dir), "seed": options.seed, "augment": options.augment,
        "validation": {k: v for k, v in metrics.items() if v is not None},
        "zero_stage": engine.zero_optimization_stage(),
    })
    save_weights(run_dir / "last.safetensors", state, card)
    if improved:
        save_weights(run_dir / "best.safetensors", state, card)


def _write_config(run_dir, chips_dir, options, ds_config, world, n_train, n_val, max_steps, resumed_at) -> None:
    import deepspeed
    import segmentation_models_pytorch

    data = {
        "options": {k: (sorted(v) if isinstance(v, frozenset) else v) for k, v in asdict(options).items()},
        "chips": str(chips_dir), "train_chips": n_train, "val_chips": n_val, "max_steps": max_steps,
        "world_size": world, "deepspeed_config": ds_config, "resumed_at_step": resumed_at,
        "versions": {"s2s2net": __version__, "torch": torch.__version__, "deepspeed": deepspeed.__version__,
                     "segmentation_models_pytorch": segmentation_models_pytorch.__version__,
                     "numpy": np.__version__},
    }
    from .io import atomic_path

    with atomic_path(run_dir / "config.json") as tmp:
        tmp.write_text(json.dumps(data, indent=2, default=str))


def _truncate_metrics(path: Path, step: int) -> None:
    """Drop records logged after the checkpoint a run resumes from (they will be logged again)."""
    if not path.exists():
        return
    keep = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            if json.loads(line).get("step", 0) <= step:
                keep.append(line)
        except json.JSONDecodeError:  # a line cut short by a kill
            continue
    from .io import atomic_path

    with atomic_path(path) as tmp:
        tmp.write_text("".join(line + "\n" for line in keep), encoding="utf-8")


class _MetricsWriter:
    def __init__(self, path: Path):
        self.fh = open(path, "a", encoding="utf-8")

    def write(self, record: dict) -> None:
        self.fh.write(json.dumps(record) + "\n")
        self.fh.flush()

    def close(self) -> None:
        self.fh.close()


def _install_stop_handlers(stop: dict):
    def handler(signum, frame):
        stop["flag"] = True

    previous = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(ValueError):  # not the main thread
            previous[sig] = signal.signal(sig, handler)
    return previous


def _restore_handlers(previous: dict) -> None:
    for sig, h in previous.items():
        signal.signal(sig, h)
