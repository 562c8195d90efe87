"""The DeepSpeed training loop: ZeRO stage 2, one process or many ranks, same options.

One process is a world of one; under ``deepspeed --module s2s2net_cli`` or ``torchrun -m
s2s2net_cli`` the launcher's world gives the ranks. ``batch_size`` is the global batch: each
rank takes ``batch_size / world_size`` samples a step, so the same command gives the same
optimisation at any world size.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, default_collate

from ..bands import BAND_NAMES, BandSpec
from ..checkpoint import WeightsCard, has_gate, load_weights, without_gate
from ..errors import S2S2NetError, first_line
from ..formats import NODATA, RUN_BEST, RUN_LAST
from ..metrics import scores_from_counts
from ..model import ModelConfig, S2S2Net, widen_inputs
from ..rulebook import Phrase, finding, option, refuse
from ..world import World
from .checkpoints import export_weights, save_checkpoint, weights_only_loading
from .config import DEFAULT_STEPS, TrainOptions, build_ds_config, lr_factor
from .data import Augment, ChipDataset, check_source_weights, source_splits, weighted_order
from .losses import WaterLoss
from .run_folder import (
    CHECKPOINTS,
    Records,
    adopted_config_source,
    check_resume_chips,
    check_resume_deepspeed,
    check_resume_matches,
    check_run_dir,
    prepare_run_dir,
    source_counts,
    started_deepspeed_config,
    started_network,
    started_options,
    truncate_metrics,
    write_config,
)

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
    records: list = field(default_factory=list, repr=False)  # every step's, as metrics.jsonl: not in a notebook's view
    optimizer_state_bytes: int = 0  # this rank's Adam moments (ZeRO shards them across ranks)
    master_weight_bytes: int = 0  # this rank's fp32 master copy held by ZeRO (0 without ZeRO)
    signal: int | None = None  # the signal that stopped the run on this rank (SIGINT when another rank's did)
    warnings: list = field(default_factory=list)  # findings about the run (a calibration its start had, dropped)

    def to_dict(self) -> dict:
        """The run's summary, as ``train --json`` prints it."""
        return {"steps": self.steps, "best_f1": self.best_f1, "last": self.last, "best": self.best,
                "seconds": round(self.seconds, 1), "world_size": self.world_size, "interrupted": self.interrupted,
                "warnings": [w.to_dict() for w in self.warnings]}


def train(chips_dirs, run_dir, options: TrainOptions, on_record: Callable[[dict], None] | None = None,
          world: World | None = None) -> TrainResult:
    """Train on the chips of ``chips_dirs`` (one folder or a list: the sources, drawn as
    ``options.source_weights`` say) into ``run_dir``. Call on every rank of ``world`` (default:
    the launcher's)."""
    start_time = time.perf_counter()
    chips_dirs = [Path(d) for d in ([chips_dirs] if isinstance(chips_dirs, (str, Path)) else chips_dirs)]
    run_dir = Path(run_dir)
    if options.resume:  # what it is not given again, it goes on with as it was started
        options = started_options(run_dir, options)
    if options.max_steps is None and options.epochs is None:
        options.max_steps = DEFAULT_STEPS
    started = None  # a resumed run's network, as config.json records it
    config_source = None  # what a refusal of the DeepSpeed config's keys names: --deepspeed-config
    if options.resume:
        options.init_weights, started = started_network(run_dir, options)
        given_config = options.deepspeed_config
        options.deepspeed_config = started_deepspeed_config(run_dir, options)
        if given_config is None:
            config_source = adopted_config_source(run_dir)
        options.take_config_batch()
    init_state, init_card = (load_weights(options.init_weights) if options.init_weights and not started
                             else (None, None))
    init_gate = init_state is not None and has_gate(init_state)
    init_state = without_gate(init_state) if init_gate else init_state
    if options.water_indices and init_card and tuple(init_card.bands.names) != BAND_NAMES:
        raise refuse("S2N-TRAIN-INIT-BANDS", options.init_weights, bands=', '.join(init_card.bands.names), needs=', '.join(BAND_NAMES))
    splits = source_splits(chips_dirs, options.seed)
    check_source_weights(options.source_weights, splits[0])
    check_run_dir(run_dir, options, inputs=[*chips_dirs, options.init_weights])
    world = world or World.from_environment()
    if options.resume:
        check_resume_matches(run_dir, options, world.size, chips_dirs)
        check_resume_chips(run_dir, *splits)
    deepspeed = import_deepspeed()
    cuda = torch.cuda.is_available()
    ds_config = build_ds_config(options, world.size, "cuda" if cuda else "cpu", cuda and torch.cuda.is_bf16_supported(),
                                config_source)
    if options.resume:
        check_resume_deepspeed(run_dir, ds_config, given_config)
    fp16_source = None  # what a refusal of fp16 names: the config that asked for it, not --precision
    if options.deepspeed_config and "precision" not in options.explicit:
        fp16_source = config_source if config_source is not None else option("deepspeed_config")
    early = fp16_on_cpu(ds_config, cuda, deepspeed, fp16_source)  # warnings said as the run starts, not after it
    for found in early if on_record and world.leads else ():
        on_record({"kind": "warning", "finding": found})
    if cuda:
        torch.cuda.set_device(world.local_rank)
    elif on_record and world.leads and not deepspeed_op_built():
        on_record({"kind": "status", "message": "DeepSpeed builds its shared-memory C++ op for this CPU (first run "
                                                "on a machine only: about a minute, sometimes more)"})
    with output_to_log():  # its op's build talks: "... built successfully", ninja's lines
        world.join(timedelta(minutes=10), "nccl" if cuda else "gloo",
                   init=lambda backend, timeout: deepspeed.init_distributed(dist_backend=backend, verbose=False,
                                                                            timeout=timeout))
    try:
        if started:  # the checkpoint holds the weights: the network's shape and bands are the run's
            spec, model_config = BandSpec.from_dict(started["bands"]), ModelConfig.from_dict(started["model"])
        else:
            spec = init_card.bands if init_card else BandSpec()
            model_config = init_card.model if init_card else ModelConfig(in_channels=len(spec.names))
        if options.water_indices and not model_config.water_indices:
            model_config = replace(model_config, water_indices=True)
        trainer = Trainer(chips_dirs, run_dir, options, world, spec, splits, on_record)
        trainer.start(deepspeed, ds_config, model_config, init_state)
        result = trainer.fit(start_time)
        result.warnings = early + calibration_dropped(options.init_weights, init_card, init_gate)
        return result
    finally:
        World.leave(wait=False)
        forget_groups(deepspeed)


def forget_groups(deepspeed) -> None:
    """Drop DeepSpeed's copy of the world's process group, which ``leave`` destroyed: kept, the
    next run in this process (a notebook's second ``train``) fails to broadcast its model
    ("Group ... is not registered")."""
    deepspeed.utils.groups._WORLD_GROUP = None


def fp16_on_cpu(ds_config: dict, cuda: bool, deepspeed, source=None) -> list:
    """A warning, said as the run starts, when a run trains in fp16 (``--precision 16``, or a
    --deepspeed-config's: ``source``) on a CPU: no fast path there (measured in the rule's
    message). Refused where DeepSpeed's CPU accelerator has no fp16 (before DeepSpeed 0.17 none
    has; from it, a CPU without oneDNN's fp16, as one held to AVX2), which DeepSpeed said with
    a traceback as the engine was made."""
    if cuda or not ds_config.get("fp16", {}).get("enabled"):
        return []
    if not deepspeed.accelerator.get_accelerator().is_fp16_supported():
        raise refuse("S2N-TRAIN-FP16-UNSUPPORTED", source, version=deepspeed.__version__)
    return [finding("S2N-TRAIN-FP16-ON-CPU")]


def calibration_dropped(init_weights, init_card: WeightsCard | None, gate: bool = False) -> list:
    """A warning when the weights a run started from were calibrated (a threshold, an NDWI
    prior or a water gate of their own): the network is trained plain and the weights written are not."""
    plain = WeightsCard()
    if init_card is None or (init_card.threshold == plain.threshold and init_card.ndwi_prior == plain.ndwi_prior
                             and not gate):
        return []
    return [finding("S2N-TRAIN-CALIBRATION-DROPPED", init_weights, threshold=init_card.threshold,
                    gain=init_card.ndwi_prior, plain=plain.threshold, gate=", a water gate" if gate else "")]


def deepspeed_op_built(root=None) -> bool:
    """Whether DeepSpeed's shared-memory op for CPUs is already built in torch's extensions cache
    (``TORCH_EXTENSIONS_DIR``, else ~/.cache/torch_extensions): its first build takes a minute or
    more, in silence."""
    root = Path(root or os.environ.get("TORCH_EXTENSIONS_DIR") or Path.home() / ".cache" / "torch_extensions")
    return any(root.glob("*/deepspeed_shm_comm/*.so")) or any(root.glob("deepspeed_shm_comm/*.so"))


def import_deepspeed():
    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
        # building DeepSpeed's CPU op, torch warns "No CUDA runtime is found": nothing to do on a CPU
        logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    with output_to_log() as held:  # DeepSpeed 0.16 logs "Setting ds_accelerator to cpu" at INFO as it is imported
        import deepspeed  # heavy: only training loads it

    for name in ("DeepSpeed", "deepspeed"):
        logging.getLogger(name).setLevel(logging.WARNING)
        for handler in logging.getLogger(name).handlers:  # made in the import, on the stream the block held
            if isinstance(handler, logging.StreamHandler) and handler.stream is held:
                handler.setStream(sys.stderr)  # its warnings on stderr, where ours are, not in --json's stdout
    return deepspeed


@contextlib.contextmanager
def output_to_log():
    """What the block prints, by Python or below it (file descriptors 1 and 2: a C++ op's
    compiler, ninja's "no work to do", torch 2.4's "Using ... as PyTorch extensions root"), to
    this module's log at debug, not into a --json document on stdout or the user's terminal;
    said on stderr after all where the block fails unforeseen (not a refusal, not an interrupt).
    Yields the stream Python's stdout and stderr are in the block."""
    said = io.StringIO()
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    saved = [os.dup(1), os.dup(2)]
    unforeseen, text = False, ""
    try:
        with tempfile.TemporaryFile() as held:
            try:
                os.dup2(held.fileno(), 1)
                os.dup2(held.fileno(), 2)
                with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
                    yield said
            except S2S2NetError:
                raise
            except Exception:
                unforeseen = True
                raise
            finally:
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
                held.seek(0)
                text = (said.getvalue() + held.read().decode(errors="replace")).strip()
    finally:
        for fd in saved:
            os.close(fd)
        if text and unforeseen:
            print(text, file=sys.stderr)
        elif text:
            logging.getLogger(__name__).debug(text)


class Trainer:
    """One training run on this rank: its chips, the DeepSpeed engine, and the records,
    checkpoints and weights it writes into the run folder."""

    def __init__(self, chips_dirs: list[Path], run_dir: Path, options: TrainOptions, world: World, spec: BandSpec,
                 splits: tuple[list, list], on_record: Callable[[dict], None] | None):
        self.chips_dirs, self.run_dir, self.options, self.world, self.spec = chips_dirs, run_dir, options, world, spec
        self.chips = ", ".join(str(d) for d in chips_dirs)
        self.on_record, self.step, self.best_f1 = on_record, 0, None
        self.train_ds = ChipDataset(splits[0], spec, AUGMENTS[options.augment](), options.seed)
        self.val_ds = ChipDataset(splits[1], spec, Augment.none(), options.seed)
        self.loss_fn = WaterLoss(label_edges=options.label_edges, boundary_weight=options.boundary_weight)

    def start(self, deepspeed, ds_config: dict, model_config: ModelConfig, init_state: dict | None) -> None:
        """Prepare the run folder, the engine (from ``init_state`` or seeded) and a resumed checkpoint."""
        options, run_dir, world = self.options, self.run_dir, self.world
        # too few chips is said before the run folder is made, or emptied with --overwrite
        self.micro = ds_config["train_micro_batch_size_per_gpu"]
        epoch_chips = len(weighted_order(self.train_ds.records, options.source_weights, options.seed, 0))
        self.steps_per_epoch, self.max_steps = plan_steps(epoch_chips, world, self.micro, options, self.chips_dirs[0])
        # and a DeepSpeed config DeepSpeed does not take, by building the engine first
        self.engine, self.scheduler, self.dtype = build_engine(deepspeed, ds_config, model_config, self.spec, init_state, options,
                                                               self.max_steps)
        if world.leads:
            prepare_run_dir(run_dir, options)
        dist.barrier()
        self.card = exported_card(model_config, self.spec, options, world, self.engine.zero_optimization_stage(),
                                  self.chips, self.max_steps)
        if options.resume:
            self.step, self.best_f1 = resume(self.engine, run_dir / CHECKPOINTS, self.dtype)
        if world.leads:
            write_config(run_dir, options, ds_config, {
                "chips": self.chips, "chips_folders": [str(d) for d in self.chips_dirs],
                "train_chips": len(self.train_ds), "val_chips": len(self.val_ds),
                "sources": source_counts(self.train_ds.records, self.val_ds.records, options.source_weights),
                "max_steps": self.max_steps, "world_size": world.size, "resumed_at_step": self.step,
                "model": model_config.to_dict(), "bands": self.spec.to_dict()})
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
        last, best = self.run_dir / RUN_LAST, self.run_dir / RUN_BEST
        return TrainResult(self.step, interrupted, str(last) if last.exists() else None, str(best) if best.exists() else None,
                           self.best_f1, time.perf_counter() - start_time, self.world.size, self.records.records,
                           *optimizer_memory(self.engine.optimizer),
                           signal=(stop["signal"] or signal.SIGINT) if interrupted else None)

    def train_step(self, batch, stop_asked: bool, tick: float) -> bool:
        """One optimizer step on this rank's part of the global batch; whether any rank was asked to stop."""
        engine, options, world = self.engine, self.options, self.world
        x, y, label_scale = batch[0].to(engine.device, self.dtype), batch[1].to(engine.device), batch[2]
        # stochastic depth draws from torch's RNG: seed it from (seed, step, rank), so that a
        # resumed run draws what the uninterrupted run would have drawn
        torch.manual_seed((options.seed * 1_000_003 + self.step * 1_009 + world.rank) % 2 ** 63)
        parts = self.loss_fn.parts(engine(x), y, label_scale)
        engine.backward(parts["loss"])
        engine.step()
        self.step += 1
        stop = torch.tensor(float(stop_asked), device=engine.device)
        names = [name for name in ("loss", "bce", "dice", "boundary") if name in parts]
        values = torch.stack([parts[name].detach() for name in names] + [stop]).float()
        dist.all_reduce(values)
        values /= world.size
        self.records.emit({"kind": "train", "step": self.step, "epoch": (self.step - 1) // self.steps_per_epoch,
                           **{name: values[i].item() for i, name in enumerate(names)},
                           "lr": self.scheduler.get_last_lr()[0], "total_steps": self.max_steps,
                           "samples_per_s": options.batch_size / max(time.perf_counter() - tick, 1e-9)})
        return values[-1].item() > 0

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


def exported_card(model_config: ModelConfig, spec: BandSpec, options: TrainOptions, world: World, zero_stage: int,
                  chips: str, max_steps: int) -> WeightsCard:
    """The card of the weights a run exports: the model, its bands and how it was trained."""
    return WeightsCard(model=model_config, bands=spec, training={
        "global_batch": options.batch_size, "lr": options.lr, "world_size": world.size, "chips": chips,
        "seed": options.seed, "augment": options.augment, "zero_stage": zero_stage, "max_steps": max_steps,
        "source_weights": dict(options.source_weights), "label_edges": options.label_edges,
        **({"boundary_weight": options.boundary_weight} if options.boundary_weight else {})})


def plan_steps(n_train: int, world: World, micro: int, options: TrainOptions, chips_dir: Path) -> tuple[int, int]:
    """Steps per epoch (each rank takes ``micro`` of its share of the ``n_train`` chips an epoch
    draws, as ``options.source_weights`` weigh them) and steps in all."""
    steps_per_epoch = (n_train // world.size) // micro
    if steps_per_epoch == 0:
        weighed = Phrase(" drawn an epoch as {o.source_weight} weighs them") if options.source_weights else ""
        raise refuse("S2N-TRAIN-TOO-FEW-CHIPS", chips_dir, n_train=n_train, batch_size=options.batch_size,
                     weighed=weighed)
    return steps_per_epoch, options.max_steps if options.max_steps is not None else options.epochs * steps_per_epoch


def resume(engine, ckpt_dir: Path, dtype: torch.dtype) -> tuple[int, float | None]:
    """Load the latest checkpoint of ``ckpt_dir`` into ``engine``; the step and best F1 it saved."""
    with weights_only_loading(ckpt_dir):
        _, client = engine.load_checkpoint(str(ckpt_dir), load_optimizer_states=True, load_lr_scheduler_states=True)
    if client is None:
        raise refuse("S2N-TRAIN-CHECKPOINT-UNLOADABLE", ckpt_dir)
    cast_norm_buffers(engine.module, dtype)
    return int(client["step"]), client.get("best_f1")


def build_engine(deepspeed, ds_config: dict, config: ModelConfig, spec: BandSpec, init_state: dict | None,
                 options: TrainOptions, max_steps: int):
    """The DeepSpeed engine of a seeded network (or ``init_state``), its learning-rate schedule and compute dtype."""
    torch.manual_seed(options.seed)
    np.random.seed(options.seed)
    model = S2S2Net(config=config, spec=spec)
    if init_state is not None:
        model.load_state_dict(widen_inputs(init_state, model))
    optimizer = None
    if "optimizer" not in ds_config:
        optimizer = torch.optim.AdamW(model.parameters(), lr=options.lr, weight_decay=options.weight_decay)
    factor = lr_factor(options.warmup_steps, max_steps)
    try:
        engine, _, _, scheduler = deepspeed.initialize(
            model=model, optimizer=optimizer, config=ds_config,
            model_parameters=model.parameters() if optimizer is None else None,
            lr_scheduler=lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, factor))  # stepped by engine.step()
    except (AssertionError, ValueError, KeyError, TypeError) as exc:  # DeepSpeed's own checks of its config
        if not options.deepspeed_config:
            raise
        raise refuse("S2N-DEEPSPEED-CONFIG-REFUSED", option("deepspeed_config"), error=first_line(exc)) from exc
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


def rank_batches(dataset: ChipDataset, world: World, micro: int, options: TrainOptions, start_step: int,
                 steps_per_epoch: int):
    """Endless batches for this rank, from ``start_step`` on: a seeded, weighted order per
    epoch (``weighted_order``) split across ranks like DistributedSampler (rank r takes every
    world-th index of the order cut to a whole number of rounds)."""
    epoch, skip = divmod(start_step, steps_per_epoch)
    while True:
        dataset.set_epoch(epoch)
        order = weighted_order(dataset.records, options.source_weights, options.seed, epoch)
        whole = len(order) // world.size * world.size
        indices = order[world.rank:whole:world.size]
        batches = [indices[b * micro:(b + 1) * micro] for b in range(steps_per_epoch)][skip:]
        loader = DataLoader(dataset, batch_sampler=batches, num_workers=options.num_workers)
        yield from loader
        epoch, skip = epoch + 1, 0


@torch.no_grad()
def validate(engine, val_ds: ChipDataset, world: World, micro: int, dtype: torch.dtype, loss_fn: WaterLoss) -> dict:
    """Loss and scores over every validation chip once, pooled over the ranks. Each source
    (chips folder) is scored on its own, a coarse label on its own cells (the 2 m mask
    averaged over each cell, water where half of it is, as ``evaluate`` scores it); with
    several sources each score is the mean of the sources' scores, so that each counts alike
    whatever its number of pixels, and ``sources`` holds each one's."""
    from torchmetrics.classification import BinaryStatScores  # heavy: only validation needs it

    engine.eval()
    if len(val_ds) == 0:
        return {"val_loss": None, "f1": None, "iou": None, "precision": None, "recall": None}
    # every chip once: rank r takes chips r, r + world, ... (no padding with repeats; a
    # forward is not a collective under ZeRO-2, so ranks may run different numbers of batches)
    mine = list(range(world.rank, len(val_ds), world.size))
    device = engine.device
    sources = sorted({r.source for r in val_ds.records})
    stats = {name: BinaryStatScores(ignore_index=NODATA).to(device) for name in sources}
    loss_sum = torch.zeros(2, device=device)
    for first in range(0, len(mine), micro):
        chunk = mine[first:first + micro]
        x, y, label_scale = default_collate([val_ds[i] for i in chunk])
        x, y = x.to(device, dtype), y.to(device)
        logits = engine(x).float()
        loss_sum += torch.stack([loss_fn(logits, y, label_scale) * len(x), torch.tensor(float(len(x)), device=device)])
        for j, i in enumerate(chunk):
            predicted, truth = _on_label_grid(torch.sigmoid(logits[j:j + 1]), y[j:j + 1], int(label_scale[j]))
            stats[val_ds.records[i].source].update(predicted, truth.long())
    dist.all_reduce(loss_sum)
    per_source = {}
    for name in sources:
        tp, fp, tn, fn, _ = (int(v) for v in stats[name].compute().tolist())  # torchmetrics reduces across ranks
        per_source[name] = {**scores_from_counts(tp, fp, fn), "pixels": tp + fp + tn + fn}
    result = {"val_loss": (loss_sum[0] / loss_sum[1]).item()}
    for key in ("f1", "iou", "precision", "recall"):
        values = [s[key] for s in per_source.values() if s[key] is not None]
        result[key] = sum(values) / len(values) if values else None
    result["pixels"] = sum(s["pixels"] for s in per_source.values())
    if len(sources) > 1:
        result["sources"] = per_source
    return result


def _on_label_grid(prob: torch.Tensor, target: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A prediction and its target on the label's grid: as they are for a 2 m label; for a
    coarse one (k > 1), the 2 m mask's share of water in each cell (water from a half) and
    the label's cells."""
    if k == 1:
        return prob, target
    share = torch.nn.functional.avg_pool2d((prob >= 0.5).float(), k)
    return (share >= 0.5).float(), target[..., ::k, ::k]


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
