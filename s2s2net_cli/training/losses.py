"""Soft-label BCE (smoothing 0.1) plus Dice, both over valid mask pixels only.

Targets are 0/1 with ``IGNORE`` (255) at nodata. Both parts are computed per sample and
averaged over the batch, so the loss of a global batch split across ranks is the mean of the
ranks' losses. The Dice part is computed in fp32 even under mixed precision.

Dice is the soft Dice of each sample, ``1 - 2 |P T| / (|P| + |T|)``; for a sample without
water, whose Dice is undefined, it is the mean predicted water probability (the share of the
chip called water): 0 when it is dry and seen dry, 1 when it is all called water. smp's
DiceLoss left such samples out, so false water on dry chips was punished by the BCE alone.
"""

from __future__ import annotations

import torch
from segmentation_models_pytorch.losses import SoftBCEWithLogitsLoss
from torch import nn

from ..formats import NODATA

IGNORE = NODATA  # the targets' nodata value, left out of both parts


class WaterLoss(nn.Module):
    """``bce_weight * SoftBCE(smooth=0.1) + dice_weight * Dice``, ignoring nodata targets."""

    def __init__(self, smooth_factor: float = 0.1, bce_weight: float = 1.0, dice_weight: float = 1.0):
        super().__init__()
        self.bce = SoftBCEWithLogitsLoss(smooth_factor=smooth_factor, reduction="none")
        self.bce_weight = bce_weight
        self.dice_weight = dice_weight

    def parts(self, logits: torch.Tensor, target: torch.Tensor) -> dict[str, torch.Tensor]:
        """The BCE and Dice parts and their weighted sum, as tensors."""
        logits = logits.float()
        target = target.float()
        valid = target != IGNORE
        clean = torch.where(valid, target, torch.zeros_like(target))
        n = logits.shape[0]
        per_sample_valid = valid.reshape(n, -1).sum(1).clamp_min(1)
        bce = ((self.bce(logits, clean) * valid).reshape(n, -1).sum(1) / per_sample_valid).mean()
        dice = soft_dice(torch.sigmoid(logits), clean, valid).mean()
        return {"loss": self.bce_weight * bce + self.dice_weight * dice, "bce": bce, "dice": dice}

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return self.parts(logits, target)["loss"]


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
