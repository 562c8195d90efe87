"""Channel widths across a centreline: orthogonal transects, as RivWidth measures them.

At every ``spacing`` along a centreline, a transect is walked from the centreline both ways
along the normal of the line (its direction over a stretch about as long as the channel is
wide), in steps of a quarter pixel, until it leaves the water. The width is the distance
between the two shores, each placed halfway between the last water step and the first step
off it. What ended the transect is its flag:

- ``bank``: land on both sides;
- ``island``: land on both sides, but water again just beyond one of them (the transect cut a
  bar or an island of a braided channel: the width is of one branch);
- ``bridge``: it crossed a bridge gap (hydrology/bridges.py: land across the channel that the
  centreline runs under; the width is the channel's between the shores beside the bridge);
- ``edge``: it ran off the mask or into its nodata on a side (the width is at least this).

A transect that is both is flagged ``edge`` first, then ``bridge``, then ``island``. A transect
that walked past ``max_width`` on a side found no bank within reach: it is ``open`` (the
centreline runs in a lake, a bay or the sea there, and is no river's).

All the transects of a line are walked at once (numpy), with the answers of a walk step by step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import shapely
from shapely.geometry import LineString

STEP = 0.25  # transect step, in pixels
BANK, ISLAND, BRIDGE, EDGE = "bank", "island", "bridge", "edge"


@dataclass
class Transect:
    distance: float  # along the centreline, in pixels
    x: float  # centre, in pixel coordinates (column, row; pixel centres at +0.5)
    y: float
    width: float  # in pixels
    flag: str
    ends: tuple[tuple[float, float], tuple[float, float]]  # the two shores (x, y)
    open: bool = False  # no shore within max_width on a side: open water, no river


def smooth_path(path: np.ndarray, window: int = 5) -> np.ndarray:
    """A pixel path with its staircase smoothed: a running mean over ``window`` points, the
    ends kept."""
    if len(path) <= 2 or window <= 1:
        return path.astype(float)
    pad = window // 2
    padded = np.concatenate([np.repeat(path[:1], pad, 0), path, np.repeat(path[-1:], pad, 0)]).astype(float)
    kernel = np.ones(window) / window
    out = np.c_[np.convolve(padded[:, 0], kernel, "valid"), np.convolve(padded[:, 1], kernel, "valid")]
    out[0], out[-1] = path[0], path[-1]
    return out


def transects(line: LineString, water: np.ndarray, valid: np.ndarray, half_width, spacing: float,
              max_width: float, gaps: np.ndarray | None = None) -> list[Transect]:
    """Transects across ``line`` (pixel coordinates) every ``spacing`` pixels, starting half a
    spacing in; ``half_width`` (distance to land: centrelines.HalfWidth, or an array) sets the
    stretch the direction is taken over and ``max_width`` how far a transect walks. ``water``
    includes the bridge ``gaps`` (bool), if any: a transect that crosses one is flagged.

    All of a line's transects are walked at once, a block of steps at a time (numpy); the
    answers are a walk's one at a time, step by step."""
    length = line.length
    if spacing / 2 > length:
        return []
    d = np.cumsum(np.r_[spacing / 2, np.full(int((length - spacing / 2) // spacing) + 1, spacing)])
    d = d[d <= length]  # (summed as a walk along the line sums them)
    centre = shapely.get_coordinates(shapely.line_interpolate_point(line, d))
    x, y = centre[:, 0], centre[:, 1]
    h, w = water.shape
    r = np.clip(np.trunc(y).astype(np.int64), 0, h - 1)
    c = np.clip(np.trunc(x).astype(np.int64), 0, w - 1)
    reach = np.maximum(2.0, np.asarray(half_width[r, c], dtype=np.float64))
    a = shapely.get_coordinates(shapely.line_interpolate_point(line, np.maximum(d - reach, 0)))
    b = shapely.get_coordinates(shapely.line_interpolate_point(line, np.minimum(d + reach, length)))
    tx, ty = b[:, 0] - a[:, 0], b[:, 1] - a[:, 1]
    norm = np.hypot(tx, ty)
    ok = (norm > 0) & _at(water, x, y)
    with np.errstate(invalid="ignore", divide="ignore"):
        nx, ny = -ty / norm, tx / norm
    d, x, y, nx, ny = d[ok], x[ok], y[ok], nx[ok], ny[ok]
    bridged = _at(gaps, x, y) if gaps is not None else np.zeros(len(x), dtype=bool)
    sides, flags, opened = [], [], np.zeros(len(x), dtype=bool)
    for sign in (1, -1):
        t, stop, crossed = _walk(water, valid, gaps, x, y, sign * nx, sign * ny, max_width)
        bridged |= crossed
        shore = t - STEP / 2
        bank = stop == _LAND
        flag = np.where(bank, BANK, EDGE).astype(object)  # off the mask, or no bank within max_width
        island = np.zeros(len(x), dtype=bool)
        island[bank] = _water_beyond(water, valid, x[bank], y[bank], sign * nx[bank], sign * ny[bank], t[bank],
                                     np.maximum(t[bank], 5.0))
        flag[island] = ISLAND
        opened |= stop == _OPEN
        sides.append((shore, x + sign * shore * nx, y + sign * shore * ny))
        flags.append(flag)
    out = []
    (s0, x0, y0), (s1, x1, y1) = sides
    for i in range(len(x)):
        f = (flags[0][i], flags[1][i])
        flag = EDGE if EDGE in f else BRIDGE if bridged[i] else ISLAND if ISLAND in f else BANK
        out.append(Transect(float(d[i]), float(x[i]), float(y[i]), float(s0[i] + s1[i]), flag,
                            ((float(x0[i]), float(y0[i])), (float(x1[i]), float(y1[i]))), bool(opened[i])))
    return out


_OFF, _LAND, _OPEN = 1, 2, 3  # what ended a side's walk: the mask's edge or nodata, land, max_width passed
BLOCK = 32  # steps walked at once; doubled for the transects still on water
CHUNK = 1 << 20  # the most samples of a look beyond the shore held at once


def _walk(water, valid, gaps, x, y, nx, ny, max_width):
    """Each transect's walk from (x, y) along (nx, ny) in STEPs: the step that ended it, what
    ended it (_OFF, _LAND or _OPEN: past ``max_width``, still on water) and whether it crossed a
    bridge gap on the way."""
    n = len(x)
    t_end, stop, crossed = np.zeros(n), np.zeros(n, dtype=np.int8), np.zeros(n, dtype=bool)
    last = int(max_width // STEP) + 1  # the first step past max_width
    while last * STEP <= max_width:
        last += 1
    active, k0, block = np.arange(n), 1, BLOCK
    while len(active):
        k = np.arange(k0, min(k0 + block, last + 1))
        t = k * STEP
        px = x[active, None] + t[None, :] * nx[active, None]
        py = y[active, None] + t[None, :] * ny[active, None]
        off = ~(_inside(water, px, py) & _at(valid, px, py))
        land = ~off & ~_at(water, px, py)
        opened = np.zeros_like(off)
        if k[-1] == last:
            opened[:, -1] = ~off[:, -1] & ~land[:, -1]
        ended = off | land | opened
        done = ended.any(axis=1)
        first = np.where(done, ended.argmax(axis=1), len(k))
        if gaps is not None:  # the steps a walk took on water, the one that passed max_width too
            on = np.arange(len(k))[None, :] < first[:, None]
            on |= opened & (np.arange(len(k))[None, :] == first[:, None])
            crossed[active] |= (_at(gaps, px, py) & on).any(axis=1)
        i = active[done]
        f = first[done]
        t_end[i] = t[f]
        rows = np.flatnonzero(done)
        stop[i] = np.where(off[rows, f], _OFF, np.where(land[rows, f], _LAND, _OPEN))
        active = active[~done]
        k0 += len(k)
        block *= 2
    return t_end, stop, crossed


def _water_beyond(water, valid, x, y, nx, ny, t0, distance) -> np.ndarray:
    """Whether water lies again beyond each shore at ``t0`` within ``distance``, before the
    mask's edge or nodata."""
    steps = np.ceil(distance / STEP).astype(np.int64)  # the walk checks t0 + k STEP, k = 1 .. steps
    if len(x) > 1 and len(x) * int(steps.max()) > CHUNK:  # a share at a time: memory stays small
        half = len(x) // 2
        return np.r_[_water_beyond(water, valid, x[:half], y[:half], nx[:half], ny[:half], t0[:half], distance[:half]),
                     _water_beyond(water, valid, x[half:], y[half:], nx[half:], ny[half:], t0[half:], distance[half:])]
    if not len(x):
        return np.zeros(0, dtype=bool)
    k = np.arange(1, steps.max() + 1)
    t = t0[:, None] + k[None, :] * STEP
    px, py = x[:, None] + t * nx[:, None], y[:, None] + t * ny[:, None]
    within = k[None, :] <= steps[:, None]
    off = ~(_inside(water, px, py) & _at(valid, px, py)) & within
    wet = ~off & _at(water, px, py) & within
    first_wet = np.where(wet.any(axis=1), wet.argmax(axis=1), len(k))
    first_off = np.where(off.any(axis=1), off.argmax(axis=1), len(k))
    return first_wet < first_off


def _inside(grid: np.ndarray, x, y):
    return (0 <= x) & (x < grid.shape[1]) & (0 <= y) & (y < grid.shape[0])


def _at(grid: np.ndarray, x, y):
    """grid[int(y), int(x)] where (x, y) lies inside it, else False (scalars or arrays)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    inside = _inside(grid, x, y)
    r = np.where(inside, y, 0).astype(np.int64)
    c = np.where(inside, x, 0).astype(np.int64)
    return inside & grid[r, c].astype(bool)
