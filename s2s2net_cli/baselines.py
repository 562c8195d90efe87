"""Water-index baselines at 10 m, brought to the 2 m sub-grid.

``ndwi``  (green - NIR) / (green + NIR) > 0 and ``mndwi`` (green - SWIR1) / (green + SWIR1) > 0,
``ndwi-otsu`` and ``mndwi-otsu`` with an Otsu threshold per image, all copied to 2 m by
nearest; and ``mndwi-bilinear``, MNDWI interpolated bilinearly to the 2 m pixel centres and
thresholded at 0: the obvious sub-pixel baseline. Scenes are read in strips, so memory is
bounded. Band positions follow the model's order B02, B03, B04, B08, B11, B12.
"""

from __future__ import annotations

import numpy as np
import rasterio
from rasterio.windows import Window

from .bands import SceneReader
from .errors import InputError, describe
from .grid import SCALE_FACTOR
from .io import atomic_path, check_output
from .sources import SceneOptions, open_scene

GREEN, NIR, SWIR1 = 1, 3, 4
BASELINES = ("ndwi", "mndwi", "ndwi-otsu", "mndwi-otsu", "mndwi-bilinear")
STRIP = 256
_BINS = np.linspace(-1, 1, 2001)


def water_index(reflectance: np.ndarray, name: str) -> np.ndarray:
    """The normalised difference index named by ``name`` ('ndwi...' or 'mndwi...') of a
    (6, h, w) reflectance array; NaN where undefined."""
    other = NIR if name.startswith("ndwi") else SWIR1
    g, o = reflectance[GREEN].astype(np.float32), reflectance[other].astype(np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (g - o) / (g + o)


def otsu_threshold(values_hist: np.ndarray) -> float:
    from skimage.filters import threshold_otsu

    centers = (_BINS[:-1] + _BINS[1:]) / 2
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


class BaselinePredictor:
    """Writes a baseline's 2 m mask for a scene, like Predictor does for the network."""

    def __init__(self, name: str, scene_options: SceneOptions = SceneOptions(), overwrite: bool = False):
        if name not in BASELINES:
            raise InputError(describe(name, f"unknown baseline (choose from {', '.join(BASELINES)})"))
        self.name = name
        self.scene_options = scene_options
        self.overwrite = overwrite

    @property
    def model_name(self) -> str:
        return self.name

    def predict_scene(self, scene_path, output_path, on_tile=None):
        from .predict import mask_profile

        output_path = check_output(output_path, self.overwrite)
        scene = open_scene(scene_path, self.scene_options)
        f = SCALE_FACTOR
        threshold = self._threshold(scene) if self.name.endswith("-otsu") else 0.0
        profile = mask_profile(scene)
        with atomic_path(output_path) as tmp, SceneReader(scene) as reader, rasterio.open(tmp, "w", **profile) as dst:
            for row0 in range(0, scene.height, STRIP):
                h = min(STRIP, scene.height - row0)
                halo = 1 if self.name == "mndwi-bilinear" else 0
                top, bottom = max(0, row0 - halo), min(scene.height, row0 + h + halo)
                raw, _, valid = reader.read(Window(0, top, scene.width, bottom - top))
                index = water_index(scene.reflectance(raw), self.name)
                valid &= np.isfinite(index)
                if self.name == "mndwi-bilinear":
                    fine = bilinear_to_fine(index, valid)[f * (row0 - top): f * (row0 - top + h)]
                    water = fine > threshold
                else:
                    water = np.repeat(np.repeat(index > threshold, f, 0), f, 1)
                core_valid = np.repeat(np.repeat(valid[row0 - top: row0 - top + h], f, 0), f, 1)
                out = np.where(core_valid, water, 255).astype(np.uint8)
                dst.write(out, 1, window=Window(0, row0 * f, out.shape[1], out.shape[0]))
            dst.set_band_description(1, "water (1), land (0)")
            dst.update_tags(model=self.name, threshold=f"{threshold:.4f}", source_scene=scene.name)
        return output_path

    def _threshold(self, scene) -> float:
        hist = np.zeros(len(_BINS) - 1, dtype=np.int64)
        with SceneReader(scene) as reader:
            for row0 in range(0, scene.height, STRIP):
                raw, _, keep = reader.read(Window(0, row0, scene.width, min(STRIP, scene.height - row0)))
                index = water_index(scene.reflectance(raw), self.name)
                ok = keep & np.isfinite(index)
                hist += np.histogram(np.clip(index[ok], -1, 1), bins=_BINS)[0]
        return otsu_threshold(hist)
