"""``s2s2net evaluate`` and ``s2s2net compare``: scores on hold-out scenes."""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path

import click

from ..baselines import BASELINES
from ..evaluate import evaluate as run_evaluation, make_models
from ..io import check_output
from ..predict import PredictOptions
from .options import (bands_option, device_option, flips_option, json_option, keep_clouds_option, manifest_option, mask_option,
                      nodata_option, offset_option, overwrite_option, pair_option, require_pairs, scale_option,
                      tile_size_option)
from .render import stderr, summary_table

log = logging.getLogger("s2s2net")

SCORE_COLUMNS = ("f1", "iou", "precision", "recall")


def _fmt(value) -> str:
    if value is None:
        return "undefined"
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def _run(ctx, weights, baselines, pairs, manifests, nodata, bands, scale, offset, keep_clouds, mask, device, flips,
         tile_size, save_predictions, overwrite, plot=None, threshold=None):
    pair_list = require_pairs(ctx, pairs, manifests)
    for target in (plot,):
        if target:
            check_output(target, overwrite)
    options = PredictOptions(tile_size=tile_size, overlap=min(64, tile_size // 4), device=device, bands=bands,
                             scale=scale, offset=offset, keep_clouds=keep_clouds, mask=mask, threshold=threshold,
                             flips=flips, overwrite=overwrite or save_predictions is None)
    models = make_models(list(weights), list(baselines), options)
    quiet = ctx.obj.get("quiet")
    with tempfile.TemporaryDirectory(prefix="s2s2net-eval-") as tmp:
        predictions = Path(save_predictions) if save_predictions else Path(tmp)

        def progress(pair_id, model_name):
            if not quiet:
                stderr.print(f"[dim]{pair_id}: {model_name}[/]")

        results = run_evaluation(models, pair_list, predictions, nodata, on_progress=progress,
                                 scene_options=options.scene_options())
        for warning in dict.fromkeys(w for r in results for img in r.images for w in img["warnings"]):
            log.warning(warning)
        if not save_predictions:
            for r in results:
                for img in r.images:
                    img["prediction"] = None
        if plot:
            from ..report import plot_comparison

            plot_comparison(plot, pair_list, results, predictions, scene_options=options.scene_options())
    return pair_list, results


def _image_rows(result) -> list[list[str]]:
    return [[img["id"], *(_fmt(img[c]) for c in SCORE_COLUMNS), str(img["pixels"])] for img in result.images]


common_options = [
    pair_option, manifest_option, nodata_option, bands_option, scale_option, offset_option, keep_clouds_option,
    mask_option,
    device_option, flips_option,
    tile_size_option,
    click.option("--save-predictions", type=click.Path(file_okay=False), default=None, help="Keep each 2 m prediction here as a GeoTIFF."),
    overwrite_option, json_option,
]


def with_common(f):
    for option in reversed(common_options):
        f = option(f)
    return f


@click.command()
@click.option("--weights", type=click.Path(dir_okay=False), default=None, help="Weights file (default: the bundled model).")
@click.option("--baseline", type=click.Choice(BASELINES), default=None, help="Score a water-index baseline instead.")
@click.option("--threshold", type=click.FloatRange(0, 1), default=None,
              help="Water probability threshold (default: the model's calibrated threshold).")
@with_common
@click.pass_context
def evaluate(ctx, weights, baseline, threshold, pairs, manifests, nodata, bands, scale, offset, keep_clouds, mask,
             device, flips, tile_size, save_predictions, overwrite, as_json):
    """Score one model (or baseline) against reference masks.

    Pixels that are nodata in the reference or the image are left out; the pooled scores over
    all pixels of all images are the headline. F1 is 'undefined' where neither reference nor
    prediction has water.

    \b
    Examples:
      s2s2net evaluate --manifest chips/test_manifest.csv
      s2s2net evaluate --weights run/best.safetensors --pair s2.tif label_10m.tif --json
      s2s2net evaluate --baseline mndwi-otsu --pair s2.tif label.tif --nodata -1
      s2s2net evaluate --pair S2A_MSIL2A_20230607T024541_N0509_R132_T51RUQ.SAFE.zip label.tif --json
    """
    if weights and baseline:
        raise click.BadParameter("give --weights or --baseline, not both", ctx, param_hint="'--baseline'")
    _, results = _run(ctx, [weights] if weights else [], [baseline] if baseline else [], pairs, manifests, nodata, bands,
                      scale, offset, keep_clouds, mask, device, flips, tile_size, save_predictions, overwrite,
                      threshold=threshold)
    result = results[0]
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
    if not ctx.obj.get("quiet"):
        rows = _image_rows(result) + [["overall", *(_fmt(result.overall[c]) for c in SCORE_COLUMNS), str(result.overall["pixels"])]]
        summary_table(result.model, ["image", *SCORE_COLUMNS, "pixels"], rows)


@click.command()
@click.option("--weights", multiple=True, type=click.Path(dir_okay=False), help="Weights file (repeatable).")
@click.option("--baseline", "baselines", multiple=True, type=click.Choice(BASELINES), help="Baseline (repeatable).")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), default=None, help="Write the table as CSV.")
@click.option("--plot", type=click.Path(dir_okay=False), default=None, help="Write a PNG: scene, reference and each prediction.")
@with_common
@click.pass_context
def compare(ctx, weights, baselines, csv_path, plot, pairs, manifests, nodata, bands, scale, offset, keep_clouds, mask,
            device, flips, tile_size, save_predictions, overwrite, as_json):
    """Compare models and baselines on the same images and the same pixels.

    With neither --weights nor --baseline: the bundled model against every baseline.

    \b
    Examples:
      s2s2net compare --weights a.safetensors --weights b.safetensors --baseline mndwi-bilinear --manifest test.csv
      s2s2net compare --manifest chips/test_manifest.csv --csv scores.csv --plot scores.png
    """
    if csv_path:
        check_output(csv_path, overwrite)
    if not weights and not baselines:
        from ..predict import default_weights

        weights, baselines = (default_weights(),), BASELINES
    _, results = _run(ctx, weights, baselines, pairs, manifests, nodata, bands, scale, offset, keep_clouds, mask,
                      device, flips, tile_size, save_predictions, overwrite, plot)
    if as_json:
        click.echo(json.dumps({"rows": [{"model": r.model, **r.to_dict()["overall"], "images": r.images} for r in results]}, indent=2))
    if csv_path:
        from ..report import write_csv

        write_csv(csv_path, results)
    if not ctx.obj.get("quiet"):
        rows = [[r.model, *(_fmt(r.overall[c]) for c in SCORE_COLUMNS), str(r.overall["pixels"])] for r in results]
        highlight = {}
        for j, c in enumerate(SCORE_COLUMNS, start=1):
            values = [r.overall[c] for r in results]
            if any(v is not None for v in values):
                best = max(v for v in values if v is not None)
                highlight.update({(i, j): "bold green" for i, v in enumerate(values) if v == best})
        summary_table("overall (pooled over all images)", ["model", *SCORE_COLUMNS, "pixels"], rows, highlight)
        for r in results:
            summary_table(r.model, ["image", *SCORE_COLUMNS, "pixels"], _image_rows(r))
