"""Choose a model's water probability threshold and the gain of its NDWI prior (the network's
logits plus gain x max(NDWI, 0): `s2s2net weights annotate --ndwi-prior`); print both on one
line (stdout: THRESHOLD GAIN), the table on stderr.

    python scripts/calibrate_threshold.py WEIGHTS WORK_DIR [--realdata DIR] [--manifest CSV] [--gains 0,8,16,32]

Scored on synthetic validation scenes (generator seeds 8000-8011: neither the training
seeds 1000-1299 nor the hold-out seeds 9000-9011) at 2 m, pooled, and, when the real labelled
Shanghai scene is there (../shared/realdata/), on it at 10 m as `s2s2net evaluate` scores it
(the 2 m mask averaged onto the label's 10 m pixels, water from half), and with --manifest on
its 10 m labelled pairs pooled (image,mask CSV, each label on its image's 10 m grid: the
Sen1Floods11 chips a model trained on, say). The threshold with the best mean of their F1s
and gain with the best mean of their F1s are chosen (synthetic alone without the real ones);
each gain is scored as predict runs it (a copy of WEIGHTS annotated with it). Shanghai only
chooses these two numbers; it is never trained on.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import rasterio

ROOT = Path(__file__).resolve().parent.parent
THRESHOLDS = np.round(np.arange(0.10, 0.91, 0.05), 2)
GAINS = "0,4,8,16,32"  # NDWI prior gains tried (--gains)
SHANGHAI = ("shanghai_esw_s2_l2a_6band_10m.tif", "shanghai_esw_water_10m.tif")


def f1(tp, fp, fn) -> float:
    return 2 * tp / max(2 * tp + fp + fn, 1)


def counts_at(prob_pct: np.ndarray, truth: np.ndarray, valid: np.ndarray, factor: int = 1) -> np.ndarray:
    """(len(THRESHOLDS), 3) tp, fp, fn of ``prob_pct`` (2 m, percent) against ``truth``; with
    ``factor`` 5 the 2 m mask is averaged onto the 10 m truth first (water from half)."""
    out = np.zeros((len(THRESHOLDS), 3), dtype=np.int64)
    for k, t in enumerate(THRESHOLDS):
        water = (prob_pct >= t * 100).astype(np.float32)
        if factor > 1:
            h, w = truth.shape
            water = water.reshape(h, factor, w, factor).mean(axis=(1, 3)) >= 0.5
        pred, ref = water.astype(bool) & valid, (truth == 1) & valid
        out[k] = ((pred & ref).sum(), (pred & ~ref).sum(), (~pred & ref).sum())
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("weights")
    parser.add_argument("work")
    parser.add_argument("--realdata", default=str(ROOT.parent / "shared" / "realdata"))
    parser.add_argument("--manifest", default=None, help="10 m labelled pairs (image,mask CSV) scored pooled")
    parser.add_argument("--gains", default=GAINS, help=f"NDWI prior gains to try, comma-separated (default {GAINS})")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from s2s2net_cli.checkpoint import annotate_weights
    from s2s2net_cli.synthetic.scenes import make_pair, write_pair

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    synthetic = []  # (scene file, its 2 m truth): made once, scored for every gain
    for seed in range(8000, 8012):
        pair = make_pair(192, seed=seed)
        scene = work / f"val_{seed}_scene.tif"
        write_pair(pair, scene, work / f"val_{seed}_mask.tif")
        synthetic.append((scene, pair.mask))
    gains = [float(g) for g in args.gains.split(",")]
    means, tables = [], []
    for gain in gains:
        weights = annotate_weights(args.weights, work / f"gain_{gain:g}.safetensors", {}, ndwi_prior=gain, overwrite=True)
        scores = score(weights, work, synthetic, Path(args.realdata), args.manifest)
        mean = np.mean([scores[k] for k in scores], axis=0)
        means.append(mean)
        tables.append(scores)
    g, best = np.unravel_index(int(np.argmax(np.array(means))), (len(gains), len(THRESHOLDS)))
    for gain, scores, mean in zip(gains, tables, means):
        print(f"NDWI prior gain {gain:g}", file=sys.stderr)
        print("threshold  " + "  ".join(f"{k:>9}" for k in scores) + "       mean", file=sys.stderr)
        for k, t in enumerate(THRESHOLDS):
            mark = "  <-" if (gain, k) == (gains[g], best) else ""
            print(f"{t:9.2f}  " + "  ".join(f"{scores[n][k]:9.4f}" for n in scores) + f"  {mean[k]:9.4f}{mark}",
                  file=sys.stderr)
    print(f"{THRESHOLDS[best]:.2f} {gains[g]:g}")


def score(weights: Path, work: Path, synthetic: list, realdata: Path, manifest: str | None) -> dict[str, list[float]]:
    """F1 at every threshold of ``weights`` on each kind of data: the ``synthetic`` validation
    scenes ((file, 2 m truth) pairs), Shanghai (when there) and the pairs of ``manifest`` (when given)."""
    from s2s2net_cli.inference.predictor import PredictOptions, Predictor

    predictor = Predictor(weights, PredictOptions(tile_size=192, overlap=48, probability=True, overwrite=True, precision="32"))
    pooled = np.zeros((len(THRESHOLDS), 3), dtype=np.int64)
    for scene, truth in synthetic:
        out = work / scene.name.replace("_scene.tif", "_prob.tif")
        predictor.predict_scene(scene, out)
        with rasterio.open(out) as src:
            prob = src.read(1)
        pooled += counts_at(prob, np.nan_to_num(truth, nan=0), ~np.isnan(truth) & (prob != 255))
    scores = {"synthetic": [f1(*c) for c in pooled]}
    image, label = (realdata / name for name in SHANGHAI)
    if image.exists() and label.exists():
        real = Predictor(weights, PredictOptions(probability=True, overwrite=True, precision="32"))
        real.predict_scene(image, work / "shanghai_prob.tif")
        with rasterio.open(work / "shanghai_prob.tif") as src, rasterio.open(label) as lab:
            prob, truth = src.read(1), lab.read(1)
        valid = (truth != 255) & (prob.reshape(truth.shape[0], 5, truth.shape[1], 5) != 255).all(axis=(1, 3))
        scores["shanghai"] = [f1(*c) for c in counts_at(prob, truth, valid, factor=5)]
    if manifest:
        import csv

        real = Predictor(weights, PredictOptions(probability=True, overwrite=True, precision="32"))
        pooled = np.zeros((len(THRESHOLDS), 3), dtype=np.int64)
        with open(manifest, newline="") as fh:
            rows = list(csv.DictReader(fh))
        for k, row in enumerate(rows):
            image, label = (Path(manifest).parent / row[c] for c in ("image", "mask"))
            real.predict_scene(image, work / f"pair_{k}_prob.tif")
            with rasterio.open(work / f"pair_{k}_prob.tif") as src, rasterio.open(label) as lab:
                prob, truth = src.read(1), lab.read(1)
            h, w = truth.shape
            valid = (truth != 255) & (prob.reshape(h, 5, w, 5) != 255).all(axis=(1, 3))
            pooled += counts_at(prob, truth, valid, factor=5)
        scores["pairs"] = [f1(*c) for c in pooled]
    return scores


if __name__ == "__main__":
    main()
