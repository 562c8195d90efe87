"""Predicting one scene: a whole scene to a georeferenced 2 m mask, the facade of this wing.

The scene is cut into tiles of ``tile_size`` 10 m pixels, each read with ``overlap`` pixels of
context on every side (rasterio windows, reflected past the scene edges). The encoder and
decoder see the whole read window; the upsampling head, nine tenths of the work, runs only on
the tile plus ``blend`` pixels (``S2S2Net.forward_window``), so context costs little. The
tiles stream through the forward (stream.py) into the mask writer (writer.py).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from ..grid import SCALE_FACTOR
from ..io import check_output
from ..rulebook import Finding
from ..sources.checks import scene_warnings, small_scene_warning
from ..sources.open import open_scene
from ..sources.options import SceneOptions
from ..sources.scene import Scene, SceneReader
from ..tiling import TileGrid, scene_tile
from ..world import World
from .options import DEFAULT_TILE_SIZE, PredictOptions
from .stream import Forward, run_rows
from .writer import MaskWriter, PredictionStats, made_with, reading_tags

log = logging.getLogger("s2s2net")

MASKED_BY = ("clouds", "left_out", "area_of_interest")  # what may leave a scene's data out of its mask


def masked_by(scene: Scene) -> tuple[str, ...]:
    """What leaves data of ``scene`` out of its mask, of MASKED_BY: its clouds (a product's or
    a stack's SCL classes, unless kept), pixels given to leave out, an area of interest."""
    said = (scene.cloud_band is not None, bool(scene.leave_out), bool(scene.aoi_name))
    return tuple(name for name, given in zip(MASKED_BY, said) if given)


@dataclass
class SceneResult:
    scene: str
    output: str
    seconds: float
    water_km2: float
    nodata_fraction: float
    tiles: int
    warnings: list[Finding] = field(default_factory=list)
    masked_fraction: float = 0.0  # of the output's pixels: data left out (clouds, --mask, outside --aoi)
    masked_by: tuple[str, ...] = ()  # what leaves data out of this scene: of MASKED_BY
    gpu_peak_mb: float | None = None  # the most GPU memory torch held at once (GPUs only)
    precision: str = "fp32"  # the arithmetic the network ran in
    fused_mish: bool = False  # whether its Mish ran compiled (large scenes on a CPU)
    head: str = "full"  # "gated": its head skipped where the weights' water gate ruled water out
    tile_size: int = 0  # the tile plan: tiles of this many 10 m pixels a side,
    context: int = 0  # each read with this many around it
    beside: dict[str, str] = field(default_factory=dict)  # what was written beside the mask: vector, rivers

    def to_dict(self) -> dict:
        out = {"scene": self.scene, "output": self.output, "seconds": round(self.seconds, 3),
               "water_km2": self.water_km2, "nodata_fraction": self.nodata_fraction,
               "masked_fraction": self.masked_fraction, "masked_by": list(self.masked_by), "tiles": self.tiles,
               "tile_size": self.tile_size,
               "context": self.context,
               "warnings": [w.to_dict() for w in self.warnings],
               "precision": self.precision, "fused_mish": self.fused_mish, "head": self.head}
        if self.gpu_peak_mb is not None:
            out["gpu_peak_mb"] = round(self.gpu_peak_mb, 1)
        return out | self.beside


@dataclass
class PreparedScene:
    """One scene checked and ready to run: where its tiles lie, its forward and writer."""

    scene: Scene
    output: Path
    warnings: list[Finding]
    grid: TileGrid
    forward: Forward
    writer: MaskWriter
    start: float


class Predictor:
    """A model (a weights file, or any Forward: the index baselines, a test's stand-in) and
    the settings to run it over scenes."""

    def __init__(self, model, options: PredictOptions | None = None, world: World = World()):
        self.options = opts = options or PredictOptions()
        if not isinstance(model, Forward):
            from .runtime import ModelRuntime  # torch and the network: 6 s to import on an AVX2 CPU, not for baselines

            # a probability map is exact everywhere: the gate's land is a mask's, not a probability
            model = ModelRuntime(model, opts.device, opts.precision, opts.flips, opts.threshold, opts.batch_size,
                                 local_rank=world.local_rank, full_head=opts.full_head or opts.probability)
        self.forward = model

    @property
    def model_name(self) -> str:
        return self.forward.name

    def reading(self, scene: SceneOptions) -> "Predictor":
        """The same model (loaded once) with the same settings, reading scenes with ``scene``."""
        return Predictor(self.forward, replace(self.options, scene=scene))

    def made_with(self, scene_path=None) -> dict:
        """The tags that say how its masks are made (model, its digest, threshold, prior, kind of
        values; with ``scene_path``, opened, how that scene is read: bands, scale, offset, clouds,
        pixels left out, area of interest): what --skip-existing compares with an existing mask's."""
        tags = made_with(self.forward.tags(), self.options.probability, self.forward.threshold_per_scene)
        if scene_path is not None:
            tags.update(reading_tags(open_scene(scene_path, self.options.scene, len(self.forward.spec.names))))
        return tags

    def prepare(self, scene_path, output_path) -> PreparedScene:
        """Check the output path and the scene; the scene ready to run, with its warnings
        (band order, scale, offset)."""
        start, opts = time.perf_counter(), self.options
        check_output(output_path, opts.overwrite, inputs=(scene_path, opts.scene.leave_out, opts.scene.aoi))
        scene = open_scene(scene_path, opts.scene, len(self.forward.spec.names))
        warnings = scene_warnings(scene, self.forward.spec) + [w for w in [small_scene_warning(scene)] if w]
        forward = self.forward.for_scene(scene)
        writer = MaskWriter(forward.threshold, opts.probability, forward.tags(), opts.creation_options, opts.cog,
                            opts.overwrite)
        tile = scene_tile(scene.height, scene.width, opts.tile_size, DEFAULT_TILE_SIZE)
        # context past a small scene's edges is only its own reflection: no more of it than a tile
        context = opts.overlap if tile == opts.tile_size else min(opts.overlap, tile)
        grid = TileGrid.for_scene(scene.height, scene.width, tile, context, opts.blend)
        log.info(f"{scene.name}: {grid.n_rows} x {grid.n_cols} tiles of {tile} px, {context} px of context")
        return PreparedScene(scene, Path(output_path), warnings, grid, forward, writer, start)

    def predict_scene(self, scene_path, output_path, on_tile: Callable[[int, int], None] | None = None) -> SceneResult:
        """Predict ``scene_path`` into ``output_path`` (GeoTIFF, uint8), atomically."""
        job = self.prepare(scene_path, output_path)

        def fill(dst) -> PredictionStats:
            stats = PredictionStats()
            with SceneReader(job.scene) as reader:
                run_rows(job.grid, reader, job.forward, (0, job.grid.n_rows),
                         lambda row0, col0, prob, valid: job.writer.write_block(dst, prob, row0, valid, stats, col0),
                         stats, on_tile)
            return stats

        return self.result(job, job.writer.write(job.scene, job.output, fill))

    @staticmethod
    def result(job: PreparedScene, stats: PredictionStats) -> SceneResult:
        """What the prediction of ``job`` made, from its counters."""
        total = job.scene.width * job.scene.height * SCALE_FACTOR ** 2
        return SceneResult(str(job.scene.path), str(job.output), time.perf_counter() - job.start,
                           water_km2=round(stats.water_m2 / 1e6, 6),  # to the square metre
                           nodata_fraction=stats.nodata / total, tiles=stats.tiles,
                           warnings=job.warnings, masked_fraction=stats.masked / total,
                           masked_by=masked_by(job.scene),
                           gpu_peak_mb=job.forward.gpu_peak_mb(), precision=job.forward.precision,
                           fused_mish=job.forward.fused_mish, head=job.forward.head, tile_size=job.grid.tile,
                           context=job.grid.context)
