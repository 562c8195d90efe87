"""Where a scene comes from: a GeoTIFF/VRT stack, a Sentinel-2 product, or a STAC item.

Every source answers the same questions and nothing downstream knows which it was: the
10 m grid, the six bands' DNs with their scale and offset, and which pixels count (nodata,
L2A scene classification, a raster of pixels to leave out, an area of interest). A product or
item becomes a VRT of its band files (vrt.py). ``open_pair`` opens a scene with its water label.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import NamedTuple

import numpy as np
import rasterio
from rasterio.errors import RasterioIOError

from ..bands import BAND_NAMES, DEFAULT_SCALE
from ..errors import first_line
from ..formats import check_exists, enclosing_product, raster_in_zip, valid_mask
from ..labels import Label, VectorLabel, check_label, check_transformable, label_bounds_in, open_label
from ..polygons import open_layer, polygons_in
from ..rulebook import finding, refuse
from . import safe, stac
from .aoi import restrict_to_aoi
from .band_folder import folder_bands, held_bands, holds_band_files
from .checks import grid_warnings
from .options import SceneOptions
from .scene import Scene, check_has_valid_pixels, open_stack, read_sample
from .vrt import band_files_scene


def open_scene(source, options: SceneOptions = SceneOptions(), n_bands: int = len(BAND_NAMES)) -> Scene:
    """Open ``source`` (stack, ``.SAFE`` folder, its ``MTD_MSIL*.xml``, a product ``.zip``, a
    folder or ``.zip`` of band files, or a STAC item ``.json`` or URL) as a checked Scene;
    InputError naming it for anything wrong."""
    text = str(source)
    check_exists(text)
    band_files = None
    held = held_bands(text) if text.lower().endswith(".zip") or not safe.is_product(text) else {}
    stack = raster_in_zip(text) if not held else None  # a zip of one stack: read in place
    if held and holds_band_files(held):  # a folder (or zip) of band files, its bands named by their files
        if options.bands is not None:  # said before any file is read
            raise refuse("S2N-BANDS-NOT-STACK", text, kind="band folder")
        band_files = folder_bands(text, held)
        product = enclosing_product(text)
        if product is not None:  # an unpacked product's granule or IMG_DATA: its radiometry
            level, scale, offset = safe.product_radiometry(str(product))
            band_files = replace(band_files, kind=f"band folder of an {level} product", scale=scale, offset=offset)
    elif stack is None and safe.is_product(text):
        band_files = safe.product_bands(text)
    elif stac.is_item(text):
        band_files = stac.item_bands(text)
    if band_files is not None and options.bands is not None:
        raise refuse("S2N-BANDS-NOT-STACK", text, kind=band_files.kind)
    if band_files is None:
        scene = open_stack(stack or text, options.bands, n_bands)
        scale, offset = stack_radiometry(scene, options)
        scene = replace(scene, path=text, scale=scale, offset=offset,
                        cloud_band=None if options.keep_clouds else scene.cloud_band)
    elif band_files.kind == "band folder":  # read as a stack is: --scale and --offset
        scene = band_files_scene(band_files, keep_clouds=options.keep_clouds)
        scale = options.scale or (1.0 if holds_float_reflectance(scene) else DEFAULT_SCALE)
        scene = replace(scene, scale=scale, offset=(float(options.offset),) * len(scene.indexes))
    else:
        if options.offset:
            raise refuse("S2N-OFFSET-NOT-STACK", text, kind=band_files.kind, offsets=', '.join(f'{v:g}' for v in band_files.offset))
        if options.scale is not None:  # it was read as the product says, --scale unsaid
            raise refuse("S2N-SCALE-NOT-STACK", text, kind=band_files.kind, scale=band_files.scale)
        scene = band_files_scene(band_files, keep_clouds=options.keep_clouds)
    if options.leave_out:
        shapes = leave_out_of(options.leave_out, scene)
        scene = replace(scene, leave_out=str(options.leave_out), leave_out_shapes=shapes)
    if options.bbox or options.aoi:
        scene = restrict_to_aoi(scene, bbox=options.bbox, aoi=options.aoi)
    return scene


def stack_radiometry(scene: Scene, options: SceneOptions) -> tuple[float, tuple[float, ...]]:
    """A stack's scale and offsets, reflectance = (DN + offset) / scale: the file's own band
    metadata where it has some (GDAL's scale and offset: reflectance = DN x s + o), which
    --scale and --offset may repeat but not contradict; else --scale (default 10000, or 1 for
    float reflectance) and --offset. A stored offset with no stored scale (GDAL's scale 1, as
    `gdal_edit.py -offset -1000` leaves it) is in DNs: the scale is then --scale's or the
    default, as for a stack without metadata."""
    with rasterio.open(scene.dataset) as src:
        scales = [src.scales[i - 1] for i in scene.indexes]
        offsets = [src.offsets[i - 1] for i in scene.indexes]
    if all(s == 1 for s in scales):
        scale = options.scale or (1.0 if holds_float_reflectance(scene) else DEFAULT_SCALE)
        if not any(offsets):
            return scale, (float(options.offset),) * len(scene.indexes)
        offset = tuple(float(o) for o in offsets)
    elif len(set(scales)) > 1 or not scales[0]:
        raise refuse("S2N-SCENE-SCALES-DIFFER", scene.path, scales=', '.join(map(str, scales)))
    else:
        scale, offset = 1 / scales[0], tuple(o / scales[0] for o in offsets)
    agrees = (options.scale is None or math.isclose(options.scale, scale)) and (
        not options.offset or all(math.isclose(options.offset, o) for o in offset))
    if not agrees:
        raise refuse("S2N-SCENE-SCALE-CONTRADICTED", scene.path, scale=scale, offset=offset[0])
    return scale, offset


def holds_float_reflectance(scene: Scene) -> bool:
    """A float stack whose valid values lie in 0-2: reflectance itself (scale 1), as Earth
    Engine and many notebooks export it, not DNs."""
    if not scene.dtype.startswith("float"):
        return False
    sample = read_sample(scene)
    valid = valid_mask(sample, scene.nodata)
    if not valid.any():
        return False
    values = sample[:, valid]
    return bool(np.nanpercentile(values, 99) <= 2.0 and np.nanmin(values) >= -0.5)


def leave_out_of(path, scene: Scene) -> tuple:
    """A --mask of pixels to leave out, checked: a raster (its nonzero pixels; returns ()) or a
    vector file of polygons (returns them, in the scene's CRS), readable, georeferenced, in a CRS
    that transforms to the scene's, and overlapping the scene (else it would leave nothing out)."""
    try:
        with rasterio.open(path) as src:
            crs = src.crs
    except RasterioIOError as exc:
        layer = open_layer(path)
        if layer is None:
            raise refuse("S2N-LEAVE-OUT-UNREADABLE", path, error=first_line(exc)) from exc
        return _leave_out_polygons(path, layer, scene)
    if crs is None:
        raise refuse("S2N-LEAVE-OUT-NO-CRS", path)
    if not _overlap(label_bounds_in(open_label(path), scene.crs), scene.bounds):
        raise refuse("S2N-LEAVE-OUT-NO-OVERLAP", path, scene_name=scene.name)
    return ()


def _leave_out_polygons(path, layer, scene: Scene) -> tuple:
    """The polygons of a vector --mask that lie on ``scene``, in its CRS."""
    if layer.features == 0:  # said as what it is, not as polygons elsewhere
        raise refuse("S2N-LEAVE-OUT-EMPTY", path)
    if layer.crs is None:
        raise refuse("S2N-LEAVE-OUT-NO-CRS", path)
    check_transformable(path, layer.crs, scene.crs)
    shapes = polygons_in(layer.read(near=(scene.crs, scene.bounds)), layer.crs, scene.crs)
    on_scene = tuple(g for g in shapes if _overlap(g.bounds, scene.bounds))
    if not on_scene:
        raise refuse("S2N-LEAVE-OUT-NO-OVERLAP", path, scene_name=scene.name)
    return on_scene


def _overlap(a: tuple, b: tuple) -> bool:
    """Whether two (left, bottom, right, top) boxes share an area."""
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


class OpenPair(NamedTuple):
    """A scene and its water label, opened and checked."""

    scene: Scene
    label: Label | VectorLabel
    bounds: tuple  # what the label covers, in the scene's CRS (a vector label: the whole scene)
    warnings: list  # what the label's values say (check_label)


def open_pair(image, label_path, options: SceneOptions | None = None, nodata: float | None = None) -> OpenPair:
    """Open and check a scene (any source, read with ``options``) and its water label: both
    readable with valid pixels, CRSs that transform, and overlapping."""
    scene = open_scene(image, options or SceneOptions())
    check_has_valid_pixels(scene)
    label = open_label(label_path, nodata, near=(scene.crs, scene.bounds))
    bounds = label_bounds_in(label, scene.crs)
    if not _overlap(bounds, scene.bounds):
        raise refuse("S2N-MASK-NO-OVERLAP", label_path, scene_name=scene.name)
    if isinstance(label, VectorLabel):  # polygons label the whole scene, on no grid of their own
        unused = [finding("S2N-NODATA-POLYGONS", label_path, nodata=nodata)] if nodata is not None else []
        return OpenPair(scene, label, scene.bounds, check_label(label) + unused)
    return OpenPair(scene, label, bounds, check_label(label) + grid_warnings(label_path, label.crs, label.transform, scene))

