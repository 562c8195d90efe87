"""The upsampling head rewritten for inference as sub-pixel convolutions.

Each step of the head bilinearly upsamples its input by f = P/Q (2 or 2.5) and convolves it
3x3. Both are linear, so away from the map's edges the step equals one convolution on the
coarse grid (stride Q) whose P x P outputs per block are the fine grid's phases, shuffled into
place afterwards (Shi et al., 2016). The fine map that the upsample would write never exists,
the convolution sees P^2 times the output channels on a grid P^2 times smaller (a shape the
CPU's matrix kernels run far faster), Mish runs on the phases (it is elementwise), and on the
last step the 1x1 logit convolution does too (a grouped convolution, one group per phase), so
only one channel is ever shuffled at x20. On the x2.5 step each phase reads 3 (or 2) of the
coarse kernel's 4 taps a side: the phases that share a window run as one 3x3 convolution each,
9 of 16 taps: a fifth fewer multiply-adds in the whole head, 0-7 % faster over the whole
network on this project's CPU (the rest of the step, Mish and the logit, costs as before).

The edges differ: the upsample clamps and the convolution pads the fine map with zeros, where
the coarse convolution pads the coarse map. The two fine rows and columns at each edge of the
map are therefore recomputed by the original step on a thin slab and written over the phases'
answer, so the output equals the trained head's everywhere (up to float rounding).

Quantized (``SubpixelHead.quantize``, what ``--precision int8`` runs), each step's coarse
convolutions read its input as 8-bit codes over a range measured on scenes and run as oneDNN's
8-bit convolution, its sums in 32-bit integers and its answer in fp32; all else as above. Its
integer sums are exact, so blocks, bands and the whole map agree up to float rounding.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import os
import shutil
from bisect import bisect_left
from fractions import Fraction
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

# Fine rows (and columns) at each edge of a step's output that the coarse convolution gets
# wrong, and the coarse rows of input that give them exactly through the original step.
EDGE_ROWS = 2
EDGE_INPUT_ROWS = 2
# 10 m pixels beyond the active cells that the gated head's x2 and x2.5 steps run on: what
# their convolutions read beyond the cells, and the wrong edges (EDGE_ROWS) that a cut leaves,
# stay inside it (as EDGE_ROWS rows do around a band; one pixel is not enough).
GATE_HALO = 2
# Active cells of a band further apart than this many cells run as separate pieces; closer, as one.
SPAN_GAP = 8
GATE_BAND_ROWS = 8  # rows of the x2 step's input (10 m) in a block of a sparse band: two cells
GATE_BLOCK_CELLS = 2  # cells across a block: 2 since the blocks run inside their halo (docs/performance.md)
GATE_BATCH = 64  # blocks in one batch (their maps are small: about 40 MB in fp32 for 64)
# A band whose active runs span this much of its width runs over them, as the full head's bands
# do; a sparser one in blocks. 0.8 measured against 0.5 and 1.01 (docs/performance.md).
GATE_DENSE = 0.8
LOG2_E = 1.4426950408889634  # e^x = 2^(x LOG2_E)
VALID = -1  # the key of a step's whole kernel without padding (SubpixelStep.inside), once quantized


def phase_taps(factor: float) -> tuple[int, int, int, torch.Tensor]:
    """For a bilinear upsample by ``factor`` (align_corners=False) followed by 3 fine taps:
    (P, Q, offset of the first coarse tap, coefficients (P, 3, L)) where phase p's fine tap k
    reads coarse pixel Q b + offset + d of block b with weight coefficients[p, k, d]."""
    ratio = Fraction(factor).limit_denominator(8)
    if float(ratio) != factor:
        raise ValueError(f"factor {factor} is not a small rational")
    P, Q = ratio.numerator, ratio.denominator
    taps: dict[tuple[int, int, int], float] = {}
    for p in range(P):
        for k in (-1, 0, 1):
            source = (p + k + 0.5) * Q / P - 0.5  # in coarse pixels from the block's first one
            first = math.floor(source)
            frac = source - first
            taps[p, k, first] = taps.get((p, k, first), 0.0) + 1 - frac
            taps[p, k, first + 1] = taps.get((p, k, first + 1), 0.0) + frac
    low = min(d for _, _, d in taps)
    length = max(d for _, _, d in taps) - low + 1
    coefficients = torch.zeros(P, 3, length, dtype=torch.float64)
    for (p, k, d), w in taps.items():
        coefficients[p, k + 1, d - low] += w
    return P, Q, low, coefficients


class SubpixelStep(nn.Module):
    """One head step (bilinear upsample by ``factor``, 3x3 convolution, Mish, and on the last
    step the 1x1 ``logit`` convolution) as a convolution on the coarse grid, its phases
    shuffled onto the fine grid."""

    def __init__(self, conv: nn.Conv2d, factor: float, logit: nn.Conv2d | None = None,
                 mish: Callable[[torch.Tensor], torch.Tensor] | None = None):
        super().__init__()
        self.factor = factor
        self.mish = mish or _mish_inplace
        self.original_conv, self.original_logit = conv, logit
        P, Q, low, coef = phase_taps(factor)
        self.P, self.Q, self.pad = P, Q, -low
        length = coef.shape[-1]
        w = conv.weight.detach().double()  # (out, in, 3, 3)
        # (py, px, out, in, dy, dx): each phase's kernel on the coarse grid, where the trained
        # convolution's weights are (a GPU's: every number of the step lives there)
        on_device = coef.to(w.device)
        phased = torch.einsum("oikl,akd,ble->aboide", w, on_device, on_device)
        out_ch = w.shape[0]
        if logit is None:  # pixel_shuffle reads channel c P^2 + py P + px
            weight = phased.permute(2, 0, 1, 3, 4, 5)
        else:  # phase-major, so that the logit is one group per phase
            weight = phased
        weight = weight.reshape(out_ch * P * P, w.shape[1], length, length)
        self.weight = nn.Parameter(weight.to(conv.weight.dtype), requires_grad=False)
        bias = conv.bias.detach() if conv.bias is not None else conv.weight.new_zeros(out_ch)
        bias = bias.repeat_interleave(P * P) if logit is None else bias.repeat(P * P)
        self.bias = nn.Parameter(bias, requires_grad=False)
        if self.pad != length - Q - self.pad:
            raise ValueError(f"factor {factor}: the coarse convolution would need uneven padding")
        if logit is not None:  # the 1x1 logit on each phase's channels: P^2 groups
            self.logit_weight = nn.Parameter(logit.weight.detach().repeat(P * P, 1, 1, 1), requires_grad=False)
            self.logit_bias = nn.Parameter(logit.bias.detach().repeat(P * P), requires_grad=False)
        self.groups = self._phase_groups(phased, bias.view(-1, out_ch) if logit is not None else None, coef, logit)
        self.int8: tuple[float, int] | None = None  # the input's scale and zero point, once quantized
        self.packed: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    def quantize(self, low: float, high: float) -> None:
        """Run this step's convolutions in 8-bit integers (oneDNN): its input rounded to 256
        levels over [``low``, ``high``] (a range calibrated on scenes; beyond it clamped), the
        weights to 8 bits per output channel, the sums in 32-bit integers, the answer in fp32.
        Mish, the logit, the pixel shuffle and the edges run as before, in fp32."""
        scale = max(high - min(low, 0.0), 1e-6) / 255
        zero = min(max(round(-min(low, 0.0) / scale), 0), 255)
        self.int8 = (scale, zero)
        convs = [(0, self.weight, self.Q, self.pad), (VALID, self.weight, self.Q, 0)]
        convs += [(k + 1, g.weight, self.Q, 0) for k, g in enumerate(self.groups)]
        for key, weight, stride, padding in convs:
            w = weight.detach().float()
            w_scale = w.abs().amax(dim=(1, 2, 3)).clamp_min(1e-12) / 127
            qw = torch.round(w / w_scale.view(-1, 1, 1, 1)).clamp(-127, 127).to(torch.int8)
            packed = torch.ops.onednn.qconv_prepack(qw, w_scale, scale, zero, [stride] * 2, [padding] * 2, [1, 1], 1, None)
            self.packed[key] = (packed, w_scale, torch.zeros(len(w_scale), dtype=torch.int64))

    def _codes(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` as the int8 convolutions read it: its 8-bit codes once quantized (in fp32 runs), else ``x``."""
        if self.int8 is None or x.dtype != torch.float32 or torch.is_autocast_enabled("cpu"):
            return x
        scale, zero = self.int8
        return getattr(self.mish, "codes", codes)(x, 1 / scale, zero)  # in x's layout

    def _conv(self, x: torch.Tensor, key: int, weight: torch.Tensor, bias: torch.Tensor, padding: int) -> torch.Tensor:
        """The step's convolution ``key`` (0: the whole kernel; k: group k - 1) on ``x``: in int8
        where ``x`` is codes (``_codes``), else as ``x``'s type."""
        if x.dtype != torch.uint8:
            return F.conv2d(x, weight.to(x.dtype), bias.to(x.dtype), stride=self.Q, padding=padding)
        scale, zero = self.int8
        packed, w_scale, w_zero = self.packed[key]
        return torch.ops.onednn.qconv2d_pointwise(x, scale, zero, packed, w_scale, w_zero, bias.float(), [self.Q] * 2,
                                                  [padding] * 2, [1, 1], 1, 1.0, 0, torch.float32, "none", [], "")

    def _phase_groups(self, phased: torch.Tensor, bias: torch.Tensor | None, coef: torch.Tensor,
                      logit: nn.Conv2d | None) -> nn.ModuleList:
        """Where phases read fewer coarse taps than the kernel's length (x2.5: each phase 3 or
        2 of 4), the phases that share a window of taps as one convolution each, reading only
        that window: 9 of 16 taps, 1.8x less work than the one convolution. Empty where every
        phase reads the whole kernel (x2). Only the last step (with its logit) has such phases."""
        length = coef.shape[-1]
        used = [torch.nonzero(coef[p].abs().sum(0)).flatten().tolist() for p in range(self.P)]
        window = max(taps[-1] - taps[0] + 1 for taps in used)
        if window == length or logit is None:
            return nn.ModuleList()
        starts = [min(taps[0], length - window) for taps in used]
        groups = nn.ModuleList()
        for sy in sorted(set(starts)):
            for sx in sorted(set(starts)):
                phases = [(py, px) for py in range(self.P) for px in range(self.P)
                          if starts[py] == sy and starts[px] == sx]
                weight = torch.cat([phased[py, px, :, :, sy: sy + window, sx: sx + window] for py, px in phases])
                group = nn.Module()
                group.start = (sy, sx)
                group.register_buffer("index", torch.tensor([py * self.P + px for py, px in phases], device=phased.device))
                group.weight = nn.Parameter(weight.to(self.weight.dtype), requires_grad=False)
                group.bias = nn.Parameter(torch.cat([bias[py * self.P + px] for py, px in phases]), requires_grad=False)
                n = len(phases)
                # the 1x1 logit of each phase on its own channels, as one dense convolution whose weights
                # are zero off each phase's (a grouped one of n groups ran 1.5x its time on the CPU)
                group.logit_weight = nn.Parameter(torch.block_diag(*[logit.weight.detach()[:, :, 0, 0]] * n)[..., None, None],
                                                  requires_grad=False)
                group.logit_bias = nn.Parameter(logit.bias.detach().repeat(n), requires_grad=False)
                groups.append(group)
        return groups

    def forward(self, x: torch.Tensor, top: bool = True, bottom: bool = True, left: bool = True,
                right: bool = True) -> torch.Tensor:
        """The step on ``x``; ``top``, ``bottom``, ``left`` and ``right`` say whether its first and
        last rows and columns are to be made exact (a caller that crops them away, or fixes them
        itself, need not)."""
        h, w = x.shape[-2:]
        if h % self.Q or w % self.Q or h < EDGE_INPUT_ROWS or w < EDGE_INPUT_ROWS:
            return self.original(x)
        if self.groups:
            y = F.pixel_shuffle(self._grouped(x), self.P)
        else:
            y = self.mish(self._conv(self._codes(x), 0, self.weight, self.bias, self.pad))
            if self.original_logit is not None:
                y = F.conv2d(y, self.logit_weight.to(y.dtype), self.logit_bias.to(y.dtype), groups=self.P * self.P)
            y = F.pixel_shuffle(y, self.P)
        self._fix_edges(x, y, top, bottom, left, right)
        return y

    def inside(self, x: torch.Tensor) -> torch.Tensor:
        """The step's output on the coarse blocks whose every tap lies inside ``x`` (no padding, no
        edges): block j reads input rows (and columns) Q j to Q j + L - 1, L the kernel's length;
        (h - L) // Q + 1 blocks a side. Where a caller keeps only a map's inside, the work on its
        halo that the padded step does and the caller cuts away."""
        length = self.weight.shape[-1]
        h, w = (x.shape[-2] - length) // self.Q + 1, (x.shape[-1] - length) // self.Q + 1
        if self.groups:
            return F.pixel_shuffle(self._grouped(x, h, w, padding=0), self.P)
        y = self.mish(self._conv(self._codes(x), VALID, self.weight, self.bias, 0))
        if self.original_logit is not None:
            y = F.conv2d(y, self.logit_weight.to(y.dtype), self.logit_bias.to(y.dtype), groups=self.P * self.P)
        return F.pixel_shuffle(y, self.P)

    def _grouped(self, x: torch.Tensor, h: int | None = None, w: int | None = None, padding: int | None = None) -> torch.Tensor:
        """The logits of every phase (n, P^2, h, w: h / Q, w / Q by default), each group of phases
        from its own window, ``x`` padded by ``padding`` (the step's own by default)."""
        h, w = h or x.shape[-2] // self.Q, w or x.shape[-1] // self.Q
        x_in = self._codes(x)
        pad = self.pad if padding is None else padding
        padded = F.pad(x_in, (pad,) * 4, value=self.int8[1] if x_in.dtype == torch.uint8 else 0) if pad else x_in
        out = x.new_empty(x.shape[0], self.P * self.P, h, w)
        for k, group in enumerate(self.groups):
            sy, sx = group.start
            y = self.mish(self._conv(padded[..., sy:, sx:], k + 1, group.weight, group.bias, 0)[..., :h, :w])
            out[:, group.index] = F.conv2d(y, group.logit_weight.to(y.dtype), group.logit_bias.to(y.dtype))
        return out

    def original(self, x: torch.Tensor) -> torch.Tensor:
        """The step as trained: upsample, convolve, Mish (and the logit)."""
        h, w = x.shape[-2:]
        up = F.interpolate(x, size=(round(h * self.factor), round(w * self.factor)), mode="bilinear",
                           align_corners=False)
        y = F.mish(self.original_conv(up))
        return self.original_logit(y) if self.original_logit is not None else y

    def _fix_edges(self, x: torch.Tensor, y: torch.Tensor, top: bool, bottom: bool, left: bool, right: bool) -> None:
        """Overwrite the fine rows and columns at the map's edges with the original step's."""
        n = EDGE_INPUT_ROWS
        e = EDGE_ROWS
        if top:
            y[..., :e, :] = self.original(x[..., :n, :])[..., :e, :]
        if bottom:
            y[..., -e:, :] = self.original(x[..., -n:, :])[..., -e:, :]
        self.fix_sides(x, y, left=left, right=right)

    def fix_sides(self, x: torch.Tensor, y: torch.Tensor, skip: int = 0, left: bool = True, right: bool = True) -> None:
        """Overwrite the first (``left``) and last (``right``) fine columns of the step's output
        ``y`` on input ``x`` (``y``: that output's rows from ``skip`` on)."""
        n, e = EDGE_INPUT_ROWS, EDGE_ROWS
        h = y.shape[-2]
        if left:
            y[..., :, :e] = self.original(x[..., :, :n])[..., skip: skip + h, :e]
        if right:
            y[..., :, -e:] = self.original(x[..., :, -n:])[..., skip: skip + h, -e:]


class SubpixelHead(nn.Module):
    """A ProgressiveUpsamplingHead's numbers, each step a SubpixelStep; with ``last_step_rows``
    the last step in pieces of that many input rows (plus a halo of two) as the original does,
    and the x2 step before it in bands of two pieces' worth, so that neither's map at 5 m or
    2 m ever exists whole (in fp32 the 5 m map of a 512 px tile alone is 143 MB, three times
    over while it is made).

    Given ``active`` decoder cells (the water gate's), those two steps, two thirds or more of
    the head's work, run only around them, and not at all on a band without one. A band whose
    active cells' runs (plus a halo of GATE_HALO 10 m pixels; runs closer than SPAN_GAP cells as
    one) span GATE_DENSE of its width or more runs over those runs; a sparser one in blocks of
    GATE_BAND_ROWS x GATE_BLOCK_CELLS cells around its active cells, GATE_BATCH blocks with
    their halos in one batch (a lone cell costs a small piece of one batched convolution, not
    a convolution of its own: on a tile of rivers on land the network's call takes 0.7-0.8 of
    the time it took in thin bands of runs). What they give outside the active cells is not
    to be read (the caller fills it).
    Measured, skipping the first two steps too gained nothing: the cells they would need cover
    most of a tile (and making the 10 m map only around the blocks saved nothing either)."""

    takes_active = True

    def __init__(self, head: nn.Module, mish: Callable[[torch.Tensor], torch.Tensor] | None = None):
        super().__init__()
        self.factors = head.factors
        self.steps = nn.ModuleList(SubpixelStep(step[0], factor, mish=mish)
                                   for factor, step in zip(head.factors[:-1], head.steps[:-1]))
        self.last = SubpixelStep(head.steps[-1][0], head.factors[-1], head.logit, mish=mish)

    def quantize(self, ranges: list[tuple[float, float]]) -> None:
        """Run every step's convolutions in 8-bit integers, each step's input rounded over its
        range in ``ranges`` (SubpixelStep.quantize)."""
        for step, (low, high) in zip([*self.steps, self.last], ranges, strict=True):
            step.quantize(low, high)

    def forward(self, x: torch.Tensor, last_step_rows: int | None = None,
                active: torch.Tensor | None = None) -> torch.Tensor:
        return self.fine(self.coarse(x), last_step_rows, active)

    def coarse(self, x: torch.Tensor) -> torch.Tensor:
        """The steps that run over the whole window: the head's 10 m features (what a fine gate reads)."""
        for step in self.steps[:-1]:
            x = step(x)
        return x

    def fine(self, x: torch.Tensor, last_step_rows: int | None = None,
             active: torch.Tensor | None = None) -> torch.Tensor:
        """The last two steps on ``coarse``'s output ``x``, around the ``active`` cells where given."""
        banded = self.steps[-1]
        rows, cols = x.shape[-2:]
        if active is None and (not last_step_rows or 2 * rows <= last_step_rows):
            return self.last(banded(x))
        band, halo = max(last_step_rows or rows, 2), EDGE_ROWS  # input rows of the banded step, and around them
        cell = rows // active.shape[0] if active is not None else 1  # the banded step's pixels per decoder cell
        fine = round(banded.factor * self.last.factor)  # output pixels per pixel of the banded step's input
        out, blocks = [], []
        for a in range(0, rows, band):
            b = min(a + band, rows)
            lo, hi = max(a - halo, 0), min(b + halo, rows)
            spans = [(0, cols)] if active is None else self._spans(active[a // cell: -(-b // cell)].any(0), cell, cols)
            if spans == [(0, cols)]:
                out.append(self._band(x, lo, hi, a, b, rows, 0, cols, last_step_rows))
                continue
            out.append(x.new_zeros((x.shape[0], 1, (b - a) * fine, cols * fine)))
            if _width(spans) >= GATE_DENSE * cols:  # much to run: over the band's spans, as the full head's
                for c0, c1 in spans:
                    out[-1][..., fine * c0: fine * c1] = self._band(x, lo, hi, a, b, rows, c0, c1, last_step_rows)
                continue
            for p in range(a, b, GATE_BAND_ROWS):  # little: in small blocks, run together
                q = min(p + GATE_BAND_ROWS, b)
                used = active[p // cell: -(-q // cell)].any(0)
                blocks += [(out[-1], a, p, q, c0, c1) for c0, c1 in _blocks(used, cell, cols)]
        self._run_blocks(x, blocks, fine, last_step_rows)
        return torch.cat(out, dim=-2)

    def _run_blocks(self, x: torch.Tensor, blocks: list[tuple[torch.Tensor, int, int, int, int, int]], fine: int,
                    last_step_rows: int | None) -> None:
        """The x2 and x2.5 steps on each block (the input rows [p, q) and columns [c0, c1) of
        ``x``), written into its band's output (which starts at input row a). Blocks with
        GATE_HALO pixels of the map around them run as batches of GATE_BATCH, one shape to a
        batch, the halo cut away after; a block at the map's edge runs alone, its edge made exact."""
        rows, cols = x.shape[-2:]
        g, n = GATE_HALO, x.shape[0]
        inner: dict[tuple[int, int], list] = {}
        for band, a, p, q, c0, c1 in blocks:
            if p - g >= 0 and q + g <= rows and c0 - g >= 0 and c1 + g <= cols:
                inner.setdefault((q - p, c1 - c0), []).append((band, a, p, q, c0, c1))
                continue
            lo, hi, l0, l1 = max(p - EDGE_ROWS, 0), min(q + EDGE_ROWS, rows), max(c0 - g, 0), min(c1 + g, cols)
            y = self._band(x, lo, hi, p, q, rows, l0, l1, last_step_rows)
            band[..., fine * (p - a): fine * (q - a), fine * c0: fine * c1] = y[..., fine * (c0 - l0): fine * (c1 - l0)]
        for (h, w), group in inner.items():
            for i in range(0, len(group), GATE_BATCH):
                chunk = group[i: i + GATE_BATCH]
                crops = torch.cat([x[..., p - g: q + g, c0 - g: c1 + g] for _, _, p, q, c0, c1 in chunk])
                crops = crops.contiguous(memory_format=torch.channels_last)
                z = self._inside(crops, h, w)
                for j, (band, a, p, q, c0, c1) in enumerate(chunk):
                    band[..., fine * (p - a): fine * (q - a), fine * c0: fine * c1] = z[j * n: (j + 1) * n]

    def _inside(self, crops: torch.Tensor, h: int, w: int) -> torch.Tensor:
        """The x2 and x2.5 steps' output on the middle ``h`` x ``w`` input pixels of ``crops``
        (GATE_HALO pixels around them), computing only what reaches it: each step on the blocks
        whose taps lie inside its input (``SubpixelStep.inside``), the x2 step's output cut to
        the rows and columns the x2.5 step reads. The padded steps on the whole crop, cut after,
        did 1.3x (x2) and 1.9x (x2.5) this work for a block of 8 x 16 pixels."""
        step, last, g = self.steps[-1], self.last, GATE_HALO
        # the x2.5 step's blocks over the middle (its input: the x2 step's P-times finer map)
        first, rows, cols = (step.P * n // last.Q for n in (g, h, w))
        start = last.Q * first - last.pad - step.P * step.pad  # in the x2 step's inside output
        reach = last.weight.shape[-1] - last.Q  # input rows a run of blocks reads beyond Q each
        y = step.inside(crops)[..., start: start + last.Q * rows + reach, start: start + last.Q * cols + reach]
        return last.inside(y)

    @staticmethod
    def _spans(used: torch.Tensor, cell: int, cols: int) -> list[tuple[int, int]]:
        """The columns (of the banded step's input) to run for a band whose active cells are
        ``used``: each run of active cells with GATE_HALO pixels each side, runs closer than
        SPAN_GAP cells run as one."""
        where = torch.nonzero(used).flatten().tolist()
        spans: list[tuple[int, int]] = []
        for k in where:
            c0, c1 = max(k * cell - GATE_HALO, 0), min((k + 1) * cell + GATE_HALO, cols)
            if spans and c0 - spans[-1][1] < SPAN_GAP * cell:
                spans[-1] = (spans[-1][0], c1)
            else:
                spans.append((c0, c1))
        return spans

    def _band(self, x: torch.Tensor, lo: int, hi: int, a: int, b: int, rows: int, c0: int, c1: int,
              last_step_rows: int | None) -> torch.Tensor:
        """The x2 and x2.5 steps' output for input rows [a, b) and columns [c0, c1) of ``x``
        (rows [lo, hi) read: two around where there are)."""
        cols = x.shape[-1]
        # output rows [2 lo, 2 hi); those within EDGE_ROWS of a cut are wrong and never read
        y = self.steps[-1](x[..., lo:hi, c0:c1], top=lo == 0, bottom=hi == rows, left=c0 == 0, right=c1 == cols)
        return self._last_rows(y, 2 * lo, 2 * a, 2 * b, 2 * rows, last_step_rows or 2 * rows, c0 == 0, c1 == cols)

    def _last_rows(self, y: torch.Tensor, y0: int, a: int, b: int, rows: int, piece_rows: int, left: bool = True,
                   right: bool = True) -> torch.Tensor:
        """The last step's output for its input rows [a, b) of ``rows``, in pieces of
        ``piece_rows``; ``y`` holds its input rows from ``y0`` on, two beyond [a, b) where there
        are; ``left`` and ``right``: whether its first and last columns are the map's."""
        factor, halo = self.factors[-1], 2
        pieces = []
        for p in range(a, b, piece_rows):
            q = min(p + piece_rows, b)
            lo, hi = max(p - halo, 0), min(q + halo, rows)
            piece = self.last(y[..., lo - y0: hi - y0, :], top=p == 0, bottom=q == rows, left=False, right=False)
            skip = round((p - lo) * factor)
            pieces.append(piece[..., skip: skip + round((q - p) * factor), :])
        out = torch.cat(pieces, dim=-2)
        lo, hi = max(a - halo, 0), min(b + halo, rows)
        self.last.fix_sides(y[..., lo - y0: hi - y0, :], out, skip=round((a - lo) * factor), left=left, right=right)
        return out


def _width(spans: list[tuple[int, int]]) -> int:
    return sum(c1 - c0 for c0, c1 in spans)


def _blocks(used: torch.Tensor, cell: int, cols: int) -> list[tuple[int, int]]:
    """Columns [c0, c1) of GATE_BLOCK_CELLS cells each that cover the ``used`` cells, each
    starting at the first used cell the last one left out. A block reaching into the GATE_HALO
    pixels at the map's right edge moves left, where its used cells allow, so that it keeps its
    halo and runs batched (alone, such blocks took a third of the blocks' time on a mixed
    scene); where they do not, it is cut at the edge and runs alone."""
    where = torch.nonzero(used).flatten().tolist()
    blocks: list[tuple[int, int]] = []
    width, edge = GATE_BLOCK_CELLS * cell, cols - GATE_HALO
    end = 0
    for k in where:
        if k < end:
            continue
        end = k + GATE_BLOCK_CELLS
        c0, c1 = k * cell, min(end * cell, cols)
        if c1 > edge:
            last_used = where[bisect_left(where, end) - 1]  # the last used cell this block covers
            if (last_used + 1) * cell <= edge and edge - width >= GATE_HALO:
                c0, c1 = edge - width, edge
        blocks.append((c0, c1))
    return blocks


def codes(x: torch.Tensor, inverse: float | torch.Tensor, zero: int | torch.Tensor) -> torch.Tensor:
    """``x`` as 8-bit codes: round(x ``inverse``) + ``zero`` (``inverse``: 1 / the codes' scale),
    clamped to 0-255 (uint8)."""
    return torch.clamp(torch.round(x * inverse) + zero, 0, 255).to(torch.uint8)


def _mish_inplace(x: torch.Tensor) -> torch.Tensor:
    return F.mish(x, inplace=True)


def _mish_one_exp(x: torch.Tensor) -> torch.Tensor:
    """Mish with one exponential, in fp32: x tanh(log(1 + e^x)) = x n / (n + 2), n = e^x (e^x + 2).
    For bf16 and fp16 inputs e^x is 2^(x log2 e): compiled, the same bf16 answers as e^x on 8
    million values, in 0.71 of the time (Zen 4); in fp32 it is not faster and rounds otherwise."""
    wide = x.dtype in (torch.float32, torch.float64)
    e = (torch.exp(x.float()) if wide else torch.exp2(x.float() * LOG2_E)).clamp(max=1e4)  # beyond e^9.2 the ratio is 1 in fp32
    n = e * (e + 2)
    return (x.float() * n / (n + 2)).to(x.dtype)


class FusedMish:
    """Mish compiled by TorchInductor into one pass over memory (3-4x faster than torch's own
    on a CPU in bf16), for any shape, once ``enabled``; torch's own Mish until then. The
    compilation happens on the first call after that (about 15 s, 2 s with the compiler's
    cache warm) and needs a C++ compiler; where it fails, or its first answer is not torch's
    Mish, this falls back to torch's Mish for good and says why in ``failure``."""

    def __init__(self, enabled: bool = False):
        self.enabled = enabled
        self.compiled: dict[str, Callable] = {}  # each function compiled, by name
        self.failure: str | None = None if has_cpp_compiler() else "no C++ compiler"

    @property
    def active(self) -> bool:
        return self.enabled and self.failure is None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self._run(_mish_one_exp, x, (), _mish_inplace, self._mish_error)

    def codes(self, x: torch.Tensor, inverse: float, zero: int) -> torch.Tensor:
        """``codes(x, inverse, zero)``, compiled into one pass as Mish is (torch's operations: five)."""
        return self._run(codes, x, (inverse, zero), lambda x: codes(x, inverse, zero),
                         lambda x, y: self._codes_error(x, y, inverse, zero))

    def _run(self, function: Callable, x: torch.Tensor, arguments: tuple, plain: Callable,
             error: Callable[[torch.Tensor, torch.Tensor], tuple[str | None, torch.Tensor]]) -> torch.Tensor:
        """``function(x, *arguments)`` compiled, on ``x`` as one flat view (one graph for every shape
        and batch, the arguments as tensors: no recompiling), its first answer checked by ``error``
        (a compiler that gets it wrong is not used); ``plain(x)`` until enabled or after a failure."""
        if self.active:
            try:
                flat, back = _flat(x)
                tensors = tuple(torch.tensor(a, dtype=x.dtype) for a in arguments)
                compiled = self.compiled.get(function.__name__)
                if compiled is None:
                    if not torch.cuda.is_available():
                        quiet_cpp_extension()
                    compiled = self.compiled[function.__name__] = torch.compile(function, dynamic=True)
                    with compile_options(), subnormals_kept():
                        self.failure, answer = error(flat, compiled(flat, *tensors))
                    return back(answer)
                with compile_options(), subnormals_kept():  # a recompile (another dtype) alike
                    return back(compiled(flat, *tensors))
            except Exception as failure:  # noqa: BLE001 - any compiler failure means the plain path
                self.failure = f"{type(failure).__name__}: {str(failure).splitlines()[0] if str(failure) else ''}"
        return plain(x)

    @staticmethod
    def _mish_error(x: torch.Tensor, y: torch.Tensor) -> tuple[str | None, torch.Tensor]:
        """What is wrong with the compiled Mish's answer ``y`` on ``x`` (None: nothing), and the answer to use."""
        expected = F.mish(x.float())
        error = float((y.float() - expected).abs().max()) if x.numel() else 0.0
        if error > MISH_CHECK_TOLERANCE[x.dtype]:
            return f"compiled Mish differs from torch's by {error:.3g}", expected.to(x.dtype)
        return None, y

    @staticmethod
    def _codes_error(x: torch.Tensor, y: torch.Tensor, inverse: float, zero: int) -> tuple[str | None, torch.Tensor]:
        """The same for the compiled 8-bit codes: a rounding apart from torch's at most."""
        expected = codes(x, inverse, zero)
        if x.numel() and int((y.int() - expected.int()).abs().max()) > 1:
            return "compiled 8-bit codes differ from torch's", expected
        return None, y


def _flat(x: torch.Tensor) -> tuple[torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    """``x`` as one dimension where its memory is dense (contiguous, or channels-last), and the
    way back to its shape and layout; elsewhere ``x`` itself."""
    if x.dim() == 4 and not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last):
        n, c, h, w = x.shape
        return x.permute(0, 2, 3, 1).reshape(-1), lambda y: y.view(n, h, w, c).permute(0, 3, 1, 2)
    if x.is_contiguous():
        return x.view(-1), lambda y: y.view(x.shape)
    return x, lambda y: y


# How far the compiled Mish may differ from torch's on its first call: float rounding of its one
# exponential in fp32, and of the result's last bit in bf16 or fp16 (values to 60: bf16's 0.25).
MISH_CHECK_TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-4, torch.bfloat16: 0.5, torch.float16: 0.1}


def compile_options():
    """TorchInductor's options for the Mish it compiles, as its config's context: 256-bit vectors
    where torch would use 512. Its AVX-512 code for this function with dynamic shapes in fp32
    gives wrong numbers (errors of 1-2) and corrupts the heap (torch 2.14.1, an AMD EPYC with
    AVX-512: "double free or corruption"); the 256-bit code is right in fp32 and bf16, and in bf16
    about 5 % slower on Mish alone (under 1 % of a tile). Set by the config's own patch, not
    torch.compile's ``options``, which torch before 2.5 refuses for an option whose default is
    None ("Unexpected type of attr cpp.simdlen")."""
    from torch._inductor import config

    if torch.backends.cpu.get_cpu_capability().startswith("AVX512"):
        return config.patch({"cpp.simdlen": 256})
    return contextlib.nullcontext()


def flushes_subnormals() -> bool:
    """Whether this thread's floating point flushes subnormal numbers to zero (x86's FTZ/DAZ)."""
    return float(np.float32(1e-40) * np.float32(2.0)) == 0.0


@contextlib.contextmanager
def subnormals_kept():
    """The process's handling of subnormal numbers as it was before the block. torch 2.4's
    TorchInductor compiled with -ffast-math, for which gcc before 13 links crtfastmath.o in:
    loading its code set flush-to-zero for the whole process, and changed a library caller's
    numbers under them."""
    before = flushes_subnormals()
    try:
        yield
    finally:
        if flushes_subnormals() != before:
            torch.set_flush_denormal(before)


def quiet_cpp_extension() -> None:
    """Compiling imports torch's C++ extension builder, which says "No CUDA runtime is found"
    where nvcc is on the PATH: nothing to do on a CPU. Its logger is quietened; torch 2.4
    printed it as the module was imported, so it is imported here with stderr set aside."""
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    with contextlib.redirect_stderr(io.StringIO()):
        import torch.utils.cpp_extension  # noqa: F401


def has_cpp_compiler() -> bool:
    """Whether TorchInductor can find a C++ compiler (it looks for these, or $CXX)."""
    return any(shutil.which(name) for name in (os.environ.get("CXX", ""), "g++", "c++", "clang++") if name)
