"""Soft-label BCE (smoothing 0.1) plus Dice, both over valid mask pixels only.

Targets are 0/1 with ``IGNORE`` (255) at nodata. Both parts are computed per sample and
averaged over the batch, so the loss of a global batch split across ranks is the mean of the
ranks' losses. The Dice part is computed in fp32 even under mixed precision.
"""

from __future__ import annotations

import torch
from segmentation_models_pytorch.losses import DiceLoss, SoftBCEWithLogitsLoss
from torch import nn

IGNORE = 255


class WaterLoss(nn.Module):
    """``bce_weight * SoftBCE(smooth=0.1) + dice_weight * Dice``, ignoring nodata targets."""

    def __init__(self, smooth_factor: float = 0.1, bce_weight: float = 1.0, dice_weight: float = 1.0):
        super().__init__()
        self.bce = SoftBCEWithLogitsLoss(smooth_factor=smooth_factor, reduction="none")
        # samples as "labels": smp then scores Dice per sample (dims 0 and 2) and averages them
        self.dice = DiceLoss(mode="multilabel", from_logits=True, ignore_index=IGNORE)
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
        # smp's Dice masks both prediction and target where target == ignore_index.
        masked = torch.where(valid, clean, torch.full_like(target, IGNORE))
        dice = self.dice(logits.reshape(1, n, -1), masked.reshape(1, n, -1))
        return {"loss": self.bce_weight * bce + self.dice_weight * dice, "bce": bce, "dice": dice}

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return self.parts(logits, target)["loss"]
