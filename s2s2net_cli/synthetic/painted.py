"""Synthetic water painted into real Sentinel-2 scenes: real land, exact truth for the water.

A crop of a real 6-band 10 m scene is taken as the background. Water bodies and their shores
are drawn at 2 m as in ``synthetic`` (rivers, streams, canals, lakes, coasts, harbours,
floods over the background's fields) and mixed in linearly: each 10 m pixel becomes the
background times the share of its 2 m sub-pixels left unpainted plus the painted spectra
times theirs (B11/B12 mixed over the background's own 20 m grid), blurred like the sensor,
with sensor noise on what was painted. On an L1C background the painted spectra get the
scene's own path radiance (dark-object estimate).

The truth is exact where painted. The background's own pixels are labelled only where a water
index is sure of them, and only away from any other kind of pixel: clear water (MNDWI > 0.2,
NDWI > 0.1, NIR < 0.08) is water, clear land (MNDWI < -0.15 or NDVI > 0.5) is land, everything
else (marsh, shadows, dark roofs, every edge) is nodata in the mask, left out of the loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import rasterio
from rasterio.windows import Window
from scipy import ndimage

from ..bands import DEFAULT_SCALE, BandSpec
from ..formats import dn_to_reflectance, reflectance_to_dn
from ..grid import SCALE_FACTOR, to_fine
from ..indices import NIR, water_index
from ..rulebook import finding, refuse
from ..sources.checks import scene_warnings
from ..sources.open import open_scene
from ..sources.options import SceneOptions
from .scenes import (
    CLASSES,
    SPECTRA,
    WATER_CLASSES,
    SyntheticPair,
    class_fractions,
    draw_water,
    scene_spectra,
    smooth_noise,
    through_20m,
)

BACKGROUND = 255  # class code of unpainted 2 m pixels
RED = 2
FIELDS_NDVI = 0.3  # background land this green may flood


def vegetation_index(refl: np.ndarray) -> np.ndarray:
    """NDVI, (NIR - red) / (NIR + red), of a (6, h, w) reflectance array; NaN where undefined."""
    nir, red = refl[NIR].astype(np.float32), refl[RED].astype(np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (nir - red) / (nir + red)


def background_truth(refl: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """(h, w) float32 truth of a real (6, h, w) reflectance scene at 10 m: 1 sure water, 0 sure
    land, NaN where an index is not sure, next to a pixel of another kind, or nodata."""
    mndwi, ndwi = water_index(refl, "mndwi"), water_index(refl, "ndwi")
    water = (mndwi > 0.2) & (ndwi > 0.1) & (refl[NIR] < 0.08) & valid
    land = ~water & ((mndwi < -0.15) | (vegetation_index(refl) > 0.5)) & valid
    kind = np.full(valid.shape, 2, np.uint8)  # 0 land, 1 water, 2 unsure or nodata
    kind[land], kind[water] = 0, 1
    uniform = ndimage.minimum_filter(kind, 3, mode="nearest") == ndimage.maximum_filter(kind, 3, mode="nearest")
    truth = np.full(valid.shape, np.nan, np.float32)
    truth[uniform & (kind < 2)] = kind[uniform & (kind < 2)]
    return truth


def path_radiance(refl: np.ndarray, valid: np.ndarray, level: str) -> np.ndarray:
    """(6,) reflectance the atmosphere adds to every pixel: 0 for L2A; for L1C, how far the
    scene's darkest pixels (0.5th percentile per band) lie above the darkest water's spectrum."""
    if level != "L1C" or not valid.any():
        return np.zeros(refl.shape[0], np.float32)
    darkest = np.percentile(refl[:, valid], 0.5, axis=1)
    return np.clip(darkest - np.asarray(SPECTRA["dark_water"]), 0, None).astype(np.float32)


def swir_phase(band: np.ndarray) -> tuple[int, int]:
    """Where the 20 m grid starts in a 10 m band copied from 20 m by nearest: the (row, column)
    phase, 0 or 1 each, whose 2 x 2 blocks are most often constant."""
    def constant_share(axis: int, phase: int) -> float:
        a = np.moveaxis(band, axis, 0)[phase:]
        n = a.shape[0] // 2 * 2
        return float(np.mean(a[0:n:2] == a[1:n:2])) if n else 0.0

    return (int(constant_share(0, 1) > constant_share(0, 0)), int(constant_share(1, 1) > constant_share(1, 0)))


def paint_pair(background: np.ndarray, level: str, transform, crs, seed: int, *, blur: float | None = None,
               noise: float | None = None, texture: float = 0.05) -> SyntheticPair:
    """Synthetic water painted into ``background``, a real (6, h, w) uint16 scene (reflectance
    x 10000, 0 nodata) of processing ``level`` "L1C" or "L2A", and the 2 m truth. ``blur``
    (sigma in 10 m pixels) and ``noise`` (sd) are drawn from the seed when None; with 0 for
    them and ``texture`` each 10 m pixel is the exact linear mix."""
    rng = np.random.default_rng(seed)
    valid = np.all(background > 0, axis=0)
    refl = dn_to_reflectance(background)
    _, h, w = refl.shape
    f = SCALE_FACTOR
    truth10 = background_truth(refl, valid)
    fields = to_fine((truth10 == 0) & (vegetation_index(refl) > FIELDS_NDVI))
    classes = np.full((h * f, w * f), BACKGROUND, np.uint8)
    draw_water(classes, rng, fields=fields)

    spectra = scene_spectra(rng) + path_radiance(refl, valid, level)
    painted = classes != BACKGROUND
    n = len(CLASSES)
    frac = class_fractions(np.where(painted, classes, n).astype(np.uint8), n + 1)  # (h, w, n + 1)
    brightness = 1 + texture * np.clip(smooth_noise(h, w, rng, scale=rng.uniform(3, 12)), -3, 3)
    delta = np.einsum("hwk,kb->bhw", frac[..., :n], spectra, optimize=True) * brightness \
        - (1 - frac[..., n])[None] * refl
    sigma = rng.uniform(0.3, 0.6) if blur is None else blur
    if sigma:
        delta = ndimage.gaussian_filter(delta, sigma=(0, sigma, sigma), mode="reflect")
    delta[4:] = through_20m(delta[4:], swir_phase(background[4]))
    touched = frac[..., n] < 1
    sd = rng.uniform(0.002, 0.004) if noise is None else noise
    out = refl + delta + rng.normal(0, sd, refl.shape).astype(np.float32) * touched[None]
    scene = reflectance_to_dn(out)
    scene[:, ~valid] = 0

    mask = to_fine(truth10)
    mask[painted] = np.isin(classes[painted], WATER_CLASSES)
    mask[to_fine(~valid)] = np.nan
    return SyntheticPair(scene, mask.astype(np.float32), classes, spectra, transform, crs, level, seed)


@dataclass(frozen=True)
class BackgroundReading:
    """How a background is read (background_reading's): what GDAL opens (the stack itself, or a
    VRT of a product's band files), which of its bands are B02..B12, the offset added to its
    DNs, and its level."""

    dataset: str
    indexes: tuple[int, ...]
    offset: tuple[float, ...]
    level: str


def background_reading(path, bands: tuple[int, ...] | None = None, offset: float = 0.0, size: int | None = None,
                       level: str | None = None) -> tuple[BackgroundReading, list]:
    """How the background ``path`` (a stack, or a product or STAC item as predict takes them) is
    read, as predict reads it (``bands``, ``offset``: --bands, --offset, or its own metadata),
    its level (a product's own, a stack's tag ``level``, or ``level`` where it says none: L2A
    where neither does, warned of); and what predict would warn of (band order, pixel size, the
    +1000 offset), and that its pairs are smaller than ``size`` where it is."""
    scene = open_scene(path, SceneOptions(bands=bands, offset=offset))
    if scene.scale != DEFAULT_SCALE:
        raise refuse("S2N-BACKGROUND-SCALE", path, expected=DEFAULT_SCALE, scale=scene.scale)
    if scene.dtype != "uint16":  # before what reading it says
        raise refuse("S2N-BACKGROUND-BANDS", path, count=scene.count, dtype=scene.dtype)
    said = scene_warnings(scene, BandSpec())
    product = scene.kind.endswith(" product")
    own = scene.kind.split()[0] if product else tagged_level(path) if scene.kind == "stack" else None
    if own and level and own != level:
        said_by = "its metadata" if product else "its tag level"
        raise refuse("S2N-BACKGROUND-LEVEL-CONTRADICTED", path, own=own, said_by=said_by, level=level)
    if not own and not level:  # L1C painted as L2A would get no path radiance, and be tagged L2A
        said.append(finding("S2N-BACKGROUND-NO-LEVEL", path))
    if size is not None and min(scene.width, scene.height) < size:  # read_background crops the whole of it
        said.append(finding("S2N-BACKGROUND-SMALL", path, width=scene.width, height=scene.height, size=size,
                            crop_width=min(size, scene.width), crop_height=min(size, scene.height)))
    reading = BackgroundReading(scene.dataset, tuple(scene.indexes), tuple(scene.offset), own or level or "L2A")
    return reading, said


def tagged_level(path) -> str | None:
    """A stack's tag ``level`` (L1C or L2A), None without one; another value is refused."""
    with rasterio.open(path) as src:
        level = src.tags().get("level")
    if level is not None and level.upper() not in ("L1C", "L2A"):
        raise refuse("S2N-BACKGROUND-LEVEL", path, level=level)
    return None if level is None else level.upper()


def read_background(path, size: int, rng: np.random.Generator, tries: int = 20, min_land: float = 0.4,
                    reading: BackgroundReading | None = None) -> tuple[np.ndarray, str, object, object]:
    """A random ``size`` x ``size`` crop (the whole scene where smaller) of the uint16 scene at
    ``path`` read as ``reading`` says (default: the stack's six bands in order, its tag ``level``
    or L2A, no offset; a product's offset is -1000 from baseline 04.00 on, nodata 0 kept): the
    first of up to ``tries`` whose background truth is at least ``min_land`` sure land (land is
    what water gets painted over), else the one with most: (data, level, transform, crs)."""
    try:
        src = rasterio.open(reading.dataset if reading else path)
    except rasterio.errors.RasterioIOError as exc:
        raise refuse("S2N-BACKGROUND-UNREADABLE", path) from exc
    with src:
        if (reading is None and src.count != 6) or src.dtypes[0] != "uint16":
            raise refuse("S2N-BACKGROUND-BANDS", path, count=src.count, dtype=src.dtypes[0])
        indexes, offset = (reading.indexes, reading.offset) if reading else (None, (0.0,) * 6)
        level = reading.level if reading else tagged_level(path) or "L2A"
        hh, ww = min(size, src.height), min(size, src.width)
        best = None
        for _ in range(tries):
            window = Window(int(rng.integers(0, src.width - ww + 1)), int(rng.integers(0, src.height - hh + 1)), ww, hh)
            data = with_offset(src.read(list(indexes or range(1, 7)), window=window), offset)
            truth = background_truth(dn_to_reflectance(data), np.all(data > 0, axis=0))
            land = float(np.mean(truth == 0))
            if best is None or land > best[0]:
                best = (land, data, src.window_transform(window))
            if land >= min_land:
                break
        return best[1], level, best[2], src.crs


def with_offset(data: np.ndarray, offset: tuple[float, ...]) -> np.ndarray:
    """uint16 DNs (bands first) with each band's ``offset`` added, nodata 0 kept and valid pixels
    kept at 1 or more (a dark pixel is not turned into nodata)."""
    if not any(offset):
        return data
    shift = np.rint(np.asarray(offset, dtype=np.float64)).astype(np.int32)[:, None, None]
    return np.where(data > 0, np.clip(data.astype(np.int32) + shift, 1, 65535), 0).astype(np.uint16)


def make_painted_pair(path, size: int, seed: int, reading: BackgroundReading | None = None) -> SyntheticPair:
    """Water painted into a crop of the background scene at ``path`` (read as ``reading`` says:
    read_background), all drawn from ``seed``."""
    rng = np.random.default_rng([seed, 1])
    data, level, transform, crs = read_background(path, size, rng, reading=reading)
    return paint_pair(data, level, transform, crs, seed)

