"""Grid arithmetic: the exact 5x sub-grid of a scene, padding to a multiple of 32.

A 2 m output grid is the scene's affine transform times ``Affine.scale(1/5)``: same origin,
same CRS, exactly 5x the width and height. Coordinates are never rebuilt from bounds.
"""

from __future__ import annotations

import functools

import numpy as np
from affine import Affine
from pyproj import CRS, Geod, Proj, Transformer
from pyproj.exceptions import CRSError, ProjError

SCALE_FACTOR = 5
PAD_MULTIPLE = 32


def fine_transform(transform: Affine, factor: int = SCALE_FACTOR) -> Affine:
    """The transform of the sub-grid that splits every pixel into ``factor`` x ``factor`` cells."""
    return transform @ Affine.scale(1.0 / factor)


def fine_shape(height: int, width: int, factor: int = SCALE_FACTOR) -> tuple[int, int]:
    return height * factor, width * factor


def padded_size(size: int, multiple: int = PAD_MULTIPLE) -> int:
    """The smallest multiple of ``multiple`` that holds ``size`` (at least one multiple)."""
    return max(multiple, -(-size // multiple) * multiple)


def row_pixel_areas(crs, transform: Affine, row0: int, n_rows: int, width: int = 0):
    """Area in m2 on the ground of one pixel in each of the rows [row0, row0 + n_rows) of a
    north-up grid ``width`` pixels wide: geodesic (WGS 84 ellipsoid) in a geographic CRS, whose
    pixels shrink towards the poles; in a projected one the pixel's width times height (in
    metres) over the projection's areal scale at the row's middle (UTM's 0.9994-1.002; Web
    Mercator's 1.6 at 38 degrees of latitude, 4 at 60)."""
    if crs is not None and crs.is_geographic:
        geod = Geod(ellps="WGS84")
        tops = transform.f + transform.e * np.arange(row0, row0 + n_rows)
        lats = np.clip(np.stack([tops, tops + transform.e]), -90, 90)
        # the area between two parallels over a span of longitude: a zone of the ellipsoid
        out = np.empty(n_rows)
        for k in range(n_rows):
            lon = [0.0, transform.a, transform.a, 0.0]
            lat = [lats[0, k], lats[0, k], lats[1, k], lats[1, k]]
            out[k] = abs(geod.polygon_area_perimeter(lon, lat)[0])
        return out
    factor = crs.linear_units_factor[1] if crs is not None and crs.is_projected else 1.0
    nominal = np.full(n_rows, abs(transform.a * transform.e) * factor * factor)
    if crs is None or not crs.is_projected:
        return nominal
    return nominal / areal_scales(crs.to_wkt(), transform, row0, n_rows, width)


def areal_scales(wkt: str, transform: Affine, row0: int, n_rows: int, width: int) -> np.ndarray:
    """How many times the map's area exceeds the ground's in the projected CRS ``wkt``, at the
    middle of each of the rows [row0, row0 + n_rows); 1 where the projection cannot say."""
    x = np.full(n_rows, transform.c + transform.a * width / 2)
    y = transform.f + transform.e * (np.arange(row0, row0 + n_rows) + 0.5)
    return _areal_scales_at(wkt, x, y)


def linear_scales(crs, x, y) -> np.ndarray:
    """How many of the map's metres a metre on the ground is at each point (``x``, ``y``) of
    ``crs``: the square root of the projection's areal scale, which is its scale in every
    direction in a conformal projection (UTM's 0.9996-1.001; Web Mercator's 1.27 at 38 degrees
    of latitude, 2 at 60) and the mean of its two directions' in another (an equal-area
    projection's 1, whose scale along a parallel and a meridian part from it away from its
    standard parallels). 1 in a CRS that is not projected or where the projection cannot say."""
    return np.sqrt(areal_scales_at(crs, x, y))


def areal_scales_at(crs, x, y) -> np.ndarray:
    """How many times the map's area exceeds the ground's at each point (``x``, ``y``) of ``crs``
    (Web Mercator's 1.6 at 38 degrees of latitude); 1 in a CRS that is not projected or where
    the projection cannot say."""
    x, y = np.atleast_1d(np.asarray(x, dtype=float)), np.atleast_1d(np.asarray(y, dtype=float))
    if crs is None or not crs.is_projected:
        return np.ones(np.broadcast(x, y).shape)
    return _areal_scales_at(crs.to_wkt(), x, y)


def _areal_scales_at(wkt: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    try:
        to_geographic, projection = _projection(wkt)
        scale = projection.get_factors(*to_geographic.transform(x, y), errcheck=False).areal_scale
    except (ProjError, CRSError):
        return np.ones(np.broadcast(x, y).shape)
    return np.where(np.isfinite(scale) & (scale > 0), scale, 1.0)


@functools.lru_cache(maxsize=8)
def _projection(wkt: str):
    """The transformer from a projected CRS to its geographic one (longitude first), and the
    projection whose factors (areal scale) it has: made once a CRS, not once a row of a mask."""
    crs = CRS.from_wkt(wkt)
    return Transformer.from_crs(crs, crs.geodetic_crs, always_xy=True), Proj(crs)


def utm_epsg(crs, transform: Affine, width: int, height: int) -> int | None:
    """The EPSG code of the WGS 84 UTM zone of the middle of a ``width`` x ``height`` raster on
    ``crs`` and ``transform`` (326NN north of the equator, 327NN south), or None where its CRS
    cannot say where that is."""
    return utm_epsg_at(crs, *(transform @ (width / 2, height / 2)))


def utm_epsg_at(crs, x: float, y: float) -> int | None:
    """The EPSG code of the WGS 84 UTM zone of the point (x, y) in ``crs``; None where its CRS
    cannot say where that is."""
    try:
        lon, lat = Transformer.from_crs(crs, "EPSG:4326", always_xy=True).transform(x, y)
    except (ProjError, CRSError):
        return None
    if not (np.isfinite(lon) and np.isfinite(lat)):
        return None
    zone = min(int((lon + 180) % 360 // 6) + 1, 60)
    return (32600 if lat >= 0 else 32700) + zone


def is_south_up(transform: Affine) -> bool:
    """True for a grid whose rows run from south to north (a positive pixel height), as a raster
    written from ascending y coordinates (rioxarray's ``to_raster`` of a DataArray sorted so)."""
    return transform.e > 0 and not is_rotated(transform)


def is_rotated(transform: Affine) -> bool:
    """True for transforms with rotation or shear terms (north-up grids only are supported)."""
    return transform.b != 0 or transform.d != 0


def to_fine(values, factor: int = SCALE_FACTOR):
    """A (..., h, w) 10 m array on its 2 m sub-grid: each pixel copied to its ``factor`` x ``factor`` cells."""
    return np.repeat(np.repeat(values, factor, axis=-2), factor, axis=-1)


def grid_shift(transform: Affine, on: Affine, factor: int = SCALE_FACTOR) -> tuple[float, float] | None:
    """How far (x, y, in the CRS's units) the grid of ``transform`` lies off the exact 5x sub-grid
    of ``on`` (a scene's 10 m grid), both in one CRS: its origin's offset from the scene's grid
    in its own cells (a 10 m label half a pixel off: 5). None when its lines fall on the finer
    grid's lines, or the two cannot be compared (rotated, or not multiples of each other)."""
    if is_rotated(transform) or is_rotated(on):
        return None
    fine = fine_transform(on, factor)
    shifts = []
    for origin, fine_origin, cell, fine_cell in ((transform.c, fine.c, transform.a, fine.a),
                                                 (transform.f, fine.f, transform.e, fine.e)):
        step = min(abs(cell), abs(fine_cell))
        coarse = max(abs(cell), abs(fine_cell))
        if abs(coarse / step - round(coarse / step)) > 1e-6:  # cells that are no multiple of each other
            return None
        aligned = abs(((origin - fine_origin) + step / 2) % step - step / 2) < 1e-3 * step
        off = (origin - fine_origin) % abs(cell)
        shifts.append((aligned, off - abs(cell) if off > abs(cell) / 2 else off))
    if all(aligned for aligned, _ in shifts):
        return None
    return tuple(0.0 if aligned else off for aligned, off in shifts)
