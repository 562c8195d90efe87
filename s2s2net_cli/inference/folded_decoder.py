"""The SegFormer decoder rewritten for inference, its linear layers folded into one.

The decoder maps each encoder stage through a linear layer (MLP), upsamples it to 1/4 of the
input, concatenates the four and fuses them with a 1x1 convolution and batch norm, then its
activation. Upsampling acts on space and the linear maps on channels, so they commute, and
a composition of linear maps is one: the folded decoder applies to each stage a single 1x1
convolution (MLP, its quarter of the fuse convolution and the batch norm's scale, in eval
mode) at the stage's own resolution, upsamples the four 256-channel results and sums them
before the activation. The same numbers (up to float rounding) without the 1024-channel map,
the transposes around the MLPs, or the fp32 copies autocast makes around upsampling.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class FoldedDecoder(nn.Module):
    """The numbers of an eval-mode smp SegformerDecoder (with any activation after its batch norm)."""

    def __init__(self, decoder: nn.Module):
        super().__init__()
        conv, norm, self.activation = decoder.fuse_stage[0], decoder.fuse_stage[1], decoder.fuse_stage[2]
        if conv.bias is not None or not isinstance(norm, nn.BatchNorm2d):
            raise ValueError("expected a bias-free 1x1 fuse convolution followed by batch norm")
        scale = norm.weight.double() / torch.sqrt(norm.running_var.double() + norm.eps)
        fuse = conv.weight.detach().double()[:, :, 0, 0]  # (out, stages x out)
        width = fuse.shape[0]
        weights, bias = [], norm.bias.detach().double() - scale * norm.running_mean.double()
        for i, mlp in enumerate(decoder.mlp_stage):
            part = fuse[:, i * width:(i + 1) * width]
            weights.append((scale[:, None] * (part @ mlp.linear.weight.detach().double())).float())
            bias = bias + scale * (part @ mlp.linear.bias.detach().double())
        self.weights = nn.ParameterList(nn.Parameter(w[:, :, None, None], requires_grad=False) for w in weights)
        self.bias = nn.Parameter(bias.float(), requires_grad=False)

    takes_region = True

    def forward(self, features: list[torch.Tensor], region: tuple[int, int, int, int] | None = None) -> torch.Tensor:
        """The decoder's map (1/4 of the input), or only its rows [a, b) and columns [c, d) for
        ``region`` = (a, b, c, d): the same numbers there (up to float rounding), each stage
        convolved and upsampled only over what they read (``_source``)."""
        size = [dim // 4 for dim in features[0].shape[2:]]
        a, b, c, d = region or (0, size[0], 0, size[1])
        stages = features[2:] if features[1].size(1) == 0 else features[1:]
        total = None
        for i, (weight, feature) in enumerate(zip(self.weights, stages[::-1])):
            last = i == len(self.weights) - 1
            r = size[0] // feature.shape[-2]  # the stage's stride over the map's: 8, 4, 2, 1
            (sa, sb), (sc, sd) = _source(a, b, r, feature.shape[-2]), _source(c, d, r, feature.shape[-1])
            y = F.conv2d(feature[..., sa:sb, sc:sd], weight, self.bias if last else None)
            if r > 1:
                with torch.autocast(y.device.type, enabled=False):  # upsample in y's own dtype
                    y = F.interpolate(y, scale_factor=r, mode="bilinear", align_corners=False)
            y = y[..., a - r * sa: b - r * sa, c - r * sc: d - r * sc]
            total = y if total is None else total + y
        return self.activation(total)


def _source(a: int, b: int, r: int, n: int) -> tuple[int, int]:
    """The rows [sa, sb) of a map of ``n`` rows that its bilinear upsampling by the whole number
    ``r`` reads for its output rows [a, b): output row i reads rows around (i + 0.5) / r - 0.5.
    Upsampled alone, those rows give the same output rows [a, b) as the whole map: each output
    row keeps its two rows and weights, and the clamping at the map's edges stays where it was."""
    if r == 1:
        return a, b
    return max(math.floor((a + 0.5) / r - 0.5), 0), min(math.floor((b - 0.5) / r - 0.5) + 2, n)
