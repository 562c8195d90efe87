"""What a trained model gains, and loses, when NDWI is added to its logits after training: gain x
NDWI (each 10 m pixel's, brought to 2 m bilinearly) added to every 2 m logit, for several gains,
on the Bolivia folds, on Shanghai and on the synthetic hold-out; and the same with max(NDWI, 0),
which only ever adds water (what `s2s2net weights annotate --ndwi-prior` gives a model).

    python scripts/ndwi_fusion.py CROSSVAL REALDATA HOLDOUT [WEIGHTS]

CROSSVAL holds scripts/bolivia_folds.py's manifests and each fold's model
(CROSSVAL/fold{k}_test.csv, CROSSVAL/fold{k}/model.safetensors): every Bolivia chip is scored by
the model that never trained on it, at 10 m (water where half the 2 m cells are, as `evaluate`
counts a 10 m label), pooled. Shanghai (REALDATA/shanghai_esw_*) is scored at 10 m and the
synthetic hold-out scenes (HOLDOUT/manifest.csv, from scripts/score_default.sh) at 2 m, with
their boundary F1 (edges within 2 px), by WEIGHTS (default: the bundled model). Each image is
one forward pass in fp32 at the weights' own threshold (the card's own NDWI prior left out); nodata pixels are left out.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import rasterio
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from s2s2net_cli.bands import normalise  # noqa: E402
from s2s2net_cli.checkpoint import load_model  # noqa: E402
from s2s2net_cli.grid import SCALE_FACTOR  # noqa: E402
from s2s2net_cli.indices import water_index  # noqa: E402
from s2s2net_cli.inference.runtime import DEFAULT_WEIGHTS  # noqa: E402
from s2s2net_cli.manifest import read_manifest  # noqa: E402
from s2s2net_cli.metrics import Counts, boundary_counts, boundary_f1, count  # noqa: E402

GAINS = (0, 4, 8, 16, 24, 32)


def fused_logits(model, card, image: np.ndarray, positive: bool) -> tuple[dict[int, np.ndarray], np.ndarray]:
    """The 2 m water masks of one (6, h, w) DN image for every gain (of max(NDWI, 0) when
    ``positive``), and its valid 10 m pixels."""
    valid = (image != 0).all(0)
    reflectance = image / card.bands.scale
    x = torch.from_numpy(normalise(reflectance, valid, card.bands))[None]
    with torch.no_grad():
        logits = model(x)[0, 0].numpy()
    ndwi = torch.from_numpy(np.nan_to_num(water_index(reflectance, "ndwi")).astype(np.float32))[None, None]
    prior = F.interpolate(ndwi, scale_factor=SCALE_FACTOR, mode="bilinear", align_corners=False)[0, 0].numpy()
    if positive:
        prior = np.maximum(prior, 0)
    cut = float(np.log(card.threshold / (1 - card.threshold)))
    return {gain: logits + gain * prior >= cut for gain in GAINS}, valid


def at_10m(mask: np.ndarray) -> np.ndarray:
    h, w = mask.shape[0] // SCALE_FACTOR, mask.shape[1] // SCALE_FACTOR
    return mask.reshape(h, SCALE_FACTOR, w, SCALE_FACTOR).mean((1, 3)) >= 0.5


def score_10m(model, card, pairs, counts: dict[int, Counts], positive: bool) -> None:
    for image_path, label_path in pairs:
        with rasterio.open(image_path) as src:
            image = src.read().astype(np.float32)
        with rasterio.open(label_path) as src:
            label = src.read(1)
        masks, valid = fused_logits(model, card, image, positive)
        ok = valid & (label != 255)
        for gain, mask in masks.items():
            counts[gain] += count(at_10m(mask), label == 1, ok)


def load_without_prior(path: Path):
    model, card = load_model(path)
    model.prior = None  # the gains here are added to the network's own logits
    return model, card


def main(crossval: Path, realdata: Path, holdout: Path, weights: Path) -> None:
    torch.set_num_threads(2)
    folds = [load_without_prior(crossval / f"fold{k}" / "model.safetensors") for k in range(3)]
    model, card = load_without_prior(weights)
    print(f"{'gain':>46} " + " ".join(f"{g:>7}" for g in GAINS))
    for positive in (False, True):
        rows = {}
        bolivia = {gain: Counts() for gain in GAINS}
        for k, (fold_model, fold_card) in enumerate(folds):
            score_10m(fold_model, fold_card, [(p.image, p.mask) for p in read_manifest(crossval / f"fold{k}_test.csv")],
                      bolivia, positive)
        rows["Bolivia, cross-validated (10 m)"] = {g: c.scores()["f1"] for g, c in bolivia.items()}
        shanghai = {gain: Counts() for gain in GAINS}
        score_10m(model, card, [(realdata / "shanghai_esw_s2_l2a_6band_10m.tif", realdata / "shanghai_esw_water_10m.tif")],
                  shanghai, positive)
        rows["Shanghai (10 m)"] = {g: c.scores()["f1"] for g, c in shanghai.items()}
        synthetic = {gain: Counts() for gain in GAINS}
        edges = {gain: np.zeros(4, np.int64) for gain in GAINS}
        for pair in read_manifest(holdout / "manifest.csv"):
            with rasterio.open(pair.image) as src:
                image = src.read().astype(np.float32)
            with rasterio.open(pair.mask) as src:
                truth = src.read(1)
            masks, valid = fused_logits(model, card, image, positive)
            ok = ~np.isnan(truth) & np.repeat(np.repeat(valid, SCALE_FACTOR, 0), SCALE_FACTOR, 1)
            for gain, mask in masks.items():
                synthetic[gain] += count(mask, truth == 1, ok)
                edges[gain] += boundary_counts(mask, truth == 1, ok, tolerance=2)
        rows["synthetic hold-out (2 m)"] = {g: c.scores()["f1"] for g, c in synthetic.items()}
        rows["synthetic hold-out, boundary F1"] = {g: boundary_f1(e) for g, e in edges.items()}
        for name, row in rows.items():
            name = f"{'max(NDWI, 0): ' if positive else 'NDWI: '}{name}"
            print(f"{name:>46} " + " ".join(f"{row[g]:7.4f}" for g in GAINS))


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5):
        print("usage: python scripts/ndwi_fusion.py CROSSVAL REALDATA HOLDOUT [WEIGHTS]", file=sys.stderr)
        sys.exit(2)
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]),
         Path(sys.argv[4]) if len(sys.argv) > 4 else DEFAULT_WEIGHTS)
