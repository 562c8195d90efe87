"""Water-index baselines at 10 m, brought to the 2 m sub-grid, as forwards of the tile stream.

``ndwi``  (green - NIR) / (green + NIR) > 0 and ``mndwi`` (green - SWIR1) / (green + SWIR1) > 0,
``ndwi-otsu`` and ``mndwi-otsu`` with an Otsu threshold per scene, all copied to 2 m by
nearest; and ``mndwi-bilinear``, MNDWI interpolated bilinearly to the 2 m pixel centres and
thresholded at 0: the obvious sub-pixel baseline. They run through the same stream and writer
as the network, so their masks have the same grid, tags and options. Pixels where the index is
undefined are nodata.
"""

from __future__ import annotations

import numpy as np
from rasterio.windows import Window

from ..grid import SCALE_FACTOR, to_fine
from ..indices import bilinear_to_fine, index_histogram, otsu_threshold, water_index
from ..rulebook import refuse
from ..sources.scene import Scene, SceneReader
from .options import BASELINES
from .stream import Forward

STRIP = 256  # rows read at a time for a scene's Otsu threshold


class IndexBaseline(Forward):
    """A water index thresholded at ``index_threshold`` (Otsu's of each scene for '-otsu').
    Its tiles are the index and where it may be interpolated; its output is 0 or 1."""

    def __init__(self, name: str, index_threshold: float = 0.0):
        if name not in BASELINES:
            raise refuse("S2N-BASELINE-UNKNOWN", name, choices=', '.join(BASELINES))
        self.name = name
        self.index_threshold = index_threshold
        self.threshold_per_scene = name.endswith("-otsu")

    def tags(self) -> dict:
        return {"model": self.name, "threshold": f"{self.index_threshold:.4f}"}

    def for_scene(self, scene: Scene) -> "IndexBaseline":
        if not self.name.endswith("-otsu"):
            return self
        return IndexBaseline(self.name, scene_otsu_threshold(scene, self.name))

    def read_tile(self, reader: SceneReader, window: Window):
        raw, valid, keep = reader.read(window)
        index = water_index(reader.scene.reflectance(raw), self.name)
        counts = keep & np.isfinite(index)
        rows = np.arange(window.row_off, window.row_off + window.height)
        cols = np.arange(window.col_off, window.col_off + window.width)
        inside = ((rows >= 0) & (rows < reader.scene.height))[:, None] & ((cols >= 0) & (cols < reader.scene.width))
        return np.stack([index, counts & inside]).astype(np.float32), counts, valid & ~keep

    def __call__(self, batch: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
        top, left, height, width = box
        f, t = SCALE_FACTOR, self.index_threshold
        if not self.name.endswith("-bilinear"):
            return to_fine(batch[:, 0, top: top + height, left: left + width] > t).astype(np.float32)
        # the interpolation reaches one 10 m pixel around the box; outside the scene counts as no data
        r0, c0 = max(top - 1, 0), max(left - 1, 0)
        r1, c1 = min(top + height + 1, batch.shape[2]), min(left + width + 1, batch.shape[3])
        out = []
        for index, ok in batch[:, :, r0:r1, c0:c1]:
            fine = bilinear_to_fine(index, ok > 0)
            out.append(fine[f * (top - r0): f * (top - r0 + height), f * (left - c0): f * (left - c0 + width)] > t)
        return np.stack(out).astype(np.float32)


def scene_otsu_threshold(scene: Scene, name: str) -> float:
    """Otsu's threshold of the index ``name`` over the pixels of ``scene`` that count."""
    hist = np.zeros(len(index_histogram(np.zeros(0))), dtype=np.int64)
    with SceneReader(scene) as reader:
        for row0 in range(0, scene.height, STRIP):
            raw, _, keep = reader.read(Window(0, row0, scene.width, min(STRIP, scene.height - row0)))
            hist += index_histogram(water_index(scene.reflectance(raw), name)[keep])
    return otsu_threshold(hist)
