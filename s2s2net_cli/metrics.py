"""Pixel counts and scores for water masks over valid pixels."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BOUNDARY_TOLERANCE = 2  # pixels: how far a water edge may lie from the reference's and still count


@dataclass
class Counts:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0
    edges: tuple = (0, 0, 0, 0)  # boundary_counts, summed (all zero where they were not counted)

    def __iadd__(self, other: "Counts") -> "Counts":
        self.tp += other.tp
        self.fp += other.fp
        self.fn += other.fn
        self.tn += other.tn
        self.edges = tuple(int(a + b) for a, b in zip(self.edges, other.edges))
        return self

    @property
    def pixels(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    def scores(self) -> dict:
        return {**scores_from_counts(self.tp, self.fp, self.fn), "boundary_f1": boundary_f1(np.array(self.edges)),
                "pixels": self.pixels, "tp": self.tp, "fp": self.fp, "fn": self.fn, "tn": self.tn}


def count(pred: np.ndarray, ref: np.ndarray, valid: np.ndarray) -> Counts:
    """Confusion counts of boolean ``pred`` against boolean ``ref`` where ``valid``."""
    p, r = pred[valid].astype(bool), ref[valid].astype(bool)
    tp = int(np.count_nonzero(p & r))
    fp = int(np.count_nonzero(p & ~r))
    fn = int(np.count_nonzero(~p & r))
    return Counts(tp, fp, fn, int(p.size) - tp - fp - fn)


def scores_from_counts(tp: int, fp: int, fn: int) -> dict:
    """F1, IoU, precision and recall; None where a score is undefined (0 / 0), e.g. F1 when
    neither the reference nor the prediction has any water."""
    return {
        "f1": 2 * tp / (2 * tp + fp + fn) if (2 * tp + fp + fn) else None,
        "iou": tp / (tp + fp + fn) if (tp + fp + fn) else None,
        "precision": tp / (tp + fp) if (tp + fp) else None,
        "recall": tp / (tp + fn) if (tp + fn) else None,
    }


def disk(radius: int) -> np.ndarray:
    """The pixels within ``radius`` (Euclidean) of the centre of a (2 radius + 1)^2 square:
    what "near" means for boundary F1 (boundary_counts, and the loss that learns it)."""
    y, x = np.mgrid[-radius:radius + 1, -radius:radius + 1]
    return y * y + x * x <= radius * radius


def boundary_counts(pred: np.ndarray, ref: np.ndarray, valid: np.ndarray, tolerance: int = BOUNDARY_TOLERANCE,
                    core: tuple[slice, slice] | None = None) -> np.ndarray:
    """Boundary F1's counts (Csurka et al. 2013): the predicted water edge pixels within
    ``tolerance`` pixels (Euclidean) of a reference edge pixel, the predicted edge pixels, the
    reference edge pixels within ``tolerance`` of a predicted one, the reference edge pixels;
    edges are the water pixels with a land 4-neighbour, counted where ``valid``. Sum them over
    images, then precision = [0] / [1], recall = [2] / [3]. ``core``: count only the pixels of
    this part of the arrays, the rest (at least ``tolerance`` + 1 pixels around it) being there
    so that its edges and distances are those of the whole image."""
    from scipy import ndimage  # only boundary scores need it

    def edge(mask):
        return mask & ~ndimage.binary_erosion(mask, border_value=1) & valid

    pe, re = edge(pred.astype(bool) & valid), edge(ref.astype(bool) & valid)
    near_ref, near_pred = ndimage.binary_dilation(re, disk(tolerance)), ndimage.binary_dilation(pe, disk(tolerance))
    if core is not None:
        pe, re, near_ref, near_pred = pe[core], re[core], near_ref[core], near_pred[core]
    return np.array([np.count_nonzero(pe & near_ref), np.count_nonzero(pe), np.count_nonzero(re & near_pred),
                     np.count_nonzero(re)], dtype=np.int64)


def boundary_f1(counts: np.ndarray) -> float | None:
    """Boundary F1 from summed ``boundary_counts``: None where neither mask has an edge (as F1
    is where neither has water), 0 where only one has, or where none of them lies near the other's."""
    if not counts[1] and not counts[3]:
        return None
    precision = counts[0] / counts[1] if counts[1] else 0.0
    recall = counts[2] / counts[3] if counts[3] else 0.0
    return float(2 * precision * recall / (precision + recall)) if precision + recall else 0.0
