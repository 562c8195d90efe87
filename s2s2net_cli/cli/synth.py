"""``s2s2net synth``: synthetic scene/mask pairs with exact 2 m truth."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import click

from .options import bands_option, json_option, offset_option, overwrite_option, seed_option
from .render import log_findings

log = logging.getLogger("s2s2net")


@click.command()
@click.argument("out_dir", type=click.Path(path_type=Path))
@click.option("--count", type=click.IntRange(1), default=1, show_default=True, help="Number of pairs.")
@click.option("--size", type=click.IntRange(8, 20000), default=256, show_default=True,
              help="Scene side in 10 m pixels (drawn whole at 2 m in memory, about 1.2 KB a pixel: 18 GB at "
                   "4000; a size the memory free cannot hold is refused).")
@seed_option(0, "Seed of the first pair; pair i uses seed+i.")
@click.option("--level", type=click.Choice(["L1C", "L2A", "mixed"]), default="mixed", show_default=True,
              help="Top-of-atmosphere haze (L1C) or surface reflectance (L2A); with --background, the "
                   "level of a scene without a level tag.")
@click.option("--background", "backgrounds", metavar="SCENE", multiple=True,
              help="Paint the water into crops of this real scene instead of a synthetic landscape: a 6-band "
                   "uint16 stack (tag level=L1C or L2A), a Sentinel-2 product or a STAC item, as predict takes "
                   "them; repeatable, pairs take them in turn.")
@click.option("--landscape", type=click.Choice(["mixed", "rivers", "floods"]), default="mixed", show_default=True,
              help="mixed: every kind of water; rivers: one or two rivers 10-80 m wide on land, nothing else; "
                   "floods: mixed, under a flood broken into ragged lobes, channels and pools.")
@click.option("--manifest/--no-manifest", default=True, show_default=True, help="Write manifest.csv (image,mask,id): the pairs made, and those it listed before.")
@bands_option
@offset_option
@overwrite_option
@json_option
@click.pass_context
def synth(ctx, out_dir: Path, count: int, size: int, seed: int, level: str, backgrounds: tuple[str, ...],
          landscape: str, manifest: bool, bands: tuple[int, ...] | None, offset: float, overwrite: bool,
          as_json: bool) -> None:
    """Make synthetic Sentinel-2 scenes (6 bands, 10 m, uint16) with exact 2 m water masks.

    Each pair is OUT_DIR/synth_<seed>_scene.tif and OUT_DIR/synth_<seed>_mask.tif, on the
    exact 5x sub-grid, and OUT_DIR/synth_<seed>_rivers.gpkg the rivers drawn (centreline and
    true width: the truth `s2s2net rivers` is scored against). Same seed, same pair.

    With --background, water is painted into a random crop (at most --size) of a real scene:
    the scene keeps its place, grid and level (a product's own, a stack's tag level=L1C or L2A;
    --level says it for a scene that says none, else it is painted as L2A, warned of;
    --landscape does not apply, and is refused); a crop is the whole scene where it is smaller
    than --size; the mask is exact where water or shore was painted, and elsewhere says water
    or land only where a water index is sure (nodata otherwise, which training leaves out of
    the loss). A background is read as predict reads it (a stack's bands by their descriptions
    or --bands, its own offset metadata or --offset; a product's offset its own), warned of as
    predict warns; the painted scene is written without the offset, its six bands in the
    model's order.

    \b
    Example:
      s2s2net synth demo/ --count 4 --size 256 --seed 100
      s2s2net synth demo/ --count 4 --json
      s2s2net synth rivers/ --landscape rivers --count 8 --size 128
      s2s2net synth painted/ --background real_l1c.tif --count 20 --size 192 --seed 5000
      s2s2net synth painted/ --background S2B_MSIL2A_20230823T155559.SAFE.zip --count 20
    """
    from ..synthetic.sets import SynthOptions, make_synthetic_set  # heavy: scipy, the generator

    options = SynthOptions(count=count, size=size, seed=seed, level=level, landscape=landscape,
                           backgrounds=tuple(backgrounds), bands=bands, offset=offset, manifest=manifest,
                           overwrite=overwrite)
    quiet = ctx.obj.get("quiet")
    summary = make_synthetic_set(out_dir, options, on_background=log_findings,
                                 on_pair=None if quiet else lambda scene, mask, water: click.echo(
                                     f"{scene}  {mask}  water {water:.1%}", err=True))
    if as_json:
        click.echo(json.dumps(summary.to_dict(), indent=2))
