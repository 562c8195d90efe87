"""Where the tiles of a scene lie and where their outputs meet: the arithmetic of tiled prediction.

A scene of ``height`` x ``width`` 10 m pixels is cut into tiles of ``tile`` pixels, their
*cores*. The network reads each core with ``context`` pixels around it (reflected past the
scene's edges) and returns the 2 m output of the core widened by ``blend`` pixels on each
side, its *output box*. Neighbouring output boxes overlap by ``2 * blend`` 10 m pixels, where
they are blended with smooth weights that sum to one at every 2 m pixel; outside those seams
each 2 m pixel comes from one tile. Context costs only the encoder and decoder; the blend
costs the upsampling head too, so it is kept small.

Tiles run one row of tiles at a time, top to bottom. After tile row ``i`` the 2 m rows above
``final_bottom(i)`` are finished. Ranks sharing one scene take contiguous shares of tile rows
(``rank_shares``); two neighbouring shares meet in a seam of ``2 * blend`` 10 m rows that both reach.

Pure arithmetic: no I/O, no torch. Rows and columns in 10 m pixels unless a name says 2 m.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from rasterio.windows import Window

from .grid import SCALE_FACTOR


def planned_tile(height: int, width: int, largest: int, multiple: int = 32) -> int:
    """The tile side for a scene of ``height`` x ``width`` when none is given: as few tiles as
    tiles of ``largest`` need, each as small as covers the scene (the smallest multiple of
    ``multiple``, the network's stride, that does). A scene smaller than one tile gets one tile
    of about its own size, not a ``largest`` one read mostly as reflections of itself (a 64 px
    scene cost a 640 px window); a 600 px one gets 2 x 2 tiles of 320, not of 512."""
    rows, cols = math.ceil(height / largest), math.ceil(width / largest)
    side = max(math.ceil(height / rows), math.ceil(width / cols))
    return min(largest, math.ceil(side / multiple) * multiple)


def scene_tile(height: int, width: int, given: int | None, largest: int, multiple: int = 32) -> int:
    """The tile side a scene of ``height`` x ``width`` is run in: ``given`` (--tile-size), but no
    larger than one tile that covers the whole scene (the smallest multiple of ``multiple`` that
    does), since past the scene a tile reads only the scene's reflection: --tile-size 100000 on a
    512 px scene padded its one window to 100128 px a side, 112 GiB. Planned (planned_tile, tiles
    up to ``largest``) when none is given."""
    if given is None:
        return planned_tile(height, width, largest, multiple)
    return min(given, math.ceil(max(height, width) / multiple) * multiple)


@dataclass(frozen=True)
class TileGrid:
    height: int
    width: int
    tile: int
    context: int
    blend: int

    @classmethod
    def for_scene(cls, height: int, width: int, tile: int, context: int, blend: int) -> "TileGrid":
        """The grid with ``blend`` held within the context and within half a tile."""
        return cls(height, width, tile, context, max(0, min(blend, context, tile // 2)))

    def __post_init__(self):
        if self.height < 1 or self.width < 1 or self.tile < 1 or self.context < 0:
            raise ValueError("scene and tile sizes must be positive and the context not negative")
        if not 0 <= self.blend <= min(self.context, self.tile // 2):
            raise ValueError(f"blend {self.blend} must lie in 0-{min(self.context, self.tile // 2)}")

    @property
    def n_rows(self) -> int:
        return math.ceil(self.height / self.tile)

    @property
    def n_cols(self) -> int:
        return math.ceil(self.width / self.tile)

    @property
    def read_size(self) -> int:
        """Side of the window the network reads for one tile."""
        return self.tile + 2 * self.context

    def read_window(self, i: int, j: int) -> Window:
        """The 10 m window read for tile (i, j): its core with the context around (may reach past the scene)."""
        return Window(j * self.tile - self.context, i * self.tile - self.context, self.read_size, self.read_size)

    @property
    def output_box(self) -> tuple[int, int, int, int]:
        """(top, left, height, width) of every tile's output box inside its read window, in 10 m pixels."""
        side = self.tile + 2 * self.blend
        return self.context - self.blend, self.context - self.blend, side, side

    def box_of(self, i: int, cols: range) -> tuple[int, int, int, int]:
        """The part of ``output_box`` (top, left, height, width) that tile row ``i``'s tiles ``cols``
        need: cut at the scene's edges, past which the blend reads no output (the last row and
        column of a 10980 px scene in 512 px tiles lie 0.55 outside it), the widest of the tiles' parts."""
        top, left, side, _ = self.output_box
        row = i * self.tile - self.blend  # the scene row of the box's first
        dy, bottom = max(-row, 0), min(side, self.height - row)
        starts = [j * self.tile - self.blend for j in cols]
        dx, right = min(max(-c, 0) for c in starts), max(min(side, self.width - c) for c in starts)
        return top + dy, left + dx, bottom - dy, right - dx

    def core_rows(self, i: int) -> tuple[int, int]:
        """The scene rows [top, bottom) of tile row i's core."""
        return i * self.tile, min((i + 1) * self.tile, self.height)

    def core_cols(self, j: int) -> tuple[int, int]:
        return j * self.tile, min((j + 1) * self.tile, self.width)

    def output_rows(self, i: int) -> tuple[int, int]:
        """The 2 m rows [top, bottom) of tile row i's output box, before clipping to the scene."""
        f = SCALE_FACTOR
        return f * (i * self.tile - self.blend), f * ((i + 1) * self.tile + self.blend)

    def output_cols(self, j: int) -> tuple[int, int]:
        f = SCALE_FACTOR
        return f * (j * self.tile - self.blend), f * ((j + 1) * self.tile + self.blend)

    @cached_property
    def row_weights(self) -> list[np.ndarray]:
        """Per tile row, the blend weight of each 2 m row of its output box."""
        return blend_weights(self.height, self.tile, self.blend)

    @cached_property
    def col_weights(self) -> list[np.ndarray]:
        return blend_weights(self.width, self.tile, self.blend)

    def final_bottom(self, i: int) -> int:
        """The 2 m row above which the output is finished once tile rows up to i have run."""
        if i >= self.n_rows - 1:
            return self.height * SCALE_FACTOR
        return SCALE_FACTOR * ((i + 1) * self.tile - self.blend)

    def final_right(self, j: int) -> int:
        """The 2 m column left of which a tile row's output is finished once its tiles up to j have run."""
        if j >= self.n_cols - 1:
            return self.width * SCALE_FACTOR
        return SCALE_FACTOR * ((j + 1) * self.tile - self.blend)

    def seam(self, k: int) -> tuple[int, int]:
        """The 2 m rows [top, bottom) that both tile row k - 1 and tile row k reach (k >= 1)."""
        f = SCALE_FACTOR
        return f * (k * self.tile - self.blend), min(f * (k * self.tile + self.blend), self.height * f)

    def rank_shares(self, world: int) -> list[tuple[int, int]]:
        """Contiguous [first, last) ranges of tile rows, one per rank, as even as possible."""
        edges = np.linspace(0, self.n_rows, world + 1).round().astype(int)
        return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]

    def can_share(self, world: int) -> bool:
        """Whether ``world`` ranks can each take a share of at least one tile row."""
        return 1 < world <= self.n_rows

    def share_rows(self, first: int, last: int) -> tuple[int, int]:
        """The 2 m rows [top, bottom) that only the tile rows [first, last) reach (no seam)."""
        top = self.seam(first)[1] if first > 0 else 0
        bottom = self.seam(last)[0] if last < self.n_rows else self.height * SCALE_FACTOR
        return top, bottom


def blend_weights(size: int, tile: int, blend: int) -> list[np.ndarray]:
    """Per tile along one axis of ``size`` 10 m pixels, the 2 m weights of its output box
    (length 5(tile + 2 blend)): a raised cosine over the ``2 * blend`` pixels it shares with each
    neighbour, normalised so that the weights of all tiles covering any 2 m position inside the
    scene sum to one."""
    f = SCALE_FACTOR
    n = math.ceil(size / tile)
    ramp_len = f * 2 * blend
    length = f * (tile + 2 * blend)
    base = np.ones(length, dtype=np.float64)
    if ramp_len:
        ramp = 0.5 - 0.5 * np.cos(np.pi * (np.arange(ramp_len) + 0.5) / ramp_len)
        base[:ramp_len] = ramp
        base[-ramp_len:] = np.minimum(base[-ramp_len:], ramp[::-1])
    total = np.zeros(f * (n * tile + 2 * blend), dtype=np.float64)  # index 0 is 2 m position -5 blend
    for i in range(n):
        total[f * i * tile: f * i * tile + length] += base
    return [(base / total[f * i * tile: f * i * tile + length]).astype(np.float32) for i in range(n)]
