"""How to mend a raster a rule refuses or warns of, said as the line that does it: for a file,
a command of what comes with s2s2net (rasterio's ``rio``) or a line of Python; for a DataArray a
notebook held in its place, the line that mends the array (rulebook.Advice)."""

from __future__ import annotations

import shlex
from pathlib import Path

from affine import Affine

from .formats import is_remote
from .grid import utm_epsg, utm_epsg_at
from .rulebook import Advice


def to_utm(path, crs, transform: Affine, width: int, height: int, what: str = "it",
           resolution: float | None = None) -> Advice | str:
    """Advice to reproject the raster ``path`` to its UTM zone: for a file the ``rio warp``
    command that writes it beside it (its name with ``_utm``), for a DataArray its
    ``rio.reproject``; nearest neighbour, so a mask keeps its 0/1 and nodata, a scene its DNs."""
    epsg = utm_epsg(crs, transform, width, height)
    if epsg is None:
        return f"reproject {what} to its UTM zone first"
    src, dst = str(path), beside(path, "_utm")
    said = f"reproject {what} to its UTM zone first: "
    return Advice(
        said + f"rio warp {shlex.quote(src)} {shlex.quote(dst)} --dst-crs EPSG:{epsg}"
        + (f" --res {resolution:g}" if resolution else "") + " --resampling nearest",
        said + f"da.rio.reproject('EPSG:{epsg}'" + (f", resolution={resolution:g}" if resolution else "")
        + ", resampling=rasterio.enums.Resampling.nearest)")


def north_up(path) -> str:
    """The line of Python that writes the south-up raster ``path`` north-up beside it (its name
    with ``_north_up``), its pixels and tags as they are."""
    src, dst = str(path), beside(path, "_north_up")
    return f"rioxarray.open_rasterio({src!r}).sortby('y', ascending=False).rio.to_raster({dst!r})"


def onto_grid(path, crs, x: float, y: float, resolution: float | None = None) -> Advice | str:
    """Advice to put the raster ``path`` (georeferenced by ground control points, or on a rotated
    grid; (x, y) in ``crs`` lies in it) on a north-up grid of its UTM zone, by nearest neighbour
    as to_utm's: for a file the ``rio warp`` that writes it beside it (its name with ``_grid``),
    for a DataArray its ``rio.reproject``."""
    epsg = utm_epsg_at(crs, x, y) if crs is not None else None
    if epsg is None:
        return "warp it onto a north-up grid first (rio warp)"
    src, dst = str(path), beside(path, "_grid")
    said = "warp it onto a north-up grid first: "
    res = f" --res {resolution:g}" if resolution else ""
    return Advice(
        said + f"rio warp {shlex.quote(src)} {shlex.quote(dst)} --dst-crs EPSG:{epsg}{res} --resampling nearest",
        said + f"da.rio.reproject('EPSG:{epsg}'" + (f", resolution={resolution:g}" if resolution else "")
        + ", resampling=rasterio.enums.Resampling.nearest)")


def beside(path, suffix: str) -> str:
    """Where a remedy writes the mended copy of the raster ``path``: beside it, its name with
    ``suffix`` (``water_utm.tif``); in the current folder for a URL or a GDAL virtual path
    (``/vsizip/labels.zip/water.tif``), where nothing can be written beside it."""
    src = Path(str(path))
    name = f"{src.stem}{suffix}.tif"
    return name if is_remote(path) else str(src.with_name(name))


def gcps_centre(gcps) -> tuple[float, float]:
    """The mean of the ground control points' map coordinates."""
    return sum(g.x for g in gcps) / len(gcps), sum(g.y for g in gcps) / len(gcps)
