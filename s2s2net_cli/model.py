"""The network: SegFormer MiT-B0 encoder, SegFormer all-MLP decoder, progressive 5x head.

Composed from segmentation-models-pytorch parts, as its own models are: an encoder, a
decoder and a head. The output is exactly 5H x 5W for any input H x W: the input is padded
to a multiple of 32 by reflection, run, and the output cropped. Nothing is interpolated
into shape after the fact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial

import torch
import torch.nn.functional as F
from segmentation_models_pytorch.decoders.segformer.decoder import SegformerDecoder
from segmentation_models_pytorch.encoders import get_encoder
from segmentation_models_pytorch.encoders.mix_transformer import Attention as MitAttention
from torch import nn

from .bands import BAND_NAMES, BandSpec
from .grid import PAD_MULTIPLE, SCALE_FACTOR, padded_size
from .indices import GREEN, NIR, SWIR1

ARCHITECTURE = "s2s2net"
# The decoder works at 1/4 of the input; these steps take it to 5x the input (x20 in all).
HEAD_FACTORS = (2.0, 2.0, 2.0, 2.5)
DECODER_STRIDE = 4
# Decoder pixels on each side of a window that the head's upsamplings and 3x3 convolutions
# reach: with them the head's output inside the window is exactly that of the whole map.
HEAD_MARGIN = 2
# Rows of its input the head's last step takes at a time (an even number, so each piece
# starts on a whole output row): its 5x maps never exist whole, and pieces stay in cache.
LAST_STEP_ROWS = 32
# The water indices a network may take as inputs beside its bands (ModelConfig.water_indices),
# as (band, other band) positions of their normalised difference, in the order appended.
WATER_INDEX_INPUTS = {"ndwi": (GREEN, NIR), "mndwi": (GREEN, SWIR1)}
# Indices span -1..1 with a spread of about 0.5; doubled they are on the bands' scale (sd ~1).
WATER_INDEX_GAIN = 2.0
# The largest gain of an NDWI prior (NdwiPrior): at 100 no logit of the network outvotes it.
MAX_NDWI_PRIOR = 100.0
GATE_HIDDEN = 16  # the water gate's hidden channels (WaterGate)
FINE_GATE_POOLS = 3  # the fine gate's summaries of each 10 m channel over a cell (fine_gate_inputs)
# The logit of a 2 m pixel whose head the water gate skipped (WaterGate): land, whatever prior is added.
LAND_LOGIT = -1000.0
# The logit of a 2 m pixel in a cell the water gate found water throughout (its water bound): water.
WATER_LOGIT = 1000.0


@dataclass(frozen=True)
class ModelConfig:
    """Everything needed to rebuild the network; stored in every weights file."""

    in_channels: int = 6
    encoder: str = "mit_b0"
    decoder_channels: int = 256
    head_channels: tuple[int, ...] = (128, 64, 32, 16)
    water_indices: bool = False  # NDWI and MNDWI, computed from the bands, as two more inputs

    @property
    def encoder_channels(self) -> int:
        """Channels the encoder reads: the bands, and the water indices when the network takes them."""
        return self.in_channels + (len(WATER_INDEX_INPUTS) if self.water_indices else 0)

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
            water_indices=bool(data.get("water_indices", False)),  # absent from weights before it existed
        )
        if config.encoder != "mit_b0":
            raise ValueError(f"unknown encoder {config.encoder!r}")
        if len(config.head_channels) != len(HEAD_FACTORS) or not 1 <= config.in_channels <= 64:
            raise ValueError("head_channels or in_channels out of range")
        if not all(1 <= c <= 4096 for c in (config.decoder_channels, *config.head_channels)):
            raise ValueError("channel counts out of range")
        return config


def replace_modules(module: nn.Module, old: type[nn.Module], make: Callable[[nn.Module], nn.Module]) -> nn.Module:
    """Swap every ``old`` module under ``module`` for ``make(it)``, in place."""
    for name, child in module.named_children():
        if isinstance(child, old):
            setattr(module, name, make(child))
        else:
            replace_modules(child, old, make)
    return module


class SdpaAttention(nn.Module):
    """smp's MiT efficient self-attention (keys and values from a map ``sr_ratio`` x coarser),
    its softmax(q k^T scale) v as one ``F.scaled_dot_product_attention`` call: the same
    numbers up to float rounding without the (queries x keys) score map in memory, the same
    submodules and so the same state dict. The encoder on a 640 px window in 0.55x its time
    with AVX2 kernels, 0.75x in native bf16 (docs/performance.md, "The encoder's attention")."""

    def __init__(self, attention: MitAttention):
        super().__init__()
        if attention.attn_drop.p or attention.proj_drop.p:
            raise ValueError("attention dropout is not supported")
        self.num_heads, self.scale, self.sr_ratio = attention.num_heads, attention.scale, attention.sr_ratio
        self.q, self.kv, self.proj, self.sr, self.norm = attention.q, attention.kv, attention.proj, attention.sr, attention.norm

    def forward(self, x: torch.Tensor, height: int, width: int) -> torch.Tensor:
        batch, n, channels = x.shape
        heads = self.num_heads
        q = self.q(x).reshape(batch, n, heads, channels // heads).transpose(1, 2)
        if self.sr_ratio > 1:
            x = x.transpose(1, 2).reshape(batch, channels, height, width)
            x = self.norm(self.sr(x).flatten(2).transpose(1, 2))
        k, v = self.kv(x).reshape(batch, -1, 2, heads, channels // heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, scale=self.scale)
        return self.proj(y.transpose(1, 2).reshape(batch, n, channels))


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

    def forward(self, x: torch.Tensor, last_step_rows: int | None = None) -> torch.Tensor:
        """Logits at x20 the decoder's resolution. With ``last_step_rows`` the last step runs on
        that many rows of its input at a time (plus two rows of halo each side): the same
        numbers, without the whole x20 maps in memory."""
        for factor, step in zip(self.factors[:-1], self.steps[:-1]):
            x = step(_upsample(x, factor))
        rows = x.shape[-2]
        if not last_step_rows or rows <= last_step_rows:
            return self._last(x)
        factor, halo = self.factors[-1], 2
        if last_step_rows % 2 or not (last_step_rows * factor).is_integer():
            raise ValueError(f"last_step_rows {last_step_rows} must be even and give whole output rows")
        pieces = []
        for a in range(0, rows, last_step_rows):
            b = min(a + last_step_rows, rows)
            lo, hi = max(a - halo, 0), min(b + halo, rows)
            out = self._last(x[..., lo:hi, :])
            skip = round((a - lo) * factor)
            pieces.append(out[..., skip: skip + round((b - a) * factor), :])
        return torch.cat(pieces, dim=-2)

    def _last(self, x: torch.Tensor) -> torch.Tensor:
        return self.logit(self.steps[-1](_upsample(x, self.factors[-1])))


def _upsample(x: torch.Tensor, factor: float) -> torch.Tensor:
    h, w = x.shape[-2:]
    return F.interpolate(x, size=(round(h * factor), round(w * factor)), mode="bilinear", align_corners=False)


def normalised_difference(x: torch.Tensor, spec: BandSpec, a: int, b: int) -> torch.Tensor:
    """(band a - band b) / (band a + band b) of normalised bands ``x`` (n, c, h, w), the
    reflectance recovered with ``spec``'s mean and spread; float32, bounded to -1..1 (bands
    that sum to nothing, nodata or dark water, give a bounded value, never inf or NaN)."""
    ra, rb = (x[:, i: i + 1].float() * spec.std[i] + spec.mean[i] for i in (a, b))
    return ((ra - rb) / (ra + rb).abs().clamp_min(1e-3)).clamp(-1, 1)


def check_index_bands(spec: BandSpec, what: str) -> None:
    """Water indices are computed at fixed band positions: ``what`` (a network using them)
    needs these bands in this order."""
    if tuple(spec.names) != BAND_NAMES:
        raise ValueError(f"{what} needs the bands {', '.join(BAND_NAMES)} in that order")


class WaterIndexInputs(nn.Module):
    """Appends NDWI and MNDWI to the normalised bands: the reflectance is recovered with the
    band spec's mean and spread, and each index (a ratio: a scene's brightness and a band's
    gain leave it unchanged) is computed in float32 and scaled by WATER_INDEX_GAIN."""

    def __init__(self, spec: BandSpec):
        super().__init__()
        check_index_bands(spec, "a network with water index inputs")
        self.spec = spec

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        indices = [normalised_difference(x, self.spec, a, b) * WATER_INDEX_GAIN for a, b in WATER_INDEX_INPUTS.values()]
        return torch.cat([x, *(index.to(x.dtype) for index in indices)], dim=1)


class NdwiPrior(nn.Module):
    """What a pixel's own NDWI says for water, as a logit on the 2 m grid: ``gain`` x max(NDWI,
    0), each 10 m pixel's NDWI brought to 2 m bilinearly first (align_corners=False: the 2 m
    cells' centres on the 10 m grid). Only where NDWI is positive: it can make water of what the
    network doubted, never land of what the network found (water NDWI cannot see: muddy flood
    water, flooded vegetation). No weights: the gain is chosen after training, as the threshold is."""

    def __init__(self, spec: BandSpec, gain: float):
        super().__init__()
        check_index_bands(spec, "an NDWI prior")
        if not 0 <= gain <= MAX_NDWI_PRIOR:
            raise ValueError(f"NDWI prior {gain} is not in 0-{MAX_NDWI_PRIOR:g}")
        self.spec, self.gain = spec, float(gain)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # the gain before the bilinear step (10 m, 25 times fewer pixels) and the clamp in place:
        # one pass over the 2 m map in place of three; the same numbers for a gain that is a power of two
        ndwi = normalised_difference(x, self.spec, *WATER_INDEX_INPUTS["ndwi"]) * self.gain
        return F.interpolate(ndwi, scale_factor=SCALE_FACTOR, mode="bilinear", align_corners=False).clamp_min_(0)

    def cell_bounds(self, x: torch.Tensor, rows: int, cols: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The largest and the smallest prior inside each decoder cell (rows x cols of them from
        the input's top left), float32: the most and the least of the cell's own 10 m pixels and
        the ring around them, which is all its 2 m pixels' bilinear values read (a bilinear value
        lies between the least and the most of the pixels it reads)."""
        prior = normalised_difference(x, self.spec, *WATER_INDEX_INPUTS["ndwi"]).clamp_min(0) * self.gain
        s = DECODER_STRIDE
        pad = (0, max(s * cols - prior.shape[-1], 0), 0, max(s * rows - prior.shape[-2], 0))
        # cells beyond the input read zeros: never above the largest prior, never above the smallest
        high = F.max_pool2d(F.pad(prior, pad), s + 2, stride=s, padding=1)[:, 0, :rows, :cols]
        low = -F.max_pool2d(F.pad(-prior, pad), s + 2, stride=s, padding=1)[:, 0, :rows, :cols]
        return high, low


class WaterGate(nn.Module):
    """Where the head's work can be skipped: from the decoder's features (a fine gate: from the
    head's own 10 m features summed up per cell, ``fine_gate_inputs``), for each decoder cell
    (4 x 4 pixels at 10 m, 20 x 20 at 2 m), an upper estimate of the largest logit the head
    gives inside it (its land bound, channel 0: below the threshold the cell is land) and, with
    ``bounds`` 2, a lower estimate of the smallest (its water bound, channel 1: above the
    threshold the cell is water throughout), both before any NDWI prior. Each bound is a 1x1
    convolution to ``hidden`` channels of its own, Mish, and a 3x3 one to the estimate (one
    grouped convolution for both); fitted after training to the head's own answers
    (``training.gate``), never trained with the network. Float32 whatever the autocast."""

    def __init__(self, in_channels: int, hidden: int = GATE_HIDDEN, bounds: int = 1):
        super().__init__()
        if bounds not in (1, 2):
            raise ValueError(f"a water gate has 1 or 2 bounds, not {bounds}")
        self.reduce = nn.Conv2d(in_channels, hidden * bounds, 1)
        self.score = nn.Conv2d(hidden * bounds, bounds, 3, padding=1, groups=bounds)

    @property
    def bounds(self) -> int:
        return self.score.out_channels

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        with torch.autocast(features.device.type, enabled=False):
            return self.score(F.mish(self.reduce(features.float())))


class S2S2Net(nn.Module):
    """6 x H x W Sentinel-2 reflectance (normalised) -> 1 x 5H x 5W water logits. ``spec`` (the
    bands' normalisation) is needed only by a network that takes the water indices as inputs or
    is given an NDWI prior (``ndwi_prior``, its gain: added to the logits, see NdwiPrior; a
    setting of the trained network, like its threshold, not a part that trains). ``gate``, the
    bounds (1 or 2; 0 or False: none) of a WaterGate fitted to the trained head, lets
    ``forward_window`` skip the head far from water (and, with 2, inside it); ``fine_gate``, the
    bounds of a second one that reads the head's own 10 m features (``fine_gate_inputs``), skips
    its last two steps on more of the cells the first leaves."""

    def __init__(self, in_channels: int = 6, config: ModelConfig | None = None, spec: BandSpec | None = None,
                 ndwi_prior: float = 0.0, gate: int = 0, fine_gate: int = 0):
        super().__init__()
        self.config = config or ModelConfig(in_channels=in_channels)
        cfg = self.config
        self.inputs = WaterIndexInputs(spec or BandSpec()) if cfg.water_indices else nn.Identity()
        self.encoder = get_encoder(cfg.encoder, in_channels=cfg.encoder_channels, depth=5, weights=None)
        replace_modules(self.encoder, nn.GELU, lambda _: nn.SiLU())
        replace_modules(self.encoder, MitAttention, SdpaAttention)
        self.decoder = SegformerDecoder(self.encoder.out_channels, encoder_depth=5, segmentation_channels=cfg.decoder_channels)
        replace_modules(self.decoder, nn.ReLU, lambda _: nn.SiLU())
        self.head = ProgressiveUpsamplingHead(cfg.decoder_channels, cfg.head_channels)
        self.prior = NdwiPrior(spec or BandSpec(), ndwi_prior) if ndwi_prior else None
        self.gate = WaterGate(cfg.decoder_channels, bounds=int(gate)) if gate else None
        self.fine_gate = WaterGate(FINE_GATE_POOLS * cfg.head_channels[-3], bounds=int(fine_gate)) if fine_gate else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[-2:]
        logits = self.head(self.features(x))
        logits = logits[..., : h * SCALE_FACTOR, : w * SCALE_FACTOR]
        return logits if self.prior is None else logits + self.prior(x).to(logits.dtype)

    def features(self, x: torch.Tensor, region: tuple[int, int, int, int] | None = None) -> torch.Tensor:
        """The decoder's features (n, decoder_channels, fh, fw) of ``x``, padded to PAD_MULTIPLE: what
        the head and the gate read; with ``region`` = (a, b, c, d), only their rows [a, b) and
        columns [c, d) (a decoder that ``takes_region``: the inference one)."""
        encoded = self.encoder(self.inputs(pad_to_multiple(x, PAD_MULTIPLE)))
        return self.decoder(encoded) if region is None else self.decoder(encoded, region)

    def forward_window(self, x: torch.Tensor, top: int, left: int, height: int, width: int,
                       last_step_rows: int | None = LAST_STEP_ROWS, skip_below: float | None = None,
                       features: torch.Tensor | None = None,
                       cells: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """The logits of ``forward(x)`` inside a window of the input (10 m pixels), exactly
        (up to float rounding), at a fraction of the cost: encoder and decoder see all of
        ``x`` as context, the head runs only on the window's decoder pixels plus HEAD_MARGIN,
        its last step in pieces. (n, 1, 5 height, 5 width).

        With ``skip_below`` (a logit: the threshold's) and a water gate, the head runs only on
        the cells whose answer the gate cannot tell (``head_cells``): LAND_LOGIT fills those it
        rules water out of, WATER_LOGIT those it finds water throughout; the logits of the
        cells it runs on are unchanged. With a fine gate too, the head's last two steps run only
        on those of them that the fine gate cannot tell either (``fine_cells``). ``features``
        (``self.features(x)``) and ``cells`` (the cells to run and those to fill as water, in
        place of ``head_cells``': run as given), where a caller has them."""
        h, w = x.shape[-2:]
        if top < 0 or left < 0 or height < 1 or width < 1 or top + height > h or left + width > w:
            raise ValueError(f"window ({top}, {left}, {height}, {width}) does not lie inside {h} x {w}")
        if features is None and cells is None and getattr(self.decoder, "takes_region", False):
            # the decoder only over the window's cells and HEAD_MARGIN around them, all the head and
            # the gates read of it; the rest as if the input began at the region's first cell
            s, (fh, fw) = DECODER_STRIDE, (padded_size(n) // DECODER_STRIDE for n in (h, w))
            a, c = max(top // s - HEAD_MARGIN, 0), max(left // s - HEAD_MARGIN, 0)
            b, d = min(-(-(top + height) // s) + HEAD_MARGIN, fh), min(-(-(left + width) // s) + HEAD_MARGIN, fw)
            return self.forward_window(x[..., s * a: s * b, s * c: s * d], top - s * a, left - s * c, height, width,
                                       last_step_rows, skip_below, self.features(x, (a, b, c, d)), cells)
        features = self.features(x) if features is None else features
        refine = None
        if cells is None and skip_below is not None and self.gate:
            prior_cells = self.prior_cells(x, features.shape[-2:])  # for both gates: made once
            cells = self.head_cells(x, features, skip_below, prior_cells=prior_cells)
            if self.fine_gate is not None:  # cells a caller gives run as given
                refine = partial(self.fine_cells, x, skip_below=skip_below, shape=features.shape[-2:],
                                 prior_cells=prior_cells)
        active, water = (None, None) if cells is None else cells
        logits = self._head_window(features, top, left, height, width, last_step_rows, active, refine, water)
        if self.prior is None:
            return logits
        # added in the prior's float32 (in bf16 runs the sum is not rounded to bf16), in its own memory
        return self.window_prior(x, top, left, height, width).add_(logits)

    def window_prior(self, x: torch.Tensor, top: int, left: int, height: int, width: int,
                     prior: NdwiPrior | None = None) -> torch.Tensor:
        """``prior`` (the network's own by default) of the window (top, left, height, width) of
        ``x`` on the 2 m grid, float32, in memory of its own: as ``forward_window`` adds it to its
        logits, made from the window and one pixel around it (as far as its bilinear step reaches)."""
        h, w = x.shape[-2:]
        t0, l0 = max(top - 1, 0), max(left - 1, 0)
        prior = self.prior if prior is None else prior
        values = prior(x[..., t0: min(top + height + 1, h), l0: min(left + width + 1, w)])
        y, x0 = SCALE_FACTOR * (top - t0), SCALE_FACTOR * (left - l0)
        return values[..., y: y + SCALE_FACTOR * height, x0: x0 + SCALE_FACTOR * width]

    def _head_window(self, features: torch.Tensor, top: int, left: int, height: int, width: int,
                     last_step_rows: int | None, active: torch.Tensor | None,
                     refine: Callable | None = None, water: torch.Tensor | None = None) -> torch.Tensor:
        """The head's logits inside the window, on the decoder cells it covers (those of
        ``active`` only, when given: LAND_LOGIT elsewhere, and WATER_LOGIT on the cells of
        ``water``). ``refine`` (``fine_cells`` with its input bound), given the head's 10 m
        features, narrows the active cells further and names more to fill as water."""
        fh, fw = features.shape[-2:]
        s, up = DECODER_STRIDE, DECODER_STRIDE * SCALE_FACTOR  # 10 m and 2 m pixels per decoder cell
        o0, o1, p0, p1 = top // s, -(-(top + height) // s), left // s, -(-(left + width) // s)  # the window's cells
        gated = getattr(self.head, "takes_active", False)  # the sub-pixel head skips rows and columns itself
        refine = refine if gated else None
        if (active is not None and refine is None and bool(active[o0:o1, p0:p1].all())
                and (water is None or not bool(water[o0:o1, p0:p1].any()))):
            active = None  # every cell of the window runs: the full head's path
        if active is None:
            r0, c0 = max(o0 - HEAD_MARGIN, 0), max(p0 - HEAD_MARGIN, 0)
            logits = self.head(features[..., r0: min(o1 + HEAD_MARGIN, fh), c0: min(p1 + HEAD_MARGIN, fw)],
                               last_step_rows)
            y, x0 = SCALE_FACTOR * top - up * r0, SCALE_FACTOR * left - up * c0
            return logits[..., y: y + SCALE_FACTOR * height, x0: x0 + SCALE_FACTOR * width]
        # the window's cells whole, on a canvas of LAND_LOGIT; the window is cut from it at the end
        canvas = None
        rows = torch.nonzero(active[o0:o1, p0:p1].any(1)).flatten()
        cols = torch.nonzero(active[o0:o1, p0:p1].any(0)).flatten()
        waters = [] if water is None else [water[o0:o1, p0:p1]]
        if len(rows):  # the head over the window's active cells and HEAD_MARGIN around them
            a0, a1, b0, b1 = o0 + int(rows[0]), o0 + int(rows[-1]) + 1, p0 + int(cols[0]), p0 + int(cols[-1]) + 1
            r0, c0, r1, c1 = max(a0 - HEAD_MARGIN, 0), max(b0 - HEAD_MARGIN, 0), min(a1 + HEAD_MARGIN, fh), min(b1 + HEAD_MARGIN, fw)
            window = features[..., r0:r1, c0:c1]
            cells = torch.zeros((r1 - r0, c1 - c0), dtype=torch.bool, device=active.device)
            cells[a0 - r0: a1 - r0, b0 - c0: b1 - c0] = active[a0:a1, b0:b1]
            if refine is not None:
                coarse = self.head.coarse(window)
                cells, fine_water = refine(coarse, cells, r0, c0)
                logits = self.head.fine(coarse, last_step_rows, active=cells)
                waters.append(_onto(fine_water[a0 - r0: a1 - r0, b0 - c0: b1 - c0], (o1 - o0, p1 - p0), a0 - o0, b0 - p0))
            else:
                logits = self.head(window, last_step_rows, active=cells) if gated else self.head(window, last_step_rows)
            # in float32 where the prior is added to it (its bf16 logits then convert once, as they are copied)
            canvas = logits.new_empty((logits.shape[0], 1, up * (o1 - o0), up * (p1 - p0)),
                                      dtype=torch.float32 if self.prior is not None else logits.dtype)
            # the head's cells [a0, a1) x [b0, b1) (the window's active ones lie there), those it ran on
            # kept; LAND_LOGIT around them (written once: the head's cells are most of a window)
            ya, yb, xa, xb = up * (a0 - o0), up * (a1 - o0), up * (b0 - p0), up * (b1 - p0)
            mine = canvas[..., ya:yb, xa:xb]
            mine.copy_(logits[..., up * (a0 - r0): up * (a1 - r0), up * (b0 - c0): up * (b1 - c0)])
            for around in (canvas[..., :ya, :], canvas[..., yb:, :], canvas[..., ya:yb, :xa], canvas[..., ya:yb, xb:]):
                around.fill_(LAND_LOGIT)
            fill_cells_(mine, ~cells[a0 - r0: a1 - r0, b0 - c0: b1 - c0], LAND_LOGIT)
        if canvas is None:
            canvas = features.new_full((features.shape[0], 1, up * (o1 - o0), up * (p1 - p0)), LAND_LOGIT)
        if waters:
            fill_cells_(canvas, waters[0] if len(waters) == 1 else waters[0] | waters[1], WATER_LOGIT)
        y, x0 = SCALE_FACTOR * top - up * o0, SCALE_FACTOR * left - up * p0
        return canvas[..., y: y + SCALE_FACTOR * height, x0: x0 + SCALE_FACTOR * width]

    def head_cells(self, x: torch.Tensor, features: torch.Tensor, skip_below: float,
                   prior_cells: tuple | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The decoder cells (fh, fw) whose head the water gate cannot skip, and those it finds
        water throughout (``gate_cells``' rule). ``prior_cells``: ``prior_cells(x, shape)``,
        where the caller has it."""
        prior = self.prior_cells(x, features.shape[-2:]) if prior_cells is None else prior_cells
        return gate_cells(self.gate(features), *prior, skip_below)

    def fine_cells(self, x: torch.Tensor, coarse: torch.Tensor, cells: torch.Tensor, r0: int, c0: int,
                   skip_below: float, shape: tuple[int, int], prior_cells: tuple | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor]:
        """Of ``cells`` (those ``head_cells`` left to run: a window of them from cell ``r0``,
        ``c0`` of the map's ``shape``), those the fine gate cannot tell either from ``coarse``
        (the head's 10 m features over the window: ``head.coarse``), and those it finds water
        throughout (``gate_cells``' rule). ``prior_cells``: ``prior_cells(x, shape)``, where the
        caller has it."""
        rows, cols = cells.shape
        bounds = self.fine_gate(fine_gate_inputs(coarse))[..., :rows, :cols]
        prior_cells = self.prior_cells(x, shape) if prior_cells is None else prior_cells
        prior = [p[..., r0: r0 + rows, c0: c0 + cols] if torch.is_tensor(p) else p for p in prior_cells]
        run, water = gate_cells(bounds, *prior, skip_below)
        return cells & run, cells & water

    def prior_cells(self, x: torch.Tensor, shape: tuple[int, int]) -> tuple[torch.Tensor | float, torch.Tensor | float]:
        """The most and the least the NDWI prior adds in each decoder cell (a map of ``shape``); 0 without one."""
        if self.prior is None:
            return 0.0, 0.0
        return self.prior.cell_bounds(x, *shape)


def gate_cells(bounds: torch.Tensor, prior_max: torch.Tensor | float, prior_min: torch.Tensor | float,
               skip_below: float) -> tuple[torch.Tensor, torch.Tensor]:
    """A gate's rule, from its ``bounds`` (n, 1 or 2, rows, cols) and the NDWI prior's most and
    least in each cell: the cells to run, and those water throughout. A cell may hold water where
    the land bound (the head's largest logit), plus the most the prior adds there, reaches
    ``skip_below`` in any image of the batch; of those, it is water throughout where the water
    bound (the smallest), plus the least the prior adds, reaches it in every image (none without
    a water bound)."""
    maybe = (bounds[:, 0] + prior_max >= skip_below).any(0)
    if bounds.shape[1] < 2:
        return maybe, torch.zeros_like(maybe)
    water = maybe & (bounds[:, 1] + prior_min >= skip_below).all(0)
    return maybe & ~water, water


def fine_gate_inputs(coarse: torch.Tensor) -> torch.Tensor:
    """What a fine gate reads: the head's 10 m features (n, c, 4 rows, 4 cols) summed up per
    decoder cell, the largest, mean and smallest of each channel over its 4 x 4 pixels (n, 3 c,
    rows, cols), float32: summed up in the features' own type (bf16 in bf16 runs: the mean
    rounded to it, 5x faster than the map made fp32 first)."""
    cell = DECODER_STRIDE
    return torch.cat([F.max_pool2d(coarse, cell), F.avg_pool2d(coarse, cell), -F.max_pool2d(-coarse, cell)], 1).float()


def fill_cells_(pixels: torch.Tensor, cells: torch.Tensor, value: float) -> torch.Tensor:
    """``pixels`` (n, c, rows up, cols up: the 2 m pixels of ``cells``, rows x cols decoder cells
    of up = DECODER_STRIDE x SCALE_FACTOR pixels a side) with ``value`` on those of the cells
    set, in place, over the rows and columns that hold any. As pixels x keep + fill with one
    row of each per cell (keep 0 or 1, fill ``value`` or 0: exact for finite pixels, which a
    head's logits are): CPU vector code, where masked_fill is not (a 2640 px map: 0.9 ms
    against 3.2 in bf16)."""
    rows, cols = torch.nonzero(cells.any(1)).flatten(), torch.nonzero(cells.any(0)).flatten()
    if not len(rows):
        return pixels
    r0, r1, c0, c1 = int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1
    up = DECODER_STRIDE * SCALE_FACTOR
    box = pixels[..., up * r0: up * r1, up * c0: up * c1]
    box = box.view(*box.shape[:2], r1 - r0, up, box.shape[-1])
    mask = cells[r0:r1, c0:c1].repeat_interleave(up, 1)[:, None]
    torch.addcmul(mask.to(box.dtype) * value, box, (~mask).to(box.dtype), out=box)
    return pixels


def _onto(cells: torch.Tensor, shape: tuple[int, int], row: int, col: int) -> torch.Tensor:
    """``cells`` on a map of ``shape`` (False elsewhere), their first at ``row``, ``col``."""
    out = cells.new_zeros(shape)
    out[row: row + cells.shape[0], col: col + cells.shape[1]] = cells
    return out


def cell_pixels(cells: torch.Tensor, top: int, left: int, height: int, width: int) -> torch.Tensor:
    """The 2 m pixels (SCALE_FACTOR height, SCALE_FACTOR width) of a window at ``top``, ``left``
    (10 m pixels) that lie in the decoder ``cells`` (the whole map's: (fh, fw))."""
    up = DECODER_STRIDE * SCALE_FACTOR
    y0, x0, y1, x1 = SCALE_FACTOR * top, SCALE_FACTOR * left, SCALE_FACTOR * (top + height), SCALE_FACTOR * (left + width)
    o0, p0 = y0 // up, x0 // up
    pixels = _cells_to_pixels(cells[o0: -(-y1 // up), p0: -(-x1 // up)], up)[0, 0]
    return pixels[y0 - up * o0: y1 - up * o0, x0 - up * p0: x1 - up * p0]


def pixel_cells(pixels: torch.Tensor, top: int, left: int, shape: tuple[int, int]) -> torch.Tensor:
    """The decoder cells (a map of ``shape``: (fh, fw)) that hold any of the 2 m ``pixels`` of a
    window at ``top``, ``left`` (10 m pixels): the inverse of ``cell_pixels``."""
    up = DECODER_STRIDE * SCALE_FACTOR
    canvas = pixels.new_zeros((shape[0] * up, shape[1] * up))
    y0, x0 = SCALE_FACTOR * top, SCALE_FACTOR * left
    canvas[y0: y0 + pixels.shape[0], x0: x0 + pixels.shape[1]] = pixels
    return canvas.view(shape[0], up, shape[1], up).any(3).any(1)


def _cells_to_pixels(cells: torch.Tensor, size: int) -> torch.Tensor:
    """A (rows, cols) map of cells as (1, 1, rows size, cols size) pixels."""
    return cells.repeat_interleave(size, 0).repeat_interleave(size, 1)[None, None]


def widen_inputs(state: dict[str, torch.Tensor], model: nn.Module) -> dict[str, torch.Tensor]:
    """``state`` of a network that read fewer input channels than ``model`` (the water indices
    added) made to fit it: the first layer's weights for the new channels are zero, so the
    widened network computes exactly what the narrower one did until training moves them."""
    expected = model.state_dict()
    widened = dict(state)
    for name, tensor in state.items():
        target = expected.get(name)
        if (target is not None and tensor.dim() == 4 and target.dim() == 4 and tensor.shape[1] < target.shape[1]
                and tensor.shape[:1] + tensor.shape[2:] == target.shape[:1] + target.shape[2:]):
            extra = tensor.new_zeros((tensor.shape[0], target.shape[1] - tensor.shape[1], *tensor.shape[2:]))
            widened[name] = torch.cat([tensor, extra], dim=1)
    return widened


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
