"""An area of interest: a longitude/latitude box or the polygons of a vector file.

The scene is cut to the AOI's bounding window on its own grid (so the output stays on the
exact 5x sub-grid and only the windows that cover the AOI are read), its top-left corner
moved out to a multiple of 32 pixels (320 m) of the scene's grid; pixels outside the
polygons are left out (nodata in outputs). Tiles at the window's edge still see the real
pixels beyond it as context.
"""

from __future__ import annotations

import math
from dataclasses import replace

import shapely
from affine import Affine

from ..grid import PAD_MULTIPLE
from ..polygons import polygons_only, unreadable
from ..rulebook import Phrase, option, refuse
from .scene import Scene


def check_bbox(bbox) -> tuple[float, float, float, float]:
    """(W, S, E, N) in degrees, from four numbers or a "W,S,E,N" text (as --bbox takes it);
    UsageError saying what is wrong."""
    if isinstance(bbox, str):
        try:
            bbox = [float(v) for v in bbox.split(",")]
        except ValueError:
            raise refuse("S2N-BBOX-NOT-NUMBERS", option("bbox"), value=bbox) from None
    if len(bbox) != 4:
        raise refuse("S2N-BBOX-NOT-FOUR", option("bbox"))
    west, south, east, north = (float(v) for v in bbox)
    if not all(math.isfinite(v) for v in (west, south, east, north)):
        raise refuse("S2N-BBOX-NOT-FINITE", option("bbox"))
    if not (-180 <= west <= 180 and -180 <= east <= 180):
        raise refuse("S2N-BBOX-LONGITUDE", option("bbox"))
    if not (-90 <= south <= 90 and -90 <= north <= 90):
        raise refuse("S2N-BBOX-LATITUDE", option("bbox"))
    if west >= east:
        raise refuse("S2N-BBOX-WEST-EAST", option("bbox"), west=west, east=east)
    if south >= north:
        raise refuse("S2N-BBOX-SOUTH-NORTH", option("bbox"), south=south, north=north)
    return west, south, east, north


def restrict_to_aoi(scene: Scene, bbox=None, aoi=None) -> Scene:
    """``scene`` cut to the bounding window of ``bbox`` (lon/lat) or the polygons in ``aoi``."""
    import geopandas as gpd  # heavy: only an area of interest needs it

    if bbox is not None:
        west, south, east, north = check_bbox(bbox)
        box = shapely.segmentize(shapely.box(west, south, east, north), max((east - west), (north - south)) / 64)
        shapes = gpd.GeoSeries([box], crs="EPSG:4326")
        label = option("bbox", f"{west:g},{south:g},{east:g},{north:g}")
    else:
        try:
            frame = gpd.read_file(aoi, layer=0)  # the first layer; aoi_warnings says so when there are more
        except Exception as exc:  # pyogrio raises its own errors
            raise unreadable(aoi, exc) from exc
        if frame.crs is None:
            raise refuse("S2N-AOI-NO-CRS", aoi)
        shapes = frame.geometry[~(frame.geometry.is_empty | frame.geometry.isna())]
        if shapes.empty:
            raise refuse("S2N-AOI-EMPTY", aoi)
        shapes = gpd.GeoSeries(polygons_only(aoi, shapes), crs=frame.crs)  # a line would keep only its pixels
        label = str(aoi)
    try:
        shapes = shapes.to_crs(scene.crs)
    except Exception as exc:
        raise refuse("S2N-AOI-CRS", label, error=exc) from exc
    shapes = [g if g.is_valid else g.buffer(0) for g in shapes if g is not None and not g.is_empty]  # --bbox's too
    left, bottom, right, top = shapely.union_all(shapes).bounds
    if not all(math.isfinite(v) for v in (left, bottom, right, top)):  # far from the scene's projection
        raise _no_overlap(scene, label, bbox)
    inverse = ~scene.dataset_transform
    cols, rows = zip(*(inverse @ xy for xy in ((left, top), (right, bottom), (left, bottom), (right, top))))
    H, W = scene.dataset_shape
    # the window's corner snaps outward to a multiple of PAD_MULTIPLE pixels, so the network
    # meets the pixels at the same phase of its strides as in the whole scene
    col0 = max(math.floor(min(cols) / PAD_MULTIPLE) * PAD_MULTIPLE, 0)
    row0 = max(math.floor(min(rows) / PAD_MULTIPLE) * PAD_MULTIPLE, 0)
    col1, row1 = min(math.ceil(max(cols)), W), min(math.ceil(max(rows)), H)
    if col1 <= col0 or row1 <= row0:
        raise _no_overlap(scene, label, bbox)
    transform = scene.dataset_transform @ Affine.translation(col0, row0)
    return replace(scene, transform=transform, width=col1 - col0, height=row1 - row0, origin=(row0, col0),
                   aoi=tuple(shapes), aoi_name=str(label))


def _no_overlap(scene: Scene, label: str, bbox=None):
    """The refusal of an area of interest that misses ``scene``, with the scene's bounds as
    --bbox takes them; for a ``bbox`` that would overlap it read latitude first (S,W,N,E, the
    order of many map sites' coordinates), said so."""
    bounds = _lonlat_bounds(scene)
    covers = ",".join(f"{v:.4f}" for v in bounds) if bounds else "(bounds not known in longitude/latitude)"
    swapped = ""
    if bbox is not None and bounds:
        west, south, east, north = check_bbox(bbox)
        if south < bounds[2] and north > bounds[0] and west < bounds[3] and east > bounds[1]:
            given = option("bbox", f"{south:g},{west:g},{north:g},{east:g}").template
            swapped = Phrase("; read latitude first it would: give longitude first, " + given)
    return refuse("S2N-AOI-NO-OVERLAP", label, scene_name=scene.name, covers=covers, swapped=swapped)


def _lonlat_bounds(scene: Scene) -> tuple[float, float, float, float] | None:
    """The scene's bounds in longitude/latitude as --bbox takes them (W,S,E,N); None where its
    CRS has no way there."""
    from rasterio.warp import transform_bounds

    H, W = scene.dataset_shape
    left, top = scene.dataset_transform @ (0, 0)
    right, bottom = scene.dataset_transform @ (W, H)
    try:
        return transform_bounds(scene.crs, "EPSG:4326", min(left, right), min(top, bottom), max(left, right),
                                max(top, bottom))
    except Exception:  # a CRS without a way to longitude/latitude: the message says the rest
        return None
