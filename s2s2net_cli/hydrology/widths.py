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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
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


def transects(line: LineString, water: np.ndarray, valid: np.ndarray, half_width: np.ndarray, spacing: float,
              max_width: float, gaps: np.ndarray | None = None) -> list[Transect]:
    """Transects across ``line`` (pixel coordinates) every ``spacing`` pixels, starting half a
    spacing in; ``half_width`` (distance to land) sets the stretch the direction is taken over
    and ``max_width`` how far a transect walks. ``water`` includes the bridge ``gaps`` (bool),
    if any: a transect that crosses one is flagged."""
    out = []
    length = line.length
    d = spacing / 2
    while d <= length:
        centre = line.interpolate(d)
        r, c = int(centre.y), int(centre.x)
        local = float(half_width[min(max(r, 0), water.shape[0] - 1), min(max(c, 0), water.shape[1] - 1)])
        reach = max(2.0, local)
        a, b = line.interpolate(max(d - reach, 0)), line.interpolate(min(d + reach, length))
        tx, ty = b.x - a.x, b.y - a.y
        norm = np.hypot(tx, ty)
        if norm > 0:
            nx, ny = -ty / norm, tx / norm
            t = _walk(water, valid, centre.x, centre.y, nx, ny, max_width, gaps)
            if t is not None:
                out.append(Transect(d, centre.x, centre.y, *t))
        d += spacing
    return out


def _walk(water, valid, x, y, nx, ny, max_width, gaps=None):
    """Width, flag, shores and whether a side found no shore within ``max_width`` of the transect
    through (x, y) along (nx, ny); None when the centre is not on water."""
    if not _at(water, x, y):
        return None
    sides, flags, opened = [], [], False
    bridged = gaps is not None and _at(gaps, x, y)
    for sign in (1, -1):
        t, flag = 0.0, BANK
        while True:
            t += STEP
            px, py = x + sign * t * nx, y + sign * t * ny
            if not _inside(water, px, py) or not _at(valid, px, py):
                flag = EDGE
                break
            if not _at(water, px, py):
                break
            if gaps is not None and not bridged and _at(gaps, px, py):
                bridged = True
            if t > max_width:
                flag, opened = EDGE, True
                break
        shore = t - STEP / 2
        if flag == BANK and _water_beyond(water, valid, x, y, sign * nx, sign * ny, t, max(t, 5.0)):
            flag = ISLAND
        sides.append((shore, (x + sign * shore * nx, y + sign * shore * ny)))
        flags.append(flag)
    flag = EDGE if EDGE in flags else BRIDGE if bridged else ISLAND if ISLAND in flags else BANK
    return sides[0][0] + sides[1][0], flag, (sides[0][1], sides[1][1]), opened


def _water_beyond(water, valid, x, y, nx, ny, t0, distance) -> bool:
    t = t0
    while t < t0 + distance:
        t += STEP
        px, py = x + t * nx, y + t * ny
        if not _inside(water, px, py) or not _at(valid, px, py):
            return False
        if _at(water, px, py):
            return True
    return False


def _inside(grid: np.ndarray, x: float, y: float) -> bool:
    return 0 <= x < grid.shape[1] and 0 <= y < grid.shape[0]


def _at(grid: np.ndarray, x: float, y: float) -> bool:
    return _inside(grid, x, y) and bool(grid[int(y), int(x)])
