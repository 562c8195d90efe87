"""One scene's rows of tiles shared among the ranks of a launcher (deepspeed, torchrun).

Rank k runs a contiguous share of tile rows (``TileGrid.rank_shares``). The 2 m rows that only
its own tiles reach are final: it writes them (uint8) to its part file. The ``2 * blend`` rows at
each border between two shares (the seams) are reached by tiles of both: each rank keeps its
share of their blend (float32 ``.npy``). When every rank is done, rank 0 stitches the parts
and the summed seams into OUTPUT, written atomically like a single-process prediction, and
removes the parts. The result is the same mask one process writes.

The ranks talk through the world's gloo process group; the parts lie in a hidden folder
beside OUTPUT.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable

import numpy as np
import rasterio
import torch.distributed as dist
from affine import Affine
from rasterio.windows import Window

from ..errors import S2S2NetError, first_line
from ..grid import SCALE_FACTOR
from ..rulebook import refuse
from ..sources.scene import SceneReader
from ..world import World
from .predictor import Predictor, PreparedScene, SceneResult
from .stream import run_rows
from .writer import PredictionStats, mask_profile

STITCH_ROWS = 512  # 2 m rows copied at a time


def gather_on_rank0(lists: list[list], world: World) -> list[list]:
    """Each of ``lists`` of every rank, concatenated in rank order (all ranks take part)."""
    gathered = [None] * world.size
    dist.all_gather_object(gathered, lists)
    return [[item for rank_lists in gathered for item in rank_lists[k]] for k in range(len(lists))]


def predict_scene_shared(predictor: Predictor, scene_path, output_path, world: World,
                         on_tile: Callable[[int, int], None] | None = None) -> SceneResult | None:
    """Predict one scene with every rank of the world's process group; rank 0 writes OUTPUT and
    returns the result, the other ranks return None. Bad input raises on every rank that meets
    it; the others stop too (rank 0 naming the failed rank's problem)."""
    job = _on_every_rank(lambda: predictor.prepare(scene_path, output_path), world)
    if job is None:
        return None
    if not job.grid.can_share(world.size):  # fewer rows of tiles than ranks: rank 0 runs it all
        result = _on_every_rank(lambda: predictor.predict_scene(scene_path, output_path, on_tile) if world.leads else 0,
                                world)
        return result if world.leads else None
    shares = job.grid.rank_shares(world.size)
    parts = job.output.parent / f".{job.output.name}.parts"
    if world.leads:
        shutil.rmtree(parts, ignore_errors=True)
        parts.mkdir(parents=True)
    dist.barrier()
    try:
        share_stats = _on_every_rank(lambda: predict_share(job, parts, world.rank, shares, on_tile), world, gather=True)
        if share_stats is None or not world.leads:
            return None
        stats = PredictionStats()
        for s in share_stats:
            stats += s
        job.writer.write(job.scene, job.output, lambda dst: stitch(job, parts, shares, dst, stats))
        return predictor.result(job, stats)
    finally:
        if world.leads:
            shutil.rmtree(parts, ignore_errors=True)


def predict_share(job: PreparedScene, parts: Path, rank: int, shares, on_tile) -> PredictionStats:
    """Run this rank's tile rows: final rows to ``rank<k>.tif``, seam shares to ``.npy``."""
    first, last = shares[rank]
    f, grid, scene = SCALE_FACTOR, job.grid, job.scene
    top_seam = grid.seam(first) if first > 0 else (0, 0)
    part_top, part_bottom = grid.share_rows(first, last)
    stats = PredictionStats()
    top_share = np.zeros((top_seam[1] - top_seam[0], scene.width * f), dtype=np.float32)
    profile = _part_profile(scene, part_top, part_bottom)
    with SceneReader(scene) as reader, rasterio.open(parts / f"rank{rank}.tif", "w", **profile) as part:
        def emit(row0: int, col0: int, prob: np.ndarray, valid_10m: np.ndarray) -> None:
            n_seam = int(np.clip(top_seam[1] - row0, 0, len(prob)))
            if n_seam:
                top_share[row0 - top_seam[0]: row0 - top_seam[0] + n_seam, col0: col0 + prob.shape[1]] = prob[:n_seam]
            if n_seam < len(prob):
                row = row0 + n_seam
                job.writer.write_block(part, prob[n_seam:], row, valid_10m[row // f - row0 // f:], stats, col0,
                                       dst_row0=row - part_top)

        bottom_share = run_rows(grid, reader, job.forward, (first, last), emit, stats, on_tile)
    if first > 0:
        np.save(parts / f"rank{rank}.top.npy", top_share)
    if last < grid.n_rows:
        np.save(parts / f"rank{rank}.bottom.npy", bottom_share)
    return stats


def _part_profile(scene, top: int, bottom: int) -> dict:
    profile = mask_profile(scene)
    profile.update(height=max(bottom - top, 1), transform=profile["transform"] @ Affine.translation(0, top),
                   zlevel=1)
    return profile


def stitch(job: PreparedScene, parts: Path, shares, dst, stats: PredictionStats) -> PredictionStats:
    """Write each share's part, and the two halves of each seam summed, into ``dst``."""
    f, grid = SCALE_FACTOR, job.grid
    W2 = job.scene.width * f
    with SceneReader(job.scene) as reader:
        for k, (first, last) in enumerate(shares):
            if first > 0:
                above = np.load(parts / f"rank{k - 1}.bottom.npy", mmap_mode="r")
                below = np.load(parts / f"rank{k}.top.npy", mmap_mode="r")
                seam0 = grid.seam(first)[0]
                for r in range(0, len(below), STITCH_ROWS):
                    prob = np.asarray(above[r: r + STITCH_ROWS]) + np.asarray(below[r: r + STITCH_ROWS])
                    row0 = seam0 + r
                    valid = _kept_rows(reader, row0 // f, (row0 + len(prob) - 1) // f + 1)
                    job.writer.write_block(dst, prob, row0, valid, stats)
            top, bottom = grid.share_rows(first, last)
            if bottom > top:
                with rasterio.open(parts / f"rank{k}.tif") as part:
                    for r in range(0, bottom - top, STITCH_ROWS):
                        h = min(STITCH_ROWS, bottom - top - r)
                        dst.write(part.read(1, window=Window(0, r, W2, h)), 1, window=Window(0, top + r, W2, h))
    return stats


def _kept_rows(reader: SceneReader, row0: int, row1: int) -> np.ndarray:
    """Where the output counts (10 m, rows x width) in the scene rows [row0, row1); empty when row1 <= row0."""
    if row1 <= row0:
        return np.zeros((0, reader.scene.width), dtype=bool)
    return reader.read(Window(0, row0, reader.scene.width, row1 - row0))[2]


def _on_every_rank(fn: Callable, world: World, gather: bool = False):
    """Run ``fn`` on every rank and agree on the outcome: a rank whose ``fn`` raised re-raises
    its own error; if another rank failed, rank 0 raises that rank's error and the others
    return None. With ``gather``, every rank gets the list of all ranks' values."""
    try:
        value, error = fn(), None
    except S2S2NetError as exc:
        value, error = None, exc
    except (OSError, RuntimeError, MemoryError) as exc:  # disk, GDAL, CUDA out of memory: the others must hear
        name = type(exc).__name__
        value, error = None, refuse("S2N-SYSTEM-ERROR", None, kind=name, error=first_line(exc) if str(exc).strip() else "no message")
        error.__cause__ = exc
    outcomes = [None] * world.size
    dist.all_gather_object(outcomes, ("error", (str(error), getattr(error, "finding", None))) if error
                           else ("ok", value if gather else None))
    if error is not None:
        raise error
    failed = [(k, message) for k, (kind, message) in enumerate(outcomes) if kind == "error"]
    if failed:
        if world.leads:
            k, (message, found) = failed[0]
            error = S2S2NetError(f"{message} (on rank {k})")
            error.finding = found
            raise error
        return None
    return [v for _, v in outcomes] if gather else value
