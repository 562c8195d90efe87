"""Scoring models and baselines on hold-out scenes, with the same pixels counted for all.

Each model's 2 m prediction is made by the same streaming code as ``predict`` and written to
a GeoTIFF; it is then brought to the reference's grid window by window: compared directly on
the same grid, by nearest when the reference is finer or in another CRS, and averaged to a
water fraction then thresholded at 0.5 when the reference is coarser (a 10 m label). Pixels
that are nodata in the reference or in the image are left out of every count. Beside F1, IoU,
precision and recall, the boundary F1: how many of the water edges lie within 2 pixels of the
reference's, on its grid (4 m for a 2 m reference, 20 m for a 10 m label), and back.

With ``degrade`` N, each scene is scored by Wald's protocol (sources/degraded.py): degraded N x,
predicted back up by every model and baseline, and scored against its reference on the
reference's own grid, which must be finer than the degraded scene's pixels; reference pixels
under an invalid coarse cell, or past the whole 2N blocks the degraded scene covers, are left
out. The warnings are the original scene's, as read.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import rasterio
from rasterio.warp import transform_bounds

from ..formats import NODATA, safe_name
from ..inference.baselines import IndexBaseline
from ..inference.predictor import PredictOptions, Predictor
from ..inference.writer import acquisition_tags, reading_tags
from ..io import check_output, make_folder
from ..labels import (
    VectorLabel,
    binarise,
    check_transformable,
    label_resolution_in,
    open_label,
    rasterise_label,
    warp_label,
)
from ..manifest import Pair
from ..metrics import BOUNDARY_TOLERANCE, Counts, boundary_counts, count
from ..option_checks import fields_set, options_said
from ..rulebook import finding, refuse
from ..sources.checks import scene_warnings
from ..sources.dates import SOURCE_TAG
from ..sources.degraded import DEGRADED_READING, degrade_scene, degraded_shape
from ..sources.open import OpenPair, open_pair
from ..weights_header import default_weights, weights_file


@dataclass
class ModelScores:
    model: str
    images: list[dict] = field(default_factory=list)
    counts: Counts = field(default_factory=Counts)

    @property
    def overall(self) -> dict:
        return self.counts.scores()

    def to_dict(self) -> dict:
        """The row of this model in the scores' JSON: its pooled scores and counts, and its images."""
        images = [{**img, "warnings": [w.to_dict() for w in img["warnings"]]} for img in self.images]
        return {"model": self.model, **_public(self.overall), "edges": list(self.counts.edges), "images": images}


def scores_document(results: list[ModelScores], degrade: int | None = None) -> dict:
    """The JSON document of evaluate and compare alike: one row a model (and the factor of
    Wald's protocol the scenes were degraded by, when they were)."""
    return {"rows": [r.to_dict() for r in results], **({"degrade": degrade} if degrade else {})}


def make_models(weights: list, baselines: list[str], options: PredictOptions | None = None,
                default_baselines: tuple[str, ...] = ()) -> list[Predictor]:
    """Predictors for each weights file and baseline name, all run with ``options`` (predict's
    own defaults unless given). With neither weights nor baselines: the bundled model and
    ``default_baselines``."""
    if not weights and not baselines:
        weights, baselines = [default_weights()], list(default_baselines)
    options = options or PredictOptions()
    if not weights:
        check_network_options(options, baselines)
    forwards = [IndexBaseline(name) for name in baselines]  # an unknown name is refused before a model loads
    labels = distinct_names([weights_file(w) for w in weights])  # "default": its file
    names = [*labels, *baselines]  # as every model runs alike, its name in the tables tells it apart or not
    twice = next((name for k, name in enumerate(names) if name in names[:k]), None)
    if twice is not None:  # before any weights load
        raise refuse("S2N-EVALUATE-MODEL-TWICE", twice)
    models = [Predictor(w, options) for w in weights]
    for model, label in zip(models, labels):
        model.forward.label = label
    return models + [Predictor(f, options) for f in forwards]


NETWORK_OPTIONS = ("precision", "flips", "threshold", "full_head")  # what a water index does not read


def check_network_options(options: PredictOptions, baselines: list[str]) -> None:
    """UsageError when options that set how the network runs are given and only water indices
    are scored: --threshold 0.3 beside --baseline ndwi changed nothing, without a word."""
    given = fields_set(options, NETWORK_OPTIONS)
    if given:
        raise refuse("S2N-NETWORK-OPTIONS-NO-MODEL", None, given=options_said(options, given),
                     baselines=", ".join(baselines))


def distinct_names(paths: list) -> list[str]:
    """The shortest trailing parts of ``paths`` that tell them apart: 'best.safetensors' for
    one, 'run_a/best.safetensors' and 'run_b/best.safetensors' for two run folders' best. One
    file named twice (``run/best.safetensors`` and its absolute path) keeps one name, its path."""
    resolved = [Path(p).resolve() for p in paths]
    for k in range(1, max((len(p.parts) for p in resolved), default=1) + 1):
        names = ["/".join(p.parts[-k:]) for p in resolved]
        if len(set(names)) == len(names):
            return names
    return [str(p) for p in resolved]


def score_pair(prediction_path, pair: Pair, nodata: float | None = None) -> Counts:
    """Counts of one 2 m prediction GeoTIFF against ``pair.mask``, on the reference's grid."""
    return score_predictions([prediction_path], pair, nodata)[0]


def score_predictions(prediction_paths: list, pair: Pair, nodata: float | None = None, block: int = 1024) -> list[Counts]:
    """Counts of each 2 m prediction against ``pair.mask``, on the reference's grid (water
    polygons, which have none: the first prediction's), over the same pixels for all: those
    valid in the reference and in every prediction (a baseline's undefined index, a model's
    clouds), read a block of the reference at a time."""
    with rasterio.open(prediction_paths[0]) as first:
        ref = open_label(pair.mask, nodata, near=(first.crs, tuple(first.bounds)))
    polygons = isinstance(ref, VectorLabel)
    preds = [open_label(path, NODATA) for path in prediction_paths]
    for pred in preds:
        check_transformable(pair.mask, ref.crs, pred.crs)
    counts = [Counts() for _ in preds]
    with rasterio.open(prediction_paths[0] if polygons else ref.path) as src:  # ref.path: as GDAL reads it
        grid_crs = src.crs
        finer = [label_resolution_in(pred, grid_crs) < abs(src.transform.a) * 0.999 for pred in preds]
        for window, core in _blocks(src.width, src.height, block, margin=BOUNDARY_TOLERANCE + 1):
            transform, shape = src.window_transform(window), (int(window.height), int(window.width))
            reference = (rasterise_label(ref, transform, grid_crs, shape) if polygons
                         else binarise(src.read(1, window=window), ref.nodata))
            predicted = [warp_label(pred, transform, grid_crs, shape, f) for pred, f in zip(preds, finer)]
            valid = ~np.isnan(reference)
            for p in predicted:
                valid &= ~np.isnan(p)
            for c, p in zip(counts, predicted):
                block_counts = count(p[core] == 1, reference[core] == 1, valid[core])
                block_counts.edges = tuple(int(n) for n in boundary_counts(p == 1, reference == 1, valid, core=core))
                c += block_counts
    return counts


def _blocks(width: int, height: int, block: int, margin: int = 0):
    """Windows of at most ``block`` px square, each grown by ``margin`` px where the image goes on,
    with the slices of the window that are the block itself."""
    for row0 in range(0, height, block):
        for col0 in range(0, width, block):
            h, w = min(block, height - row0), min(block, width - col0)
            r0, c0 = max(row0 - margin, 0), max(col0 - margin, 0)
            r1, c1 = min(row0 + h + margin, height), min(col0 + w + margin, width)
            yield (rasterio.windows.Window(c0, r0, c1 - c0, r1 - r0),
                   (slice(row0 - r0, row0 - r0 + h), slice(col0 - c0, col0 - c0 + w)))


def evaluate(models: list, pairs: list[Pair], predictions_dir, nodata: float | None = None,
             on_progress: Callable[[str, str], None] | None = None, scene_options=None,
             degrade: int | None = None) -> list[ModelScores]:
    """Score every model on every pair, on the same pixels. Each 2 m prediction is written to
    ``predictions_dir`` (see prediction_path) and scored on the reference's grid. Pixels that
    any model's output leaves out (nodata, clouds, --mask, an undefined index) are left out
    of every model's counts. With ``degrade`` N, every scene is first degraded N x (Wald's
    protocol) and the models map the degraded scene."""
    opened = {pair.id: open_pair(pair.image, pair.mask, scene_options, nodata=nodata) for pair in pairs}
    for pair in pairs:
        opened[pair.id].warnings.extend(reference_share_warnings(opened[pair.id], pair))
    if degrade:
        for pair in pairs:
            check_degradable(opened[pair.id], pair, degrade)
    runs = [m.reading(DEGRADED_READING) for m in models] if degrade else models
    predictions_dir = Path(predictions_dir)
    for pair in pairs:  # every prediction's file, before the first is written
        for run in runs:
            check_output(prediction_path(predictions_dir, pair, run.model_name), run.options.overwrite,
                         inputs=(pair.image, pair.mask))
    make_folder(predictions_dir)
    results = [ModelScores(m.model_name) for m in models]
    for pair in pairs:
        paths, warnings = [], []
        if pair.split in ("train", "val"):  # a manifest's row chip trains or validates on: no hold-out
            opened[pair.id].warnings.append(finding("S2N-EVALUATE-TRAINING-PAIR", pair.image, split=pair.split))
        with tempfile.TemporaryDirectory(prefix="s2s2net-degraded-") as tmp:
            image, scene_said = pair.image, None
            if degrade:
                image = degrade_scene(opened[pair.id].scene, degrade, Path(tmp) / "degraded.tif").path
                scene_said = scene_warnings(opened[pair.id].scene, models[0].forward.spec)
            for run in runs:
                if on_progress:
                    on_progress(pair.id, run.model_name)
                paths.append(prediction_path(predictions_dir, pair, run.model_name))
                said = run.predict_scene(image, paths[-1]).warnings
                if degrade:
                    tag_degraded(paths[-1], opened[pair.id].scene, degrade)
                warnings.append((said if scene_said is None else scene_said) + opened[pair.id].warnings)
        for result, counts, path, said in zip(results, score_predictions(paths, pair, nodata), paths, warnings):
            result.counts += counts
            result.images.append({"image": str(pair.image), "reference": str(pair.mask), "id": pair.id,
                                  **_public(counts.scores()), "edges": list(counts.edges), "prediction": str(path),
                                  "warnings": list(said),
                                  **({"degrade": degrade} if degrade else {})})
    return results


REFERENCE_SHARE_HINT = 0.5  # a raster reference of less of its scene than this: told how to predict only its part


def reference_share_warnings(opened: OpenPair, pair: Pair) -> list:
    """S2N-REFERENCE-PART-OF-SCENE where ``pair``'s raster reference covers less than half of its
    scene (one lake's label in a whole tile: the rest is predicted, for minutes, and scores
    nothing), with the --bbox of what it covers; nothing under an area of interest already, or
    for water polygons (which label the whole scene)."""
    scene = opened.scene
    if isinstance(opened.label, VectorLabel) or scene.aoi:
        return []
    (left, bottom, right, top), (l2, b2, r2, t2) = scene.bounds, opened.bounds
    covered = (max(left, l2), max(bottom, b2), min(right, r2), min(top, t2))
    share = (covered[2] - covered[0]) * (covered[3] - covered[1]) / ((right - left) * (top - bottom))
    if share >= REFERENCE_SHARE_HINT:
        return []
    try:
        west, south, east, north = transform_bounds(scene.crs, "EPSG:4326", *covered, densify_pts=21)
    except Exception:  # a CRS with no way to longitude/latitude: no --bbox to say
        return []
    out = lambda v, up: (math.ceil if up else math.floor)(v * 1e4) / 1e4  # noqa: E731  (4 decimals, outward: 11 m)
    bbox = f"{out(west, False):.4f},{out(south, False):.4f},{out(east, True):.4f},{out(north, True):.4f}"
    return [finding("S2N-REFERENCE-PART-OF-SCENE", pair.mask, percent=f"{share:.0%}" if share >= 0.01 else "under 1%",
                    scene_name=scene.name, bbox=bbox)]


def tag_degraded(path: Path, scene, factor: int) -> None:
    """A prediction of a degraded scene (written from a temporary stack of its reflectance)
    names the scene it was degraded from, read as it was, and the factor in its tags."""
    with rasterio.open(path, "r+") as dst:
        dst.update_tags(**{SOURCE_TAG: scene.name, "source_kind": scene.kind, **reading_tags(scene),
                           **acquisition_tags(scene), "degraded": f"{factor}x (Wald's protocol)"})


def check_degradable(opened: OpenPair, pair: Pair, factor: int) -> None:
    """InputError unless ``pair``'s scene holds one whole 2N block of ``factor`` and its
    reference is finer than the degraded scene's pixels (a coarser one cannot test the detail)."""
    degraded_shape(opened.scene, factor)
    reference = label_resolution_in(opened.label, opened.scene.crs)
    coarse = abs(opened.scene.transform.a) * factor
    if reference >= coarse * 0.999:
        raise refuse("S2N-DEGRADE-REFERENCE-COARSE", pair.mask, reference=reference, factor=factor, coarse=coarse)


def prediction_path(out_dir: Path, pair: Pair, model_name: str) -> Path:
    """Where a model's prediction of a pair goes: "a.safetensors+flips" -> <id>__a_flips.tif,
    "run_a/best.safetensors" -> <id>__run_a_best.tif."""
    weights, plus, variant = model_name.partition("+")
    name = weights.removesuffix(".safetensors").replace("/", "_") + (f"_{variant}" if plus else "")
    return out_dir / f"{safe_name(f'{pair.id}__{name}')}.tif"


def _public(scores: dict) -> dict:
    return {k: scores[k] for k in ("f1", "iou", "precision", "recall", "boundary_f1", "pixels")} | {
        k: scores[k] for k in ("tp", "fp", "fn", "tn") if k in scores}
