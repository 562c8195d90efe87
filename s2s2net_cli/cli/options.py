"""Options that several commands share, so each is defined once."""

from __future__ import annotations

import click

overwrite_option = click.option("--overwrite", is_flag=True, help="Replace existing outputs.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print a machine-readable JSON summary on stdout.")


def parse_bands(ctx, param, value):
    """--bands 1,2,3,4,5,6: six distinct 1-based band indexes."""
    if value is None:
        return None
    try:
        indexes = tuple(int(v) for v in value.split(","))
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of band numbers", ctx, param)
    if len(indexes) != 6:
        raise click.BadParameter(f"needs 6 band indexes (B02,B03,B04,B08,B11,B12), got {len(indexes)}", ctx, param)
    if min(indexes) < 1:
        raise click.BadParameter("band indexes are 1-based", ctx, param)
    return indexes


bands_option = click.option("--bands", callback=parse_bands, metavar="I,I,I,I,I,I",
                            help="1-based band indexes of B02,B03,B04,B08,B11,B12 in the scene (default 1..6).")


def _parse_creation_options(ctx, param, values):
    out = {}
    for item in values or ():
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", ctx, param)
        out[name.strip()] = value.strip()
    return out


creation_options = click.option("--co", "creation_options", multiple=True, callback=_parse_creation_options,
                                metavar="NAME=VALUE", help="GeoTIFF creation option (repeatable), as in rio.")


def _check_device(ctx, param, value):
    import re

    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", value):
        raise click.BadParameter(f"{value!r} is not auto, cpu, cuda or cuda:N", ctx, param)
    return value


device_option = click.option("--device", default="auto", show_default=True, callback=_check_device,
                             help="auto, cpu, cuda or cuda:N.")
precision_option = click.option("--precision", type=click.Choice(["auto", "32", "bf16", "16"]), default="auto",
                                show_default=True, help="Mixed precision on GPUs when auto; fp32 on the CPU.")


pair_option = click.option("--pair", "pairs", nargs=2, multiple=True, type=click.Path(dir_okay=False),
                           metavar="IMAGE MASK", help="A scene and its mask (repeatable).")
manifest_option = click.option("--manifest", type=click.Path(dir_okay=False),
                               help="CSV with columns image,mask (optional id, split); paths relative to the file.")
nodata_option = click.option("--nodata", type=float, default=None, help="Mask value that means nodata (besides NaN and the file's nodata).")


def require_pairs(ctx, pairs, manifest):
    """Pairs from --pair and --manifest (at least one of them)."""
    from ..manifest import pairs_from_options

    if not pairs and not manifest:
        raise click.UsageError("give --pair IMAGE MASK or --manifest FILE", ctx)
    return pairs_from_options(list(pairs), manifest)
