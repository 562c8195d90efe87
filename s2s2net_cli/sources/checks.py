"""What a scene's own values, descriptions and grid say about how it was read: warnings when
its bands are described as other bands than the model reads, its reflectance looks like
another scale, a missing offset or one its DNs do not carry, or its pixels are not
Sentinel-2's 10 m."""

from __future__ import annotations

import math
import os

import numpy as np
import rasterio
from rasterio.crs import CRS

from .. import remedies
from ..bands import BAND_NAMES, BandSpec, band_token
from ..formats import valid_mask
from ..grid import grid_shift, row_pixel_areas
from ..polygons import layers_warnings, open_layer
from ..rulebook import Finding, finding
from .scene import Scene, check_has_valid_pixels


def scene_warnings(scene: Scene, spec: BandSpec) -> list[Finding]:
    """Check that ``scene`` holds valid pixels (InputError if not); the warnings about how it
    was read (band order, scale, offset), from a decimated sample."""
    warnings = band_order_warnings(scene, spec)
    sample = check_has_valid_pixels(scene)
    valid = valid_mask(sample, scene.nodata)
    negative = negative_offset_warning(scene, sample, valid)
    # an offset the DNs do not carry darkens every pixel: say that, not that the scale looks wrong
    scale = None if negative else scale_warning(scene, sample, valid)
    found = (resolution_warning(scene), geographic_warning(scene), scale, offset_warning(scene, sample, valid),
             negative)
    return (warnings + empty_band_warnings(scene, sample, valid) + [w for w in found if w] + leave_out_warnings(scene)
            + aoi_warnings(scene))


# The share of a scene's bright pixels where one band alone is 0 beyond which that band is warned
# of: a swath's edge leaves slivers where the 20 m bands' footprint and the 10 m bands' differ.
EMPTY_BAND_SHARE = 0.05
# Reflectance that some other band of a pixel reaches where none of its bands is truly black: dark
# water is black in SWIR (0 in an L2A product of before 2022, which clipped negative values), land
# never is, and water seldom reaches 0.2 in any band (a turbid river in red, sun glint: neither black).
BRIGHT = 0.2


def empty_band_warnings(scene: Scene, sample: np.ndarray, valid: np.ndarray) -> list[Finding]:
    """A warning for each band that holds 0 (no data) in more than EMPTY_BAND_SHARE of the
    sample's bright pixels (where another band reaches BRIGHT: land, not dark water): a band
    file that failed to read, or another band stacked in its place, maps water where the band
    is black, without a word otherwise."""
    values = sample[:, valid]
    empty = (values == 0) if scene.nodata is None else (values == 0) | (values == scene.nodata)
    reflectance = np.where(empty, 0, scene.reflectance(values[:, None])[:, 0])
    found = []
    for k, index in enumerate(scene.indexes):
        bright = np.delete(reflectance, k, axis=0).max(axis=0) >= BRIGHT
        share = float(empty[k, bright].mean()) if bright.sum() >= 100 else 0.0
        if share > EMPTY_BAND_SHARE:
            found.append(finding("S2N-BAND-EMPTY", scene.path, band=BAND_NAMES[k], index=index, share=share))
    return found


def band_order_warnings(scene: Scene, spec: BandSpec) -> list[Finding]:
    """Warnings when the scene's band descriptions name other bands than the model expects, or
    name none and the bands were read in the model's order without --bands."""
    assumed = assumed_order_warning(scene, spec.names)
    warnings = [assumed] if assumed else []
    for pos, (index, expected) in enumerate(zip(scene.indexes, spec.names)):
        desc = scene.descriptions[index - 1] if index - 1 < len(scene.descriptions) else None
        if desc and band_token(desc) and band_token(desc) != band_token(expected):
            warnings.append(finding("S2N-BANDS-DESCRIBED-OTHER", scene.path, index=index, description=desc,
                                    expected=expected, position=pos + 1))
    return warnings


def assumed_order_warning(scene: Scene, names) -> Finding | None:
    """A warning when a stack's bands say nothing of what they are (no description, no colour
    interpretation) and were read as ``names`` in that order: a stack of red, green and blue
    first, as many exports are, would be mapped without a word, and wrongly."""
    if not scene.order_assumed:
        return None
    return finding("S2N-BANDS-UNDESCRIBED", scene.path, names=", ".join(names))


# The largest value of an 8-bit picture. Reflectance x 10000 of 0.0255 or less in all six bands
# of every pixel is darker than any scene but a crop of dark open water (L1C's path radiance
# alone lifts blue above 0.05, baseline 04.00's offset every DN above 1000).
EIGHT_BIT_MAX = 255


def scale_warning(scene: Scene, sample: np.ndarray, valid: np.ndarray) -> Finding | None:
    """A warning when the valid pixels' median reflectance is implausible for the scene's scale,
    or when an integer stack read as reflectance x 10000 holds no value above 255: an 8-bit
    picture of the scene (a display stretch to 0-255) saved in a wider type, whose dark values
    the network would take for water almost everywhere."""
    if not valid.any():
        return None
    median = float(np.median(scene.reflectance(sample)[:, valid]))
    if median > 1.5 or median < 0.002:
        return finding("S2N-SCALE-IMPLAUSIBLE", scene.path, median=median, scale=scene.scale)
    brightest = sample[:, valid].max()
    if np.issubdtype(sample.dtype, np.integer) and scene.scale > EIGHT_BIT_MAX and brightest <= EIGHT_BIT_MAX:
        return finding("S2N-SCALE-EIGHT-BIT", scene.path, brightest=brightest, scale=scene.scale)
    return None


# Below this reflectance lies the darkest 1 % of some band of nearly every scene (water,
# shadow, vegetation in the SWIR). Since processing baseline 04.00 DNs carry +1000, which
# lifts every band's darkest pixels above 0.1.
OFFSET_SUSPECT_REFLECTANCE = 0.09


def offset_warning(scene: Scene, sample: np.ndarray, valid: np.ndarray) -> Finding | None:
    """A warning when a stack read without offset looks like DNs that still carry the +1000 of
    processing baseline 04.00 and later: even the darkest pixels of every band are bright."""
    if not scene.radiometry_by_options or any(scene.offset) or valid.sum() < 100:
        return None
    darkest = np.percentile(scene.reflectance(sample)[:, valid], 1, axis=1)
    if float(darkest.min()) >= OFFSET_SUSPECT_REFLECTANCE:
        return finding("S2N-OFFSET-MISSING", scene.path, limit=OFFSET_SUSPECT_REFLECTANCE)
    return None


# Reflectance below which the darkest 1 % of a band does not fall with the right offset (the
# darkest water's SWIR is about 0 at the surface, never -0.03); the -1000 of baseline 04.00
# applied to DNs without the +1000 puts it near -0.1.
NEGATIVE_SUSPECT_REFLECTANCE = -0.03


def negative_offset_warning(scene: Scene, sample: np.ndarray, valid: np.ndarray) -> Finding | None:
    """A warning when a negative offset (--offset -1000, or the product's own) leaves the darkest
    1 % of some band well below zero reflectance: the DNs do not carry the +1000 it takes away
    (a product before processing baseline 04.00, or a harmonized collection's), and every band
    is 0.1 too dark."""
    if not any(o < 0 for o in scene.offset) or valid.sum() < 100:
        return None
    darkest = np.percentile(scene.reflectance(sample)[:, valid], 1, axis=1)
    band = int(np.argmin(darkest))
    if float(darkest[band]) >= NEGATIVE_SUSPECT_REFLECTANCE:
        return None
    offset = f"{scene.offset[band]:g}" if len(set(scene.offset)) == 1 else f"{scene.offset[band]:g} on {BAND_NAMES[band]}"
    return finding("S2N-OFFSET-NOT-CARRIED", scene.path, offset=offset, band=BAND_NAMES[band],
                   darkest=float(darkest[band]))


# The network reads 10 m pixels; a grid reprojected from them (to degrees, say) stays near that.
TEN_METRE_PIXELS = (8.0, 12.5)


def pixel_metres(scene: Scene) -> float:
    """The side of the square of a scene's pixel's area on the ground, in metres: the area as
    predict counts it (geodesic in degrees, the CRS's unit in metres) in its middle row."""
    return math.sqrt(row_pixel_areas(scene.crs, scene.transform, scene.height // 2, 1, scene.width)[0])


def resolution_warning(scene: Scene) -> Finding | None:
    """A warning when the scene's pixels are not about 10 m: the network reads Sentinel-2's 10 m
    bands, and on 20 m or 60 m pixels (a stack resampled to them) it sees every shape at the
    wrong size, and the output's pixels are a fifth of the input's, not 2 m."""
    metres = pixel_metres(scene)
    if TEN_METRE_PIXELS[0] <= metres <= TEN_METRE_PIXELS[1]:
        return None
    return finding("S2N-PIXELS-NOT-10M", scene.path, metres=metres, output_metres=metres / 5)


def geographic_warning(scene: Scene) -> Finding | None:
    """A warning when the scene is in degrees (EPSG:4326, as Sen1Floods11 and many exports are):
    its mask is written in degrees too, which rivers refuses; name the UTM zone to reproject to."""
    crs = CRS.from_user_input(scene.crs)
    if not crs.is_geographic:
        return None
    return finding("S2N-SCENE-GEOGRAPHIC", scene.path, crs=crs.to_string(),
                   how=remedies.to_utm(scene.path, crs, scene.transform, scene.width, scene.height, "the scene", 10))


# Under this many 10 m pixels a side, a scene shows the network little context: crops of 64 px
# of the real scenes here found up to 11 % more water than the whole scenes over the same ground
# (IoU 0.90-0.97), crops of 128 px up to 5 % (IoU 0.94-0.99) (scripts/crop_sizes.py on the
# Virginia crop, Shanghai and two Bolivia chips; docs/guides/predict.md).
SMALL_SCENE = 128
SMALL_SCENE_COST = (0.11, 0.90)  # the most water found in excess at 64 px, and the lowest IoU


def small_scene_warning(scene: Scene) -> Finding | None:
    """A warning when the scene is under SMALL_SCENE px a side, with what that cost on real scenes.
    Its file's size counts, not an area of interest's: tiles read their context beyond the AOI."""
    height, width = scene.dataset_shape
    if min(width, height) >= SMALL_SCENE:
        return None
    return finding("S2N-SCENE-SMALL", scene.path, width=width, height=height, least=SMALL_SCENE,
                   high=SMALL_SCENE_COST[0], iou=SMALL_SCENE_COST[1])


def grid_warnings(path, crs, transform, scene: Scene) -> list:
    """A warning when a raster (a label, a --mask) in the scene's CRS lies on a grid shifted off
    the scene's 10 m and 2 m grids by part of a cell: warped onto them, every cell is read half
    from its neighbours, without a word."""
    if crs is None or CRS.from_user_input(crs) != CRS.from_user_input(scene.crs):
        return []
    shift = grid_shift(transform, scene.transform)
    if shift is None:
        return []
    return [finding("S2N-GRID-SHIFT", path, scene_name=scene.name, dx=shift[0], dy=shift[1])]


def aoi_warnings(scene: Scene) -> list:
    """That only the first layer of an --aoi file of several was read."""
    if not scene.aoi or not os.path.isfile(scene.aoi_name):  # none, or a --bbox
        return []
    layer = open_layer(scene.aoi_name)
    return layers_warnings(layer) if layer is not None else []


def leave_out_warnings(scene: Scene) -> list:
    """grid_warnings of the scene's --mask raster, when it has one; for polygons, which are on
    no grid, that only the first of the file's layers was read."""
    if not scene.leave_out:
        return []
    if scene.leave_out_shapes:
        return layers_warnings(open_layer(scene.leave_out))
    with rasterio.open(scene.leave_out) as src:
        return grid_warnings(scene.leave_out, src.crs, src.transform, scene)
