"""``s2s2net evaluate`` and ``s2s2net compare``: scores on hold-out scenes."""

from __future__ import annotations

import functools
import json
import logging

import click

from ..formats import PLOT_FILE, TABLE_FILE
from ..inference.options import BASELINES, ModelOptions, PredictOptions
from ..io import check_output
from .options import (
    HintedCommand,
    OutputFile,
    bad_parameter,
    exclusive,
    json_option,
    manifest_option,
    model_options,
    nodata_option,
    overwrite_option,
    pair_option,
    require_pairs,
    scene_options,
    score_degrade_option,
)
from .render import log_findings, stderr, summary_table

log = logging.getLogger("s2s2net")

SCORE_COLUMNS = ("f1", "iou", "precision", "recall", "boundary_f1")


def _fmt(value) -> str:
    if value is None:
        return "undefined"
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def scoring_options(command):
    """The options evaluate and compare share besides the model's: pairs, label nodata, how
    scenes are read, Wald's protocol and where predictions go; handed on as ``scoring`` (a dict)."""
    shared = [click.option("--csv", "csv_path", type=OutputFile(TABLE_FILE), default=None, help="Write the table as CSV."),
              pair_option, manifest_option, nodata_option, scene_options,
              click.option("--save-predictions", type=click.Path(), default=None,
                           help="Keep each 2 m prediction here as a GeoTIFF."),
              score_degrade_option, overwrite_option, json_option]
    names = ("csv_path", "pairs", "manifests", "nodata", "scene", "save_predictions", "degrade", "overwrite")

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        return command(*args, scoring={name: kwargs.pop(name) for name in names}, **kwargs)

    for option in reversed(shared):
        wrapper = option(wrapper)
    return wrapper


def _score(ctx, scoring: dict, model: ModelOptions, weights, baselines, default_baselines=(), plot=None):
    """Every model scored on every pair, run as predict runs it (the same options, the same
    defaults); the table written to --csv."""
    pairs = require_pairs(ctx, scoring["pairs"], scoring["manifests"])
    if scoring["csv_path"]:  # before the work; the plot is compare's to check
        inputs = [*scoring["manifests"], *(path for pair in scoring["pairs"] for path in pair)]
        check_output(scoring["csv_path"], scoring["overwrite"], inputs)
    options = PredictOptions.of(model, scene=scoring["scene"],
                                overwrite=scoring["overwrite"] or scoring["save_predictions"] is None)
    from ..evaluation.compare import compare as run_comparison  # heavy: torch
    from ..evaluation.evaluate import make_models

    models = make_models(list(weights), list(baselines), options, default_baselines)
    quiet = ctx.obj.get("quiet")

    def progress(pair_id, model_name):
        if not quiet:
            stderr.print(f"[dim]{pair_id}: {model_name}[/]")

    results = run_comparison(models, pairs, scoring["nodata"], scoring["scene"], scoring["save_predictions"],
                             plot, progress, scoring["degrade"], scoring["overwrite"])
    log_findings(w for r in results for img in r.images for w in img["warnings"])
    if scoring["csv_path"]:
        from ..evaluation.report import write_csv

        write_csv(scoring["csv_path"], results, scoring["degrade"])
    return results


def _image_rows(result) -> list[list[str]]:
    return [[img["id"], *(_fmt(img[c]) for c in SCORE_COLUMNS), str(img["pixels"])] for img in result.images]


@click.command(cls=HintedCommand)
@model_options
@click.option("--baseline", type=click.Choice(BASELINES), default=None, help="Score a water-index baseline instead.")
@scoring_options
@click.pass_context
def evaluate(ctx, model, baseline, scoring, as_json):
    """Score one model (or baseline) against reference masks.

    Pixels that are nodata in the reference or the image are left out; the pooled scores over
    all pixels of all images are the headline. F1 is 'undefined' where neither reference nor
    prediction has water. The model runs as `s2s2net predict` runs it, with the same options.

    \b
    Examples:
      s2s2net evaluate --manifest chips/test_manifest.csv
      s2s2net evaluate --weights run/best.safetensors --pair s2.tif label_10m.tif --json
      s2s2net evaluate --baseline mndwi-otsu --pair s2.tif label.tif --nodata -1
      s2s2net evaluate --pair S2A_MSIL2A_20230607T024541_N0509_R132_T51RUQ.SAFE.zip label.tif --json
      s2s2net evaluate --pair scene.tif label.tif --bbox 121.45,31.20,121.52,31.26
      s2s2net evaluate --pair scene.tif label_10m.tif --degrade 5 --csv detail.csv
    """
    if model.weights and baseline:
        raise bad_parameter(exclusive("--weights", "--baseline"), ctx, hint="--baseline")
    from ..evaluation.evaluate import scores_document  # heavy: torch

    results = _score(ctx, scoring, model, [model.weights] if model.weights else [], [baseline] if baseline else [])
    result = results[0]
    if as_json:
        click.echo(json.dumps(scores_document(results, scoring["degrade"]), indent=2))
    if not ctx.obj.get("quiet"):
        rows = _image_rows(result) + [["overall", *(_fmt(result.overall[c]) for c in SCORE_COLUMNS), str(result.overall["pixels"])]]
        summary_table(_titled(result.model, scoring["degrade"]), ["image", *SCORE_COLUMNS, "pixels"], rows)


@click.command(cls=HintedCommand)
@model_options(several=True)
@click.option("--baseline", "baselines", multiple=True, type=click.Choice(BASELINES), help="Baseline (repeatable).")
@click.option("--plot", type=OutputFile(PLOT_FILE), default=None,
              help="Write a PNG: scene, reference and each prediction (of 20 images at most: those the models "
                   "differ most on).")
@scoring_options
@click.pass_context
def compare(ctx, model, weights, baselines, plot, scoring, as_json):
    """Compare models and baselines on the same images and the same pixels.

    With neither --weights nor --baseline: the bundled model against every baseline; with
    --baseline alone, the baselines alone (--weights default adds the bundled model).

    \b
    Examples:
      s2s2net compare --weights a.safetensors --weights b.safetensors --baseline mndwi-bilinear --manifest test.csv
      s2s2net compare --manifest chips/test_manifest.csv --csv scores.csv --plot scores.png
      s2s2net compare --manifest labels_10m.csv --degrade 5 --plot detail.png
    """
    from ..evaluation.evaluate import scores_document  # heavy: torch

    results = _score(ctx, scoring, model, weights, baselines, default_baselines=BASELINES, plot=plot)
    if as_json:
        click.echo(json.dumps(scores_document(results, scoring["degrade"]), indent=2))
    if not ctx.obj.get("quiet"):
        _compare_tables(results, scoring["degrade"])
        if baselines and not weights:  # a model left out that the user may have meant to compare them with
            click.echo("baselines alone, as no --weights was given: --weights default adds the bundled model",
                       err=True)


def _titled(title: str, degrade: int | None) -> str:
    """A table's title, saying when its scores are Wald's protocol's."""
    return f"{title} (scenes degraded {degrade}x, Wald's protocol)" if degrade else title


def _compare_tables(results, degrade: int | None = None) -> None:
    rows = [[r.model, *(_fmt(r.overall[c]) for c in SCORE_COLUMNS), str(r.overall["pixels"])] for r in results]
    highlight = {}
    for j, c in enumerate(SCORE_COLUMNS, start=1):
        values = [r.overall[c] for r in results]
        if any(v is not None for v in values):
            best = max(v for v in values if v is not None)
            highlight.update({(i, j): "bold green" for i, v in enumerate(values) if v == best})
    summary_table(_titled("overall (pooled over all images)", degrade), ["model", *SCORE_COLUMNS, "pixels"], rows,
                  highlight)
    for r in results:
        summary_table(_titled(r.model, degrade), ["image", *SCORE_COLUMNS, "pixels"], _image_rows(r))
