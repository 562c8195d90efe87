"""Bridge gaps: short strips of land across a channel (a bridge, a road on a weir) that cut
its water in two, so that a centreline would stop at each bridge.

A gap is land that a closing of the water by ``max_gap`` px fills, in one piece that spans
no more than ``max_span`` px, that touches two bodies of water that are not otherwise
connected. A notch in a shore touches one body only; land between two branches of one
braided channel touches one body; a levee between a river and a pond is longer than a bridge. A bridge whose gap the
closing joins to such a levee (other water within ``max_gap`` of the bank beside it) is left
out too: there the centreline stops at the bridge, as it would without this. The centreline runs across the gaps, and the transects that cross one are flagged.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import ndimage

from .centrelines import label_8


def bridge_gaps(water: np.ndarray, max_gap: float, max_span: float, bodies: np.ndarray | None = None) -> np.ndarray:
    """The pixels of ``water``'s bridge gaps (bool): up to ``max_gap`` px along the channel,
    spanning up to ``max_span`` px. ``bodies``: the labels of water's 8-connected bodies, when
    they are at hand (ndimage.label's, 0 on land)."""
    gaps = np.zeros(water.shape, dtype=bool)
    steps = math.ceil(max_gap / 2)
    rows, cols = np.flatnonzero(water.any(axis=1)), np.flatnonzero(water.any(axis=0))
    if steps < 1 or not len(rows):
        return gaps
    box = (slice(max(rows[0] - steps, 0), rows[-1] + steps + 1),
           slice(max(cols[0] - steps, 0), cols[-1] + steps + 1))  # where a closing can add land
    local = water[box]
    size = 2 * steps + 1  # a square closing: a dilation, then an erosion (each separable)
    grown = _spread(_spread(np.pad(local, steps), size, 0), size, 1)
    closed = ~_spread(_spread(~grown, size, 0), size, 1)[steps:-steps, steps:-steps]  # (land outside: none eroded)
    candidates = closed & ~local
    candidate_labels, n = label_8(candidates)
    if n == 0:
        return gaps
    body_labels = bodies[box] if bodies is not None else label_8(local)[0]
    # the bodies of water beside each candidate: its pixels' eight neighbours, read where they lie
    rows, cols = np.nonzero(candidates)
    which = candidate_labels[rows, cols]
    beside = np.stack([body_labels[np.clip(rows + dr, 0, local.shape[0] - 1), np.clip(cols + dc, 0, local.shape[1] - 1)]
                       for dr in (-1, 0, 1) for dc in (-1, 0, 1) if dr or dc], axis=1)
    none = np.iinfo(body_labels.dtype).max
    low, high = np.full(n + 1, none, dtype=body_labels.dtype), np.zeros(n + 1, dtype=body_labels.dtype)
    np.minimum.at(low, which, np.where(beside > 0, beside, none).min(axis=1))
    np.maximum.at(high, which, beside.max(axis=1))
    low, high = low[1:], high[1:]
    extent = np.array([max(s[0].stop - s[0].start, s[1].stop - s[1].start) for s in ndimage.find_objects(candidate_labels)])
    keep = np.zeros(n + 1, dtype=bool)
    keep[1:] = (low < high) & (extent <= max_span)  # two bodies or more beside it
    gaps[box] = keep[candidate_labels]
    return gaps


def _spread(a: np.ndarray, size: int, axis: int) -> np.ndarray:
    """Each pixel of ``a`` (bool) or any pixel within ``size // 2`` of it along ``axis`` (a
    maximum filter of odd ``size``, nothing outside the array): shifted copies or-ed together,
    their reach doubled each time, sliced along ``axis`` in place (moving the axis first made
    the run along rows a strided copy: 6x slower; scipy's maximum_filter1d is slower still
    along columns)."""
    half, n = size // 2, a.shape[axis]

    def along(start, stop):
        return tuple(slice(start, stop) if k == axis else slice(None) for k in range(a.ndim))

    run = np.zeros(a.shape[:axis] + (n + 2 * half,) + a.shape[axis + 1:], dtype=bool)  # run[i]: a[i - half] or ...
    run[along(half, half + n)] = a
    span = 1
    while span < size:
        step = min(span, size - span)
        run[along(None, -step)] |= run[along(step, None)].copy()
        span += step
    return run[along(None, n)]
