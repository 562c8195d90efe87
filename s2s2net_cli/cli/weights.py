"""``s2s2net weights``: what a weights file says about itself, and notes added to it."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..checkpoint import annotate_weights, read_card
from .options import named_as, overwrite_option, parse_name_values


@click.group()
def weights():
    """Read and annotate weights files (.safetensors with the model's card)."""


@weights.command()
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
def show(path):
    """Print the card of a weights file as JSON (read from its header: no tensor is loaded).

    \b
    Example:
      s2s2net weights show run/best.safetensors
    """
    click.echo(json.dumps(read_card(path).to_dict(), indent=2))


@weights.command()
@click.argument("src", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("dst", type=click.Path(dir_okay=False, path_type=Path),
                callback=named_as((".safetensors",), "weights are written as safetensors"))
@click.option("--set", "notes", multiple=True, callback=parse_name_values, metavar="KEY=VALUE",
              help="A note added to the card's training record (repeatable).")
@click.option("--threshold", type=click.FloatRange(0, 1), default=None,
              help="The water probability threshold the model was calibrated for.")
@click.option("--ndwi-prior", type=click.FloatRange(0, 100), default=None, metavar="GAIN",
              help="Add GAIN x max(NDWI, 0) (each 10 m pixel's, brought to 2 m bilinearly) to the network's "
                   "logits wherever the weights are used; 0 takes it off.")
@overwrite_option
def annotate(src, dst, notes, threshold, ndwi_prior, overwrite):
    """Copy weights from SRC to DST with notes added to their card (and its threshold and NDWI
    prior set, as calibrated for them).

    \b
    Examples:
      s2s2net weights annotate run/best.safetensors model.safetensors --set recipe=train.sh --threshold 0.6
      s2s2net weights annotate model.safetensors without_prior.safetensors --ndwi-prior 0
    """
    annotate_weights(src, dst, notes, threshold, overwrite=overwrite, ndwi_prior=ndwi_prior)
