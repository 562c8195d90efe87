"""Reading a Sentinel-2 scene: band order, reflectance scale, nodata, normalisation.

The network reads B02, B03, B04, B08, B11, B12 at 10 m as reflectance (DN / scale). The
band order, scale and normalisation a model was trained with travel in its weights file.
Nodata is the file's nodata value (every band equal to it), NaN in any band, or a pixel
whose bands are all zero. Nodata never reaches the network as zeros that look like water:
it is filled with the band mean (0 after normalisation) and reported in a valid mask.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import rasterio
from rasterio.errors import RasterioIOError
from rasterio.windows import Window

from .errors import InputError, describe
from .grid import is_rotated

BAND_NAMES = ("B02", "B03", "B04", "B08", "B11", "B12")
DEFAULT_SCALE = 10000.0
# Reflectance mean and spread of a mixed land/water Sentinel-2 scene, per band above.
DEFAULT_MEAN = (0.08, 0.09, 0.09, 0.22, 0.18, 0.12)
DEFAULT_STD = (0.05, 0.05, 0.06, 0.12, 0.09, 0.07)

_REFLECTANCE_DTYPES = {"uint16", "int16", "uint32", "int32", "float32", "float64"}


@dataclass(frozen=True)
class BandSpec:
    """What a model expects of its input: band names, reflectance scale and normalisation."""

    names: tuple[str, ...] = BAND_NAMES
    scale: float = DEFAULT_SCALE
    mean: tuple[float, ...] = DEFAULT_MEAN
    std: tuple[float, ...] = DEFAULT_STD

    def to_dict(self) -> dict:
        return {"names": list(self.names), "scale": self.scale, "mean": list(self.mean), "std": list(self.std)}

    @classmethod
    def from_dict(cls, data: dict) -> "BandSpec":
        spec = cls(
            names=tuple(str(n) for n in data["names"]),
            scale=float(data["scale"]),
            mean=tuple(float(v) for v in data["mean"]),
            std=tuple(float(v) for v in data["std"]),
        )
        n = len(spec.names)
        if not (len(spec.mean) == len(spec.std) == n) or n == 0:
            raise ValueError("band names, mean and std differ in length")
        if not (spec.scale > 0 and all(s > 0 for s in spec.std)):
            raise ValueError("scale and std must be positive")
        return spec


@dataclass(frozen=True)
class Scene:
    """An opened, checked scene: where its pixels are and which bands to read."""

    path: str
    crs: object
    transform: object
    width: int
    height: int
    dtype: str
    count: int
    indexes: tuple[int, ...]
    nodata: float | None
    descriptions: tuple[str | None, ...] = field(default=())

    @property
    def shape(self) -> tuple[int, int]:
        return self.height, self.width


def open_scene(path, indexes: tuple[int, ...] | None = None, n_bands: int = len(BAND_NAMES)) -> Scene:
    """Open ``path`` and check that it can be read as a reflectance scene of ``n_bands`` bands.

    ``indexes`` are the 1-based bands to read, in the model's band order (default 1..n).
    Raises InputError naming the file for anything that cannot be a scene.
    """
    try:
        with rasterio.open(path) as src:
            crs, transform = src.crs, src.transform
            width, height, count, dtype = src.width, src.height, src.count, src.dtypes[0]
            nodata, descriptions = src.nodata, tuple(src.descriptions)
    except RasterioIOError as exc:
        raise InputError(describe(path, f"not a readable raster ({_first_line(exc)})")) from exc
    if crs is None:
        raise InputError(describe(path, "has no CRS; a scene must be georeferenced"))
    if is_rotated(transform):
        raise InputError(describe(path, "has a rotated or sheared transform; only north-up grids are supported"))
    if transform.is_identity or transform.a <= 0 or transform.e >= 0:
        raise InputError(describe(path, "has no usable geotransform (expected north-up pixels)"))
    if dtype not in _REFLECTANCE_DTYPES:
        raise InputError(describe(path, f"has dtype {dtype}, which cannot hold reflectance (expected uint16, int16 or float)"))
    if indexes is None:
        if count < n_bands:
            raise InputError(describe(path, f"has {count} band(s); the model needs {n_bands} (B02, B03, B04, B08, B11, B12)"))
        indexes = tuple(range(1, n_bands + 1))
    else:
        indexes = tuple(int(i) for i in indexes)
        if len(indexes) != n_bands:
            raise InputError(describe(path, f"{len(indexes)} band indexes given; the model needs {n_bands}"))
        bad = [i for i in indexes if not 1 <= i <= count]
        if bad:
            raise InputError(describe(path, f"has {count} band(s); band index {bad[0]} does not exist"))
    return Scene(str(path), crs, transform, width, height, dtype, count, indexes, nodata, descriptions)


def read_sample(scene: Scene, size: int = 256) -> np.ndarray:
    """A decimated view of the scene's bands (at most size x size), read across the whole
    file, so a truncated or damaged file is caught before any output is started."""
    shape = (len(scene.indexes), min(size, scene.height), min(size, scene.width))
    try:
        with rasterio.open(scene.path) as src:
            return src.read(list(scene.indexes), out_shape=shape)
    except RasterioIOError as exc:
        raise InputError(describe(scene.path, f"cannot be read, damaged or truncated ({_first_line(exc)})")) from exc


def check_has_valid_pixels(scene: Scene) -> np.ndarray:
    """InputError when the scene holds no valid pixel; returns the decimated sample read."""
    sample = read_sample(scene)
    if valid_mask(sample, scene.nodata).any():
        return sample
    with rasterio.open(scene.path) as src:  # the sample can miss a small valid area
        for _, window in src.block_windows(1):
            if valid_mask(src.read(list(scene.indexes), window=window), scene.nodata).any():
                return sample
    raise InputError(describe(scene.path, "has no valid pixel (all nodata)"))


def valid_mask(raw: np.ndarray, nodata: float | None) -> np.ndarray:
    """Pixels that hold data: not NaN in any band, not all-nodata, not all-zero. ``raw`` is (bands, h, w)."""
    valid = np.ones(raw.shape[1:], dtype=bool)
    if raw.dtype.kind == "f":
        valid &= ~np.isnan(raw).any(axis=0)
    if nodata is not None and not (isinstance(nodata, float) and math.isnan(nodata)):
        valid &= ~(raw == nodata).all(axis=0)
    valid &= (raw != 0).any(axis=0)
    return valid


def to_reflectance(raw: np.ndarray, scale: float) -> np.ndarray:
    return raw.astype(np.float32) / np.float32(scale)


def normalise(reflectance: np.ndarray, valid: np.ndarray, spec: BandSpec) -> np.ndarray:
    """(reflectance - mean) / std per band, with nodata pixels set to 0 (the band mean)."""
    mean = np.asarray(spec.mean, dtype=np.float32)[:, None, None]
    std = np.asarray(spec.std, dtype=np.float32)[:, None, None]
    out = (reflectance - mean) / std
    out[:, ~valid] = 0.0
    np.nan_to_num(out, copy=False, nan=0.0, posinf=0.0, neginf=0.0)
    return out


def read_window(src, scene: Scene, window: Window) -> np.ndarray:
    """Read the scene's bands in ``window``, which may reach past the edges: those parts are
    filled by reflecting the scene (so tiles at the border see plausible context)."""
    row0, col0 = int(window.row_off), int(window.col_off)
    h, w = int(window.height), int(window.width)
    r0, c0 = max(row0, 0), max(col0, 0)
    r1, c1 = min(row0 + h, scene.height), min(col0 + w, scene.width)
    if r1 <= r0 or c1 <= c0:
        raise ValueError(f"window {window} does not overlap the scene")
    data = src.read(list(scene.indexes), window=Window(c0, r0, c1 - c0, r1 - r0))
    pads = ((0, 0), (r0 - row0, row0 + h - r1), (c0 - col0, col0 + w - c1))
    if any(p for pair in pads for p in pair):
        mode = "reflect" if min(data.shape[1:]) > 1 else "edge"
        data = np.pad(data, pads, mode=mode)
    return data


def read_normalised(src, scene: Scene, window: Window, spec: BandSpec) -> tuple[np.ndarray, np.ndarray]:
    """The network's input for ``window``: normalised float32 (bands, h, w) and a valid mask."""
    raw = read_window(src, scene, window)
    valid = valid_mask(raw, scene.nodata)
    return normalise(to_reflectance(raw, spec.scale), valid, spec), valid


def read_scene(path, spec: BandSpec = BandSpec(), indexes=None) -> tuple[np.ndarray, np.ndarray, Scene]:
    """A whole (small) scene as normalised array, valid mask and Scene. For chips and tests."""
    scene = open_scene(path, indexes, len(spec.names))
    with rasterio.open(path) as src:
        data, valid = read_normalised(src, scene, Window(0, 0, scene.width, scene.height), spec)
    return data, valid, scene


def band_order_warnings(scene: Scene, spec: BandSpec) -> list[str]:
    """Warnings when the scene's band descriptions name other bands than the model expects."""
    warnings = []
    for pos, (index, expected) in enumerate(zip(scene.indexes, spec.names)):
        desc = scene.descriptions[index - 1] if index - 1 < len(scene.descriptions) else None
        if desc and _band_token(desc) and _band_token(desc) != _band_token(expected):
            warnings.append(
                describe(scene.path, f"band {index} is described as {desc!r} but the model reads {expected} there (input {pos + 1})")
            )
    return warnings


def scale_warning(scene: Scene, sample: np.ndarray, valid: np.ndarray, spec: BandSpec) -> str | None:
    """A warning when the valid pixels' median reflectance is implausible for the model's scale."""
    if not valid.any():
        return None
    median = float(np.median(sample[:, valid])) / spec.scale
    if median > 1.5 or median < 0.002:
        return describe(
            scene.path,
            f"median reflectance is {median:.4g} with scale {spec.scale:g}; values look like another scale (see --scale)",
        )
    return None


def _band_token(text: str) -> str | None:
    """'B8', 'B08', 'b08 (nir)' -> 'B08'; None when the text names no Sentinel-2 band."""
    import re

    m = re.search(r"\bB0?(\d{1,2})(A?)\b", text.upper())
    if not m:
        return None
    return f"B{int(m.group(1)):02d}{m.group(2)}"


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
