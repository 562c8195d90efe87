"""Water polygons from a written mask, read strip by strip (memory bounded by the strip)."""

from __future__ import annotations

from pathlib import Path

import geopandas as gpd
import numpy as np
import rasterio
from pyproj import Geod
from rasterio.features import shapes
from rasterio.windows import Window
from shapely.geometry import shape
from shapely.ops import unary_union

from .formats import NODATA, POLYGONS_FILE, WATER, probability_cut
from .grid import areal_scales_at
from .io import atomic_file_set, atomic_path, check_output

STRIP_ROWS = 2048


def water_polygons(mask_path, strip_rows: int = STRIP_ROWS) -> gpd.GeoDataFrame:
    """Polygons of water in ``mask_path``, in its CRS, with ``area_m2``: value 1 of a mask, or
    probability (percent) at or above the threshold in its tags for a ``--probability`` raster.

    Polygons are traced per strip of rows; those that touch a strip border are merged with
    their neighbours across it afterwards, so a lake split by strips comes out whole.
    """
    whole, edge = [], []
    with rasterio.open(mask_path) as src:
        crs = src.crs
        cut = probability_cut(src.tags())
        if cut is not None:
            is_water = lambda data: (data >= cut) & (data != NODATA)  # noqa: E731
        else:
            is_water = lambda data: data == WATER  # noqa: E731
        for row0 in range(0, src.height, strip_rows):
            h = min(strip_rows, src.height - row0)
            window = Window(0, row0, src.width, h)
            data = src.read(1, window=window)
            water = is_water(data)
            transform = src.window_transform(window)
            top_y, bottom_y = transform.f, (transform @ (0, h))[1]
            for geom, _ in shapes(water.astype(np.uint8), mask=water, transform=transform):
                poly = shape(geom)
                miny, maxy = poly.bounds[1], poly.bounds[3]
                touches = (row0 > 0 and maxy >= top_y) or (row0 + h < src.height and miny <= bottom_y)
                (edge if touches else whole).append(poly)
    if edge:
        merged = unary_union(edge)
        whole.extend(getattr(merged, "geoms", [merged]))
    gdf = gpd.GeoDataFrame({"geometry": whole}, geometry="geometry", crs=crs)
    if crs is not None and crs.is_geographic:  # degrees: geodesic areas on the WGS 84 ellipsoid
        geod = Geod(ellps="WGS84")
        gdf["area_m2"] = [abs(geod.geometry_area_perimeter(g)[0]) for g in gdf.geometry]
    else:  # the CRS's unit squared (a foot's, say) in square metres, over the projection's areal
        # scale at the polygon's middle: the ground's (Web Mercator's map area is 1.6 times it at 38 degrees)
        metres = crs.linear_units_factor[1] if crs is not None and crs.is_projected else 1.0
        middles = gdf.geometry.centroid
        scales = areal_scales_at(crs, middles.x.to_numpy(), middles.y.to_numpy()) if len(gdf) else 1.0
        gdf["area_m2"] = gdf.geometry.area * metres ** 2 / scales
    return gdf


MULTI_FILE_SUFFIXES = {".shp"}  # formats written as several files (.shp, .shx, .dbf, .prj, .cpg)


def write_water_polygons(mask_path, vector_path, overwrite: bool = False) -> Path:
    """The water polygons of ``mask_path`` written to ``vector_path`` (its format by its
    suffix; its layer is "water", a shapefile's its name), whole or not at all."""
    vector_path = check_output(vector_path, overwrite, kind=POLYGONS_FILE)
    gdf = water_polygons(mask_path)
    suffix = vector_path.suffix.lower()
    with (atomic_file_set if suffix in MULTI_FILE_SUFFIXES else atomic_path)(vector_path) as tmp:
        # a single file's layer named here, not after the hidden file it is written to
        gdf.to_file(tmp) if suffix in MULTI_FILE_SUFFIXES else gdf.to_file(tmp, layer="water")
    return vector_path
