"""Pixel counts and scores for water masks over valid pixels."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Counts:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    def __iadd__(self, other: "Counts") -> "Counts":
        self.tp += other.tp
        self.fp += other.fp
        self.fn += other.fn
        self.tn += other.tn
        return self

    @property
    def pixels(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    def scores(self) -> dict:
        return {**scores_from_counts(self.tp, self.fp, self.fn), "pixels": self.pixels,
                "tp": self.tp, "fp": self.fp, "fn": self.fn, "tn": self.tn}


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
