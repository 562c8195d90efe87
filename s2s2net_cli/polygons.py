"""Polygons read from a vector file (an area of interest, water polygons): only polygons, each
valid. A line or a point has no area, so where polygons are needed it is refused, not drawn as
the pixels it touches."""

from __future__ import annotations

from .rulebook import refuse

POLYGONAL = {"Polygon", "MultiPolygon"}


def polygons_only(path, geometries) -> tuple:
    """The polygons of ``geometries`` (a GeoSeries read from ``path``), empty ones left out and
    invalid ones made valid; InputError naming ``path`` when any other kind is among them."""
    import shapely

    geometries = geometries[~(geometries.isna() | geometries.is_empty)]
    kinds = set(geometries.geom_type) - POLYGONAL
    if kinds:
        raise refuse("S2N-VECTOR-NOT-POLYGONS", path, kinds=", ".join(sorted(kinds)))
    return tuple(g if g.is_valid else shapely.make_valid(g) for g in geometries)
