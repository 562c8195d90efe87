"""Calibrating a model: the water probability threshold and the gain of its NDWI prior (the
network's logits plus gain x max(NDWI, 0)) that score best, chosen together.

Each gain is scored as predict runs the weights annotated with it: the same probabilities to the
bit, the network run once a scene and each gain's prior added to its logits as the network adds
its own (runtime.EachPrior), each threshold cut as predict cuts it. On synthetic validation
scenes (generator seeds 8000 on: neither the training seeds 1000-1299 nor the hold-out seeds
9000 on), their exact 2 m truth pooled, and on each source of the user's labelled pairs pooled
(a manifest, say), each label on its scene's 10 m grid (scored on its cells: the 2 m mask
averaged, water from half) or on the 2 m grid. The threshold and gain with the best mean of the
sources' F1 are chosen; a labelled pair only chooses these two numbers, it is never trained on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import numpy as np
import rasterio
from rasterio.coords import BoundingBox
from rasterio.transform import array_bounds
from rasterio.windows import Window

from ..formats import WEIGHTS_FILE
from ..grid import SCALE_FACTOR, fine_transform
from ..labels import NODATA_TAG, VectorLabel, check_label, open_label, rasterise_label
from ..manifest import Pair
from ..option_checks import check_bounds
from ..rulebook import finding, option, refuse
from ..sources.options import SceneOptions

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


def counts_of_block(prob: np.ndarray, seen: np.ndarray, truth: np.ndarray, labelled: np.ndarray,
                    factor: int) -> np.ndarray:
    """(maps, len(THRESHOLDS), 3) tp, fp, fn of 2 m probabilities ``prob`` (maps, h, w) against
    ``truth`` where the prediction's data is ``seen`` (10 m) and the truth ``labelled``, all of
    one block: with ``factor`` 1 the truth on the 2 m grid, pixel by pixel; with 5 on the 10 m
    grid, cell by cell, a cell water where at least half its 2 m pixels are (evaluate's rule). A
    pixel is water at a threshold where its probability is at least the threshold in float32,
    as predict cuts it."""
    f, (maps, h, w) = SCALE_FACTOR, prob.shape
    valid = seen & labelled if factor == f else np.repeat(np.repeat(seen, f, axis=0), f, axis=1)[:h, :w] & labelled
    water, cuts = truth[valid] == 1, np.asarray(THRESHOLDS, dtype=np.float32)
    out = np.zeros((maps, len(THRESHOLDS), 3), dtype=np.int64)
    for m in range(maps):
        values = prob[m]
        if factor == f:  # each 10 m cell's probability of water: the least of its most probable half
            cells = values.reshape(h // f, f, w // f, f).transpose(0, 2, 1, 3).reshape(h // f, w // f, f * f)
            half = (f * f + 1) // 2  # 13 of 25: water where at least 12.5 of its pixels are
            values = np.partition(cells, f * f - half, axis=-1)[..., f * f - half]
        # how many thresholds each pixel reaches: it is water at the first that many
        reached = np.searchsorted(cuts, values[valid], side="right")
        out[m, :, 0] = _at_least(reached[water])  # tp
        out[m, :, 1] = _at_least(reached[~water])  # fp
        out[m, :, 2] = np.count_nonzero(water) - out[m, :, 0]  # fn
    return out


def _at_least(reached: np.ndarray) -> np.ndarray:
    """For each threshold k, how many of ``reached`` (thresholds reached per pixel) exceed k."""
    return np.bincount(reached, minlength=len(THRESHOLDS) + 1)[::-1].cumsum()[::-1][1:]


def f1(tp, fp, fn) -> float:
    return float(2 * tp / max(2 * tp + fp + fn, 1))  # a Python float, not numpy's, in a notebook's scores


def calibrate(weights, work_dir, sources: dict[str, list[Pair]] | None = None, gains=GAINS,
              synthetic_scenes: int = SYNTHETIC_SCENES, synthetic_size: int = SYNTHETIC_SIZE,
              on_progress: Callable[[int, int], None] | None = None, scene: SceneOptions | None = None) -> Calibration:
    """The threshold and NDWI prior gain of ``weights`` that score best (the mean of the pooled
    F1 of the synthetic scenes and of each of ``sources``, name -> labelled pairs, their scenes
    read as ``scene`` says, with predict's warnings), scored in ``work_dir``;
    ``on_progress(done, total)`` as each scene is scored."""
    from ..checkpoint import annotate_weights  # heavy: torch
    from ..synthetic.scenes import make_pair, write_pair  # the generator: scipy, only here

    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    sources = {name: list(pairs) for name, pairs in (sources or {}).items() if pairs}
    scene = scene or SceneOptions()
    label_warnings = [w for pairs in sources.values() for pair in pairs for w in _check_label(pair, scene)]
    synthetic = []
    for seed in range(FIRST_SEED, FIRST_SEED + synthetic_scenes):
        made = make_pair(synthetic_size, seed=seed)
        path = work / f"val_{seed}_scene.tif"
        write_pair(made, path, work / f"val_{seed}_mask.tif")
        synthetic.append((path, made.mask))
    # the network without a prior: each scene runs once, every gain's prior added to its logits
    plain = annotate_weights(weights, work / "plain.safetensors", {}, ndwi_prior=0, overwrite=True)
    counts, scene_warnings = _counts(plain, work, gains, synthetic, sources, on_progress, scene)
    scores = {gain: {name: [f1(*c) for c in found[g]] for name, found in counts.items()} for g, gain in enumerate(gains)}
    means = [np.mean(list(scores[gain].values()), axis=0) for gain in gains]
    g, best = np.unravel_index(int(np.argmax(np.array(means))), (len(gains), len(THRESHOLDS)))
    gain = float(list(gains)[g])
    held_out = [finding("S2N-CALIBRATE-TEST-PAIR", p.image) for pairs in sources.values() for p in pairs
                if p.split == "test"]  # chosen on them, the model scores higher there than on a hold-out
    return Calibration(THRESHOLDS[best], gain, scores,
                       scene_warnings + label_warnings + held_out + gain_edge(gain, gains, weights))


def gain_edge(chosen: float, gains, weights) -> list:
    """A warning when the gain chosen is the largest of several tried and under the largest
    allowed (100): the best may lie beyond what was tried."""
    if len(gains) < 2 or chosen != max(gains) or chosen == 0 or chosen >= MAX_GAIN:
        return []
    larger = ",".join(f"{g:g}" for g in dict.fromkeys(min(chosen * k, MAX_GAIN) for k in (2, 3)))
    return [finding("S2N-CALIBRATE-GAIN-EDGE", weights, gain=chosen, larger=larger)]


def calibrate_weights(src, dst, pairs=(), manifests=(), gains=GAINS, synthetic_scenes: int = SYNTHETIC_SCENES,
                      synthetic_size: int = SYNTHETIC_SIZE, overwrite: bool = False,
                      on_progress: Callable[[int, int], None] | None = None,
                      scene: SceneOptions | None = None) -> Calibration:
    """Calibrate the weights ``src`` and write them, the threshold and gain chosen, to ``dst``
    (what ``s2s2net weights calibrate`` does): ``pairs`` pooled as one source of labelled pairs,
    each of ``manifests`` as another, their scenes read as ``scene`` says, beside
    ``synthetic_scenes`` synthetic ones."""
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
        found = calibrate(src, work, sources, gains, synthetic_scenes, synthetic_size, on_progress, scene)
    said = "".join(f", {name} ({len(p)} labelled pairs)" for name, p in sources.items())
    notes = {"calibration": f"threshold and NDWI prior by s2s2net weights calibrate ({synthetic_scenes} synthetic "
                            f"validation scenes{said})"}
    annotate_weights(src, dst, notes, found.threshold, overwrite=overwrite, ndwi_prior=found.gain)
    return found


def _check_label(pair: Pair, scene_options: SceneOptions) -> list:
    """InputError unless ``pair``'s label holds water 1, land 0 and its nodata only (check_label:
    a 0/255 mask's water was read as unseen, its F1 0 at every threshold, without a word) and is
    on its scene's 10 m or 2 m grid (the whole scene's, as predict reads it: a product's too), or
    is water polygons (drawn on the prediction's grid). Returns the label's warnings."""
    from ..sources.open import open_scene

    label = open_label(pair.mask)
    warnings = check_label(label, declare_nodata=NODATA_TAG)  # calibrate has no --nodata: the file's tag says it
    if isinstance(label, VectorLabel):
        return warnings
    height, width = open_scene(pair.image, scene_options).dataset_shape
    if (label.height, label.width) not in ((height, width), (height * SCALE_FACTOR, width * SCALE_FACTOR)):
        raise refuse("S2N-CALIBRATE-GRID", pair.mask, scene=pair.image)
    return warnings


def _label_on_grid(pair: Pair, prediction) -> tuple[np.ndarray, np.ndarray]:
    """``pair``'s label and where it is valid, on its own grid (its scene's 10 m or 2 m one), the
    part under the ``prediction`` grid (the scene's, or its area of interest's window, which lies
    ``prediction.origin`` 10 m rows and columns into it); water polygons drawn on that grid, valid
    everywhere."""
    label = open_label(pair.mask, near=(prediction.crs, tuple(prediction.bounds)))
    if isinstance(label, VectorLabel):
        truth = rasterise_label(label, prediction.transform, prediction.crs, prediction.shape)
        return truth.astype(np.uint8), np.ones(truth.shape, bool)
    with rasterio.open(label.path) as lab:
        across = SCALE_FACTOR if (lab.height, lab.width) == prediction.dataset_shape else 1  # 2 m pixels a label pixel
        (row, col), (height, width), per_10m = prediction.origin, prediction.shape, SCALE_FACTOR // across
        window = Window(col * per_10m, row * per_10m, width // across, height // across)
        truth, nodata = lab.read(1, window=window), lab.nodata
    return truth, np.isin(truth, (0, 1)) & ((truth != nodata) if nodata is not None else True)


def _counts(weights: Path, work: Path, gains, synthetic: list, sources: dict[str, list[Pair]],
            on_progress: Callable[[int, int], None] | None,
            scene_options: SceneOptions) -> tuple[dict[str, np.ndarray], list]:
    """(len(gains), len(THRESHOLDS), 3) tp, fp, fn of ``weights`` (without a prior) with each
    gain's prior on the synthetic scenes pooled and on each source pooled (its scenes read as
    ``scene_options`` says), and what reading the sources' scenes warned of, as predict warns."""
    from ..inference.predictor import PredictOptions, Predictor  # heavy: torch

    total, done = len(synthetic) + sum(len(pairs) for pairs in sources.values()), 0
    options = {"probability": True, "overwrite": True, "precision": "32"}  # the full head, exact
    runs = [("synthetic", Predictor(weights, PredictOptions(tile_size=SYNTHETIC_SIZE, overlap=48, **options)),
             [(scene, _synthetic_truth(truth)) for scene, truth in synthetic])]
    if sources:
        real = Predictor(weights, PredictOptions(scene=scene_options, **options))
        runs += [(name, real, [(pair.image, partial(_label_on_grid, pair)) for pair in pairs])
                 for name, pairs in sources.items()]
    counts, warnings = {}, []
    for name, predictor, scenes in runs:
        counts[name] = np.zeros((len(gains), len(THRESHOLDS), 3), dtype=np.int64)
        for scene, truth_on in scenes:
            found, said = _scene_counts(predictor, scene, work, gains, truth_on)
            counts[name] += found
            warnings += [w for w in said if name != "synthetic" and w not in warnings]
            done += 1
            if on_progress:
                on_progress(done, total)
    return counts, warnings


def _synthetic_truth(truth: np.ndarray) -> Callable:
    """A synthetic scene's exact 2 m truth (NaN where it is mixed) and where it holds, for any grid."""
    return lambda grid: (np.nan_to_num(truth, nan=0), ~np.isnan(truth))


def _scene_counts(predictor, scene_path, work: Path, gains, truth_on: Callable) -> tuple[np.ndarray, list]:
    """(len(gains), len(THRESHOLDS), 3) of one scene: its tiles run as predict runs them (the
    checks, the plan, the blend), the network once, each gain's probabilities counted as they
    leave the stream (nothing written); and what reading it warned of."""
    from ..inference.runtime import EachPrior  # heavy: torch
    from ..inference.stream import run_rows
    from ..inference.writer import PredictionStats
    from ..sources.scene import SceneReader

    job = predictor.prepare(scene_path, work / "unwritten.tif")
    f, scene = SCALE_FACTOR, job.scene
    shape, transform = (scene.height * f, scene.width * f), fine_transform(scene.transform)
    grid = SimpleNamespace(crs=scene.crs, transform=transform, shape=shape, origin=scene.origin,
                           dataset_shape=scene.dataset_shape, bounds=BoundingBox(*array_bounds(*shape, transform)))
    truth, labelled = truth_on(grid)
    factor = f if truth.shape != shape else 1
    counts = np.zeros((len(gains), len(THRESHOLDS), 3), dtype=np.int64)

    def count(row0: int, col0: int, prob: np.ndarray, seen: np.ndarray) -> None:
        h, w = prob.shape[-2:]
        rows, cols = slice(row0 // factor, (row0 + h) // factor), slice(col0 // factor, (col0 + w) // factor)
        counts[...] += counts_of_block(prob, seen, truth[rows, cols], labelled[rows, cols], factor)

    with SceneReader(scene) as reader:
        run_rows(job.grid, reader, EachPrior(job.forward, gains), (0, job.grid.n_rows), count, PredictionStats())
    return counts, job.warnings
