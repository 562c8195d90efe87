"""The DeepSpeed training loop: ZeRO stage 2, one process or many ranks, same options.

One process is a world of one; under ``deepspeed --module s2s2net_cli`` or ``torchrun -m
s2s2net_cli`` the launcher's world gives the ranks. ``batch_size`` is the global batch: each
rank takes ``batch_size / world_size`` samples a step, so the same command gives the same
optimisation at any world size.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler

from ..bands import BandSpec
from ..checkpoint import WeightsCard, load_weights
from ..errors import InputError, describe
from ..formats import NODATA
from ..metrics import scores_from_counts
from ..model import ModelConfig, S2S2Net
from ..world import World
from .checkpoints import export_weights, save_checkpoint, weights_only_loading
from .config import TrainOptions, build_ds_config, lr_factor
from .data import Augment, ChipDataset, chip_splits
from .losses import WaterLoss
from .run_folder import (CHECKPOINTS, Records, check_resume_matches, check_run_dir, prepare_run_dir, truncate_metrics,
                         write_config)

AUGMENTS = {"none": Augment.none, "geometric": Augment, "full": Augment.radiometric}


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
    signal: int | None = None  # the signal that stopped the run on this rank (SIGINT when another rank's did)


def train(chips_dir, run_dir, options: TrainOptions, on_record: Callable[[dict], None] | None = None,
          world: World | None = None) -> TrainResult:
    """Train on ``chips_dir`` into ``run_dir``. Call on every rank of ``world`` (default: the launcher's)."""
    start_time = time.perf_counter()
    chips_dir, run_dir = Path(chips_dir), Path(run_dir)
    if options.max_steps is None and options.epochs is None:
        options.max_steps = 1000
    init_state, init_card = (load_weights(options.init_weights) if options.init_weights else (None, None))
    splits = chip_splits(chips_dir, options.seed)
    check_run_dir(run_dir, options)
    world = world or World.from_environment()
    if options.resume:
        check_resume_matches(run_dir, options, world.size)
    deepspeed = import_deepspeed()
    cuda = torch.cuda.is_available()
    ds_config = build_ds_config(options, world.size, "cuda" if cuda else "cpu", cuda and torch.cuda.is_bf16_supported())
    if cuda:
        torch.cuda.set_device(world.local_rank)
    world.join(timedelta(minutes=10), "nccl" if cuda else "gloo",
               init=lambda backend, timeout: deepspeed.init_distributed(dist_backend=backend, verbose=False,
                                                                        timeout=timeout))
    try:
        spec = init_card.bands if init_card else BandSpec()
        model_config = init_card.model if init_card else ModelConfig(in_channels=len(spec.names))
        trainer = Trainer(chips_dir, run_dir, options, world, spec, splits, on_record)
        trainer.start(deepspeed, ds_config, model_config, init_state)
        return trainer.fit(start_time)
    finally:
        World.leave(wait=False)


def import_deepspeed():
    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import deepspeed  # heavy: only training loads it

    for name in ("DeepSpeed", "deepspeed"):
        logging.getLogger(name).setLevel(logging.WARNING)
    return deepspeed


class Trainer:
    """One training run on this rank: its chips, the DeepSpeed engine, and the records,
    checkpoints and weights it writes into the run folder."""

    def __init__(self, chips_dir: Path, run_dir: Path, options: TrainOptions, world: World, spec: BandSpec,
                 splits: tuple[list, list], on_record: Callable[[dict], None] | None):
        self.chips_dir, self.run_dir, self.options, self.world, self.spec = chips_dir, run_dir, options, world, spec
        self.on_record, self.step, self.best_f1 = on_record, 0, None
        self.train_ds = ChipDataset(chips_dir, splits[0], spec, AUGMENTS[options.augment](), options.seed)
        self.val_ds = ChipDataset(chips_dir, splits[1], spec, Augment.none(), options.seed)
        self.loss_fn = WaterLoss()

    def start(self, deepspeed, ds_config: dict, model_config: ModelConfig, init_state: dict | None) -> None:
        """Prepare the run folder, the engine (from ``init_state`` or seeded) and a resumed checkpoint."""
        options, run_dir, world = self.options, self.run_dir, self.world
        if world.leads:
            prepare_run_dir(run_dir, options)
        dist.barrier()
        self.micro = ds_config["train_micro_batch_size_per_gpu"]
        self.steps_per_epoch, self.max_steps = plan_steps(len(self.train_ds), world, self.micro, options, self.chips_dir)
        self.engine, self.scheduler, self.dtype = build_engine(deepspeed, ds_config, model_config, init_state, options,
                                                               self.max_steps)
        self.card = WeightsCard(model=model_config, bands=self.spec, training={  # of the exported weights
            "global_batch": options.batch_size, "lr": options.lr, "world_size": world.size, "chips": str(self.chips_dir),
            "seed": options.seed, "augment": options.augment, "zero_stage": self.engine.zero_optimization_stage()})
        if options.resume:
            self.step, self.best_f1 = resume(self.engine, run_dir / CHECKPOINTS, self.dtype)
        if world.leads:
            write_config(run_dir, options, ds_config, {
                "chips": str(self.chips_dir), "train_chips": len(self.train_ds), "val_chips": len(self.val_ds),
                "max_steps": self.max_steps, "world_size": world.size, "resumed_at_step": self.step})
            truncate_metrics(run_dir / "metrics.jsonl", self.step)

    def fit(self, start_time: float) -> TrainResult:
        """Run the steps left, validating and checkpointing every ``val_every`` steps and when
        asked to stop (SIGTERM, Ctrl-C on any rank); the result on this rank."""
        stop = {"flag": False, "signal": None}
        handlers = install_stop_handlers(stop)
        self.records = Records(self.run_dir, self.world.leads, self.on_record)
        interrupted = False
        try:
            batches = rank_batches(self.train_ds, self.world, self.micro, self.options, self.step, self.steps_per_epoch)
            self.engine.train()
            tick = time.perf_counter()
            while self.step < self.max_steps and not interrupted:
                stopping = self.train_step(next(batches), stop["flag"], tick)
                tick = time.perf_counter()
                validating = self.step % self.options.val_every == 0 or self.step == self.max_steps
                if validating or stopping:
                    self.validate_and_save(validating)
                interrupted = stopping
        finally:
            restore_handlers(handlers)
            self.records.close()
        last, best = (self.run_dir / name for name in ("last.safetensors", "best.safetensors"))
        return TrainResult(self.step, interrupted, str(last) if last.exists() else None, str(best) if best.exists() else None,
                           self.best_f1, time.perf_counter() - start_time, self.world.size, self.records.records,
                           *optimizer_memory(self.engine.optimizer),
                           signal=(stop["signal"] or signal.SIGINT) if interrupted else None)

    def train_step(self, batch, stop_asked: bool, tick: float) -> bool:
        """One optimizer step on this rank's part of the global batch; whether any rank was asked to stop."""
        engine, options, world = self.engine, self.options, self.world
        x, y = batch[0].to(engine.device, self.dtype), batch[1].to(engine.device)
        # stochastic depth draws from torch's RNG: seed it from (seed, step, rank), so that a
        # resumed run draws what the uninterrupted run would have drawn
        torch.manual_seed((options.seed * 1_000_003 + self.step * 1_009 + world.rank) % 2 ** 63)
        parts = self.loss_fn.parts(engine(x), y)
        engine.backward(parts["loss"])
        engine.step()
        self.step += 1
        stop = torch.tensor(float(stop_asked), device=engine.device)
        values = torch.stack([parts["loss"].detach(), parts["bce"].detach(), parts["dice"].detach(), stop]).float()
        dist.all_reduce(values)
        values /= world.size
        self.records.emit({"kind": "train", "step": self.step, "epoch": (self.step - 1) // self.steps_per_epoch,
                           "loss": values[0].item(), "bce": values[1].item(), "dice": values[2].item(),
                           "lr": self.scheduler.get_last_lr()[0], "total_steps": self.max_steps,
                           "samples_per_s": options.batch_size / max(time.perf_counter() - tick, 1e-9)})
        return values[3].item() > 0

    def validate_and_save(self, validating: bool) -> None:
        """Validate (when ``validating``), checkpoint, and export last (and best) weights."""
        metrics, improved = {}, False
        if validating:
            metrics = validate(self.engine, self.val_ds, self.world, self.micro, self.dtype, self.loss_fn)
            self.engine.train()
            improved = metrics["f1"] is not None and (self.best_f1 is None or metrics["f1"] > self.best_f1)
            if improved:
                self.best_f1 = metrics["f1"]
            self.records.emit({"kind": "val", "step": self.step, **metrics, "best_f1": self.best_f1})
        tag = save_checkpoint(self.engine, self.run_dir / CHECKPOINTS, self.step, self.best_f1, self.world)
        if self.world.leads:
            training = {**self.card.training, "steps": self.step,
                        "validation": {k: v for k, v in metrics.items() if v is not None}}
            export_weights(self.engine, self.run_dir, tag, replace(self.card, training=training), improved)
        dist.barrier()


def plan_steps(n_train: int, world: World, micro: int, options: TrainOptions, chips_dir: Path) -> tuple[int, int]:
    """Steps per epoch (each rank takes ``micro`` of its share of the chips a step) and steps in all."""
    steps_per_epoch = (n_train // world.size) // micro
    if steps_per_epoch == 0:
        raise InputError(describe(chips_dir, f"{n_train} training chips are fewer than one global batch of "
                                             f"{options.batch_size}"))
    return steps_per_epoch, options.max_steps if options.max_steps is not None else options.epochs * steps_per_epoch


def resume(engine, ckpt_dir: Path, dtype: torch.dtype) -> tuple[int, float | None]:
    """Load the latest checkpoint of ``ckpt_dir`` into ``engine``; the step and best F1 it saved."""
    with weights_only_loading(ckpt_dir):
        _, client = engine.load_checkpoint(str(ckpt_dir), load_optimizer_states=True, load_lr_scheduler_states=True)
    if client is None:
        raise InputError(describe(ckpt_dir, "checkpoint could not be loaded"))
    cast_norm_buffers(engine.module, dtype)
    return int(client["step"]), client.get("best_f1")


def build_engine(deepspeed, ds_config: dict, config: ModelConfig, init_state: dict | None, options: TrainOptions,
                 max_steps: int):
    """The DeepSpeed engine of a seeded network (or ``init_state``), its learning-rate schedule and compute dtype."""
    torch.manual_seed(options.seed)
    np.random.seed(options.seed)
    model = S2S2Net(config=config)
    if init_state is not None:
        model.load_state_dict(init_state)
    optimizer = None
    if "optimizer" not in ds_config:
        optimizer = torch.optim.AdamW(model.parameters(), lr=options.lr, weight_decay=options.weight_decay)
    factor = lr_factor(options.warmup_steps, max_steps)
    engine, _, _, scheduler = deepspeed.initialize(
        model=model, optimizer=optimizer, config=ds_config,
        model_parameters=model.parameters() if optimizer is None else None,
        lr_scheduler=lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, factor))  # stepped by engine.step()
    dtype = torch.bfloat16 if ds_config["bf16"]["enabled"] else (torch.float16 if ds_config["fp16"]["enabled"] else torch.float32)
    cast_norm_buffers(engine.module, dtype)
    return engine, scheduler, dtype


def cast_norm_buffers(model: torch.nn.Module, dtype: torch.dtype) -> None:
    """Under bf16/fp16 DeepSpeed casts parameters but leaves BatchNorm statistics in fp32."""
    if dtype == torch.float32:
        return
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.running_mean.data = m.running_mean.data.to(dtype)
            m.running_var.data = m.running_var.data.to(dtype)


def rank_batches(dataset, world: World, micro: int, options: TrainOptions, start_step: int, steps_per_epoch: int):
    """Endless batches for this rank, from ``start_step`` on: a seeded permutation per epoch
    split across ranks like DistributedSampler (rank r takes every world-th index)."""
    sampler = DistributedSampler(dataset, num_replicas=world.size, rank=world.rank, shuffle=True, seed=options.seed,
                                 drop_last=True)
    epoch, skip = divmod(start_step, steps_per_epoch)
    while True:
        sampler.set_epoch(epoch)
        dataset.set_epoch(epoch)
        indices = list(iter(sampler))
        batches = [indices[b * micro:(b + 1) * micro] for b in range(steps_per_epoch)][skip:]
        loader = DataLoader(dataset, batch_sampler=batches, num_workers=options.num_workers)
        yield from loader
        epoch, skip = epoch + 1, 0


@torch.no_grad()
def validate(engine, val_ds, world: World, micro: int, dtype: torch.dtype, loss_fn: WaterLoss) -> dict:
    """Loss and scores over every validation chip once, pooled over the ranks."""
    from torchmetrics.classification import BinaryStatScores  # heavy: only validation needs it

    engine.eval()
    if len(val_ds) == 0:
        return {"val_loss": None, "f1": None, "iou": None, "precision": None, "recall": None}
    # every chip once: rank r takes chips r, r + world, ... (no padding with repeats; a
    # forward is not a collective under ZeRO-2, so ranks may run different numbers of batches)
    mine = list(range(world.rank, len(val_ds), world.size))
    device = engine.device
    stats = BinaryStatScores(ignore_index=NODATA).to(device)
    loss_sum = torch.zeros(2, device=device)
    for x, y in DataLoader(val_ds, batch_size=micro, sampler=mine):
        x, y = x.to(device, dtype), y.to(device)
        logits = engine(x)
        loss_sum += torch.stack([loss_fn(logits, y).float() * len(x), torch.tensor(float(len(x)), device=device)])
        stats.update(torch.sigmoid(logits.float()), y.long())
    dist.all_reduce(loss_sum)
    tp, fp, tn, fn, _ = (int(v) for v in stats.compute().tolist())  # torchmetrics reduces across ranks
    return {"val_loss": (loss_sum[0] / loss_sum[1]).item(), **scores_from_counts(tp, fp, fn), "pixels": tp + fp + tn + fn}


def optimizer_memory(optimizer) -> tuple[int, int]:
    """Bytes of optimizer state (Adam moments) and of fp32 master weights on this rank."""
    def nbytes(t):
        return t.numel() * t.element_size() if torch.is_tensor(t) else 0

    base = getattr(optimizer, "optimizer", optimizer)  # ZeRO wraps the torch optimizer
    moments = sum(nbytes(v) for state in base.state.values() for v in state.values() if torch.is_tensor(v) and v.dim() > 0)
    master = sum(nbytes(t) for t in getattr(optimizer, "single_partition_of_fp32_groups", []))
    return moments, master


def install_stop_handlers(stop: dict):
    """SIGTERM and SIGINT set ``stop['flag']``: the run stops after its step, with a checkpoint."""

    def handler(signum, frame):
        stop["flag"], stop["signal"] = True, signum

    previous = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(ValueError):  # not the main thread
            previous[sig] = signal.signal(sig, handler)
    return previous


def restore_handlers(previous: dict) -> None:
    for sig, h in previous.items():
        signal.signal(sig, h)
