"""``s2s2net rivers``: river centrelines and widths from a water mask, into a GeoPackage."""

from __future__ import annotations

import json

import click

from ..formats import RIVERS_FILE, source_name
from .options import HintedCommand, OutputFile, json_option, overwrite_option
from .render import progress_bar, summary_table


@click.command(cls=HintedCommand)
@click.argument("mask", type=click.Path(dir_okay=False))  # a str: a GDAL path or URL keeps its //
@click.option("-o", "--output", required=True, type=OutputFile(RIVERS_FILE),
              help="GeoPackage to write (layers reaches and widths).")
@click.option("--spacing", type=click.FloatRange(min=0, min_open=True), default=30.0, show_default=True,
              help="Metres between the width transects the widths layer lists; reaches are measured at least "
                   "every 30 m whatever it is.")
@click.option("--min-width", type=click.FloatRange(min=0), default=6.0, show_default=True,
              help="Leave out reaches narrower than this (median width, metres).")
@click.option("--max-width", type=click.FloatRange(min=0, min_open=True), default=500.0, show_default=True,
              help="Leave out reaches wider than this (median width, metres): lakes and the sea are no rivers.")
@click.option("--min-area", type=click.FloatRange(min=0), default=2000.0, show_default=True,
              help="Leave out water bodies smaller than this (m2): ponds and noise.")
@click.option("--max-bridge", type=click.FloatRange(min=0), default=20.0, show_default=True,
              help="Land across a channel up to this long (m) that cuts its water in two is a bridge: the "
                   "centreline runs under it and transects across it are flagged bridge (0: none).")
@click.option("--min-occurrence", type=click.IntRange(1, 100), default=None, metavar="PERCENT",
              help="For an occurrence raster of `s2s2net occurrence`: water is where it was seen on at least "
                   "this percent of the dates  [default: its permanent water's, 90]")
@click.option("--window", type=click.IntRange(256), default=4096, show_default=True,
              help="Window side in pixels: memory is bounded by one window and its margin.")
@click.option("--workers", type=click.IntRange(1), default=None,
              help="Processes measuring windows at once (each holds a window)  [default: one per CPU core]")
@overwrite_option
@json_option
@click.pass_context
def rivers(ctx, mask, output, spacing, min_width, max_width, min_area, max_bridge, min_occurrence, window, workers,
           overwrite, as_json):
    """River centrelines and widths from a water mask.

    MASK is a mask of `s2s2net predict` (0 land, 1 water, 255 nodata), its --probability raster
    (cut at the threshold in its tags), an occurrence raster of `s2s2net occurrence` (its
    permanent water, or see --min-occurrence), or any 0/1 raster with a projected CRS. The output has
    two layers: `reaches` (centrelines split at junctions, with length and median, min and max
    width) and `widths` (a transect every --spacing metres: width and a flag, bank, island,
    bridge or edge).

    \b
    Examples:
      s2s2net rivers water.tif -o rivers.gpkg
      s2s2net rivers water.tif -o rivers.gpkg --spacing 50 --min-width 10 --max-width 300
      s2s2net rivers occurrence.tif -o rivers.gpkg --min-occurrence 50
    """
    from ..hydrology.rivers import RiverOptions, measure_rivers  # heavy: scipy, shapely, geopandas

    options = RiverOptions(spacing_m=spacing, min_width_m=min_width, max_width_m=max_width, min_area_m2=min_area,
                           max_bridge_m=max_bridge, min_occurrence=min_occurrence, window=window, workers=workers,
                           overwrite=overwrite)
    with progress_bar(source_name(mask), quiet=ctx.obj.get("quiet")) as on_step:
        summary = measure_rivers(mask, output, options, on_progress=on_step)
    report(ctx, summary, as_json)


def report(ctx, summary, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(summary.to_dict(), indent=2))
    elif not ctx.obj.get("quiet"):
        width = "-" if summary.width_median_m is None else f"{summary.width_median_m:.1f} m"
        summary_table(f"{summary.output}", ["reaches", "length", "transects", "median width", "open water cut"],
                      [[str(summary.reaches), f"{summary.length_km:.2f} km", str(summary.transects), width,
                        f"{summary.open_water_km:.2f} km"]])
