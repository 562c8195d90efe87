"""``s2s2net occurrence``: water occurrence at 2 m over many dates of one place."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import click

from ..api import occurrence as water_occurrence
from ..formats import OCCURRENCE_FILE, PLOT_FILE
from ..io import check_output
from .options import (
    HintedCommand,
    OutputFile,
    creation_options,
    json_option,
    model_options,
    overwrite_option,
    scene_options,
)
from .render import counted, log_findings, progress_bar

log = logging.getLogger("s2s2net")


@click.command(cls=HintedCommand)
@click.argument("scenes", nargs=-1, required=True, metavar="SCENE...")
@click.option("-o", "--output", required=True, type=OutputFile(OCCURRENCE_FILE),
              help="Output GeoTIFF: occurrence, water count, valid count (and class with --classes).")
@click.option("--from-masks", is_flag=True, help="SCENE... are 2 m masks already predicted (0 land, 1 water, 255 nodata).")
@click.option("--like", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Output on this raster's grid (default: the first scene's 2 m grid).")
@click.option("--dates", "dates_csv", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="CSV with columns scene,date (ISO) for scenes whose metadata says no date (stacks).")
@click.option("--classes", is_flag=True, help="Add band 4: 0 never water, 1 seasonal, 2 permanent (>= 90 %), 255 unseen.")
@click.option("--strict", is_flag=True, help="Stop at a date that fails (default: name it, skip it, count it).")
@click.option("--plot", type=OutputFile(PLOT_FILE), default=None,
              help="Write a PNG of water area through time.")
@model_options
@scene_options
@click.option("--cog", is_flag=True, help="Write a Cloud Optimized GeoTIFF with overviews.")
@creation_options
@overwrite_option
@json_option
@click.pass_context
def occurrence(ctx, scenes, output, from_masks, like, dates_csv, classes, strict, plot, model, scene, cog,
               creation_options, overwrite, as_json):
    """Water occurrence over many dates of one place (JRC Global Surface Water's definitions).

    SCENE... are scenes of one place at several dates (stacks, products, STAC items, or a STAC
    ItemCollection file standing for its items in date order), or with --from-masks masks
    already predicted. Each date is predicted as `predict` does and counted on one 2 m grid:
    band 1 occurrence = water / valid dates in percent (255 where never seen), band 2 the water
    count, band 3 the valid count (not cloud, shadow, snow or nodata). A date that fails to read
    or does not overlap the grid is named and skipped (--strict stops). Under a launcher
    (torchrun, deepspeed) the dates are shared among the ranks and the counts summed.

    \b
    Examples:
      s2s2net occurrence S2*_T31UFU_*.SAFE.zip -o occurrence.tif --classes --plot area.png
      s2s2net occurrence search.json -o occurrence.tif --bbox 4.80,52.30,4.95,52.40
      s2s2net occurrence masks/*_water.tif --from-masks -o occurrence.tif --json
      torchrun --nnodes 4 --nproc_per_node 1 ... -m s2s2net_cli occurrence items.json -o occ.tif
    """
    world = ctx.obj["world"]
    if plot and world.leads:
        check_output(plot, overwrite)
    with progress_bar(output.name, quiet=ctx.obj.get("quiet") or not world.leads) as on_step:
        summary = water_occurrence(list(scenes), output, from_masks=from_masks, like=like, dates=dates_csv,
                                   classes=classes, strict=strict, cog=cog, creation_options=creation_options,
                                   overwrite=overwrite, world=world, on_progress=on_step, **vars(model),
                                   **vars(scene))
    if summary is None:
        return
    for d in summary.dates:
        log_findings(d.warnings)
    if plot:
        from ..hydrology.plot import plot_water_area  # heavy: matplotlib

        plot_water_area(summary.dates, plot, overwrite)
    if as_json:
        click.echo(json.dumps(summary.to_dict(), indent=2))
    elif not ctx.obj.get("quiet"):
        for d in summary.dates:
            click.echo(f"{d.date or '-'}  {d.source}: {d.water_km2:.3f} km2 water, {d.valid_share:.1%} seen", err=True)
        click.echo(f"{summary.output}: {counted(len(summary.dates), 'date')}, water ever "
                   f"{summary.ever_water_km2:.3f} km2", err=True)
    for d in summary.skipped:
        click.echo(f"skipped: {d.error}" + (f" [{d.code}]" if d.code else ""), err=True)  # the error names the file
    if summary.skipped or not summary.dates:  # written from the other dates, but not from all: a script must hear
        ctx.exit(1)

