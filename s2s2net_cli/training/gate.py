"""Fitting a model's water gate (model.WaterGate) to its own head.

The gate tells predict where the head, three quarters or more of the network's work, can be
skipped: the decoder cells (40 m) where no 2 m pixel can reach the threshold (land), and those
where every 2 m pixel reaches it (water throughout). It learns that from the trained network
itself, so no label is needed: on each fitting scene the full head runs once, and the gate's
land bound learns, from the decoder's features, a high quantile (GATE_QUANTILE) of the largest
logit the head gives inside each cell. Then a margin is added until, on the fitting scenes, the
water pixels in the cells it would skip are at most MISSED_PIXELS of all pixels, and
SAFETY_MARGIN beyond that. The water bound is the mirror image: a low quantile of the cell's
smallest logit, a margin taken off until the land pixels in the cells it would fill as water
are at most MISSED_PIXELS, and SAFETY_MARGIN more. The scenes: synthetic ones the tool makes
(generator seeds from FIRST_SEED, apart from the training seeds 1000-1299 and the hold-out's
9000 on) and any of the user's (unlabelled is enough), read in windows of at most WINDOW pixels.

A fine gate is fitted the same way beside it, on the head's own 10 m features (the output of
its first two steps, which run over the whole window: model.fine_gate_inputs) in place of the
decoder's: predict runs the last two steps, most of the head's work, only on the cells that
neither gate can tell.

The same runs measure the range of each head step's input (StepInputRanges): what
`--precision int8` rounds to 256 levels, so that weights with a gate can also run in int8.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

import numpy as np
import torch
import torch.nn.functional as F
from rasterio.windows import Window

from ..grid import SCALE_FACTOR
from ..model import DECODER_STRIDE, LAST_STEP_ROWS, WaterGate, fine_gate_inputs, gate_cells

if TYPE_CHECKING:  # imported where scenes are opened, as open_scene is (the sources wing brings shapely)
    from ..sources.options import SceneOptions

GATE_QUANTILE = 0.95  # of the cell's largest logit, given its features (its smallest: 1 - this)
SEEDS = (0, 1, 2)  # each bound fitted from each, the one that skips the most cells kept
EPOCHS = 60
LEARNING_RATE = 3e-3
MISSED_PIXELS = 1e-6  # the water pixels the gate may skip on the fitting scenes, of all their pixels
SAFETY_MARGIN = 0.5  # logits added beyond the margin that reaches MISSED_PIXELS
MARGIN_STEP, MAX_MARGIN = 0.25, 8.0
CLIP = (-8.0, 6.0)  # the target's range: a cell far below or above the threshold is as far as this
FIRST_SEED, SYNTHETIC_SCENES, SYNTHETIC_SIZE = 8000, 40, 192
WINDOW, WINDOWS_PER_SCENE = 512, 16
CELL_PIXELS = (DECODER_STRIDE * SCALE_FACTOR) ** 2  # 2 m pixels in a decoder cell
FIT_STEPS = 2 * 2 * len(SEEDS)  # bounds fitted: land and water, of the gate and the fine gate, from each seed


@dataclass
class Cells:
    """One fitting input, per decoder cell: the decoder's features (channels, rows, cols), the
    head's largest and smallest logits, the NDWI prior's largest and smallest values, and its
    water and land pixels at the threshold; and what a fine gate reads there (fine_gate_inputs)."""

    features: torch.Tensor
    head_max: torch.Tensor
    prior_max: torch.Tensor
    water: torch.Tensor
    head_min: torch.Tensor
    prior_min: torch.Tensor
    land: torch.Tensor
    fine_features: torch.Tensor | None = None


@dataclass
class GateFit:
    """What the fit found on its scenes."""

    margin: float
    active_fraction: float  # of the cells: where the head still runs
    missed_fraction: float  # of all pixels: water the gate skips as land
    water_fraction: float  # of all pixels: water
    cells: int
    inputs: int
    int8_ranges: list[tuple[float, float]] | None = None  # each head step's input range, for --precision int8
    water_margin: float = 0.0  # taken off the water bound
    filled_fraction: float = 0.0  # of the cells: filled as water, the head skipped
    wrong_water_fraction: float = 0.0  # of all pixels: land the gate fills as water
    fine: "GateFit | None" = None  # the fine gate's fit on the same cells, alone
    both_active_fraction: float | None = None  # of the cells: where neither gate skips the last steps
    warnings: list = field(default_factory=list)  # what reading the scenes given warned of, as predict warns

    def to_dict(self) -> dict:
        return {"margin": self.margin, "active_fraction": round(self.active_fraction, 4),
                "missed_fraction": self.missed_fraction, "water_fraction": round(self.water_fraction, 4),
                "water_margin": self.water_margin, "filled_fraction": round(self.filled_fraction, 4),
                "wrong_water_fraction": self.wrong_water_fraction,
                "cells": self.cells, "inputs": self.inputs, "int8_ranges": self.int8_ranges,
                **({"fine": self.fine.to_dict(), "both_active_fraction": round(self.both_active_fraction, 4),
                    "warnings": [w.to_dict() for w in self.warnings]} if self.fine is not None else {})}


class StepInputRanges:
    """The lowest and highest value each of a head's steps (``steps``) reads, over every run
    while this is open: what the head's int8 convolutions round to 256 levels."""

    def __init__(self, steps: list[torch.nn.Module]):
        self.ranges = [(math.inf, -math.inf)] * len(steps)
        self.hooks = [step.register_forward_pre_hook(self._watch(k)) for k, step in enumerate(steps)]

    def _watch(self, k: int) -> Callable:
        def hook(_module, args):
            low, high = self.ranges[k]
            self.ranges[k] = (min(low, float(args[0].min())), max(high, float(args[0].max())))
        return hook

    def close(self) -> list[tuple[float, float]]:
        for hook in self.hooks:
            hook.remove()
        return self.ranges


@torch.inference_mode()
def cells_of(model, x: torch.Tensor, threshold_logit: float) -> Cells:
    """The fitting targets of one normalised input ``x`` (1, bands, h, w), from ``model`` (an
    inference network, fp32) run whole, its head everywhere."""
    h, w = x.shape[-2:]
    features = model.features(x)
    fine = fine_gate_inputs(model.head.coarse(features))[0] if hasattr(model.head, "coarse") else None
    features = features.float()
    rows, cols = -(-h // DECODER_STRIDE), -(-w // DECODER_STRIDE)
    head = model._head_window(features, 0, 0, h, w, LAST_STEP_ROWS, None)[0, 0].float()
    prior = model.prior(x)[0, 0].float() if model.prior is not None else torch.zeros_like(head)
    up = DECODER_STRIDE * SCALE_FACTOR  # 2 m pixels a side of a cell

    def per_cell(a: torch.Tensor, fill: float) -> torch.Tensor:
        a = F.pad(a, (0, cols * up - a.shape[1], 0, rows * up - a.shape[0]), value=fill)
        return a.reshape(rows, up, cols, up)

    prior_max, prior_min = ([bound[0] for bound in model.prior.cell_bounds(x, rows, cols)]
                            if model.prior is not None else (torch.zeros(rows, cols), torch.zeros(rows, cols)))
    water = ((head + prior) >= threshold_logit).float()
    # the 2 m pixels beyond the input (a cell cut by its edge) are neither: they are never written
    return Cells(features[0, :, :rows, :cols].clone(), per_cell(head, -1e4).amax((1, 3)), prior_max,
                 per_cell(water, 0.0).sum((1, 3)), per_cell(head, 1e4).amin((1, 3)), prior_min,
                 per_cell(1 - water, 0.0).sum((1, 3)), fine[:, :rows, :cols].clone() if fine is not None else None)


def fit_gate(cells: list[Cells], threshold_logit: float, seeds: tuple[int, ...] = SEEDS,
             on_bound: Callable[[], None] | None = None) -> tuple[WaterGate, GateFit]:
    """A WaterGate fitted to ``cells``, its land and water bounds (their margins in their
    biases), and what it skips there. Each bound is fitted from each of ``seeds`` and the one
    that skips the most cells kept (the first of equals); ``on_bound()`` after each such fit
    (2 x len(seeds) of them)."""
    if not cells:
        raise ValueError("no fitting input")
    water, land = (torch.cat([getattr(c, name).flatten() for c in cells]) for name in ("water", "land"))
    pixels = float(water.numel() * CELL_PIXELS)
    features = _Normalised(cells)

    def fit_land(seed: int) -> tuple[WaterGate, float, torch.Tensor]:
        """Raised until the water in the cells it skips is at most MISSED_PIXELS of all pixels."""
        bound, score = _fit_bound(features, [c.head_max for c in cells], [c.prior_max for c in cells], GATE_QUANTILE, seed)
        margin = _margin(lambda m: float(water[score + m < threshold_logit].sum()), pixels)
        if on_bound:
            on_bound()
        return bound, margin, score + margin < threshold_logit

    land_bound, margin, skipped = max(map(fit_land, seeds), key=lambda fit: int(fit[2].sum()))

    def fit_water(seed: int) -> tuple[WaterGate, float, torch.Tensor]:
        """Lowered until the land in the cells it fills (of those not skipped) is at most as much."""
        bound, score = _fit_bound(features, [c.head_min for c in cells], [c.prior_min for c in cells],
                                  1 - GATE_QUANTILE, seed)
        margin = _margin(lambda m: float(land[~skipped & (score - m >= threshold_logit)].sum()), pixels)
        if on_bound:
            on_bound()
        return bound, margin, ~skipped & (score - margin >= threshold_logit)

    water_bound, water_margin, filled = max(map(fit_water, seeds), key=lambda fit: int(fit[2].sum()))
    gate = WaterGate(land_bound.reduce.in_channels, land_bound.reduce.out_channels, bounds=2)
    with torch.no_grad():
        for name in ("reduce", "score"):
            for part in ("weight", "bias"):
                getattr(getattr(gate, name), part).copy_(torch.cat([getattr(getattr(bound, name), part)
                                                                    for bound in (land_bound, water_bound)]))
        gate.score.bias += torch.tensor([margin, -water_margin])
    fit = GateFit(margin, float((~skipped & ~filled).float().mean()), float(water[skipped].sum()) / pixels,
                  float(water.sum()) / pixels, int(water.numel()), len(cells), water_margin=water_margin,
                  filled_fraction=float(filled.float().mean()), wrong_water_fraction=float(land[filled].sum()) / pixels)
    return gate.eval(), fit


class _Normalised:
    """The fitting cells' features, each channel normalised over all of them (what a bound is
    fitted on), and the features as they are (what it is folded back onto)."""

    def __init__(self, cells: list[Cells]):
        self.raw = [c.features for c in cells]
        channels = self.raw[0].shape[0]
        stacked = torch.cat([f.reshape(channels, -1) for f in self.raw], 1)
        self.mean, self.std = stacked.mean(1), stacked.std(1) + 1e-6
        self.inputs = [((f - self.mean[:, None, None]) / self.std[:, None, None])[None] for f in self.raw]


def _fit_bound(features: _Normalised, extremes: list[torch.Tensor], priors: list[torch.Tensor], quantile: float,
               seed: int) -> tuple[WaterGate, torch.Tensor]:
    """A one-bound WaterGate fitted to the ``quantile`` of the head's ``extremes`` per cell (the
    features' normalisation folded into its first convolution), and its estimates plus the
    prior's ``priors``, all cells flat."""
    mean, std = features.mean, features.std
    torch.manual_seed(seed)
    gate = WaterGate(len(mean))
    optimizer = torch.optim.Adam(gate.parameters(), LEARNING_RATE)
    targets = [e.clamp(*CLIP) for e in extremes]
    with torch.enable_grad():
        for _ in range(EPOCHS):
            for x, y in zip(features.inputs, targets):
                residual = y - gate(x)[0, 0]
                loss = torch.maximum(quantile * residual, (quantile - 1) * residual).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    with torch.no_grad():  # the normalisation folded into the first convolution
        weight = gate.reduce.weight / std[None, :, None, None]
        gate.reduce.bias -= (weight[:, :, 0, 0] * mean[None]).sum(1)
        gate.reduce.weight.copy_(weight)
        scores = [gate(f[None])[0, 0] + p for f, p in zip(features.raw, priors)]
    return gate, torch.cat([s.flatten() for s in scores])


def _margin(wrong: Callable[[float], float], pixels: float) -> float:
    """The least margin (in MARGIN_STEPs, at most MAX_MARGIN) at which ``wrong(margin)`` pixels
    are at most MISSED_PIXELS of ``pixels``, and SAFETY_MARGIN beyond it."""
    margin = 0.0
    while margin < MAX_MARGIN and wrong(margin) > MISSED_PIXELS * pixels:
        margin += MARGIN_STEP
    return margin + SAFETY_MARGIN


def synthetic_inputs(count: int = SYNTHETIC_SCENES, size: int = SYNTHETIC_SIZE, spec=None,
                     work_dir=None) -> Iterable[np.ndarray]:
    """Normalised synthetic scenes (generator seeds from FIRST_SEED), read as predict reads them."""
    import tempfile

    from ..synthetic.scenes import make_pair, write_pair  # the generator: scipy, only here

    with tempfile.TemporaryDirectory(prefix="s2s2net-gate-", dir=work_dir) as tmp:
        for seed in range(FIRST_SEED, FIRST_SEED + count):
            scene = Path(tmp) / f"gate_{seed}_scene.tif"
            write_pair(make_pair(size, seed=seed), scene, Path(tmp) / f"gate_{seed}_mask.tif")
            yield from scene_inputs(scene, spec)


def window_corners(height: int, width: int, windows: int = WINDOWS_PER_SCENE) -> list[tuple[int, int]]:
    """The (row, col) corners of the windows scene_inputs reads: WINDOW pixels apart, at most
    ``windows`` of them spread over the scene."""
    rows = range(0, max(height - WINDOW, 0) + 1, WINDOW) if height > WINDOW else [0]
    cols = range(0, max(width - WINDOW, 0) + 1, WINDOW) if width > WINDOW else [0]
    places = [(r, c) for r in rows for c in cols]
    step = max(1, math.ceil(len(places) / windows))
    return places[::step][:windows]


def scene_inputs(path, spec=None, windows: int = WINDOWS_PER_SCENE) -> Iterable[np.ndarray]:
    """Normalised windows of at most WINDOW pixels of a scene (any that predict reads, or one
    opened already: a Scene), at most ``windows`` of them spread over it, as predict reads them."""
    from ..bands import BandSpec
    from ..sources.open import open_scene
    from ..sources.options import SceneOptions
    from ..sources.scene import Scene, SceneReader, read_normalised

    spec = spec or BandSpec()
    scene = path if isinstance(path, Scene) else open_scene(path, SceneOptions(), len(spec.names))
    with SceneReader(scene) as reader:
        for r, c in window_corners(scene.height, scene.width, windows):
            window = Window(c, r, min(WINDOW, scene.width - c), min(WINDOW, scene.height - r))
            data, _, _ = read_normalised(reader, window, spec)
            yield data


def fit_model_gate(model, threshold: float, inputs: Iterable[np.ndarray],
                   on_progress: Callable[[int], None] | None = None) -> tuple[WaterGate, WaterGate, GateFit]:
    """The water gate and the fine gate of ``model`` (an inference network on the CPU, fp32)
    fitted on ``inputs`` (normalised arrays (bands, h, w)) at ``threshold`` (a probability);
    ``on_progress(k)`` after the k-th input, then after each of the fit's FIT_STEPS bounds
    (inputs + 1 to inputs + FIT_STEPS)."""
    from ..inference.runtime import threshold_logit

    logit = threshold_logit(min(max(threshold, 1e-6), 1 - 1e-6))
    cells = []
    ranges = StepInputRanges([*model.head.steps, model.head.last])
    try:
        for k, data in enumerate(inputs):
            cells.append(cells_of(model, torch.from_numpy(data)[None], logit))
            if on_progress:
                on_progress(k + 1)
    finally:
        int8_ranges = ranges.close()
    fitted = iter(range(len(cells) + 1, len(cells) + FIT_STEPS + 1))  # the fit: minutes on 40 scenes
    on_bound = (lambda: on_progress(next(fitted))) if on_progress else None
    gate, fit = fit_gate(cells, logit, on_bound=on_bound)
    fine_gate, fit.fine = fit_gate([replace(c, features=c.fine_features) for c in cells], logit, on_bound=on_bound)
    fit.both_active_fraction = _both_active(gate, fine_gate, cells, logit)
    fit.int8_ranges = [(math.floor(low * 1e4) / 1e4, math.ceil(high * 1e4) / 1e4) for low, high in int8_ranges]
    return gate, fine_gate, fit


@torch.no_grad()
def _both_active(gate: WaterGate, fine_gate: WaterGate, cells: list[Cells], threshold_logit: float) -> float:
    """The fraction of ``cells`` where the last steps run: neither gate skips or fills them."""
    active = []
    for c in cells:
        runs = [gate_cells(g(features[None]), c.prior_max, c.prior_min, threshold_logit)[0]
                for g, features in ((gate, c.features), (fine_gate, c.fine_features))]
        active.append((runs[0] & runs[1]).flatten())
    return float(torch.cat(active).float().mean())


def gate_weights(src, dst, scenes: tuple = (), synthetic_scenes: int | None = None, overwrite: bool = False,
                 on_progress: Callable[[int, int], None] | None = None,
                 scene: "SceneOptions | None" = None) -> GateFit:
    """Copy weights ``src`` to ``dst`` with a water gate fitted to them (any gate of ``src``'s
    replaced): on ``synthetic_scenes`` synthetic scenes and windows of ``scenes`` (read as the
    SceneOptions ``scene`` say, as predict reads them), at the threshold of ``src``'s card, and
    the head steps' input ranges on the same scenes (the card's ``int8_ranges``). What the fit
    found is noted in the card's training record; what reading ``scenes`` warned of is in the
    fit's ``warnings``."""
    from itertools import chain

    from ..checkpoint import FINE_GATE_PREFIX, GATE_PREFIX, load_model, load_weights, save_weights, without_gate
    from ..formats import WEIGHTS_FILE
    from ..inference.runtime import inference_network
    from ..io import check_output
    from ..rulebook import refuse

    check_output(dst, overwrite, [src, *scenes], kind=WEIGHTS_FILE)
    synthetic_scenes = SYNTHETIC_SCENES if synthetic_scenes is None else synthetic_scenes
    if not scenes and synthetic_scenes < 1:
        raise refuse("S2N-GATE-NO-INPUT", None)
    model, card = load_model(src, "cpu")
    model = inference_network(model)
    from ..sources.checks import scene_warnings
    from ..sources.open import open_scene
    from ..sources.options import SceneOptions

    opened = [open_scene(path, scene or SceneOptions(), len(card.bands.names)) for path in scenes]  # once, before the fit
    said = [w for o in opened for w in scene_warnings(o, card.bands)]
    inputs = chain(synthetic_inputs(synthetic_scenes, spec=card.bands),
                   *(scene_inputs(o, card.bands) for o in opened))
    total = None
    if on_progress:  # each synthetic scene is one window, a scene as many as window_corners places; then the fit
        total = synthetic_scenes + sum(len(window_corners(o.height, o.width)) for o in opened) + FIT_STEPS
    gate, fine_gate, fit = fit_model_gate(model, card.threshold, inputs,
                                          (lambda done: on_progress(done, total)) if on_progress else None)
    state, card = load_weights(src)
    state = {**without_gate(state), **{GATE_PREFIX + name: t for name, t in gate.state_dict().items()},
             **{FINE_GATE_PREFIX + name: t for name, t in fine_gate.state_dict().items()}}
    fitted_on = f"{synthetic_scenes} synthetic scenes" + (f" and {len(scenes)} given with --scene" if scenes else "")
    card.int8_ranges = fit.int8_ranges
    card.training = {**card.training, "gate": (
        f"water gate by s2s2net weights gate ({fitted_on}, {fit.inputs} inputs, threshold {card.threshold:g}): "
        f"margin {fit.margin:g}, the head runs on {fit.active_fraction:.1%} of the cells and skips "
        f"{fit.missed_fraction:.1e} of the pixels as land that the full head calls water; water bound margin "
        f"{fit.water_margin:g}, {fit.filled_fraction:.1%} of the cells filled as water, {fit.wrong_water_fraction:.1e} "
        f"of the pixels land that it fills as water; a fine gate on the head's 10 m features beside it (margins "
        f"{fit.fine.margin:g} and {fit.fine.water_margin:g}): the head's last two steps run on "
        f"{fit.both_active_fraction:.1%} of the cells; the head steps' input ranges for --precision int8 from the "
        f"same scenes")}
    save_weights(dst, state, card)
    fit.warnings = list(dict.fromkeys(said))
    return fit
