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

The work is on arrays: the skeleton's pixels as a graph (scipy.sparse.csgraph) for its branches,
a KD-tree of the shore for the distances to land, so a window costs its water, not its area
(beside the skeleton itself).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components, depth_first_order
from scipy.spatial import cKDTree
from skimage.morphology import skeletonize

EIGHT = np.ones((3, 3), dtype=bool)
MAX_PRUNING_ROUNDS = 12
# Bodies of water are measured each on its own bounding box (plus this many px) unless their
# boxes cover more than this share of the array, when the array is measured whole.
BOX_PAD = 2
MAX_BOXED_SHARE = 0.5


def label_8(mask: np.ndarray) -> tuple[np.ndarray, int]:
    """``ndimage.label`` of a bool ``mask``, 8-connected, in uint16 while the pieces are few
    enough (half the memory of int32) and on a uint8 view (a bool array labels 3x slower)."""
    try:
        return ndimage.label(mask.view(np.uint8), structure=EIGHT, output=np.uint16)
    except RuntimeError:  # more than 65535 pieces
        return ndimage.label(mask.view(np.uint8), structure=EIGHT)


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


class HalfWidth:
    """The distance from a pixel of ``water`` to the nearest land pixel, in pixels (half the
    channel's width on its centreline): the Euclidean distance transform's values, read only
    where they are asked for (a KD-tree of the shore: the land pixels beside water, among which
    every water pixel's nearest land pixel lies), so a window costs its shore, not its area."""

    def __init__(self, water: np.ndarray):
        self.water = water
        land = ~water
        shore = np.zeros(water.shape, dtype=bool)  # land with water beside it (4-neighbours)
        shore[1:] |= land[1:] & water[:-1]
        shore[:-1] |= land[:-1] & water[1:]
        shore[:, 1:] |= land[:, 1:] & water[:, :-1]
        shore[:, :-1] |= land[:, :-1] & water[:, 1:]
        rows, cols = np.nonzero(shore)
        self._tree = cKDTree(np.c_[rows, cols].astype(np.float64)) if len(rows) else None
        self._whole = None if len(rows) or not water.any() else ndimage.distance_transform_edt(water)

    def at(self, rows, cols) -> np.ndarray:
        """The distance at pixels (rows, cols) (int arrays): 0 on land."""
        rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
        out = np.zeros(rows.shape, dtype=np.float64)
        on = self.water[rows, cols]
        if self._whole is not None:
            out[on] = self._whole[rows[on], cols[on]]
        elif self._tree is not None and on.any():
            out[on] = self._tree.query(np.c_[rows[on], cols[on]].astype(np.float64))[0]
        return out

    def __getitem__(self, index) -> np.ndarray:
        rows, cols = index
        return self.at(rows, cols)


def centreline_branches(water: np.ndarray, prune: float = 2.0, max_width: float | None = None,
                        bodies: np.ndarray | None = None) -> tuple[list[Branch], HalfWidth]:
    """The pruned skeleton branches of ``water`` (bool) and the distance of its pixels to the
    nearest land pixel (half the channel's width on the centreline, in pixels: ``HalfWidth``).
    Where the water is wider than ``max_width`` pixels (a lake, the sea) the skeleton is cut
    out, so a creek that runs into the sea ends at its mouth.

    Each 8-connected body of water is skeletonised on its own bounding box (plus BOX_PAD px, the
    other bodies left out): its skeleton and its spurs lie inside, so the answer is the whole
    array's, at the cost of the boxes rather than the array (a river across a window of land is
    a tenth of it). ``bodies``: the bodies' labels, when they are at hand (``ndimage.label``'s
    with EIGHT, 0 on land; labels left out are bodies left out)."""
    half_width = HalfWidth(water)
    labels = bodies if bodies is not None else label_8(water)[0]
    boxes = [(k, _padded(b, water.shape)) for k, b in enumerate(ndimage.find_objects(labels), start=1) if b is not None]
    if not boxes or sum((b[0].stop - b[0].start) * (b[1].stop - b[1].start) for _, b in boxes) > MAX_BOXED_SHARE * water.size:
        return _branches_in(water, half_width, (0, 0), prune, max_width), half_width
    branches = []
    for k, (rows, cols) in boxes:
        body = labels[rows, cols] == k
        shift = np.array([rows.start, cols.start])
        for b in _branches_in(body, half_width, shift, prune, max_width):
            branches.append(Branch(b.pixels + shift, _moved(b.start, shift), _moved(b.end, shift)))
    return branches, half_width


def _padded(box: tuple[slice, slice], shape) -> tuple[slice, slice]:
    return tuple(slice(max(s.start - BOX_PAD, 0), min(s.stop + BOX_PAD, n)) for s, n in zip(box, shape))


def _moved(point, shift):
    return None if point is None else (point[0] + float(shift[0]), point[1] + float(shift[1]))


def _branches_in(water: np.ndarray, half_width: HalfWidth, shift, prune: float, max_width: float | None
                 ) -> list[Branch]:
    """centreline_branches on the whole of ``water`` at once, which lies at ``shift`` (row, col)
    in the array ``half_width`` measures."""
    skeleton = skeletonize(water)
    r0, c0 = int(shift[0]), int(shift[1])
    if max_width is not None:  # first: a river's junction in a lake would make it a spur of the lake's width
        rows, cols = np.nonzero(skeleton)
        wide = 2 * half_width.at(rows + r0, cols + c0) > max_width
        skeleton[rows[wide], cols[wide]] = False
    for _ in range(MAX_PRUNING_ROUNDS):
        branches = skeleton_branches(skeleton)
        pruned = False
        for b in branches:
            if _is_stub(b, half_width, (r0, c0), prune):
                skeleton[b.pixels[:, 0], b.pixels[:, 1]] = False
                pruned = True
        if not pruned:
            break  # (a pruned spur's junction pixels that stick out are stubs the next round prunes)
    return skeleton_branches(skeleton)


def _is_stub(branch: Branch, half_width: HalfWidth, shift, prune: float) -> bool:
    if branch.free_ends == 0:
        return False
    if branch.free_ends == 2:  # its typical width: a river cut off at a lake's shore widens only at its mouth
        width = 2 * float(np.median(half_width.at(branch.pixels[:, 0] + shift[0], branch.pixels[:, 1] + shift[1])))
    else:
        at = branch.start if branch.start is not None else branch.end
        r, c = int(round(at[0])), int(round(at[1]))
        width = 2 * float(half_width.at([r + shift[0]], [c + shift[1]])[0])
    return branch.length() + 1 < prune * width


def skeleton_branches(skeleton: np.ndarray) -> list[Branch]:
    """The branches of a one-pixel-wide skeleton (bool): its pixels cut at its junctions (those
    with three neighbours or more), each branch with the centres of the junction clusters at
    its ends. Worked on the skeleton's pixels as a graph (scipy), at the cost of the skeleton,
    not of its array."""
    rows, cols = np.nonzero(skeleton)
    if not len(rows):
        return []
    neighbour = _neighbours(rows, cols, skeleton.shape)
    junction = (neighbour >= 0).sum(axis=1) >= 3
    cluster = _components(neighbour, junction)  # junction clusters 1.., numbered as ndimage.label numbers them
    centres = {}
    if junction.any():
        count = np.bincount(cluster[junction])[1:].astype(np.float64)
        mean_r = np.bincount(cluster[junction], weights=rows[junction].astype(np.float64))[1:] / count
        mean_c = np.bincount(cluster[junction], weights=cols[junction].astype(np.float64))[1:] / count
        centres = {i + 1: (float(r), float(c)) for i, (r, c) in enumerate(zip(mean_r, mean_c))}
    # the junction clusters beside each pixel, the least first (0: none)
    beside = np.where(neighbour >= 0, cluster[np.maximum(neighbour, 0)], 0)
    branches = []
    for nodes in _traced(neighbour, ~junction, rows, cols):
        around_first = sorted({int(v) for v in beside[nodes[0]] if v})
        start = centres[around_first[0]] if around_first else None
        end = None
        if len(nodes) > 1:
            around_last = sorted({int(v) for v in beside[nodes[-1]] if v})
            end = centres[around_last[0]] if around_last else None
        elif len(around_first) > 1:  # one pixel between two junctions
            end = centres[around_first[1]]
        branches.append(Branch(np.c_[rows[nodes], cols[nodes]], start, end))
    return branches


OFFSETS = [(dr, dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1) if dr or dc]


def _neighbours(rows: np.ndarray, cols: np.ndarray, shape) -> np.ndarray:
    """(n, 8): the node (index into rows, cols, which are in raster order) of each pixel's
    neighbour at each of OFFSETS, -1 where there is none."""
    width = shape[1] + 2  # keys of a frame one pixel wider: no neighbour wraps round a row
    keys = (rows + 1) * width + cols + 1
    out = np.full((len(rows), len(OFFSETS)), -1, dtype=np.int64)
    for k, (dr, dc) in enumerate(OFFSETS):
        want = keys + dr * width + dc
        at = np.minimum(np.searchsorted(keys, want), len(keys) - 1)
        found = keys[at] == want
        out[found, k] = at[found]
    return out


def _components(neighbour: np.ndarray, member: np.ndarray) -> np.ndarray:
    """The 8-connected pieces of the ``member`` nodes, 1.. in raster order of their first pixel
    (as ``ndimage.label`` numbers them); 0 for the others."""
    nodes = np.flatnonzero(member)
    out = np.zeros(len(member), dtype=np.int64)
    if not len(nodes):
        return out
    local = np.full(len(member), -1, dtype=np.int64)
    local[nodes] = np.arange(len(nodes))
    src, k = np.nonzero(neighbour[nodes] >= 0)
    dst = local[neighbour[nodes][src, k]]
    keep = dst >= 0
    graph = csr_matrix((np.ones(int(keep.sum()), dtype=np.int8), (src[keep], dst[keep])), shape=(len(nodes),) * 2)
    _, labels = connected_components(graph, directed=False)  # numbered in order of each piece's first node
    out[nodes] = labels + 1
    return out


def _traced(neighbour: np.ndarray, member: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> list[np.ndarray]:
    """The 8-connected pieces of the ``member`` nodes in raster order of their first pixel, each
    its nodes in order from one of its ends (the first in raster order). Each pixel of a
    skeleton less its junctions has at most two neighbours, so a piece is a path or a loop: the
    paths are traced together by one depth-first walk of their graph (scipy), from a node joined
    to every path's first end; a loop (a ring of water round an island, no junction on it) by
    _ordered."""
    piece = _components(neighbour, member)
    count = int(piece.max())
    if count == 0:
        return []
    n = len(member)
    linked = (neighbour >= 0) & member[np.maximum(neighbour, 0)] & member[:, None]
    degree = linked.sum(axis=1)
    ends = np.flatnonzero(member & (degree <= 1))
    first_end = np.full(count + 1, n, dtype=np.int64)
    np.minimum.at(first_end, piece[ends], ends)
    paths = first_end[1:] < n
    src, k = np.nonzero(linked)
    dst = neighbour[src, k]
    starts = first_end[1:][paths]
    root = n  # joined to every path's first end
    graph = csr_matrix((np.ones(len(src) + len(starts), dtype=np.int8),
                        (np.r_[src, np.full(len(starts), root)], np.r_[dst, starts])), shape=(n + 1, n + 1))
    order = depth_first_order(graph, root, directed=True, return_predecessors=False)[1:]
    sizes = np.bincount(piece, minlength=count + 1)
    pieces: list = [None] * count
    at = 0
    while at < len(order):  # the walk takes each path whole, one after another
        p = piece[order[at]]
        pieces[p - 1] = order[at:at + sizes[p]]
        at += sizes[p]
    for p in np.flatnonzero(~paths) + 1:  # loops
        mine = np.flatnonzero(piece == p)
        ordered = _ordered(rows[mine], cols[mine])
        lookup = {(int(r), int(c)): int(i) for r, c, i in zip(rows[mine], cols[mine], mine)}
        pieces[p - 1] = np.array([lookup[(int(r), int(c))] for r, c in ordered], dtype=np.int64)
    return pieces


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
