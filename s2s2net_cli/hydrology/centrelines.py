"""Channel centrelines of a water mask: its skeleton as branches between junctions, with the
spurs that a skeleton grows towards every bump of a shore pruned away.

A skeleton (scikit-image) is cut into branches at its junction pixels (three or more
neighbours). A spur is a branch with one free end; it is pruned when it is shorter than
``prune`` times the channel's width where it leaves the channel (twice the distance to the
shore at its junction), and pruning repeats until nothing changes, so a straight channel
gives one line, not a comb. A free-standing branch shorter than ``prune`` times its median
width (a pond's stub) is dropped too. Where the water is wider than ``max_width`` the skeleton
is cut out before pruning, so a river that enters a lake or the sea is a branch of its own, not
a spur of the lake's width.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage
from skimage.morphology import skeletonize

EIGHT = np.ones((3, 3), dtype=bool)
MAX_PRUNING_ROUNDS = 12
# Bodies of water are measured each on its own bounding box (plus this many px) unless their
# boxes cover more than this share of the array, when the array is measured whole.
BOX_PAD = 2
MAX_BOXED_SHARE = 0.5


@dataclass
class Branch:
    """A skeleton branch: its pixels (row, col) in order along it, and at each end the
    junction it meets (its (row, col) centre) or None for a free end."""

    pixels: np.ndarray
    start: tuple[float, float] | None
    end: tuple[float, float] | None

    @property
    def free_ends(self) -> int:
        return (self.start is None) + (self.end is None)

    def length(self) -> float:
        """In pixels, from its first to its last pixel (diagonal steps count sqrt 2)."""
        steps = np.diff(self.pixels, axis=0)
        return float(np.hypot(steps[:, 0], steps[:, 1]).sum())

    def path(self) -> np.ndarray:
        """(n, 2) x, y in pixel coordinates (pixel centres at +0.5), from the start junction
        through the pixels to the end junction."""
        points = [self.pixels.astype(float)]
        if self.start is not None:
            points.insert(0, np.array([self.start]))
        if self.end is not None:
            points.append(np.array([self.end]))
        rc = np.concatenate(points)
        return np.c_[rc[:, 1] + 0.5, rc[:, 0] + 0.5]


def centreline_branches(water: np.ndarray, prune: float = 2.0, max_width: float | None = None
                        ) -> tuple[list[Branch], np.ndarray]:
    """The pruned skeleton branches of ``water`` (bool) and the distance of each pixel to the
    nearest land pixel (half the channel's width on the centreline), in pixels. Where the water
    is wider than ``max_width`` pixels (a lake, the sea) the skeleton is cut out, so a creek
    that runs into the sea ends at its mouth.

    Each 8-connected body of water is measured on its own bounding box (plus BOX_PAD px, the
    other bodies left out): its nearest land, its skeleton and its spurs lie inside, so the
    answer is the whole array's, at the cost of the boxes rather than the array (a river
    across a window of land is a tenth of it)."""
    labels, n = ndimage.label(water, structure=EIGHT)
    boxes = [_padded(b, water.shape) for b in ndimage.find_objects(labels)]
    if n == 0 or sum((b[0].stop - b[0].start) * (b[1].stop - b[1].start) for b in boxes) > MAX_BOXED_SHARE * water.size:
        return _branches_in(water, prune, max_width)
    half_width = np.zeros(water.shape, dtype=np.float64)
    branches = []
    for k, (rows, cols) in enumerate(boxes, start=1):
        body = labels[rows, cols] == k
        body_branches, body_half_width = _branches_in(body, prune, max_width)
        half_width[rows, cols][body] = body_half_width[body]
        shift = np.array([rows.start, cols.start])
        for b in body_branches:
            branches.append(Branch(b.pixels + shift, _moved(b.start, shift), _moved(b.end, shift)))
    return branches, half_width


def _padded(box: tuple[slice, slice], shape) -> tuple[slice, slice]:
    return tuple(slice(max(s.start - BOX_PAD, 0), min(s.stop + BOX_PAD, n)) for s, n in zip(box, shape))


def _moved(point, shift):
    return None if point is None else (point[0] + float(shift[0]), point[1] + float(shift[1]))


def _branches_in(water: np.ndarray, prune: float, max_width: float | None) -> tuple[list[Branch], np.ndarray]:
    """centreline_branches on the whole of ``water`` at once."""
    half_width = ndimage.distance_transform_edt(water)
    skeleton = skeletonize(water)
    if max_width is not None:  # first: a river's junction in a lake would make it a spur of the lake's width
        skeleton &= 2 * half_width <= max_width
    for _ in range(MAX_PRUNING_ROUNDS):
        branches, junction_labels = skeleton_branches(skeleton)
        pruned = False
        for b in branches:
            if _is_stub(b, half_width, prune):
                skeleton[b.pixels[:, 0], b.pixels[:, 1]] = False
                pruned = True
        if not pruned:
            break  # (a pruned spur's junction pixels that stick out are stubs the next round prunes)
    return skeleton_branches(skeleton)[0], half_width


def _is_stub(branch: Branch, half_width: np.ndarray, prune: float) -> bool:
    if branch.free_ends == 0:
        return False
    if branch.free_ends == 2:  # its typical width: a river cut off at a lake's shore widens only at its mouth
        width = 2 * float(np.median(half_width[branch.pixels[:, 0], branch.pixels[:, 1]]))
    else:
        at = branch.start if branch.start is not None else branch.end
        r, c = int(round(at[0])), int(round(at[1]))
        width = 2 * float(half_width[r, c])
    return branch.length() + 1 < prune * width


def skeleton_branches(skeleton: np.ndarray) -> tuple[list[Branch], np.ndarray]:
    """The branches of a one-pixel-wide skeleton and the labels of its junction clusters."""
    neighbours = ndimage.convolve(skeleton.astype(np.uint8), EIGHT.astype(np.uint8), mode="constant") - skeleton
    junction = skeleton & (neighbours >= 3)
    junction_labels, _ = ndimage.label(junction, structure=EIGHT)
    centres = {}
    if junction.any():
        ids = np.arange(1, junction_labels.max() + 1)
        for i, (r, c) in zip(ids, ndimage.center_of_mass(junction, junction_labels, ids)):
            centres[int(i)] = (float(r), float(c))
    body = skeleton & ~junction
    body_labels, n = ndimage.label(body, structure=EIGHT)
    branches = []
    for k, slices in enumerate(ndimage.find_objects(body_labels), start=1):
        if slices is None:
            continue
        r0, c0 = slices[0].start, slices[1].start
        rows, cols = np.nonzero(body_labels[slices] == k)
        pixels = _ordered(rows + r0, cols + c0)
        start = _junction_at(pixels[0], junction_labels, centres)
        end = _junction_at(pixels[-1], junction_labels, centres) if len(pixels) > 1 else None
        if len(pixels) == 1 and start is not None:  # one pixel between two junctions
            others = _junctions_around(pixels[0], junction_labels) - {_label_of(start, centres)}
            end = centres[min(others)] if others else None
        branches.append(Branch(pixels, start, end))
    return branches, junction_labels


def _ordered(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """The pixels of a path (or loop) in order, from one of its ends."""
    points = set(zip(rows.tolist(), cols.tolist()))

    def around(p):
        r, c = p
        return [(r + dr, c + dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1) if (dr or dc) and (r + dr, c + dc) in points]

    ends = [p for p in points if len(around(p)) <= 1]
    current = min(ends) if ends else min(points)
    order, seen = [current], {current}
    while True:
        nxt = [p for p in around(current) if p not in seen]
        if not nxt:
            break
        # prefer the 4-neighbour: a diagonal shortcut would skip a pixel of the path
        nxt.sort(key=lambda p: abs(p[0] - current[0]) + abs(p[1] - current[1]))
        current = nxt[0]
        order.append(current)
        seen.add(current)
    return np.array(order, dtype=np.int64)


def _junctions_around(pixel, junction_labels: np.ndarray) -> set[int]:
    r, c = int(pixel[0]), int(pixel[1])
    h, w = junction_labels.shape
    window = junction_labels[max(r - 1, 0):min(r + 2, h), max(c - 1, 0):min(c + 2, w)]
    return {int(v) for v in np.unique(window) if v}


def _junction_at(pixel, junction_labels: np.ndarray, centres: dict):
    found = _junctions_around(pixel, junction_labels)
    return centres[min(found)] if found else None


def _label_of(centre, centres: dict) -> int:
    return next(k for k, v in centres.items() if v == centre)
