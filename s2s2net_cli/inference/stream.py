"""The tile stream: a scene's tiles run through a forward and blended on the 2 m grid.

Tiles go to the forward in batches, one row of tiles at a time (where they lie is
``tiling.TileGrid``'s arithmetic), each batch asking only for the part of its output box
that lies inside the scene (``TileGrid.box_of``). Neighbouring outputs are blended over their
``2 * blend`` shared pixels with weights that sum to one, so a constant scene gives a constant
mask across tile borders. Each block of the output goes to ``emit`` as soon as no later tile
can touch it; only the seams between tiles are held back, so memory grows with neither the
scene's area nor, beyond a seam's rows, its width. The stream knows no weights and no files: a
``Forward`` reads its tiles and maps them to probabilities, ``emit`` writes them.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable

import numpy as np
from rasterio.windows import Window

from ..bands import BandSpec
from ..grid import SCALE_FACTOR
from ..sources.scene import SceneReader, read_normalised
from ..tiling import TileGrid
from .writer import PredictionStats


class Forward:
    """What the stream runs: it reads a tile and maps a batch of tiles (n, bands, h, w) to the
    2 m water probability (n, 5 height, 5 width) inside ``box`` = (top, left, height, width);
    with ``maps`` above 1, to that many probabilities of each pixel (n, maps, 5 height, 5 width),
    each blended as one would be alone."""

    name = "forward"
    maps = 1
    threshold = 0.5  # the probability at and above which a 2 m pixel is water
    threshold_per_scene = False  # drawn from each scene (for_scene), not one for every scene
    spec = BandSpec()
    batch_size = 1
    threaded = False  # read and write beside the forward in threads (beside a GPU)

    def read_tile(self, reader: SceneReader, window: Window) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The forward's input for ``window``, where its output counts and where data is left out."""
        return read_normalised(reader, window, self.spec)

    def for_scene(self, scene) -> "Forward":
        """The forward for one scene (a baseline may draw its threshold from the scene)."""
        return self

    def tags(self) -> dict:
        """What the output's tags say of the forward."""
        return {"model": self.name, "threshold": str(self.threshold)}

    precision = "fp32"
    fused_mish = False  # whether the network's Mish ran compiled into one pass
    head = "full"  # how the network's head ran: "full", or "gated" by its water gate

    def gpu_peak_mb(self) -> float | None:
        return None

    def __call__(self, batch: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
        raise NotImplementedError


def run_rows(grid: TileGrid, reader: SceneReader, forward: Forward, rows: tuple[int, int], emit: Callable,
             stats: PredictionStats, on_tile: Callable[[int, int], None] | None = None) -> np.ndarray:
    """Run the tile rows ``rows`` = [first, last) and blend them on the 2 m grid.

    Each block of the output that no later tile of the range can still touch goes to
    ``emit(row0, col0, prob, valid_10m)`` as soon as its tile has run (``valid_10m``: where
    the output counts, 10 m, covering the block). Beside a GPU (``forward.threaded``), emits
    run in a background thread, in order, while the forward works on the next tile, and the
    next tiles are read the same way. Blocks partition the range's rows; only the seams between
    neighbouring tiles are held back (float32). The seam rows at the top of a range that does
    not start at the top hold only this range's share of the blend, like the seam rows below
    its last tile row: those are returned, (rows, 5 * width) float32.
    """
    first, last = rows
    batches = [(i, range(j0, min(j0 + forward.batch_size, grid.n_cols)))
               for i in range(first, last) for j0 in range(0, grid.n_cols, forward.batch_size)]
    blender = _RowBlender(grid, first, () if forward.maps == 1 else (forward.maps,))
    total, done = (last - first) * grid.n_cols, 0

    def read(i, cols):
        return [forward.read_tile(reader, grid.read_window(i, j)) for j in cols]

    # Beside a GPU, reading and writing run in threads. On the CPU the network already keeps
    # every core busy: threads gained nothing measurable there and raised peak memory.
    executor = ThreadPoolExecutor if forward.threaded else InlineExecutor
    with executor(1, thread_name_prefix="s2s2net-read") as reads, \
            executor(1, thread_name_prefix="s2s2net-write") as writes:
        next_tiles, writing = reads.submit(read, *batches[0]), deque()
        for n, (i, cols) in enumerate(batches):
            if cols.start == 0:
                blender.start_row(i)
            tiles = next_tiles.result()
            if n + 1 < len(batches):
                next_tiles = reads.submit(read, *batches[n + 1])
            if n % TRIM_EVERY == 0:
                release_free_memory()
            box = grid.box_of(i, cols)
            probs = forward(np.stack([x for x, _, _ in tiles]), box)
            for k, j in enumerate(cols):
                block, keep, r0, c0 = blender.add(i, j, probs[k], tiles[k][1], box)
                while len(writing) >= 2:
                    writing.popleft().result()
                if block.size:
                    writing.append(writes.submit(emit, r0, c0, block, keep))
                stats.masked += _masked_pixels(grid, i, j, tiles[k][2])
                stats.tiles += 1
                done += 1
                if on_tile:
                    on_tile(done, total)
            del probs, block, tiles  # not alive while the forward runs the next tiles
        while writing:
            writing.popleft().result()
    return blender.below


class _RowBlender:
    """The blend of one tile row after another on the 2 m grid: which part of each tile's
    output is finished, and the seams held back for the tiles still to come. Each output has
    ``lead`` axes before its rows and columns (none: one probability a pixel)."""

    def __init__(self, grid: TileGrid, first: int, lead: tuple[int, ...] = ()):
        self.grid, self.first, self.lead = grid, first, lead
        # the seam below the previous tile row: its rows, the part the tiles above added
        self.below = np.zeros(lead + (0, grid.width * SCALE_FACTOR), dtype=np.float32)

    def start_row(self, i: int) -> None:
        """Begin tile row ``i``: its output rows [r0, r1), of which [r0, final) are finished after it."""
        f, grid = SCALE_FACTOR, self.grid
        self.top, bottom = grid.output_rows(i)
        self.r0, self.r1 = max(self.top, 0), min(bottom, grid.height * f)
        self.final = grid.final_bottom(i)
        self.above = self.below
        self.below = np.zeros(self.lead + (self.r1 - self.final, grid.width * f), dtype=np.float32)
        assert i == self.first or self.above.shape[-2] == min(2 * f * grid.blend, grid.height * f - self.r0)
        self.right = np.zeros(self.lead + (self.r1 - self.r0, 0), dtype=np.float32)  # seam right of the previous tile

    def add(self, i: int, j: int, prob: np.ndarray, keep_tile: np.ndarray, box: tuple[int, int, int, int]):
        """Blend tile (i, j)'s output ``prob`` in (that of ``box``: part of the grid's output box,
        ``TileGrid.box_of``); the finished block, where it counts (10 m), and its corner (row0,
        col0) on the 2 m grid."""
        f, grid, right = SCALE_FACTOR, self.grid, self.right
        r0, r1, top, final = self.r0, self.r1, self.top, self.final
        left_edge, right_edge = grid.output_cols(j)
        c0, c1 = max(left_edge, 0), min(right_edge, grid.width * f)
        dy, dx = (f * (b - a) for a, b in zip(grid.output_box[:2], box[:2]))  # where prob starts in the box
        acc = prob[..., r0 - top - dy: r1 - top - dy, c0 - left_edge - dx: c1 - left_edge - dx]
        _weigh(acc, grid.row_weights[i][r0 - top: r1 - top], axis=0)
        _weigh(acc, grid.col_weights[j][c0 - left_edge: c1 - left_edge], axis=1)
        seam = right.shape[-1]
        acc[..., :, :seam] += right
        above = self.above.shape[-2]
        acc[..., :above, seam:] += self.above[..., :, c0 + seam: c1]  # the rest added before
        done_right = grid.final_right(j)  # columns [c0, done_right) are done after this tile
        block = acc[..., : final - r0, : done_right - c0]  # a view: the writer reads it in pieces, nothing writes it again
        self.below[..., :, c0: done_right] = acc[..., final - r0:, : done_right - c0]
        self.right = acc[..., :, done_right - c0:].copy()
        window = grid.read_window(i, j)
        wr, wc = window.row_off, window.col_off
        keep = keep_tile[r0 // f - wr: final // f - wr, c0 // f - wc: done_right // f - wc]
        return block, keep, r0, c0


def _weigh(acc: np.ndarray, weights: np.ndarray, axis: int) -> None:
    """``acc`` times ``weights`` along its rows (``axis`` 0) or columns (1), the last two axes,
    in place, over the runs of weights that are not 1 (the blend's ramps at a tile's edges: the
    rest of the tile is left as it is, not multiplied)."""
    ramp = np.flatnonzero(weights != 1)
    if not ramp.size:
        return
    breaks = np.flatnonzero(np.diff(ramp) > 1)
    for a, b in zip(ramp[np.r_[0, breaks + 1]], ramp[np.r_[breaks, -1]] + 1):
        if axis == 0:
            acc[..., a:b, :] *= weights[a:b, None]
        else:
            acc[..., a:b] *= weights[a:b]


def _masked_pixels(grid: TileGrid, i: int, j: int, left_out: np.ndarray) -> int:
    """2 m pixels of tile (i, j)'s core whose data is left out (clouds, --mask, outside the AOI)."""
    c, f = grid.context, SCALE_FACTOR
    core_r, core_c = grid.core_rows(i), grid.core_cols(j)
    return f * f * int(left_out[c: c + core_r[1] - core_r[0], c: c + core_c[1] - core_c[0]].sum())


class InlineExecutor:
    """A ThreadPoolExecutor's ``submit`` that runs the call at once, in this thread."""

    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def submit(self, fn, *args) -> Future:
        future = Future()
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # handed over like a thread's, raised by result()
            future.set_exception(exc)
        return future


# Forwards between hand-backs of the C heap's free pages (release_free_memory). Each hand-back
# makes the next forward fault its pages in afresh: every fourth tile in place of every tile,
# predict took 0.89 of the time on a 2048 px scene and 0.95 on a full tile (418 s against 441 s,
# int8 on two AVX2 cores), at a peak of 1.46 GB on the tile against 1.40.
TRIM_EVERY = 4


def release_free_memory() -> None:
    """Hand the C heap's free pages back to the system (glibc's malloc_trim). The network's
    large temporaries of one tile otherwise leave holes that the next tile's do not fit,
    and resident memory creeps up tile by tile (measured: +150 MB of peak over six 640 px tiles;
    flat with this). Nothing where there is no glibc."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _glibc():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


_LIBC = _glibc()
