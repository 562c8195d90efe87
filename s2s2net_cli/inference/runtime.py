"""The network at run time: weights loaded on a device, mixed precision and test-time flips,
as a forward from normalised tiles to 2 m water probabilities."""

from __future__ import annotations

import contextlib
import math
import os
from typing import Callable

import numpy as np
import torch

from ..bands import BAND_NAMES
from ..checkpoint import load_model
from ..model import NdwiPrior, cell_pixels, pixel_cells
from ..rulebook import option, refuse
from ..weights_header import model_name, weights_digest, weights_file
from .folded_decoder import FoldedDecoder
from .stream import Forward
from .subpixel_head import FusedMish, SubpixelHead


def resolve_device(device: str, local_rank: int = 0) -> torch.device:
    """The torch device for ``device``; "auto" and "cuda" take this rank's GPU (``local_rank``) under a launcher.
    A GPU asked for that is not there is refused, saying why (a PyTorch built for the CPU only)."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type != "cuda":
        return dev
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        why = (f"this PyTorch ({torch.__version__}) is built for the CPU only" if torch.version.cuda is None
               else f"this PyTorch (CUDA {torch.version.cuda}) finds no GPU or driver")
        raise refuse("S2N-DEVICE-NO-CUDA", option("device", device), why=why)
    if dev.index is None:
        return torch.device("cuda", local_rank % count)
    if dev.index >= count:
        raise refuse("S2N-DEVICE-NO-SUCH-GPU", option("device", device), count=count, last=count - 1)
    return dev


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for ``precision`` on ``device`` (None for fp32). "auto": bf16 on GPUs
    that have it (else fp16), and on CPUs whose instructions do bf16 arithmetic natively
    (AVX512_BF16 or AMX, read from the CPU), where it is 1.6x faster here; fp32 on other CPUs."""
    if precision == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.bfloat16 if cpu_has_native_bf16() else None
    return {"32": None, "bf16": torch.bfloat16, "16": torch.float16}[precision]


def runs_int8(precision: str, device: torch.device, has_ranges: bool) -> bool:
    """Whether the head's convolutions run in 8-bit integers: asked for ("int8"; refused off x86
    CPUs), or "auto" on an x86 CPU with VNNI and without native bf16, for weights that carry int8
    ranges (faster than fp32 there, with masks 99.9 % the same: docs/performance.md)."""
    x86 = device.type == "cpu" and cpu_runs_int8()
    if precision == "int8" and not x86:
        where = device if device.type != "cpu" else f"this CPU ({torch.backends.cpu.get_cpu_capability()})"
        raise refuse("S2N-INT8-NOT-X86", None, device=where)
    return precision == "int8" or (precision == "auto" and x86 and has_ranges and cpu_has_vnni()
                                   and not cpu_has_native_bf16())


def cpu_runs_int8() -> bool:
    """Whether this CPU runs oneDNN's 8-bit convolutions: x86 with AVX2 or AVX-512, as torch reads it."""
    return torch.backends.mkldnn.is_available() and torch.backends.cpu.get_cpu_capability().startswith(("AVX2", "AVX512"))


def cpu_has_vnni() -> bool:
    """Whether this CPU sums 8-bit products into 32 bits in one instruction (AVX512_VNNI or
    AVX_VNNI), as torch reads it from the CPU: where 8-bit convolutions pay (3-4x fp32's on a Zen
    4's AVX512_VNNI). Without it oneDNN's AVX2 kernels multiply 8-bit integers in two steps, level
    with fp32 on a real AVX2 CPU (AMD EPYC Zen 1: 0.98x, and a scene 1.03x as long in int8).
    oneDNN held below VNNI (ONEDNN_MAX_CPU_ISA=AVX2, as benchmarks mimic an AVX2 CPU) has none."""
    capabilities = torch.cpu.get_capabilities() if hasattr(torch.cpu, "get_capabilities") else {}
    held = (os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or "").upper()
    return bool(capabilities.get("avx512_vnni") or capabilities.get("avx_vnni")) and held not in ("SSE41", "AVX", "AVX2")


def cpu_has_native_bf16() -> bool:
    """Whether this CPU multiplies bf16 natively (AVX512_BF16 or AMX-BF16), as torch reads it from
    the CPU, and torch's kernels use it: held to AVX2 (ATEN_CPU_CAPABILITY=avx2), they emulate
    bf16, 3.5x slower than int8 on a 1024 px scene (AMD EPYC Zen 4)."""
    capabilities = torch.cpu.get_capabilities() if hasattr(torch.cpu, "get_capabilities") else {}
    native = bool(capabilities.get("avx512_bf16") or capabilities.get("amx_bf16"))
    return native and torch.backends.cpu.get_cpu_capability().startswith("AVX512")


PRECISION_NAMES = {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}

# 10 m pixels of a scene from which a CPU compiles Mish into one pass (FusedMish): 16 tiles of
# 512 px, which save about 5 s against a 2 s compile with the compiler's cache warm (the first
# compile on a machine, about 15 s, is repaid from about 50 tiles).
FUSED_MISH_MIN_PIXELS = 2048 * 2048


def inference_network(model: torch.nn.Module, mish: FusedMish | None = None) -> torch.nn.Module:
    """The trained network (in eval mode) as it runs here: its decoder folded and its head as
    sub-pixel convolutions (Mish from ``mish``), channels-last. The same numbers up to float
    rounding; in bf16 on this project's CPU about 1.9x faster than the trained network (3x with
    the fused Mish; predict_bench.py)."""
    model.decoder = FoldedDecoder(model.decoder)
    model.head = SubpixelHead(model.head, mish=mish)
    return model.to(memory_format=torch.channels_last)  # 1.4x faster convolutions on CPUs and GPUs


class ModelRuntime(Forward):
    """A weights file's network on a device, run in fp32 or mixed precision, with or without
    the eight flips of each tile."""

    def __init__(self, weights, device: str = "auto", precision: str = "auto", flips: bool = False,
                 threshold: float | None = None, batch_size: int | None = None, local_rank: int = 0,
                 full_head: bool = False):
        self.weights = weights_file(weights)  # "default": the bundled model
        self.device = resolve_device(device, local_rank)
        self.model, self.card = load_model(self.weights, self.device)  # InputError naming a missing or bad file
        self.digest = weights_digest(self.weights)
        self.mish = FusedMish()
        self.model = inference_network(self.model, self.mish)
        if tuple(self.card.bands.names) != BAND_NAMES:
            raise refuse("S2N-WEIGHTS-BANDS", self.weights, trained=', '.join(self.card.bands.names), reads=', '.join(BAND_NAMES))
        self.int8 = runs_int8(precision, self.device, self.card.int8_ranges is not None)
        if self.int8 and self.card.int8_ranges is None:
            raise refuse("S2N-INT8-NO-RANGES", self.weights)
        if self.int8:
            self.model.head.quantize(self.card.int8_ranges)
        self.amp = None if self.int8 else autocast_dtype(precision, self.device)
        if self.amp is not None:  # the head's weights in the type it runs in, once: its convolutions
            self.model.head.to(self.amp)  # cast them to their input's on every call (~1900 casts a tile)
        self.spec = self.card.bands
        self.flips = flips
        self.threshold = self.card.threshold if threshold is None else threshold
        # where the weights carry a water gate, the head runs only where it cannot rule water out (at a
        # threshold of 0 or 1 everywhere: every pixel is water, or only those whose probability rounds to 1)
        gated = not full_head and self.model.gate is not None and 0 < self.threshold < 1
        self.skip_below = threshold_logit(self.threshold) if gated else None
        self.label = self.weights.name  # what the model is called: its file's name, unless a caller says otherwise
        self.threaded = self.device.type == "cuda"
        self.batch_size = batch_size or (8 if self.threaded else 1)

    def for_scene(self, scene) -> "ModelRuntime":
        """On a CPU, a scene large enough to repay the compilation runs Mish compiled (FusedMish)."""
        if self.device.type == "cpu" and scene.height * scene.width >= FUSED_MISH_MIN_PIXELS:
            self.mish.enabled = True
        return self

    @property
    def name(self) -> str:
        """The model's name in tags, tables and prediction files: its label, "+flips" when averaged over flips."""
        return model_name(self.label, self.flips)

    @property
    def precision(self) -> str:
        """The arithmetic the network runs in: fp32, bf16, fp16 or int8 (the head's convolutions; the rest fp32)."""
        return "int8" if self.int8 else PRECISION_NAMES[self.amp]

    @property
    def fused_mish(self) -> bool:
        return self.mish.active

    @property
    def head(self) -> str:
        """How the head ran: "gated" (skipped where the water gate rules water out) or "full"."""
        return "full" if self.skip_below is None else "gated"

    def tags(self) -> dict:
        return {"model": self.name, "model_sha256": self.digest, "model_version": self.card.version,
                "threshold": str(self.threshold), "ndwi_prior": f"{self.card.ndwi_prior:g}", "precision": self.precision, "head": self.head}

    def gpu_peak_mb(self) -> float | None:
        """The most GPU memory torch held at once (GPUs only)."""
        return torch.cuda.max_memory_allocated(self.device) / 2 ** 20 if self.device.type == "cuda" else None

    @torch.inference_mode()
    def __call__(self, batch: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
        """Water probability (n, 5 height, 5 width) float32 inside ``box`` = (top, left, height,
        width) of a normalised batch (n, bands, h, w); the whole batch is the network's context.
        With ``flips``, the mean over the eight flips and quarter turns of the batch."""
        x = torch.from_numpy(batch)
        if self.device.type == "cuda":
            x = x.pin_memory().to(self.device, non_blocking=True)

        def amp():
            return torch.autocast(self.device.type, dtype=self.amp, enabled=self.amp is not None)

        def probability(x, *box):
            with amp():
                logits = self.model.forward_window(x.contiguous(memory_format=torch.channels_last), *box,
                                                   skip_below=self.skip_below)
            return logits.float().sigmoid_()  # the logits are this call's own: in place

        if self.flips and self.skip_below is not None:
            prob = gated_mean_over_flips(self.model, x, box, self.skip_below, amp)
        else:
            prob = mean_over_flips(probability, x, box) if self.flips else probability(x, *box)
        return prob[:, 0].cpu().numpy()


class EachPrior:
    """The network of ``runtime`` run once on each batch, its water probability with each of
    ``gains`` as its NDWI prior (n, len(gains), 5 height, 5 width): what ``runtime`` would map
    were its weights annotated with each gain in turn, to the bit, at a fraction of the work
    (calibrate's). ``runtime``'s weights have no prior of their own; it runs neither flips nor
    a water gate (probabilities: the full head). A stream's Forward: the runtime's in all else."""

    def __init__(self, runtime: ModelRuntime, gains):
        if runtime.model.prior is not None or runtime.flips or runtime.skip_below is not None:
            raise ValueError("EachPrior takes a runtime of weights without a prior, without flips or a gate")
        self.runtime, self.maps = runtime, len(gains)
        spec = runtime.card.bands
        self.priors = [NdwiPrior(spec, gain) if gain else None for gain in gains]  # 0: as weights with none

    def __getattr__(self, name):  # reading tiles, the spec, the batch size, tags: the runtime's
        return getattr(self.runtime, name)

    def for_scene(self, scene) -> "EachPrior":
        self.runtime.for_scene(scene)
        return self

    @torch.inference_mode()
    def __call__(self, batch: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
        run = self.runtime
        x = torch.from_numpy(batch).to(run.device).contiguous(memory_format=torch.channels_last)
        with torch.autocast(run.device.type, dtype=run.amp, enabled=run.amp is not None):
            logits = run.model.forward_window(x, *box)
            out = torch.empty((logits.shape[0], self.maps, *logits.shape[2:]), dtype=torch.float32, device=x.device)
            for k, prior in enumerate(self.priors):  # each added as forward_window adds the network's own
                out[:, k: k + 1] = logits if prior is None else run.model.window_prior(x, *box, prior=prior).add_(logits)
        return out.sigmoid_().cpu().numpy()


def threshold_logit(threshold: float) -> float:
    """The logit at and above which a pixel is water, for a threshold strictly between 0 and 1."""
    return math.log(threshold / (1 - threshold))


FLIPS = tuple((transpose, flip_rows, flip_cols) for transpose in (False, True) for flip_rows in (False, True)
              for flip_cols in (False, True))  # the eight flips and quarter turns of a square


def mean_over_flips(forward: Callable, x: torch.Tensor, box: tuple[int, int, int, int]) -> torch.Tensor:
    """Test-time augmentation: the mean of ``forward(x', *box')`` over the eight flips and
    quarter turns x' of ``x`` (n, c, h, w), each output turned back onto ``x``'s grid. ``box``
    = (top, left, height, width) is the window of ``x`` to return, turned with it; ``forward``
    returns that window's pixels at any whole multiple of the input's resolution. The mean
    commutes with every flip and turn of the input (up to float rounding)."""
    total = None
    for flip in FLIPS:
        out = turn_back(forward(*turn_window(x, box, flip)), flip)
        total = out if total is None else total + out
    return total / len(FLIPS)


def gated_mean_over_flips(model: torch.nn.Module, x: torch.Tensor, box: tuple[int, int, int, int], skip_below: float,
                          amp: Callable = contextlib.nullcontext) -> torch.Tensor:
    """``mean_over_flips`` of the water probability of a gated network (``S2S2Net.forward_window``
    with ``skip_below``), its masks those of the full head's mean wherever the gate is right. Each
    flip's gate rules on its own cells, and a cell it fills in one flip may run in another: the
    mean of a filled 0 or 1 with the head's probabilities elsewhere is not the head's mean. So the
    flips agree first: a pixel is filled only where the gate fills it alike in all eight (0 where
    it rules water out in all, 1 where it finds water throughout in all: the head's mean is then
    on the same side of the threshold), and every flip runs the head on each cell that holds any
    other pixel. Each flip's features are kept between the two passes (``amp``: the autocast to
    run in); measured, computing them again costs more time than keeping them costs memory."""
    kept, land, water = [], None, None
    for flip in FLIPS:
        y, *window = turn_window(x, box, flip)
        y = y.contiguous(memory_format=torch.channels_last)
        with amp():
            features = model.features(y)
            run, full = model.head_cells(y, features, skip_below)
        kept.append(features)
        flip_land = turn_back(cell_pixels(~(run | full), *window), flip)
        flip_water = turn_back(cell_pixels(full, *window), flip)
        land = flip_land if land is None else land & flip_land
        water = flip_water if water is None else water & flip_water
    need = ~(land | water)
    total = None
    for flip, features in zip(FLIPS, kept):
        y, *window = turn_window(x, box, flip)
        run = pixel_cells(turn(need, flip), window[0], window[1], features.shape[-2:])
        with amp():
            logits = model.forward_window(y.contiguous(memory_format=torch.channels_last), *window,
                                          skip_below=skip_below, features=features, cells=(run, torch.zeros_like(run)))
        out = turn_back(torch.sigmoid(logits.float()), flip)
        total = out if total is None else total + out
    return (total / len(FLIPS)).masked_fill(land, 0.0).masked_fill(water, 1.0)


def turn_window(x: torch.Tensor, box: tuple[int, int, int, int], flip: tuple[bool, bool, bool]) -> tuple:
    """``x`` (n, c, h, w) turned by ``flip`` (one of FLIPS), and ``box`` (top, left, height, width) turned with it."""
    transpose, flip_rows, flip_cols = flip
    top, left, height, width = box
    rows, cols = x.shape[-2:]
    if transpose:
        top, left, height, width, rows, cols = left, top, width, height, cols, rows
    if flip_rows:
        top = rows - top - height
    if flip_cols:
        left = cols - left - width
    return turn(x, flip), top, left, height, width


def turn(t: torch.Tensor, flip: tuple[bool, bool, bool]) -> torch.Tensor:
    """A map (its last two dimensions) turned by ``flip``: transposed, then its rows and columns flipped."""
    transpose, flip_rows, flip_cols = flip
    t = t.transpose(-2, -1) if transpose else t
    dims = [d for d, flipped in ((-2, flip_rows), (-1, flip_cols)) if flipped]
    return t.flip(dims) if dims else t


def turn_back(t: torch.Tensor, flip: tuple[bool, bool, bool]) -> torch.Tensor:
    """``turn`` undone."""
    transpose, flip_rows, flip_cols = flip
    dims = [d for d, flipped in ((-2, flip_rows), (-1, flip_cols)) if flipped]
    t = t.flip(dims) if dims else t
    return t.transpose(-2, -1) if transpose else t
