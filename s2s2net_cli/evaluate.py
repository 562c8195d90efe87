"""Scoring models and baselines on hold-out scenes, with the same pixels counted for all.

Each model's 2 m prediction is made by the same streaming code as ``predict`` and written to
a GeoTIFF; it is then brought to the reference's grid window by window: compared directly on
the same grid, by nearest when the reference is finer or in another CRS, and averaged to a
water fraction then thresholded at 0.5 when the reference is coarser (a 10 m label). Pixels
that are nodata in the reference or in the image are left out of every count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import rasterio

from .align import binarise, check_transformable, mask_resolution_in, open_mask, open_pair, warp_mask
from .baselines import BASELINES, BaselinePredictor
from .errors import InputError, describe
from .manifest import Pair
from .metrics import Counts, count


@dataclass
class ModelScores:
    model: str
    images: list[dict] = field(default_factory=list)
    counts: Counts = field(default_factory=Counts)

    @property
    def overall(self) -> dict:
        return self.counts.scores()

    def to_dict(self) -> dict:
        return {"model": self.model, "images": self.images, "overall": _public(self.overall)}


def make_models(weights: list, baselines: list[str], predict_options=None) -> list:
    """Predictors for each weights file and baseline name (default: the bundled model)."""
    from .predict import Predictor, PredictOptions, default_weights

    for name in baselines:
        if name not in BASELINES:
            raise InputError(describe(name, f"unknown baseline (choose from {', '.join(BASELINES)})"))
    if not weights and not baselines:
        weights = [default_weights()]
    options = predict_options or PredictOptions()
    models = [Predictor(w, options) for w in weights]
    models += [BaselinePredictor(b, options.scene_options(), options.overwrite) for b in baselines]
    names = [m.model_name for m in models]
    if len(set(names)) != len(names):
        raise InputError(describe(names[0], "two models have the same name; give weights files distinct names"))
    return models


def score_pair(prediction_path, pair: Pair, nodata: float | None = None, block: int = 1024) -> Counts:
    """Counts of a 2 m prediction GeoTIFF against ``pair.mask``, on the reference's grid."""
    ref = open_mask(pair.mask, nodata)
    pred = open_mask(prediction_path, 255)
    check_transformable(pair.mask, ref.crs, pred.crs)
    finer = mask_resolution_in(pred, ref.crs) < abs(ref.transform.a) * 0.999
    counts = Counts()
    with rasterio.open(pair.mask) as src:
        for row0 in range(0, src.height, block):
            for col0 in range(0, src.width, block):
                window = rasterio.windows.Window(col0, row0, min(block, src.width - col0), min(block, src.height - row0))
                reference = binarise(src.read(1, window=window), ref.nodata)
                predicted = warp_mask(pred, src.window_transform(window), ref.crs, reference.shape, finer)
                valid = ~np.isnan(reference) & ~np.isnan(predicted)
                counts += count(predicted == 1, reference == 1, valid)
    return counts


def evaluate(models: list, pairs: list[Pair], predictions_dir, nodata: float | None = None,
             on_progress: Callable[[str, str], None] | None = None, scene_options=None) -> list[ModelScores]:
    """Score every model on every pair. Each 2 m prediction is written to ``predictions_dir``
    (see prediction_path) and scored on the reference's grid. Pixels a model's output leaves
    out (nodata, clouds, --mask) are left out of every count."""
    for pair in pairs:
        open_pair(pair.image, pair.mask, scene_options, nodata=nodata)
    predictions_dir = Path(predictions_dir)
    predictions_dir.mkdir(parents=True, exist_ok=True)
    results = [ModelScores(m.model_name) for m in models]
    for pair in pairs:
        for model, result in zip(models, results):
            if on_progress:
                on_progress(pair.id, model.model_name)
            pred_path = prediction_path(predictions_dir, pair, model.model_name)
            predicted = model.predict_scene(pair.image, pred_path)
            counts = score_pair(pred_path, pair, nodata)
            result.counts += counts
            result.images.append({"image": str(pair.image), "reference": str(pair.mask), "id": pair.id,
                                  **_public(counts.scores()), "prediction": str(pred_path),
                                  "warnings": list(getattr(predicted, "warnings", []))})
    return results


def prediction_path(out_dir: Path, pair: Pair, model_name: str) -> Path:
    weights, plus, variant = model_name.partition("+")  # "a.safetensors+flips": a_flips
    name = Path(weights).stem + (f"_{variant}" if plus else "")
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in f"{pair.id}__{name}")
    return out_dir / f"{safe}.tif"


def _public(scores: dict) -> dict:
    return {k: scores[k] for k in ("f1", "iou", "precision", "recall", "pixels")} | {
        k: scores[k] for k in ("tp", "fp", "fn", "tn") if k in scores}
