"""``s2s2net weights``: what a weights file says about itself, and notes added to it."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..errors import S2S2NetError
from ..evaluation.calibrate import GAINS, MIN_SYNTHETIC_SIZE, SYNTHETIC_SCENES, SYNTHETIC_SIZE, read_gains
from .options import (
    SuggestingGroup,
    bad_parameter,
    json_option,
    manifest_option,
    overwrite_option,
    pair_option,
    parse_name_values,
    scene_options,
    weights_dst,
    weights_src_dst,
)
from .render import log_findings, progress_bar, summary_table


def _parse_gains(ctx, param, value) -> tuple[float, ...]:
    try:
        return read_gains(value)
    except S2S2NetError as exc:  # said as Click says a bad value
        raise bad_parameter(exc.finding, ctx, param) from None


@click.group(cls=SuggestingGroup)
def weights():
    """Read, annotate and calibrate weights files (.safetensors with the model's card)."""


@weights.command()
@click.argument("path", type=click.Path(path_type=Path))
def show(path):
    """Print the card of a weights file as JSON (read from its header: no tensor is loaded).

    \b
    Example:
      s2s2net weights show run/best.safetensors
    """
    from ..checkpoint import read_card  # heavy: torch

    click.echo(json.dumps(read_card(path).to_dict(), indent=2))


@weights.command()
@weights_src_dst
@click.option("--set", "notes", multiple=True, callback=parse_name_values, metavar="KEY=VALUE",
              help="A note added to the card's training record (repeatable).")
@click.option("--threshold", type=click.FloatRange(0, 1), default=None,
              help="The water probability threshold the model was calibrated for.")
@click.option("--ndwi-prior", type=click.FloatRange(0, 100), default=None, metavar="GAIN",
              help="Add GAIN x max(NDWI, 0) (each 10 m pixel's, brought to 2 m bilinearly) to the network's "
                   "logits wherever the weights are used; 0 takes it off.")
@overwrite_option
def annotate(src, dst, output, notes, threshold, ndwi_prior, overwrite):
    """Copy weights from SRC to DST with notes added to their card (and its threshold and NDWI
    prior set, as calibrated for them).

    \b
    Examples:
      s2s2net weights annotate run/best.safetensors model.safetensors --set recipe=train.sh --threshold 0.6
      s2s2net weights annotate model.safetensors without_prior.safetensors --ndwi-prior 0
    """
    from ..checkpoint import annotate_weights  # heavy: torch

    dst = weights_dst(dst, output)
    annotate_weights(src, dst, notes, threshold, overwrite=overwrite, ndwi_prior=ndwi_prior)


@weights.command()
@weights_src_dst
@pair_option
@manifest_option
@click.option("--gains", default=",".join(f"{g:g}" for g in GAINS), show_default=True, metavar="G,G,...",
              callback=_parse_gains, help="NDWI prior gains to try (0: none).")
@click.option("--synthetic-scenes", type=click.IntRange(1), default=SYNTHETIC_SCENES, show_default=True,
              help="Synthetic validation scenes to score on (generator seeds from 8000).")
@click.option("--synthetic-size", type=click.IntRange(MIN_SYNTHETIC_SIZE), default=SYNTHETIC_SIZE, show_default=True,
              help="Their side in 10 m pixels.")
@scene_options
@overwrite_option
@json_option
@click.pass_context
def calibrate(ctx, src, dst, output, pairs, manifests, gains, synthetic_scenes, synthetic_size, scene, overwrite,
              as_json):
    """Choose the water threshold and NDWI prior of weights SRC and write them to DST.

    Every gain is scored as predict runs it (each scene's network run once, each gain's prior
    added to its logits), on synthetic validation scenes (exact 2 m truth) and on your labelled
    pairs (each label on its scene's 10 m grid, scored on its cells, or on the
    2 m grid; the scenes read as predict reads them, with the same options and warnings): the
    --pair pairs pooled as one source, each --manifest as another. The threshold
    and gain with the best mean of the sources' F1 are written into DST's card. Run it after
    every fine-tune: a model's calibrated threshold is what predict, evaluate and compare use
    unless --threshold is given.

    \b
    Examples:
      s2s2net weights calibrate run/best.safetensors model.safetensors --pair scene.tif label_10m.tif
      s2s2net weights calibrate run/best.safetensors model.safetensors --manifest labels.csv --gains 0,8,16
      s2s2net weights calibrate run/best.safetensors model.safetensors --manifest stacks_2023.csv --offset -1000
    """
    from ..evaluation.calibrate import THRESHOLDS, calibrate_weights  # heavy: torch

    dst = weights_dst(dst, output)
    with progress_bar("calibrate: scenes", quiet=ctx.obj.get("quiet"), every_step=True) as on_step:
        found = calibrate_weights(src, dst, pairs, manifests, gains, synthetic_scenes, synthetic_size, overwrite,
                                  on_progress=on_step, scene=scene)
    if as_json:
        click.echo(json.dumps(found.to_dict(), indent=2))
    elif not ctx.obj.get("quiet"):
        for gain, scores in found.scores.items():
            rows = [[f"{t:.2f}", *(f"{scores[s][k]:.4f}" for s in scores)] for k, t in enumerate(THRESHOLDS)]
            summary_table(f"NDWI prior gain {gain:g}", ["threshold", *scores], rows)
        click.echo(f"{dst}: threshold {found.threshold:.2f}, NDWI prior gain {found.gain:g}", err=True)
    log_findings(found.warnings)


@weights.command()
@weights_src_dst
@click.option("--scene", "scenes", multiple=True, type=click.Path(path_type=Path),
              help="A scene to fit on besides the synthetic ones (repeatable): any predict reads; no label needed.")
@click.option("--synthetic-scenes", type=click.IntRange(0), default=None,
              help="Synthetic scenes to fit on (generator seeds from 8000; default 40).")
@scene_options
@overwrite_option
@json_option
@click.pass_context
def gate(ctx, src, dst, output, scenes, synthetic_scenes, scene, overwrite, as_json):
    """Fit a water gate to weights SRC and write them with it to DST.

    The gate lets predict skip the network's head (most of its work) on the 40 m cells where
    no 2 m pixel can be water, and on those where every one is: it learns, from the head's own
    answers on the scenes (no label needed), how high and how low the head's logits can reach
    in each cell, with margins that leave at most about one pixel in a million wrong on them;
    a fine gate beside it, fitted alike on the head's own 10 m features, skips the head's last
    two steps on more cells. Masks made with them and with --full-head agree on all but those
    pixels; probability maps always run the full head.
    The same runs record the range of each head step's input, which --precision int8 rounds
    to 8 bits. Fit it again after every fine-tune (training drops both).

    \b
    Examples:
      s2s2net weights gate run/best.safetensors model.safetensors
      s2s2net weights gate model.safetensors gated.safetensors --scene S2A_tile.SAFE.zip --scene lake.tif
      s2s2net weights gate model.safetensors gated.safetensors --scene stack_2023.tif --offset -1000
    """
    from ..training.gate import gate_weights  # heavy: torch

    dst = weights_dst(dst, output)
    with progress_bar("gate: windows read, then the fit", quiet=ctx.obj.get("quiet")) as on_step:
        fit = gate_weights(src, dst, tuple(scenes), synthetic_scenes, overwrite, on_progress=on_step,  # None: default
                           scene=scene)
    if as_json:
        click.echo(json.dumps(fit.to_dict(), indent=2))
    elif not ctx.obj.get("quiet"):
        click.echo(f"{dst}: water gate with margins {fit.margin:g} and {fit.water_margin:g}: the head runs on "
                   f"{fit.active_fraction:.1%} of the fitting scenes' cells and fills {fit.filled_fraction:.1%} as water; "
                   f"{fit.missed_fraction:.1e} of their pixels are water it skips as land, {fit.wrong_water_fraction:.1e} "
                   f"land it fills as water; with the fine gate beside it (margins {fit.fine.margin:g} and "
                   f"{fit.fine.water_margin:g}) its last two steps run on {fit.both_active_fraction:.1%} of the cells", err=True)
    log_findings(fit.warnings)
