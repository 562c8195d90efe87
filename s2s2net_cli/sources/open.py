"""Where a scene comes from: a GeoTIFF/VRT stack, a Sentinel-2 product, or a STAC item.

Every source answers the same questions and nothing downstream knows which it was: the
10 m grid, the six bands' DNs with their scale and offset, and which pixels count (nodata,
L2A scene classification, a raster of pixels to leave out, an area of interest). A product or
item becomes a VRT of its band files (vrt.py). ``open_pair`` opens a scene with its water label.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import rasterio
from rasterio.errors import RasterioIOError

from ..bands import BAND_NAMES, DEFAULT_SCALE
from ..errors import InputError, describe, first_line
from ..formats import valid_mask
from ..labels import Label, check_label_has_valid, check_transformable, label_bounds_in, open_label
from . import safe, stac
from .aoi import restrict_to_aoi
from .options import SceneOptions
from .scene import Scene, check_has_valid_pixels, open_stack, read_sample
from .vrt import band_files_scene


def open_scene(source, options: SceneOptions = SceneOptions(), n_bands: int = len(BAND_NAMES)) -> Scene:
    """Open ``source`` (stack, ``.SAFE`` folder, its ``MTD_MSIL*.xml``, a product ``.zip``, or a
    STAC item ``.json`` or URL) as a checked Scene; InputError naming it for anything wrong."""
    text = str(source)
    if safe.is_product(text):
        band_files = safe.product_bands(text)
    elif stac.is_item(text):
        band_files = stac.item_bands(text)
    else:
        band_files = None
    if band_files is None:
        scene = open_stack(text, options.bands, n_bands)
        scale = options.scale or (1.0 if holds_float_reflectance(scene) else DEFAULT_SCALE)
        scene = replace(scene, scale=scale, offset=(float(options.offset),) * n_bands)
    else:
        if options.bands is not None:
            raise InputError(describe(text, f"--bands applies to stacks; a {band_files.kind} names its bands"))
        if options.offset:
            raise InputError(describe(text, f"--offset applies to stacks; a {band_files.kind} states its offset "
                                            f"in its metadata ({', '.join(f'{v:g}' for v in band_files.offset)})"))
        scene = band_files_scene(band_files, keep_clouds=options.keep_clouds)
    if options.leave_out:
        scene = replace(scene, leave_out=check_leave_out_file(options.leave_out, scene))
    if options.bbox or options.aoi:
        scene = restrict_to_aoi(scene, bbox=options.bbox, aoi=options.aoi)
    return scene


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


def check_leave_out_file(path, scene: Scene) -> str:
    """A --mask raster of pixels to leave out: readable, georeferenced, and in a CRS that
    transforms to the scene's."""
    try:
        with rasterio.open(path) as src:
            crs = src.crs
    except RasterioIOError as exc:
        raise InputError(describe(path, f"--mask is not a readable raster ({first_line(exc)})")) from exc
    if crs is None:
        raise InputError(describe(path, "--mask has no CRS"))
    check_transformable(path, crs, scene.crs)
    return str(path)


def open_pair(image, label_path, options: SceneOptions | None = None,
              nodata: float | None = None) -> tuple[Scene, Label, tuple]:
    """Open and check a scene (any source, read with ``options``) and its water label: both
    readable with valid pixels, CRSs that transform, and overlapping. Returns (Scene, Label,
    the label's bounds in the scene's CRS)."""
    scene = open_scene(image, options or SceneOptions())
    check_has_valid_pixels(scene)
    label = open_label(label_path, nodata)
    left, bottom, right, top = label_bounds_in(label, scene.crs)
    s_left, s_top = scene.transform.c, scene.transform.f
    s_right, s_bottom = scene.transform * (scene.width, scene.height)
    if left >= s_right or right <= s_left or bottom >= s_top or top <= s_bottom:
        raise InputError(describe(label_path, f"does not overlap its scene {scene.name}"))
    check_label_has_valid(label)
    return scene, label, (left, bottom, right, top)
