"""A scene degraded N x, as Wald's protocol degrades it: the source of the 2 m checks on real labels.

Super-resolution is tested without finer truth by degrading a real scene by the factor, mapping
it back up and scoring against what the original resolution showed (Wald et al. 1997; DSen2,
Lanaras et al. 2018, for Sentinel-2). Here the degradation is exactly, so that every figure
means the same thing:

- the scene is cropped to a whole number of 2N-pixel blocks from its top-left corner;
- each band's reflectance is averaged over N x N cells;
- B11 and B12 are then averaged over 2 x 2 of those coarse cells and copied back to each, as a
  product's 20 m SWIR reaches its 10 m grid;
- a coarse cell is valid only when all of its cells, and all cells of its SWIR block, are valid
  (hold data that counts: not nodata, cloud, --mask or outside the area of interest).

The degraded scene is a float32 GeoTIFF of reflectance (scale 1, offset 0, NaN nodata, band
descriptions B02 ... B12) in the scene's CRS with an N x coarser transform and the same origin: no
grid is faked. It is read back as any stack (``DEGRADED_READING``), strip by strip, so memory is
bounded by a strip of the scene's width. A block mean is sharper than real optics (no point
spread function is modelled): figures under the protocol are an upper bound of what the network
sees in a real N x coarser image.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import rasterio
from affine import Affine
from rasterio.windows import Window

from ..bands import BAND_NAMES, SWIR_BANDS
from ..io import atomic_path, geotiff_profile
from ..rulebook import refuse
from .options import SceneOptions
from .scene import Scene, SceneReader

DEGRADE_FACTORS = (2, 3, 4, 5)  # what --degrade takes; 5 is the network's own factor
SWIR_BLOCK = 2  # SWIR_BANDS averaged again over 2 x 2 coarse cells (their 20 m, as a product has them)
STRIP_ROWS = 320  # rows of the scene read at a time (rounded down to whole 2N blocks)

# how a degraded scene is read back: its own float reflectance, none of the user's stack options
DEGRADED_READING = SceneOptions(scale=1.0)


@dataclass(frozen=True)
class DegradedScene:
    """Where a degraded scene was written and what of the original it covers."""

    path: Path
    factor: int
    crs: object
    transform: Affine  # the original's transform times Affine.scale(factor)
    width: int  # coarse cells
    height: int
    valid_fraction: float  # of the coarse cells


def check_factor(factor: int) -> None:
    """UsageError unless ``factor`` is one --degrade takes (2-5)."""
    if factor not in DEGRADE_FACTORS:
        raise refuse("S2N-DEGRADE-FACTOR", None, factor=factor, choices=", ".join(map(str, DEGRADE_FACTORS)))


def degraded_shape(scene: Scene, factor: int) -> tuple[int, int]:
    """(height, width) in coarse cells of ``scene`` degraded ``factor`` x: whole 2N blocks only;
    InputError naming --degrade when the scene holds none."""
    block = SWIR_BLOCK * factor
    rows, cols = scene.height // block, scene.width // block
    if rows == 0 or cols == 0:
        raise refuse("S2N-DEGRADE-SCENE-SMALL", scene.path, width=scene.width, height=scene.height, block=block, factor=factor)
    return rows * SWIR_BLOCK, cols * SWIR_BLOCK


def block_mean(values: np.ndarray, factor: int) -> np.ndarray:
    """(..., h, w) -> (..., h / factor, w / factor): the mean of each factor x factor block."""
    *lead, h, w = values.shape
    return values.reshape(*lead, h // factor, factor, w // factor, factor).mean(axis=(-3, -1))


def block_all(values: np.ndarray, factor: int) -> np.ndarray:
    """(h, w) bool -> (h / factor, w / factor): whether every cell of each block is true."""
    h, w = values.shape
    return values.reshape(h // factor, factor, w // factor, factor).all(axis=(1, 3))


def degrade_window(reflectance: np.ndarray, valid: np.ndarray, factor: int) -> np.ndarray:
    """Six bands of reflectance (6, h, w) and where they count (h, w), h and w whole 2N blocks,
    degraded: (6, h / N, w / N) float32, NaN in every band of an invalid coarse cell."""
    coarse = block_mean(reflectance.astype(np.float64), factor)
    ok = block_all(valid, factor)
    swir = [BAND_NAMES.index(b) for b in SWIR_BANDS]
    repeat = np.ones((SWIR_BLOCK, SWIR_BLOCK))
    coarse[swir] = np.kron(block_mean(coarse[swir], SWIR_BLOCK), repeat)
    ok &= np.kron(block_all(ok, SWIR_BLOCK), repeat).astype(bool)
    out = coarse.astype(np.float32)
    out[:, ~ok] = np.nan
    return out


def degrade_scene(scene: Scene, factor: int, out_path) -> DegradedScene:
    """Write ``scene`` degraded ``factor`` x (the module's rules) to ``out_path``, strip by strip."""
    check_factor(factor)
    height, width = degraded_shape(scene, factor)
    strip = max(SWIR_BLOCK * factor, STRIP_ROWS // (SWIR_BLOCK * factor) * SWIR_BLOCK * factor)
    transform = scene.transform @ Affine.scale(factor)
    profile = geotiff_profile((len(BAND_NAMES), height, width), "float32", scene.crs, transform, float("nan"))
    valid_cells = 0
    out_path = Path(out_path)
    with atomic_path(out_path) as tmp, SceneReader(scene) as reader, rasterio.open(tmp, "w", **profile) as dst:
        dst.descriptions = BAND_NAMES
        for row0 in range(0, height * factor, strip):
            rows = min(strip, height * factor - row0)
            raw, _, keep = reader.read(Window(0, row0, width * factor, rows))
            coarse = degrade_window(scene.reflectance(raw), keep, factor)
            valid_cells += int(np.isfinite(coarse[0]).sum())
            dst.write(coarse, window=Window(0, row0 // factor, width, rows // factor))
    return DegradedScene(out_path, factor, scene.crs, transform, width, height, valid_cells / (width * height))
