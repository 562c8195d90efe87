"""``s2s2net predict``: whole scenes to georeferenced 2 m water masks."""

from __future__ import annotations

import json
import logging

import click

from ..formats import POLYGONS_FILE, RIVERS_FILE
from ..inference.options import DEFAULT_TILE_SIZE, PredictOptions
from .options import (
    HintedCommand,
    OutputFile,
    bad_parameter,
    creation_options,
    exclusive,
    json_option,
    model_options,
    overwrite_option,
    scene_options,
)
from .render import log_findings, progress_bar, report_error

log = logging.getLogger("s2s2net")


@click.command(cls=HintedCommand)
@click.argument("scenes", nargs=-1, required=True, metavar="SCENE...")
@click.option("-o", "--output", required=True, type=click.Path(),
              help="Output GeoTIFF (one scene), or a folder (an existing one, a path ending in /, or several scenes: "
                   "<name>_water.tif each, <name> the scene's stem, its STAC item id, or for a "
                   "band folder inside a product the product's name).")
@model_options
@scene_options
@click.option("--probability", is_flag=True, help="Write water probability as uint8 0-100 instead of a 0/1 mask.")
@click.option("--cog", is_flag=True, help="Write a Cloud Optimized GeoTIFF with overviews (mode resampling).")
@click.option("--vector", type=OutputFile(POLYGONS_FILE),
              help="Also write water polygons, with area (.gpkg, .geojson, .json, .shp, .fgb); into a folder of masks: "
                   "beside each mask, named like it, in this file's format.")
@click.option("--rivers", type=OutputFile(RIVERS_FILE),
              help="Also write river centrelines and widths (.gpkg), as `s2s2net rivers` does with its defaults; "
                   "into a folder of masks: beside each mask, as <mask>_rivers.gpkg.")
@creation_options
@overwrite_option
@click.option("--skip-existing", is_flag=True,
              help="Skip scenes whose output already holds their finished mask, made with the same model and "
                   "settings (listed as skipped; exit 0); another file there is refused, not replaced.")
@json_option
@click.pass_context
def predict(ctx, scenes, output, model, scene, probability, cog, vector, rivers, creation_options, overwrite,
            skip_existing, as_json):
    """Map water at 2 m in one or more Sentinel-2 scenes.

    SCENE is a 6-band GeoTIFF/VRT stack (B02, B03, B04, B08, B11, B12), a Sentinel-2 L1C or
    L2A product (.SAFE folder, its MTD_MSIL*.xml, or the .zip), a STAC item (.json or URL),
    or a folder or .zip of band files named for their bands (..._B02_10m.tif). The output has the
    scene's CRS, its transform times Affine.scale(1/5) and exactly 5x its width and height
    (with --bbox/--aoi: of the window covering the area): 0 land, 1 water, 255 nodata (also
    L2A clouds, --mask and outside the AOI).

    \b
    Examples:
      s2s2net predict scene.tif -o water.tif
      s2s2net predict S2B_MSIL2A_20230823T095559_N0509_R122_T34UCF_20230823T124759.SAFE.zip -o water.tif
      s2s2net predict item.json -o lake.tif --bbox 8.52,47.20,8.60,47.26
      s2s2net predict stack_2023.tif -o water.tif --offset -1000
      s2s2net predict a.tif b.tif -o masks/ --tile-size 256 --json
      s2s2net predict stack.tif -o water.tif --bands 2,3,4,8,11,12 --cog --vector water.gpkg
      s2s2net predict scene.tif -o water.tif --flips
      s2s2net predict scene.tif -o water.tif --rivers rivers.gpkg
      deepspeed --num_gpus 4 --module s2s2net_cli predict tile.tif -o water.tif

    Under a launcher (deepspeed --module, torchrun) several scenes are shared among the
    ranks, and one scene's rows of tiles are.
    """
    if overwrite and skip_existing:
        raise bad_parameter(exclusive("--overwrite", "--skip-existing"), ctx, hint="--skip-existing")
    options = PredictOptions.of(model, scene=scene, probability=probability, cog=cog,
                                creation_options=creation_options, overwrite=overwrite)

    def progress(name, quiet):
        log.info(f"{name}: predicting")
        return progress_bar(name, quiet=ctx.obj.get("quiet") or quiet, km2_per_step=((model.tile_size or DEFAULT_TILE_SIZE) * 0.01) ** 2,
                            every_step=ctx.obj.get("verbose", 0) > 0)

    from ..inference.batch import predict_batch  # heavy: torch

    summary = predict_batch(list(scenes), output, options, vector, rivers, skip_existing, ctx.obj["world"], progress,
                            on_result=lambda result: log_findings(result.warnings),
                            on_failure=lambda exc: report_error(ctx, exc))
    if summary is not None:  # None: another rank reports
        _report(ctx, summary, as_json)


MASKED_BY_SAID = {"clouds": "clouds", "left_out": "--mask", "area_of_interest": "outside the AOI"}
SIDE_OUTPUT_SAID = {"vector": "water polygons", "rivers": "rivers"}  # written beside the mask, where it says


def _report(ctx, summary, as_json: bool) -> None:
    """The summary: one JSON document on stdout, or a line a scene on stderr; the exit status:
    the failure's for one failed scene, 1 for several, 130 or 143 when interrupted."""
    if as_json:
        click.echo(json.dumps(summary.to_dict(), indent=2))
    elif not ctx.obj.get("quiet"):
        for r in summary.scenes:
            by = ", ".join(MASKED_BY_SAID[name] for name in r["masked_by"])
            masked = f" ({r['masked_fraction']:.1%} left out: {by})" if r["masked_fraction"] else ""
            beside = "".join(f"; {SIDE_OUTPUT_SAID[k]} {r[k]}" for k in SIDE_OUTPUT_SAID if r.get(k))
            click.echo(f"{r['output']}: {r['water_km2']:.3f} km2 water, {r['nodata_fraction']:.1%} nodata{masked}, "
                       f"{r['seconds']:.1f} s{beside}", err=True)
        for r in summary.skipped:
            click.echo(f"{r['output']}: exists, skipped", err=True)
    if summary.interrupted:
        go_on = ": run it again with --skip-existing to go on, keeping the finished masks" if summary.scenes else "."
        click.echo("Aborted: interrupted; no output was left half-written" + go_on, err=True)
        ctx.exit(128 + summary.interrupted)
    there = sum(f["code"] == "S2N-OUTPUT-EXISTS" for f in summary.failures)
    if there and not as_json and len(summary.scenes) + len(summary.failures) + len(summary.skipped) > 1:
        # a batch run again after it stopped: each existing mask was refused on its own line
        click.echo(f"{there} of the masks exist already: --skip-existing keeps the finished ones and predicts the "
                   "rest (--overwrite replaces them)", err=True)
    if summary.failures:
        ctx.exit(max(f["exit_code"] for f in summary.failures) if len(summary.failures) == 1 else 1)
