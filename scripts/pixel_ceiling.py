"""How far the six bands alone go on the Bolivia folds: a per-pixel classifier, trained on each
fold's training chips and scored on its held-out chips, pooled as scripts/bolivia_folds.py pools.

    python scripts/pixel_ceiling.py WORK      # WORK/fold{0,1,2}_{train,test}.csv (bolivia_folds.py manifests)
    python scripts/pixel_ceiling.py WORK --neighbourhood   # the same with each pixel's surroundings, and in-sample

A small MLP (6 reflectances, optionally with NDWI, MNDWI and NDMI as inputs; two hidden layers of
32; 300 full-batch Adam steps on 300,000 labelled 10 m pixels drawn from the training chips)
sees one pixel at a time, no neighbours. Where it ties NDWI > 0, the spectra carry no more than
that index does, and a model can beat the index only by what it learns from the water's shape
and surroundings. Prints pooled F1 for the classifier with and without the indices and for
NDWI > 0, on the same pixels (nodata and zero-reflectance pixels left out, as compare does).

With --neighbourhood the classifier also sees each pixel's surroundings (the mean and spread of
NDWI, MNDWI, B08 and B11 over 5, 15 and 45 px, 50 to 450 m, and their extremes over 7 px: 32
layers beside the six reflectances and three indices, 41 inputs), which is what a network can
learn beyond the index; and two rows in-sample (WORK/all.csv): classifiers fitted on half the
labelled pixels of all 15 chips and scored on the other half, pixels alone and with
surroundings. Neighbouring pixels of one chip fall in both halves, so the in-sample rows say
how much of the labels such a classifier fits on chips it learnt from (a looser bound than the
folds': a stronger learner fits more).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import rasterio
import torch
from scipy import ndimage

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from s2s2net_cli.manifest import read_manifest  # noqa: E402
from s2s2net_cli.metrics import Counts, count  # noqa: E402


def labelled_pixels(manifest: Path, neighbourhood: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Every labelled pixel of a manifest's chips: reflectances (N, 6), with their surroundings
    after them when ``neighbourhood`` (N, 38), and labels (N,)."""
    xs, ys = [], []
    for pair in read_manifest(manifest):
        with rasterio.open(pair.image) as src:
            image = src.read().astype(np.float32) / 10000
        with rasterio.open(pair.mask) as src:
            label = src.read(1)
        valid = (label != 255) & (image[0] > 0)
        if neighbourhood:
            image = np.concatenate([image, surroundings(image)])
        xs.append(image[:, valid].T)
        ys.append(label[valid])
    return np.concatenate(xs), np.concatenate(ys)


def surroundings(image: np.ndarray) -> np.ndarray:
    """(32, h, w): the mean and spread of NDWI, MNDWI, B08 and B11 around each pixel over 5, 15
    and 45 px, and their largest and smallest values over 7 px."""
    green, nir, swir = image[1], image[3], image[4]
    layers = []
    for base in ((green - nir) / (green + nir + 1e-6), (green - swir) / (green + swir + 1e-6), nir, swir):
        for size in (5, 15, 45):
            mean = ndimage.uniform_filter(base, size, mode="reflect")
            spread = np.sqrt(np.maximum(ndimage.uniform_filter(base * base, size, mode="reflect") - mean * mean, 0))
            layers += [mean, spread]
        layers += [ndimage.maximum_filter(base, 7), ndimage.minimum_filter(base, 7)]
    return np.stack(layers).astype(np.float32)


def features(x: np.ndarray, with_indices: bool) -> np.ndarray:
    if not with_indices:
        return x
    green, nir, swir = x[:, 1], x[:, 3], x[:, 4]
    ratios = [(green - nir) / (green + nir + 1e-6), (green - swir) / (green + swir + 1e-6),
              (nir - swir) / (nir + swir + 1e-6)]
    return np.concatenate([x, np.stack(ratios, 1)], 1)


def fit_and_predict(x_train, y_train, x_test, with_indices: bool, seed: int = 0) -> np.ndarray:
    torch.manual_seed(seed)
    train = features(x_train, with_indices)
    mean, std = train.mean(0), train.std(0) + 1e-6
    inputs, targets = torch.tensor((train - mean) / std), torch.tensor(y_train, dtype=torch.float32)
    net = torch.nn.Sequential(torch.nn.Linear(inputs.shape[1], 32), torch.nn.ReLU(), torch.nn.Linear(32, 32),
                              torch.nn.ReLU(), torch.nn.Linear(32, 1))
    optimiser = torch.optim.Adam(net.parameters(), 1e-2)
    for _ in range(300):
        optimiser.zero_grad()
        torch.nn.functional.binary_cross_entropy_with_logits(net(inputs)[:, 0], targets).backward()
        optimiser.step()
    with torch.no_grad():
        logits = net(torch.tensor((features(x_test, with_indices) - mean) / std))[:, 0]
    return (logits > 0).numpy()


def scored(x_train, y_train, x_test, y_test, kinds: dict) -> dict:
    """Each kind of classifier (name: with_indices, and how many inputs it sees) fitted on up to
    300,000 drawn training pixels and counted on the test pixels, and NDWI > 0 on the same."""
    drawn = np.random.default_rng(0).choice(len(x_train), min(300_000, len(x_train)), replace=False)
    water, everywhere = y_test == 1, np.ones(len(y_test), dtype=bool)
    row = {}
    for name, (with_indices, inputs) in kinds.items():
        predicted = fit_and_predict(x_train[drawn, :inputs], y_train[drawn], x_test[:, :inputs], with_indices)
        row[name] = count(predicted, water, everywhere)
    green, nir = x_test[:, 1], x_test[:, 3]
    row["ndwi"] = count((green - nir) / (green + nir + 1e-9) > 0, water, everywhere)
    return row


def main(work: Path, neighbourhood: bool = False) -> None:
    torch.set_num_threads(1)
    wide = 6 + len(surroundings(np.ones((6, 1, 1), np.float32)))
    kinds = {"pixels alone": (False, 6), "pixels + indices": (True, 6)}
    if neighbourhood:
        kinds["pixels + surroundings"] = (True, wide)
    totals = {name: Counts() for name in (*kinds, "ndwi")}
    for k in range(3):
        x_train, y_train = labelled_pixels(work / f"fold{k}_train.csv", neighbourhood)
        x_test, y_test = labelled_pixels(work / f"fold{k}_test.csv", neighbourhood)
        row = scored(x_train, y_train, x_test, y_test, kinds)
        for name, c in row.items():
            totals[name] += c
        print(f"fold {k}: " + ", ".join(f"{name} {c.scores()['f1']:.4f}" for name, c in row.items()), flush=True)
    print("pooled: " + ", ".join(f"{name} {c.scores()['f1']:.4f}" for name, c in totals.items()), flush=True)
    if neighbourhood:
        x, y = labelled_pixels(work / "all.csv", neighbourhood=True)
        half = np.random.default_rng(1).random(len(y)) < 0.5
        row = scored(x[half], y[half], x[~half], y[~half], kinds)
        print("in-sample, all 15 chips: " + ", ".join(f"{name} {c.scores()['f1']:.4f}" for name, c in row.items()))


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3) or sys.argv[2:] not in ([], ["--neighbourhood"]):
        print("usage: python scripts/pixel_ceiling.py WORK [--neighbourhood]", file=sys.stderr)
        sys.exit(2)
    main(Path(sys.argv[1]), neighbourhood=len(sys.argv) == 3)
