"""``s2s2net chip``: masks onto the 5x sub-grid of their scenes, then training chips."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import click

from .options import (
    HintedCommand,
    bad_parameter,
    chip_degrade_option,
    exclusive,
    json_option,
    manifest_option,
    nodata_option,
    overwrite_option,
    pair_option,
    require_pairs,
    scene_options,
    seed_option,
)
from .render import counted, log_findings, progress_bar, summary_table

log = logging.getLogger("s2s2net")


@click.command(cls=HintedCommand)
@pair_option
@manifest_option
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(path_type=Path), help="Chips folder.")
@click.option("--size", type=click.IntRange(16), default=512, show_default=True, help="Chip side in 10 m pixels (5x at 2 m).")
@click.option("--stride", type=click.IntRange(1), default=None, help="Step between chips in 10 m pixels (default: --size).")
@click.option("--max-nodata", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="Largest nodata fraction a chip may have.")
@click.option("--test-ids", default=None, metavar="ID,ID", help="Scene ids held out as the test split.")
@click.option("--test-regions", type=click.Path(dir_okay=False), default=None,
              help="Vector file: chips its polygons overlap (by a 2 m pixel or more) are the test split.")
@click.option("--val-fraction", type=click.FloatRange(0, 1), default=0.2, show_default=True,
              help="Share of chips drawn for validation, in blocks (1: every chip validates, none trains; 0: none validates).")
@seed_option(42, "Seed of the validation blocks' draw.")
@scene_options
@nodata_option
@chip_degrade_option
@overwrite_option
@json_option
@click.pass_context
def chip(ctx, pairs, manifests, out_dir, size, stride, max_nodata, test_ids, test_regions, val_fraction, seed, scene,
         nodata, degrade, overwrite, as_json):
    """Align high-resolution masks to Sentinel-2 scenes and cut training chips.

    Each mask is warped onto the exact 5x sub-grid of its scene (averaged to a water fraction
    when finer, nearest when about as fine). Chips are --size px at 10 m (6 bands, uint16) with
    5x that at 2 m (uint8 0/1, 255 nodata), listed in OUT/index.gpkg with their split.
    A mask coarser than that sub-grid (a 10 m label) is kept on the scene's own 10 m grid and
    trained on its cells. With --degrade N each scene is chipped degraded N x (Wald's protocol)
    and its label kept as it is: --degrade 5 makes a 10 m label exact truth on the 5x grid,
    --size and --stride then count the degraded scene's pixels.

    \b
    Examples:
      s2s2net chip --pair s2.tif mask.tif -o chips/
      s2s2net chip --manifest pairs.csv -o chips/ --size 256 --test-ids lake_a,delta_b
      s2s2net chip --manifest pairs.csv -o chips/ --test-regions holdout.gpkg --json
      s2s2net chip --pair S2B_MSIL2A_x.SAFE.zip lakes_1m.tif -o chips/ --aoi lake_district.gpkg
      s2s2net chip --manifest labels_10m.csv -o chips_sr/ --degrade 5 --size 32 --stride 16
    """
    if test_ids and test_regions:
        raise bad_parameter(exclusive("--test-ids", "--test-regions"), ctx, hint="--test-regions")
    pair_list = require_pairs(ctx, pairs, manifests)
    from ..training.chips import ChipOptions, chip_pairs  # heavy: geopandas, shapely

    options = ChipOptions(size=size, stride=stride, max_nodata=max_nodata,
                          test_ids=test_ids or (),
                          test_regions=test_regions, val_fraction=val_fraction, seed=seed, scene=scene, nodata=nodata,
                          degrade=degrade, overwrite=overwrite)
    with progress_bar("chips", quiet=ctx.obj.get("quiet")) as on_step:
        summary = chip_pairs(pair_list, out_dir, options,
                             on_progress=(lambda scene_id, done, total: on_step(done, total)) if on_step else None)
    log_findings(summary.warnings)
    if as_json:
        click.echo(json.dumps(summary.to_dict(), indent=2))
    elif not ctx.obj.get("quiet"):
        rows = [[split, str(summary.chips[split]), "-" if summary.water_fraction[split] is None else f"{summary.water_fraction[split]:.1%}"]
                for split in ("train", "val", "test")]
        rows += [[f"skipped ({why.replace('_', ' ')})", str(n), ""] for why, n in summary.skipped.items()
                 if n or why == "nodata"]  # a reason that can not apply (no --degrade, no test split) unsaid
        if summary.labels_10m:
            rows.append(["masks kept at 10 m (coarse label)", str(summary.labels_10m), ""])
        summary_table(f"{counted(summary.scenes, 'scene')} -> {summary.index}", ["split", "chips", "water"], rows)
        if summary.test_manifest:  # the test scenes whole, as a model is scored on them
            click.echo(f"{summary.test_manifest}: the test scenes whole, to score models on with s2s2net compare "
                       f"--manifest {summary.test_manifest}", err=True)
