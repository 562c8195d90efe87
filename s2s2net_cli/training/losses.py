"""Soft-label BCE (smoothing 0.1) plus Dice, both over valid mask pixels only, scored where
the label is true: on the 2 m grid for 2 m labels, on the label's own cells for coarse ones.

Targets are 0/1 with ``IGNORE`` (255) at nodata. Both parts are computed per sample and
averaged over the batch, so the loss of a global batch split across ranks is the mean of the
ranks' losses. The Dice part is computed in fp32 even under mixed precision.

Dice is the soft Dice of each sample, ``1 - 2 |P T| / (|P| + |T|)``; for a sample without
water, whose Dice is undefined, it is the mean predicted water probability (the share of the
chip called water): 0 when it is dry and seen dry, 1 when it is all called water. smp's
DiceLoss left such samples out, so false water on dry chips was punished by the BCE alone.

A coarse label (``label_scale`` k > 1: one label cell is k x k cells of 2 m, a 10 m label has
k = 5) is scored against the 2 m probabilities averaged over each of its cells: the network is
asked for the right amount of water in each cell and stays free to place it at 2 m. Its
parts are the soft BCE less the target's own entropy (the KL divergence: zero where the
cells' averages equal the smoothed targets) and the Dice with squared sums in the denominator
(``1 - 2 |P T| / (|P|^2 + |T|^2)``: zero where they equal the targets, also fractional ones).

``label_edges`` says what a 0/1 coarse label asks of the cells on its edges (a water cell with a
land cell among its 8 neighbours, or a land cell with a water one), whose true water share is
anywhere from none to all: "whole" asks them for all or none, as inside the water and the land;
"majority" only for the side of half that the label says (a water cell at least half water, a
land cell at most half), as a 10 m label is read at 10 m, so a mixed shore cell is not made a 2 m
block. Cells inside the water and the land, and fractional labels, are asked the same by both.

``boundary_weight`` (default 0: none) adds that many times a soft boundary F1 loss to the chips
whose labels are on the prediction's own grid (exact 2 m truth, or a degraded scene's label):
``1 - F1`` of the water edges, as ``metrics.boundary_counts`` scores them (edge pixels, each near
the other mask's within BOUNDARY_TOLERANCE pixels), with the prediction's edges soft (its
probability less the least of its 4-neighbours') and "near" a maximum over the tolerance's disk.
Pixel losses pay little for leaving out water too small or thin to place surely, which leaves
its shores out too; this term asks for them. Chips without a label edge add nothing.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from segmentation_models_pytorch.losses import SoftBCEWithLogitsLoss
from torch import nn

from ..formats import NODATA
from ..metrics import BOUNDARY_TOLERANCE, disk
from ..rulebook import refuse
from .config import LABEL_EDGES

IGNORE = NODATA  # the targets' nodata value, left out of both parts
EPS = 1e-6


class WaterLoss(nn.Module):
    """``bce_weight * SoftBCE(smooth=0.1) + dice_weight * Dice``, ignoring nodata targets."""

    def __init__(self, smooth_factor: float = 0.1, bce_weight: float = 1.0, dice_weight: float = 1.0,
                 label_edges: str = "whole", boundary_weight: float = 0.0):
        super().__init__()
        if label_edges not in LABEL_EDGES:
            raise refuse("S2N-LABEL-EDGES", None, value=label_edges, choices=", ".join(LABEL_EDGES))
        self.label_edges = label_edges
        self.smooth_factor = smooth_factor
        self.bce = SoftBCEWithLogitsLoss(smooth_factor=smooth_factor, reduction="none")
        self.bce_weight = bce_weight
        self.dice_weight = dice_weight
        self.boundary_weight = boundary_weight

    def parts(self, logits: torch.Tensor, target: torch.Tensor, label_scale=None) -> dict[str, torch.Tensor]:
        """The BCE and Dice parts and their weighted sum, as tensors. ``label_scale`` (one int a
        sample, default 1) says which samples carry a coarse label, repeated on the 2 m grid."""
        logits = logits.float()
        target = target.float()
        scales = [1] * len(logits) if label_scale is None else [int(k) for k in label_scale]
        boundary = None
        if set(scales) == {1}:
            bce, dice = self.fine_terms(logits, target)
            if self.boundary_weight:
                boundary = soft_boundary_loss(torch.sigmoid(logits), target).mean()
        else:
            bce, dice = torch.zeros(len(logits), device=logits.device), torch.zeros(len(logits), device=logits.device)
            for k in sorted(set(scales)):
                rows = torch.tensor([i for i, s in enumerate(scales) if s == k], device=logits.device)
                terms = (self.fine_terms(logits[rows], target[rows]) if k == 1
                         else self.coarse_terms(logits[rows], target[rows][..., ::k, ::k], k))
                bce[rows], dice[rows] = terms
            if self.boundary_weight and 1 in scales:
                fine = torch.tensor([i for i, s in enumerate(scales) if s == 1], device=logits.device)
                # a mean over the batch, the coarse samples adding nothing, as bce's and dice's
                boundary = soft_boundary_loss(torch.sigmoid(logits[fine]), target[fine]).sum() / len(logits)
        bce, dice = bce.mean(), dice.mean()
        loss = self.bce_weight * bce + self.dice_weight * dice
        out = {"loss": loss, "bce": bce, "dice": dice}
        if self.boundary_weight:
            boundary = boundary if boundary is not None else loss.new_zeros(())
            out["loss"] = loss + self.boundary_weight * boundary
            out["boundary"] = boundary
        return out

    def forward(self, logits: torch.Tensor, target: torch.Tensor, label_scale=None) -> torch.Tensor:
        return self.parts(logits, target, label_scale)["loss"]

    def fine_terms(self, logits: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-sample BCE and Dice of 2 m logits against a 2 m target."""
        valid = target != IGNORE
        clean = torch.where(valid, target, torch.zeros_like(target))
        n = logits.shape[0]
        per_sample_valid = valid.reshape(n, -1).sum(1).clamp_min(1)
        bce = (self.bce(logits, clean) * valid).reshape(n, -1).sum(1) / per_sample_valid
        return bce, soft_dice(torch.sigmoid(logits), clean, valid)

    def coarse_terms(self, logits: torch.Tensor, cells: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-sample BCE (as KL divergence) and squared Dice of 2 m logits averaged over k x k
        cells against ``cells`` (the label on its own grid: 0/1 or fractions, IGNORE at nodata)."""
        prob = F.avg_pool2d(torch.sigmoid(logits.float()), k)
        valid = cells != IGNORE
        t = torch.where(valid, cells.float(), torch.zeros_like(prob))
        s = self.smooth_factor
        ts = t * (1 - s) + (1 - t) * s
        if self.label_edges == "majority":  # edge cells: held to their side of half, not to all or none
            wet_edge, dry_edge = label_edge_cells(cells, valid)
            held = prob.detach()
            ts = torch.where(wet_edge, held.clamp(0.5, 1 - s), torch.where(dry_edge, held.clamp(s, 0.5), ts))
            t = torch.where(wet_edge, held.clamp(0.5, 1), torch.where(dry_edge, held.clamp(0, 0.5), t))
        p = prob.clamp(EPS, 1 - EPS)
        kl = (ts * (torch.log(ts.clamp_min(EPS)) - torch.log(p))
              + (1 - ts) * (torch.log((1 - ts).clamp_min(EPS)) - torch.log(1 - p)))
        n = logits.shape[0]
        bce = (kl * valid).reshape(n, -1).sum(1) / valid.reshape(n, -1).sum(1).clamp_min(1)
        return bce, squared_dice(prob, t, valid)


def label_edge_cells(cells: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The coarse label's edge cells (n, 1, h, w): water cells with a land cell among their 8
    neighbours, and land cells with a water cell among theirs (nodata and fractions are neither)."""
    water, land = (cells == 1) & valid, (cells == 0) & valid
    near_land = F.max_pool2d(land.float(), 3, stride=1, padding=1) > 0
    near_water = F.max_pool2d(water.float(), 3, stride=1, padding=1) > 0
    return water & near_land, land & near_water


def soft_dice(prob: torch.Tensor, target: torch.Tensor, valid: torch.Tensor, eps: float = 1e-7) -> torch.Tensor:
    """Per-sample Dice loss over valid pixels (n,): soft Dice where the sample has water, the
    mean predicted probability where it has none."""
    n = prob.shape[0]
    v = valid.reshape(n, -1).float()
    p = prob.reshape(n, -1) * v
    t = target.reshape(n, -1) * v
    wet = t.sum(1) > 0
    dice = 1 - 2 * (p * t).sum(1) / (p.sum(1) + t.sum(1)).clamp_min(eps)
    false_share = p.sum(1) / v.sum(1).clamp_min(1)
    return torch.where(wet, dice, false_share)


def squared_dice(prob: torch.Tensor, target: torch.Tensor, valid: torch.Tensor, eps: float = 1e-7) -> torch.Tensor:
    """Per-sample Dice loss with squared sums (n,), zero where ``prob`` equals a (possibly
    fractional) target; the mean predicted probability where the sample has no water."""
    n = prob.shape[0]
    v = valid.reshape(n, -1).float()
    p = prob.reshape(n, -1) * v
    t = target.reshape(n, -1) * v
    wet = t.sum(1) > 0
    dice = 1 - 2 * (p * t).sum(1) / ((p * p).sum(1) + (t * t).sum(1)).clamp_min(eps)
    false_share = p.sum(1) / v.sum(1).clamp_min(1)
    return torch.where(wet, dice, false_share)


def soft_boundary_loss(prob: torch.Tensor, target: torch.Tensor, tolerance: int = BOUNDARY_TOLERANCE,
                       eps: float = 1e-6) -> torch.Tensor:
    """Per-sample ``1 - boundary F1`` (n,) of water probabilities ``prob`` against a 0/1 ``target``
    on the same grid (IGNORE at nodata), 0 where the target has no edge. The target's edges are
    those of ``metrics.boundary_counts`` (valid water with a land or nodata 4-neighbour); the
    prediction's are soft: its probability less the least of its 4-neighbours'."""
    valid = (target != IGNORE).float()
    water = torch.where(target == 1, 1.0, 0.0).to(prob.dtype)
    p = prob * valid
    ref_edge = water * (1 - _erode4(water)) * valid
    pred_edge = (p - _erode4(p)).clamp_min(0) * valid
    near_ref, near_pred = _dilate_disk(ref_edge, tolerance), _dilate_disk(pred_edge, tolerance)
    n = prob.shape[0]
    precision = (pred_edge * near_ref).reshape(n, -1).sum(1) / (pred_edge.reshape(n, -1).sum(1) + eps)
    ref_count = ref_edge.reshape(n, -1).sum(1)
    recall = (ref_edge * near_pred).reshape(n, -1).sum(1) / (ref_count + eps)
    f1 = 2 * precision * recall / (precision + recall + eps)
    return torch.where(ref_count > 0, 1 - f1, torch.zeros_like(f1))


def _erode4(x: torch.Tensor) -> torch.Tensor:
    """The least of each pixel and its 4-neighbours (outside the array counts as 1, as
    ``binary_erosion(border_value=1)``)."""
    padded = F.pad(x, (1, 1, 1, 1), value=1.0)
    return torch.stack([x, padded[..., :-2, 1:-1], padded[..., 2:, 1:-1], padded[..., 1:-1, :-2],
                        padded[..., 1:-1, 2:]]).amin(0)


def _dilate_disk(x: torch.Tensor, radius: int) -> torch.Tensor:
    """The greatest value within ``radius`` pixels (Euclidean) of each pixel: the grey dilation
    by the disk ``metrics.boundary_counts`` uses (``metrics.disk``)."""
    padded = F.pad(x, (radius,) * 4)
    h, w = x.shape[-2:]
    return torch.stack([padded[..., dy: dy + h, dx: dx + w] for dy, dx in np.argwhere(disk(radius))]).amax(0)
