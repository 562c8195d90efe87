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

EIGHT = np.ones((3, 3), dtype=bool)


def bridge_gaps(water: np.ndarray, max_gap: float, max_span: float) -> np.ndarray:
    """The pixels of ``water``'s bridge gaps (bool): up to ``max_gap`` px along the channel,
    spanning up to ``max_span`` px."""
    gaps = np.zeros(water.shape, dtype=bool)
    steps = math.ceil(max_gap / 2)
    if steps < 1 or not water.any():
        return gaps
    rows, cols = np.nonzero(water)
    box = (slice(max(rows.min() - steps, 0), rows.max() + steps + 1),
           slice(max(cols.min() - steps, 0), cols.max() + steps + 1))  # where a closing can add land
    local = water[box]
    size = 2 * steps + 1  # a square closing: a maximum filter, then a minimum filter (separable, fast)
    grown = ndimage.maximum_filter(np.pad(local, steps).view(np.uint8), size=size, mode="constant")
    closed = ndimage.minimum_filter(grown, size=size, mode="constant", cval=1)[steps:-steps, steps:-steps].astype(bool)
    candidates = closed & ~local
    candidate_labels, n = ndimage.label(candidates, EIGHT)
    if n == 0:
        return gaps
    body_labels, _ = ndimage.label(local, EIGHT)
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
