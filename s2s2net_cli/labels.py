"""Water labels: rasters that say water or land (a reference mask, a high-resolution mask to
chip, or a prediction), or vector files of water polygons, read and put on a grid.

A raster label is binarised first (water = value > 0; NaN, its own nodata value and ``nodata``
are nodata), then warped with rasterio onto the target grid (the exact 5x sub-grid of a scene,
or any grid): averaged to a water fraction when the label is finer than the target (then 0/1 at
0.5), nearest when it is coarser. Only the part of the label that covers the target window is
read, so memory is bounded by the window.

A vector label (any file geopandas reads: GeoPackage, shapefile, GeoJSON...) is polygons of
water with land everywhere else: it labels every pixel of the scene, and has no grid of its own.
A target pixel is water when its centre lies in a polygon (rasterio's rasterize), so on a
scene's 2 m sub-grid the polygons are exact truth. Only the polygons near the scene are read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import rasterio
from pyproj import CRS, Transformer
from pyproj.exceptions import CRSError as ProjCRSError
from pyproj.exceptions import ProjError
from rasterio.errors import CRSError, RasterioIOError
from rasterio.features import rasterize
from rasterio.warp import Resampling, reproject, transform_bounds
from rasterio.windows import Window, from_bounds

from . import remedies
from .errors import InputError, first_line
from .formats import VALUES_TAG, gdal_empty, gdal_masked, occurrence_cut, probability_cut, raster_in_zip
from .grid import is_rotated, is_south_up
from .polygons import PolygonLayer, kinds_warnings, layers_warnings, open_layer, polygons_in
from .rulebook import DECLARE_NODATA_OPTION, DECLARE_NODATA_TAG, Phrase, finding, refuse

MAX_VALUES_NAMED = 5  # unexpected label values an error names


@dataclass(frozen=True)
class Label:
    path: str
    crs: object
    transform: object
    width: int
    height: int
    nodata: tuple[float, ...] = ()  # the values that mean nodata besides NaN: the file's own and --nodata


@dataclass(frozen=True)
class VectorLabel:
    """Water polygons (in ``crs``), land everywhere else: the whole scene labelled."""

    path: str
    crs: object  # rasterio's CRS
    shapes: tuple  # the polygons near the scene, in crs
    layer: PolygonLayer  # the file's first layer, which these are read from
    near: tuple | None = None  # the CRS and bounds they were read near (the scene's), or None for all
    nodata: tuple[float, ...] = ()  # a vector label has none
    _projected: dict = field(default_factory=dict, compare=False, repr=False)  # CRS WKT -> (shapes, STRtree)

    def shapes_in(self, crs):
        """The polygons in ``crs`` and a spatial index of them (made once per CRS)."""
        key = crs.to_wkt()
        if key not in self._projected:
            import shapely

            try:
                shapes = polygons_in(self.shapes, self.crs, crs)
            except Exception as exc:  # PROJ raises various errors
                raise refuse("S2N-MASK-CRS-TO-SCENE", self.path, error=exc) from exc
            self._projected[key] = (shapes, shapely.STRtree(shapes))
        return self._projected[key]


def nodata_values(*values) -> tuple[float, ...]:
    """The distinct values among ``values`` (numbers, None, or tuples of them) that mean nodata
    besides NaN, which always does: None and NaN left out."""
    out: list[float] = []
    for value in values:
        for v in value if isinstance(value, tuple) else (value,):
            if v is not None and not (isinstance(v, float) and math.isnan(v)) and v not in out:
                out.append(v)
    return tuple(out)


def said_nodata(values: tuple[float, ...]) -> str:
    """'-1', or '-1 and 255': a label's nodata values as a message names them."""
    return " and ".join(f"{v:g}" for v in values)


def open_label(path, nodata: float | None = None, near: tuple | None = None) -> Label | VectorLabel:
    """A label raster, checked: readable, georeferenced, north-up; ``nodata`` (--nodata) adds to
    the file's own nodata value, as both mean nodata, except a tag of land's 0 or water's 1 (a
    GDAL tool's mistake, refused by check_nodata_value), which --nodata replaces. A file that is
    no raster is read as water polygons (open_vector_label), those near ``near`` (a CRS and
    bounds in it: the scene's) when given; a zip that holds one raster, as that raster."""
    path = raster_in_zip(path) or path
    try:
        with rasterio.open(path) as src:
            own = None if nodata is not None and src.nodata in (0, 1) else src.nodata
            info = Label(str(path), src.crs, src.transform, src.width, src.height, nodata_values(own, nodata))
            check_gridded(path, src.crs, src.gcps)
    except RasterioIOError as exc:
        vector = open_vector_label(path, near)
        if vector is None:
            raise refuse("S2N-MASK-UNREADABLE", path) from exc
        return vector
    if info.crs is None:
        raise refuse("S2N-MASK-NO-CRS", path)
    if is_rotated(info.transform):
        how = remedies.onto_grid(path, info.crs, *(info.transform @ (info.width / 2, info.height / 2)))
        raise refuse("S2N-MASK-ROTATED", path, how=how)
    if is_south_up(info.transform):
        raise refuse("S2N-RASTER-SOUTH-UP", path, fix=remedies.north_up(path))
    return info


def check_gridded(path, crs, gcps: tuple, resolution: float | None = None) -> None:
    """InputError for a raster georeferenced by ground control points alone (``gcps``: rasterio's
    points and their CRS; ``crs`` None), as an unprocessed image is: told the ``rio warp`` that
    puts it on a north-up grid (of ``resolution``, a scene's 10 m)."""
    points, points_crs = gcps
    if crs is None and points:
        how = remedies.onto_grid(path, points_crs, *remedies.gcps_centre(points), resolution=resolution)
        raise refuse("S2N-RASTER-GCPS", path, count=len(points), how=how)


def open_vector_label(path, near: tuple | None = None) -> VectorLabel | None:
    """Water polygons from the first layer of the vector file ``path``, those whose bounding
    boxes meet ``near`` (a CRS and bounds in it) when given; None when no vector driver reads it.
    InputError when it has no CRS, holds no polygon, or holds geometries that are not polygons
    (lines and points have no area)."""
    layer = open_layer(path)
    if layer is None:
        return None
    if layer.features == 0:
        raise refuse("S2N-MASK-VECTOR-EMPTY", path)
    if layer.crs is None:
        raise refuse("S2N-MASK-NO-CRS", path)
    if near is not None:
        check_transformable(path, near[0], layer.crs)
    return VectorLabel(str(path), layer.crs, layer.read(near), layer, near)


def check_transformable(path, src_crs, dst_crs) -> None:
    """InputError naming ``path`` when PROJ knows no way from ``src_crs`` to ``dst_crs``."""
    try:
        Transformer.from_crs(CRS.from_wkt(src_crs.to_wkt()), CRS.from_wkt(dst_crs.to_wkt()), always_xy=True)
    except (ProjError, ProjCRSError) as exc:
        raise refuse("S2N-MASK-CRS-UNTRANSFORMABLE", path, source_crs=_crs_name(src_crs), target_crs=_crs_name(dst_crs)) from exc


def _crs_name(crs) -> str:
    epsg = crs.to_epsg()
    if epsg:
        return f"EPSG:{epsg}"
    return repr(CRS.from_wkt(crs.to_wkt()).name)


def label_bounds_in(label: Label | VectorLabel, crs) -> tuple[float, float, float, float]:
    """The label's bounds in ``crs`` (a vector label's: its polygons'; NaN when none are near
    the scene); InputError when the CRSs cannot be transformed."""
    check_transformable(label.path, label.crs, crs)
    if isinstance(label, VectorLabel):
        import shapely

        shapes, _ = label.shapes_in(crs)
        return tuple(shapely.total_bounds(shapes).tolist()) if shapes else (math.nan,) * 4
    left, top = label.transform.c, label.transform.f
    right, bottom = label.transform @ (label.width, label.height)
    try:
        bounds = transform_bounds(label.crs, crs, left, min(top, bottom), right, max(top, bottom), densify_pts=21)
    except (CRSError, Exception) as exc:  # PROJ raises various errors
        raise refuse("S2N-MASK-CRS-TO-SCENE", label.path, error=exc) from exc
    if not all(math.isfinite(b) for b in bounds):
        raise refuse("S2N-MASK-CRS-INFINITE", label.path)
    return bounds


def label_resolution_in(label: Label | VectorLabel, crs) -> float:
    """The label's mean pixel size in the units of ``crs``: 0 for polygons, finer than any grid."""
    if isinstance(label, VectorLabel):
        return 0.0
    left, bottom, right, top = label_bounds_in(label, crs)
    return math.sqrt(abs((right - left) * (top - bottom)) / (label.width * label.height))


def warp_label(label: Label | VectorLabel, dst_transform, dst_crs, shape: tuple[int, int], finer: bool) -> np.ndarray:
    """The label on the target grid as float32: 0/1, NaN where it has no valid pixel (a vector
    label has one everywhere: rasterise_label)."""
    if isinstance(label, VectorLabel):
        return rasterise_label(label, dst_transform, dst_crs, shape)
    height, width = shape
    dst_left, dst_top = dst_transform.c, dst_transform.f
    dst_right, dst_bottom = dst_transform @ (width, height)
    out = np.full(shape, np.nan, dtype=np.float32)
    try:
        src_bounds = transform_bounds(dst_crs, label.crs, dst_left, dst_bottom, dst_right, dst_top, densify_pts=21)
    except Exception as exc:
        raise refuse("S2N-MASK-CRS-TO-SCENE", label.path, error=exc) from exc
    with rasterio.open(label.path) as src:
        window = from_bounds(*src_bounds, transform=src.transform).round_offsets(op="floor").round_lengths(op="ceil")
        window = Window(window.col_off - 2, window.row_off - 2, window.width + 4, window.height + 4)
        clipped = window.intersection(Window(0, 0, src.width, src.height)) if _overlaps(window, src) else None
        if clipped is None:
            return out
        try:
            raw = src.read(1, window=clipped)
            empty = gdal_empty(src, clipped) if gdal_masked(src) else None
        except RasterioIOError as exc:
            raise refuse("S2N-MASK-READ-FAILED", label.path, error=first_line(exc)) from exc
        src_transform = src.window_transform(clipped)
    binary = binarise(raw, label.nodata)
    if empty is not None:  # what GDAL's mask band (or an alpha band) marks empty
        binary[empty] = np.nan
    reproject(binary, out, src_transform=src_transform, src_crs=label.crs, src_nodata=np.nan,
              dst_transform=dst_transform, dst_crs=dst_crs, dst_nodata=np.nan,
              resampling=Resampling.average if finer else Resampling.nearest)
    valid = ~np.isnan(out)
    out[valid] = (out[valid] >= 0.5).astype(np.float32)
    return out


def rasterise_label(label: VectorLabel, dst_transform, dst_crs, shape: tuple[int, int]) -> np.ndarray:
    """Water polygons on the target grid as float32: 1 where a pixel's centre lies in one, else 0."""
    import shapely

    shapes, tree = label.shapes_in(dst_crs)
    height, width = shape
    left, top = dst_transform.c, dst_transform.f
    right, bottom = dst_transform @ (width, height)
    near = tree.query(shapely.box(min(left, right), min(top, bottom), max(left, right), max(top, bottom)))
    if not len(near):
        return np.zeros(shape, dtype=np.float32)
    burnt = rasterize(((shapes[i], 1) for i in sorted(near)), out_shape=shape, transform=dst_transform,
                      fill=0, dtype="uint8")
    return burnt.astype(np.float32)


def binarise(raw: np.ndarray, nodata) -> np.ndarray:
    """Water 1.0, land 0.0, nodata NaN (NaN, and the value or values ``nodata``)."""
    data = raw.astype(np.float32)
    invalid = np.isnan(data)
    for value in nodata_values(nodata):
        invalid |= raw == value
    out = (data > 0).astype(np.float32)
    out[invalid] = np.nan
    return out


NODATA_OPTION, NODATA_TAG = DECLARE_NODATA_OPTION, DECLARE_NODATA_TAG  # how a command is told which value is nodata


def check_label(label: Label | VectorLabel, declare_nodata: Phrase = NODATA_OPTION) -> list[str]:
    """InputError when the label holds no valid pixel, or values other than water 1, land 0 and
    its nodata (NaN, the file's nodata value or --nodata): a 255 or -1 that no tag declares as
    nodata would otherwise count as water or land; then a nodata of 0 or 1 (check_nodata_value).
    ``declare_nodata`` says how a command is told which value is nodata. Read block by block.
    Returns its warnings: a mask with no water whose nodata value (above 1) it holds may be a
    0/255 mask whose water a GDAL tool tagged as nodata (its scores, or chips, would hold no water).
    A vector label was checked as it was read; its warnings: a file of several layers, of which
    the first was read; polygons of several kinds by a column (fclass: water, wetland...), all
    drawn as water."""
    if isinstance(label, VectorLabel):
        return layers_warnings(label.layer) + kinds_warnings(label.path, label.layer.kinds(label.near))
    others: set = set()
    any_valid = any_water = False
    declared = bool(label.nodata)
    unseen = 0  # pixels of the declared nodata value
    with rasterio.open(label.path) as src:
        tags = src.tags()
        if occurrence_cut(tags) is not None:  # it was refused for its bands, as any raster of several
            raise refuse("S2N-MASK-IS-OCCURRENCE", label.path)
        check_one_band(label.path, src.count)
        cut = probability_cut(tags)
        if cut is not None:  # its percents would be read as water wherever above 0, or refused for their values
            raise refuse("S2N-MASK-IS-PROBABILITY", label.path, cut=cut)
        for _, window in src.block_windows(1):
            raw = src.read(1, window=window)
            known = (raw == 0) | (raw == 1)
            if raw.dtype.kind == "f":
                known |= np.isnan(raw)
            if declared:
                is_nodata = np.isin(raw, label.nodata)
                known |= is_nodata
                unseen += int(is_nodata.sum())
            any_valid = any_valid or bool(((raw == 0) | (raw == 1)).any())
            any_water = any_water or bool((raw == 1).any())
            if not known.all() and len(others) < MAX_VALUES_NAMED:
                others.update(np.unique(raw[~known])[:MAX_VALUES_NAMED].tolist())
        made_here = src.tags().get("values") == VALUES_TAG[False]  # predict's own mask: 255 is its nodata
    only = next(iter(others)) if len(others) == 1 else None
    if not any_water and only is not None and only > 1:  # a 0/255 mask: its other value may be water
        value = f"{only:g}"
        raise refuse("S2N-MASK-NO-WATER-VALUE", label.path, value=value, declare_nodata=declare_nodata)
    if others:
        raise unexpected_values(label.path, others, label.nodata, declare_nodata)
    check_nodata_value(label.path, label.nodata, declare_nodata)
    if not any_valid:
        raise refuse("S2N-MASK-ALL-NODATA", label.path)
    above = [v for v in label.nodata if v > 1]
    if not any_water and unseen and above and not made_here:
        share = unseen / (label.width * label.height)
        value = said_nodata(tuple(above))
        return [finding("S2N-MASK-NO-WATER-NODATA", label.path, share=share, value=value)]
    return []


def check_one_band(path, count: int, scene_like: bool = False) -> None:
    """InputError when a mask has more than one band (a scene, occurrence's output, a class
    raster with a band a class): only its first would be read, as if it were the mask."""
    if count != 1:
        raise refuse("S2N-MASK-IS-SCENE" if scene_like else "S2N-MASK-BAND-COUNT", path, count=count)


def check_nodata_value(path, nodata, declare_nodata: Phrase = NODATA_OPTION) -> None:
    """InputError when a mask's nodata value (or one of them) is land's 0 or water's 1: every pixel
    of that class would be left out as unseen, and the scores (or counts) made of the other alone.
    GDAL tools often tag 0 as nodata on a 0/1 mask."""
    nodata = next((v for v in nodata_values(nodata) if v in (0, 1)), None)
    if nodata is None:
        return
    kind = "land" if nodata == 0 else "water"
    raise refuse("S2N-MASK-NODATA-IS-CLASS", path, nodata=nodata, kind=kind, declare_nodata=declare_nodata)


def unexpected_values(path, values, nodata, declare_nodata: Phrase = NODATA_OPTION) -> InputError:
    """The error for a mask holding ``values`` besides water 1, land 0 and its ``nodata`` (a value or values)."""
    shown = ", ".join(f"{v:g}" for v in sorted(values)[:MAX_VALUES_NAMED])
    if all(0 < v < 1 for v in values):  # shares of water: a mask resampled by averaging its finer one
        return refuse("S2N-MASK-FRACTIONS", path, shown=shown)
    declared = f" and its nodata {said_nodata(nodata_values(nodata))}" if nodata_values(nodata) else ""
    return refuse("S2N-MASK-VALUES", path, shown=shown, declared=declared, declare_nodata=declare_nodata)


def _overlaps(window: Window, src) -> bool:
    return (window.col_off < src.width and window.row_off < src.height
            and window.col_off + window.width > 0 and window.row_off + window.height > 0)
