"""Where a scene comes from: a GeoTIFF/VRT stack, a Sentinel-2 product, or a STAC item.

Every source answers the same questions and nothing downstream knows which it was: the
10 m grid, the six bands' DNs with their scale and offset, and which pixels count (nodata,
L2A scene classification, a user's mask, an area of interest). A product or item becomes a
GDAL VRT (an XML string, opened in place: nothing is unpacked or copied) of its band files
on the 10 m grid of B02. B11 and B12 reach that grid from 20 m by nearest: each 20 m pixel
is copied to its four 10 m pixels, as ``synth`` and ``chip`` feed them to the network.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from xml.sax.saxutils import escape

import rasterio
from rasterio.errors import RasterioIOError

from .bands import BAND_NAMES, DEFAULT_SCALE, Scene, check_grid, open_stack
from .errors import InputError, describe, first_line


@dataclass(frozen=True)
class SceneOptions:
    """How to read a scene: band indexes, scale and offset (stacks; products and items say
    their own), clouds, a mask of pixels to leave out, an area of interest."""

    bands: tuple[int, ...] | None = None
    scale: float | None = None  # None: 10000, or 1 for a float stack of reflectance (values 0-2)
    offset: float = 0.0
    keep_clouds: bool = False
    mask: str | None = None
    bbox: tuple[float, float, float, float] | None = None  # lon/lat W, S, E, N
    aoi: str | None = None  # vector file


@dataclass(frozen=True)
class BandFiles:
    """What a product or item resolves to: one GDAL path per band (B02 ... B12, optional SCL)."""

    source: str
    kind: str
    files: dict
    offset: tuple[float, ...]
    scale: float


def is_remote(path) -> bool:
    """URLs and GDAL virtual paths, which are strings for GDAL, never local files."""
    text = str(path)
    return "://" in text or text.startswith("/vsi")


def gdal_path(path) -> str:
    """A path or URL as GDAL opens it: https:// via /vsicurl/, s3:// via /vsis3/, gs:// via
    /vsigs/; local paths absolute; GDAL virtual paths as given."""
    text = str(path)
    if text.startswith("/vsi"):
        return text
    for scheme, prefix in (("s3://", "/vsis3/"), ("gs://", "/vsigs/"), ("az://", "/vsiaz/")):
        if text.startswith(scheme):
            return prefix + text[len(scheme):]
    if text.startswith(("http://", "https://", "ftp://")):
        return "/vsicurl/" + text
    return os.path.abspath(text)


def open_scene(source, options: SceneOptions = SceneOptions(), n_bands: int = len(BAND_NAMES)) -> Scene:
    """Open ``source`` (stack, ``.SAFE`` folder, its ``MTD_MSIL*.xml``, a product ``.zip``, or a
    STAC item ``.json`` or URL) as a checked Scene; InputError naming it for anything wrong."""
    from . import safe, stac

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
    if options.mask:
        scene = replace(scene, mask=check_mask_file(options.mask, scene))
    if options.bbox or options.aoi:
        from .aoi import restrict_to_aoi

        scene = restrict_to_aoi(scene, bbox=options.bbox, aoi=options.aoi)
    return scene


def holds_float_reflectance(scene: Scene) -> bool:
    """A float stack whose valid values lie in 0-2: reflectance itself (scale 1), as Earth
    Engine and many notebooks export it, not DNs."""
    if not scene.dtype.startswith("float"):
        return False
    import numpy as np

    from .bands import read_sample, valid_mask

    sample = read_sample(scene)
    valid = valid_mask(sample, scene.nodata)
    if not valid.any():
        return False
    values = sample[:, valid]
    return bool(np.nanpercentile(values, 99) <= 2.0 and np.nanmin(values) >= -0.5)


def band_files_scene(band_files: BandFiles, keep_clouds: bool = False) -> Scene:
    """A Scene reading ``band_files`` through a VRT on the grid of its first band (B02)."""
    names = list(BAND_NAMES) + (["SCL"] if "SCL" in band_files.files and not keep_clouds else [])
    grids = [_band_grid(band_files.source, band_files.files[name], name) for name in names]
    ref = grids[0]
    check_grid(band_files.source, ref["crs"], ref["transform"])
    bands_xml = []
    for k, (name, grid) in enumerate(zip(names, grids), start=1):
        if grid["crs"] != ref["crs"]:
            raise InputError(describe(band_files.source, f"band {name} is in another CRS than B02"))
        bands_xml.append(_vrt_band(k, name, band_files.files[name], grid, ref, band_files.source))
    xml = (f'<VRTDataset rasterXSize="{ref["width"]}" rasterYSize="{ref["height"]}">'
           f'<SRS>{escape(ref["crs"].to_wkt())}</SRS>'
           f'<GeoTransform>{", ".join(repr(float(v)) for v in ref["transform"].to_gdal())}</GeoTransform>'
           + "".join(bands_xml) + "</VRTDataset>")
    return Scene(band_files.source, ref["crs"], ref["transform"], ref["width"], ref["height"], "uint16",
                 len(names), tuple(range(1, len(BAND_NAMES) + 1)), 0, tuple(BAND_NAMES), dataset=xml,
                 kind=band_files.kind, scale=band_files.scale, offset=band_files.offset,
                 cloud_band=len(names) if names[-1] == "SCL" else None)


def _band_grid(source: str, path: str, name: str) -> dict:
    try:
        with rasterio.open(path) as src:
            return {"crs": src.crs, "transform": src.transform, "width": src.width, "height": src.height,
                    "dtype": src.dtypes[0]}
    except RasterioIOError as exc:
        raise InputError(describe(source, f"band {name} cannot be read from {path} ({first_line(exc)})")) from exc


def _vrt_band(k: int, name: str, path: str, grid: dict, ref: dict, source: str) -> str:
    """One VRT band: the whole band file placed on the reference grid (nearest when coarser)."""
    rt, t = ref["transform"], grid["transform"]
    ratio_x, ratio_y = t.a / rt.a, t.e / rt.e
    x_off, y_off = (t.c - rt.c) / rt.a, (t.f - rt.f) / rt.e
    values = (ratio_x, ratio_y, x_off, y_off)
    if any(abs(v - round(v)) > 1e-6 for v in values) or min(ratio_x, ratio_y) < 1:
        raise InputError(describe(source, f"band {name} is not on the 10 m grid of B02 or a multiple of it "
                                          f"({abs(t.a):g} m pixels at offset {x_off:g}, {y_off:g})"))
    ratio_x, ratio_y, x_off, y_off = (int(round(v)) for v in values)
    return (f'<VRTRasterBand dataType="UInt16" band="{k}"><Description>{name}</Description>'
            f'<SimpleSource resampling="nearest"><SourceFilename relativeToVRT="0">{escape(path)}</SourceFilename>'
            f'<SourceBand>1</SourceBand>'
            f'<SrcRect xOff="0" yOff="0" xSize="{grid["width"]}" ySize="{grid["height"]}"/>'
            f'<DstRect xOff="{x_off}" yOff="{y_off}" xSize="{grid["width"] * ratio_x}" '
            f'ySize="{grid["height"] * ratio_y}"/></SimpleSource></VRTRasterBand>')


def check_mask_file(path, scene: Scene) -> str:
    """A --mask raster: readable, georeferenced, and in a CRS that transforms to the scene's."""
    from .align import check_transformable

    try:
        with rasterio.open(path) as src:
            crs = src.crs
    except RasterioIOError as exc:
        raise InputError(describe(path, f"--mask is not a readable raster ({first_line(exc)})")) from exc
    if crs is None:
        raise InputError(describe(path, "--mask has no CRS"))
    check_transformable(path, crs, scene.crs)
    return str(path)


def offset_value(text, source: str, what: str) -> float:
    """A float from product metadata, or InputError naming the product."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise InputError(describe(source, f"{what} {text!r} is not a number")) from None
    if not math.isfinite(value):
        raise InputError(describe(source, f"{what} is not finite"))
    return value

