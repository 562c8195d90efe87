"""Calibrating a model: the water probability threshold and the gain of its NDWI prior (the
network's logits plus gain x max(NDWI, 0)) that score best, chosen together.

Each gain is run as predict runs it (the weights annotated with it) on synthetic validation
scenes (generator seeds 8000 on: neither the training seeds 1000-1299 nor the hold-out seeds
9000 on), their exact 2 m truth pooled, and on each source of the user's labelled pairs pooled
(a manifest, say), each label on its scene's 10 m grid (scored on its cells: the 2 m mask
averaged, water from half) or on the 2 m grid. The threshold and gain with the best mean of the
sources' F1 are chosen; a labelled pair only chooses these two numbers, it is never trained on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import numpy as np
import rasterio

from ..formats import NODATA, WEIGHTS_FILE, percent_cut
from ..grid import SCALE_FACTOR
from ..labels import NODATA_TAG, VectorLabel, check_label, open_label, rasterise_label
from ..manifest import Pair
from ..option_checks import check_bounds
from ..rulebook import finding, option, refuse

THRESHOLDS = tuple(float(t) for t in np.round(np.arange(0.10, 0.91, 0.05), 2))
GAINS = (0.0, 4.0, 8.0, 16.0, 32.0)
MAX_GAIN = 100.0  # the largest NDWI prior gain a card takes
FIRST_SEED, SYNTHETIC_SCENES = 8000, 12  # the validation scenes' generator seeds: 8000-8011
SYNTHETIC_SIZE = 192  # 10 m pixels a side
MIN_SYNTHETIC_SIZE = 32


def read_gains(given) -> tuple[float, ...]:
    """The NDWI prior gains to try, from a number, a comma-separated text ("0,8,16", as --gains
    takes it) or numbers; each once, in the order given. UsageError for none, a word that is no
    number, or a gain outside 0-100."""
    items = given.split(",") if isinstance(given, str) else [given] if np.isscalar(given) else list(given)
    text = ",".join(str(g).strip() for g in items)
    try:
        gains = tuple(dict.fromkeys(float(g) for g in items))
    except (TypeError, ValueError):
        raise refuse("S2N-GAINS-NOT-NUMBERS", option("gains"), value=text) from None
    if not gains or not all(np.isfinite(g) for g in gains):
        raise refuse("S2N-GAINS-NOT-NUMBERS", option("gains"), value=text)
    if not all(0 <= g <= MAX_GAIN for g in gains):
        raise refuse("S2N-GAINS-RANGE", option("gains"), value=text)
    return gains


@dataclass
class Calibration:
    """The chosen threshold and gain, and the F1 of each source at each threshold for each gain."""

    threshold: float
    gain: float
    scores: dict = field(default_factory=dict, repr=False)  # gain -> {source: [F1 at each of thresholds]}
    warnings: list = field(default_factory=list)  # rulebook findings

    @property
    def thresholds(self) -> tuple[float, ...]:
        """The thresholds each source's scores are at, in order."""
        return THRESHOLDS

    def to_dict(self) -> dict:
        return {"threshold": self.threshold, "ndwi_prior": self.gain, "thresholds": list(self.thresholds),
                "scores": {f"{g:g}": s for g, s in self.scores.items()},
                "warnings": [w.to_dict() for w in self.warnings]}


def counts_at(prob_pct: np.ndarray, truth: np.ndarray, valid: np.ndarray, factor: int = 1) -> np.ndarray:
    """(len(THRESHOLDS), 3) tp, fp, fn of ``prob_pct`` (2 m, percent) against ``truth``; with
    ``factor`` 5 the 2 m mask is averaged onto the 10 m truth first (water from half)."""
    out = np.zeros((len(THRESHOLDS), 3), dtype=np.int64)
    for k, t in enumerate(THRESHOLDS):
        water = (prob_pct >= percent_cut(t)).astype(np.float32)
        if factor > 1:
            h, w = truth.shape
            water = water.reshape(h, factor, w, factor).mean(axis=(1, 3)) >= 0.5
        pred, ref = water.astype(bool) & valid, (truth == 1) & valid
        out[k] = ((pred & ref).sum(), (pred & ~ref).sum(), (~pred & ref).sum())
    return out


def f1(tp, fp, fn) -> float:
    return float(2 * tp / max(2 * tp + fp + fn, 1))  # a Python float, not numpy's, in a notebook's scores


def calibrate(weights, work_dir, sources: dict[str, list[Pair]] | None = None, gains=GAINS,
              synthetic_scenes: int = SYNTHETIC_SCENES,
              synthetic_size: int = SYNTHETIC_SIZE, on_progress: Callable[[str], None] | None = None) -> Calibration:
    """The threshold and NDWI prior gain of ``weights`` that score best (the mean of the pooled
    F1 of the synthetic scenes and of each of ``sources``, name -> labelled pairs), scored in
    ``work_dir``."""
    from ..checkpoint import annotate_weights  # heavy: torch
    from ..synthetic.scenes import make_pair, write_pair  # the generator: scipy, only here

    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    sources = {name: list(pairs) for name, pairs in (sources or {}).items() if pairs}
    label_warnings = [w for pairs in sources.values() for pair in pairs for w in _check_label(pair)]
    synthetic = []
    for seed in range(FIRST_SEED, FIRST_SEED + synthetic_scenes):
        made = make_pair(synthetic_size, seed=seed)
        scene = work / f"val_{seed}_scene.tif"
        write_pair(made, scene, work / f"val_{seed}_mask.tif")
        synthetic.append((scene, made.mask))
    scores, means = {}, []
    for gain in gains:
        if on_progress:
            on_progress(f"NDWI prior gain {gain:g}")
        annotated = annotate_weights(weights, work / f"gain_{gain:g}.safetensors", {}, ndwi_prior=gain, overwrite=True)
        scores[gain] = _score(annotated, work, synthetic, sources)
        means.append(np.mean(list(scores[gain].values()), axis=0))
    g, best = np.unravel_index(int(np.argmax(np.array(means))), (len(gains), len(THRESHOLDS)))
    gain = float(list(gains)[g])
    held_out = [finding("S2N-CALIBRATE-TEST-PAIR", p.image) for pairs in sources.values() for p in pairs
                if p.split == "test"]  # chosen on them, the model scores higher there than on a hold-out
    return Calibration(THRESHOLDS[best], gain, scores, label_warnings + held_out + gain_edge(gain, gains, weights))


def gain_edge(chosen: float, gains, weights) -> list:
    """A warning when the gain chosen is the largest of several tried and under the largest
    allowed (100): the best may lie beyond what was tried."""
    if len(gains) < 2 or chosen != max(gains) or chosen == 0 or chosen >= MAX_GAIN:
        return []
    larger = ",".join(f"{g:g}" for g in dict.fromkeys(min(chosen * k, MAX_GAIN) for k in (2, 3)))
    return [finding("S2N-CALIBRATE-GAIN-EDGE", weights, gain=chosen, larger=larger)]


def calibrate_weights(src, dst, pairs=(), manifests=(), gains=GAINS, synthetic_scenes: int = SYNTHETIC_SCENES,
                      synthetic_size: int = SYNTHETIC_SIZE, overwrite: bool = False,
                      on_progress: Callable[[str], None] | None = None) -> Calibration:
    """Calibrate the weights ``src`` and write them, the threshold and gain chosen, to ``dst``
    (what ``s2s2net weights calibrate`` does): ``pairs`` pooled as one source of labelled pairs,
    each of ``manifests`` as another, beside ``synthetic_scenes`` synthetic ones."""
    import tempfile

    from ..checkpoint import annotate_weights  # heavy: torch
    from ..io import check_output
    from ..manifest import pairs_from_options

    gains = read_gains(gains)
    check_bounds(SimpleNamespace(synthetic_scenes=synthetic_scenes, synthetic_size=synthetic_size),
                 least={"synthetic_scenes": 1, "synthetic_size": MIN_SYNTHETIC_SIZE})
    check_output(dst, overwrite, [src], kind=WEIGHTS_FILE)
    pairs = list(pairs)
    sources = {"pairs": pairs_from_options(pairs)} if pairs else {}
    for manifest in [manifests] if isinstance(manifests, (str, Path)) else manifests:
        sources[Path(manifest).stem if Path(manifest).stem not in sources else str(manifest)] = pairs_from_options(
            [], manifest)
    with tempfile.TemporaryDirectory(prefix="s2s2net-calibrate-") as work:
        found = calibrate(src, work, sources, gains, synthetic_scenes, synthetic_size, on_progress)
    said = "".join(f", {name} ({len(p)} labelled pairs)" for name, p in sources.items())
    notes = {"calibration": f"threshold and NDWI prior by s2s2net weights calibrate ({synthetic_scenes} synthetic "
                            f"validation scenes{said})"}
    annotate_weights(src, dst, notes, found.threshold, overwrite=overwrite, ndwi_prior=found.gain)
    return found


def _check_label(pair: Pair) -> list:
    """InputError unless ``pair``'s label holds water 1, land 0 and its nodata only (check_label:
    a 0/255 mask's water was read as unseen, its F1 0 at every threshold, without a word) and is
    on its scene's 10 m or 2 m grid, or is water polygons (drawn on the prediction's grid).
    Returns the label's warnings."""
    label = open_label(pair.mask)
    warnings = check_label(label, declare_nodata=NODATA_TAG)  # calibrate has no --nodata: the file's tag says it
    if isinstance(label, VectorLabel):
        return warnings
    with rasterio.open(pair.image) as scene:
        if (label.height, label.width) not in ((scene.height, scene.width),
                                               (scene.height * SCALE_FACTOR, scene.width * SCALE_FACTOR)):
            raise refuse("S2N-CALIBRATE-GRID", pair.mask, scene=pair.image)
    return warnings


def _label_on_grid(pair: Pair, prediction) -> tuple[np.ndarray, np.ndarray]:
    """``pair``'s label and where it is valid, on its own grid (its scene's 10 m or 2 m one);
    water polygons drawn on the grid of the open ``prediction``, valid everywhere."""
    label = open_label(pair.mask, near=(prediction.crs, tuple(prediction.bounds)))
    if isinstance(label, VectorLabel):
        truth = rasterise_label(label, prediction.transform, prediction.crs, prediction.shape)
        return truth.astype(np.uint8), np.ones(truth.shape, bool)
    with rasterio.open(label.path) as lab:
        truth, nodata = lab.read(1), lab.nodata
    return truth, np.isin(truth, (0, 1)) & ((truth != nodata) if nodata is not None else True)


def _score(weights: Path, work: Path, synthetic: list, sources: dict[str, list[Pair]]) -> dict[str, list[float]]:
    """F1 at every threshold of ``weights`` on the synthetic scenes pooled and each source pooled."""
    from ..inference.predictor import PredictOptions, Predictor  # heavy: torch

    predictor = Predictor(weights, PredictOptions(tile_size=SYNTHETIC_SIZE, overlap=48, probability=True,
                                                  overwrite=True, precision="32"))
    pooled = np.zeros((len(THRESHOLDS), 3), dtype=np.int64)
    for scene, truth in synthetic:
        out = work / scene.name.replace("_scene.tif", "_prob.tif")
        predictor.predict_scene(scene, out)
        with rasterio.open(out) as src:
            prob = src.read(1)
        pooled += counts_at(prob, np.nan_to_num(truth, nan=0), ~np.isnan(truth) & (prob != NODATA))
    scores = {"synthetic": [f1(*c) for c in pooled]}
    real = Predictor(weights, PredictOptions(probability=True, overwrite=True, precision="32")) if sources else None
    for s, (name, pairs) in enumerate(sources.items()):
        pooled = np.zeros((len(THRESHOLDS), 3), dtype=np.int64)
        for k, pair in enumerate(pairs):
            out = work / f"source_{s}_pair_{k}_prob.tif"
            real.predict_scene(pair.image, out)
            with rasterio.open(out) as src:
                prob = src.read(1)
                truth, labelled = _label_on_grid(pair, src)
            factor = SCALE_FACTOR if truth.shape != prob.shape else 1
            h, w = truth.shape
            seen = (prob.reshape(h, factor, w, factor) != NODATA).all(axis=(1, 3))
            valid = seen & labelled
            pooled += counts_at(prob, truth, valid, factor=factor)
        scores[name] = [f1(*c) for c in pooled]
    return scores
