"""``s2s2net train``: DeepSpeed ZeRO-2 training on chips, one process or many ranks."""

from __future__ import annotations

import json
from pathlib import Path

import click
from click.core import ParameterSource

from ..errors import S2S2NetError
from ..rulebook import finding
from ..training.config import AUGMENTATIONS, DEFAULT_STEPS, LABEL_EDGES, TrainOptions, read_source_weights
from .options import (
    HintedCommand,
    bad_parameter,
    exclusive,
    json_option,
    overwrite_option,
    seed_option,
    train_precision_option,
)
from .render import counted, log_findings, progress_bar, stderr

_TRAIN = TrainOptions()  # the defaults, as the options show them


def _parse_weights(ctx, param, values) -> dict:
    try:
        return read_source_weights(list(values or ()))
    except S2S2NetError as exc:  # said as Click says a bad value
        raise bad_parameter(exc.finding, ctx, param) from None


@click.command(cls=HintedCommand)
@click.argument("chips_dirs", nargs=-1, required=True, type=click.Path(path_type=Path), metavar="CHIPS_DIR...")
@click.option("-o", "--output", "run_dir", required=True, type=click.Path(path_type=Path), help="Run folder.")
@click.option("--max-steps", type=click.IntRange(1), default=None, help=f"Optimizer steps (default {DEFAULT_STEPS} unless --epochs).")
@click.option("--epochs", type=click.IntRange(1), default=None, help="Passes over the train split (instead of --max-steps).")
@click.option("--batch-size", type=click.IntRange(1), default=_TRAIN.batch_size, show_default=True, help="Global batch, split across ranks.")
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=_TRAIN.lr, show_default=True,
              help="AdamW's peak learning rate: reached after --warmup-steps, then a cosine decay to 5 % of it at "
                   "the last step.")
@click.option("--weight-decay", type=click.FloatRange(min=0), default=_TRAIN.weight_decay, show_default=True,
              help="AdamW's decoupled weight decay.")
@train_precision_option
@click.option("--zero-stage", type=click.IntRange(0, 2), default=_TRAIN.zero_stage, show_default=True, help="DeepSpeed ZeRO stage.")
@click.option("--offload-optimizer", is_flag=True, help="ZeRO-Offload: optimizer states and step on the CPU.")
@click.option("--deepspeed-config", type=click.Path(dir_okay=False), default=None,
              help="JSON merged over the config built from the options, key by key.")
@click.option("--val-every", type=click.IntRange(1), default=_TRAIN.val_every, show_default=True, help="Validate and checkpoint every N steps.")
@seed_option(_TRAIN.seed, "Seed of the run: the network's first weights, the chips' order, their augmentation and "
                          "a validation share drawn where the chips have none.")
@click.option("--num-workers", type=click.IntRange(0), default=_TRAIN.num_workers, show_default=True, help="Data loader worker processes per rank.")
@click.option("--augment", type=click.Choice(AUGMENTATIONS), default=_TRAIN.augment, show_default=True,
              help="geometric: flips and 90-degree turns; full: also per-band gain/offset, brightness, noise, blur.")
@click.option("--warmup-steps", type=click.IntRange(0), default=_TRAIN.warmup_steps, show_default=True, help="Linear warm-up before the cosine decay.")
@click.option("--resume", is_flag=True, help="Continue from the latest checkpoint in the run folder, with the options "
                                              "it was started with where they are not given again.")
@click.option("--init-weights", type=click.Path(), default=None, help="Start from these weights (.safetensors; default: the bundled model).")
@click.option("--source-weight", "source_weights", multiple=True, callback=_parse_weights, metavar="NAME=W",
              help="Draw the chips of the chips folder NAME W times an epoch (repeatable; default 1; 0 validates only).")
@click.option("--label-edges", type=click.Choice(LABEL_EDGES), default=_TRAIN.label_edges, show_default=True,
              help="What a 10 m label asks of its shore cells: whole: all water or all land, as inside; "
                   "majority: only at least (water) or at most (land) half water, as the label is read at 10 m.")
@click.option("--boundary-weight", type=click.FloatRange(min=0), default=_TRAIN.boundary_weight, show_default=True,
              help="Add this many times a soft boundary F1 loss (water edges within 2 pixels of the label's) on "
                   "chips whose labels are on the prediction's grid (2 m truth, degraded scenes' labels).")
@click.option("--water-indices", is_flag=True,
              help="Give the network NDWI and MNDWI (computed inside it from the bands) as two more inputs; "
                   "--init-weights without them are widened, the new inputs starting at zero weight.")
@overwrite_option
@json_option
@click.pass_context
def train(ctx, chips_dirs, run_dir, max_steps, epochs, batch_size, lr, weight_decay, precision, zero_stage,
          offload_optimizer, deepspeed_config, val_every, seed, num_workers, augment, warmup_steps, resume,
          init_weights, source_weights, label_edges, boundary_weight, water_indices, overwrite, as_json):
    """Train the network on chips made by `s2s2net chip`, from one chips folder or several.

    Chips whose masks `chip` kept at 10 m (a coarse label) are scored on their 10 m cells, the
    2 m prediction averaged over each; chips with 2 m masks at 2 m. Validation scores each
    folder on its own and chooses the best weights on the mean of their F1.

    Writes RUN_DIR/metrics.jsonl, DeepSpeed checkpoints under RUN_DIR/checkpoints/ (every
    validation, and on SIGTERM or Ctrl-C), RUN_DIR/last.safetensors and best.safetensors (best
    validation F1) and RUN_DIR/config.json.

    \b
    Examples:
      s2s2net train chips/ -o run/ --max-steps 2000
      s2s2net train synthetic_chips/ sen1floods11_chips/ -o run/ --source-weight sen1floods11_chips=3
      deepspeed --num_gpus 8 --module s2s2net_cli train chips/ -o run/ --batch-size 64
      torchrun --nproc_per_node 2 -m s2s2net_cli train chips/ -o run/
      s2s2net train chips/ -o run/ --resume
    """
    if max_steps and epochs:
        raise bad_parameter(exclusive("--max-steps", "--epochs"), ctx, hint="--epochs")
    if resume and overwrite:
        raise bad_parameter(finding("S2N-RESUME-OVERWRITE"), ctx, hint="--resume")
    # what is given: a --deepspeed-config may not contradict it, a resumed run takes the rest as it was started
    explicit = frozenset(name for name in ctx.params if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE)
    options = TrainOptions(max_steps=max_steps, epochs=epochs, batch_size=batch_size, lr=lr, weight_decay=weight_decay,
                           precision=precision, zero_stage=zero_stage, offload_optimizer=offload_optimizer,
                           deepspeed_config=deepspeed_config,
                           explicit=explicit, val_every=val_every, seed=seed, num_workers=num_workers, resume=resume,
                           init_weights=init_weights, overwrite=overwrite, augment=augment, warmup_steps=warmup_steps,
                           source_weights=source_weights, label_edges=label_edges, boundary_weight=boundary_weight,
                           water_indices=water_indices)
    world = ctx.obj["world"]
    quiet = ctx.obj.get("quiet") or not world.leads
    said = []  # warnings logged as the run went
    with progress_bar("train", quiet=quiet) as on_step:
        def on_record(record):
            if on_step and record["kind"] == "train":
                on_step(record["step"], record["total_steps"])
            elif record["kind"] == "status" and not quiet:
                stderr.print(record["message"])
            elif record["kind"] == "warning":
                log_findings([record["finding"]])
                said.append(record["finding"])
            elif record["kind"] == "val" and not quiet:
                f1 = "-" if record["f1"] is None else f"{record['f1']:.3f}"
                stderr.print(f"step {record['step']}: val loss {record['val_loss']:.4f}, F1 {f1}")

        from ..training.loop import train as run_training  # heavy: torch, deepspeed

        result = run_training(list(chips_dirs), run_dir, options, on_record=on_record, world=world)
    if world.leads:
        log_findings([w for w in result.warnings if w not in said])
        report(ctx, result, as_json)
    if result.interrupted:
        click.echo(f"Interrupted at step {result.steps}; checkpoint saved. Continue with --resume.", err=True)
        ctx.exit(128 + result.signal)


def report(ctx, result, as_json: bool) -> None:
    """The run's summary: JSON on stdout with --json, else one line on stderr."""
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
    elif not ctx.obj.get("quiet"):
        best = "no validation" if result.best_f1 is None else f"best validation F1 {result.best_f1:.3f} ({result.best})"
        ranks = f" on {result.world_size} ranks" if result.world_size > 1 else ""
        stderr.print(f"{counted(result.steps, 'step')} in {result.seconds:.0f} s{ranks}: {best}; last weights {result.last}",
                     highlight=False, soft_wrap=True)
