"""The network: SegFormer MiT-B0 encoder, SegFormer all-MLP decoder, progressive 5x head.

Composed from segmentation-models-pytorch parts, as its own models are: an encoder, a
decoder and a head. The output is exactly 5H x 5W for any input H x W: the input is padded
to a multiple of 32 by reflection, run, and the output cropped. Nothing is interpolated
into shape after the fact.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from segmentation_models_pytorch.decoders.segformer.decoder import SegformerDecoder
from segmentation_models_pytorch.encoders import get_encoder
from torch import nn

from .grid import PAD_MULTIPLE, SCALE_FACTOR, padded_size

ARCHITECTURE = "s2s2net"
# The decoder works at 1/4 of the input; these steps take it to 5x the input (x20 in all).
HEAD_FACTORS = (2.0, 2.0, 2.0, 2.5)


@dataclass(frozen=True)
class ModelConfig:
    """Everything needed to rebuild the network; stored in every weights file."""

    in_channels: int = 6
    encoder: str = "mit_b0"
    decoder_channels: int = 256
    head_channels: tuple[int, ...] = (128, 64, 32, 16)

    def to_dict(self) -> dict:
        return {"architecture": ARCHITECTURE, **asdict(self), "head_channels": list(self.head_channels)}

    @classmethod
    def from_dict(cls, data: dict) -> "ModelConfig":
        if data.get("architecture") != ARCHITECTURE:
            raise ValueError(f"unknown architecture {data.get('architecture')!r} (expected {ARCHITECTURE!r})")
        config = cls(
            in_channels=int(data["in_channels"]),
            encoder=str(data["encoder"]),
            decoder_channels=int(data["decoder_channels"]),
            head_channels=tuple(int(c) for c in data["head_channels"]),
        )
        if config.encoder != "mit_b0":
            raise ValueError(f"unknown encoder {config.encoder!r}")
        if len(config.head_channels) != len(HEAD_FACTORS) or not 1 <= config.in_channels <= 64:
            raise ValueError("head_channels or in_channels out of range")
        if not all(1 <= c <= 4096 for c in (config.decoder_channels, *config.head_channels)):
            raise ValueError("channel counts out of range")
        return config


def replace_activations(module: nn.Module, old: type[nn.Module], new: type[nn.Module]) -> nn.Module:
    """Swap every ``old`` activation module for a fresh ``new`` one, in place."""
    for name, child in module.named_children():
        if isinstance(child, old):
            setattr(module, name, new())
        else:
            replace_activations(child, old, new)
    return module


class ProgressiveUpsamplingHead(nn.Module):
    """x2, x2, x2, x2.5 from the decoder's 1/4-resolution features: each step a bilinear
    upsample, a 3x3 convolution and Mish; then a 1x1 convolution to one logit."""

    def __init__(self, in_channels: int, channels: tuple[int, ...], factors: tuple[float, ...] = HEAD_FACTORS):
        super().__init__()
        self.factors = factors
        steps, prev = [], in_channels
        for ch in channels:
            steps.append(nn.Sequential(nn.Conv2d(prev, ch, 3, padding=1), nn.Mish()))
            prev = ch
        self.steps = nn.ModuleList(steps)
        self.logit = nn.Conv2d(prev, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[-2:]
        scale = 1.0
        for factor, step in zip(self.factors, self.steps):
            scale *= factor
            size = (round(h * scale), round(w * scale))
            x = step(F.interpolate(x, size=size, mode="bilinear", align_corners=False))
        return self.logit(x)


class S2S2Net(nn.Module):
    """6 x H x W Sentinel-2 reflectance (normalised) -> 1 x 5H x 5W water logits."""

    def __init__(self, in_channels: int = 6, config: ModelConfig | None = None):
        super().__init__()
        self.config = config or ModelConfig(in_channels=in_channels)
        cfg = self.config
        self.encoder = get_encoder(cfg.encoder, in_channels=cfg.in_channels, depth=5, weights=None)
        replace_activations(self.encoder, nn.GELU, nn.SiLU)
        self.decoder = SegformerDecoder(self.encoder.out_channels, encoder_depth=5, segmentation_channels=cfg.decoder_channels)
        replace_activations(self.decoder, nn.ReLU, nn.SiLU)
        self.head = ProgressiveUpsamplingHead(cfg.decoder_channels, cfg.head_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[-2:]
        x = pad_to_multiple(x, PAD_MULTIPLE)
        logits = self.head(self.decoder(self.encoder(x)))
        return logits[..., : h * SCALE_FACTOR, : w * SCALE_FACTOR]


def pad_to_multiple(x: torch.Tensor, multiple: int) -> torch.Tensor:
    """Pad bottom and right to a multiple of ``multiple`` by reflection (edge copies where the
    input is too small to reflect)."""
    h, w = x.shape[-2:]
    ph, pw = padded_size(h, multiple) - h, padded_size(w, multiple) - w
    if ph == 0 and pw == 0:
        return x
    if ph < h and pw < w:
        return F.pad(x, (0, pw, 0, ph), mode="reflect")
    return F.pad(x, (0, pw, 0, ph), mode="replicate")
