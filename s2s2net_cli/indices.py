"""Water indices of reflectance: NDWI, MNDWI, an Otsu threshold, and bilinear interpolation
of a 10 m field to the centres of its 2 m sub-pixels. Pure arithmetic on arrays in the
network's band order B02, B03, B04, B08, B11, B12.
"""

from __future__ import annotations

import numpy as np
from skimage.filters import threshold_otsu

from .grid import SCALE_FACTOR

GREEN, NIR, SWIR1 = 1, 3, 4
HISTOGRAM_BINS = np.linspace(-1, 1, 2001)  # index values binned for an Otsu threshold


def water_index(reflectance: np.ndarray, name: str) -> np.ndarray:
    """The normalised difference index named by ``name`` ('ndwi...' or 'mndwi...') of a
    (6, h, w) reflectance array; NaN where undefined."""
    other = NIR if name.startswith("ndwi") else SWIR1
    g, o = reflectance[GREEN].astype(np.float32), reflectance[other].astype(np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (g - o) / (g + o)


def index_histogram(index: np.ndarray) -> np.ndarray:
    """Counts of the finite values of ``index`` (clipped to -1..1) in HISTOGRAM_BINS."""
    return np.histogram(np.clip(index[np.isfinite(index)], -1, 1), bins=HISTOGRAM_BINS)[0]


def otsu_threshold(values_hist: np.ndarray) -> float:
    """Otsu's threshold of a histogram over HISTOGRAM_BINS; 0 when it has fewer than two filled bins."""
    centers = (HISTOGRAM_BINS[:-1] + HISTOGRAM_BINS[1:]) / 2
    if values_hist.sum() == 0 or np.count_nonzero(values_hist) < 2:
        return 0.0
    return float(threshold_otsu(hist=(values_hist, centers)))


def bilinear_to_fine(values: np.ndarray, valid: np.ndarray, factor: int = SCALE_FACTOR) -> np.ndarray:
    """Interpolate a 10 m field bilinearly to the centres of its 2 m sub-pixels, using valid
    pixels only (normalised interpolation); edges are held constant."""
    v = np.where(valid, values, 0).astype(np.float64)
    w = valid.astype(np.float64)
    for axis in (0, 1):
        n = v.shape[axis]
        u = (np.arange(n * factor) + 0.5) / factor - 0.5
        i0 = np.clip(np.floor(u).astype(int), 0, n - 1)
        i1 = np.clip(i0 + 1, 0, n - 1)
        t = np.clip(u - np.floor(u), 0, 1)
        t = np.where(u < 0, 0, np.where(u > n - 1, 0, t))
        shape = [1, 1]
        shape[axis] = -1
        t = t.reshape(shape)
        v = np.take(v, i0, axis=axis) * (1 - t) + np.take(v, i1, axis=axis) * t
        w = np.take(w, i0, axis=axis) * (1 - t) + np.take(w, i1, axis=axis) * t
    with np.errstate(invalid="ignore", divide="ignore"):
        return (v / w).astype(np.float32)

