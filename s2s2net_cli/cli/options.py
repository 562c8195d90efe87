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
