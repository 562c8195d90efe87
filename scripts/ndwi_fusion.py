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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from s2s2net_cli.bands import normalise  # noqa: E402
from s2s2net_cli.checkpoint import load_model  # noqa: E402
from s2s2net_cli.grid import SCALE_FACTOR  # noqa: E402
from s2s2net_cli.inference.runtime import DEFAULT_WEIGHTS  # noqa: E402
from s2s2net_cli.manifest import read_manifest  # noqa: E402
from s2s2net_cli.metrics import Counts, boundary_counts, count  # noqa: E402
from s2s2net_cli.model import NdwiPrior  # noqa: E402

GAINS = (0, 4, 8, 16, 24, 32)
KINDS = ("NDWI", "max(NDWI, 0)")


def fused_masks(model, card, image: np.ndarray) -> tuple[dict[tuple[str, int], np.ndarray], np.ndarray]:
    """The 2 m water masks of one (6, h, w) DN image for every gain of NDWI and of max(NDWI, 0)
    (keyed (kind, gain)), the network run once, and the image's valid 10 m pixels. NDWI is the
    model's own NdwiPrior's, before its clamp and gain."""
    valid = (image != 0).all(0)
    x = torch.from_numpy(normalise(image / card.bands.scale, valid, card.bands))[None]
    with torch.no_grad():
        logits = model(x)[0, 0].numpy()
        ndwi = NdwiPrior(card.bands, 1.0).fine_ndwi(x)[0, 0].numpy()
    cut = float(np.log(card.threshold / (1 - card.threshold)))
    priors = {KINDS[0]: ndwi, KINDS[1]: np.maximum(ndwi, 0)}
    return {(kind, gain): logits + gain * prior >= cut for kind, prior in priors.items() for gain in GAINS}, valid


def at_10m(mask: np.ndarray) -> np.ndarray:
    h, w = mask.shape[0] // SCALE_FACTOR, mask.shape[1] // SCALE_FACTOR
    return mask.reshape(h, SCALE_FACTOR, w, SCALE_FACTOR).mean((1, 3)) >= 0.5


def score_10m(model, card, pairs, counts: dict[tuple[str, int], Counts]) -> None:
    for image_path, label_path in pairs:
        with rasterio.open(image_path) as src:
            image = src.read().astype(np.float32)
        with rasterio.open(label_path) as src:
            label = src.read(1)
        masks, valid = fused_masks(model, card, image)
        ok = valid & (label != 255)
        for key, mask in masks.items():
            counts[key] += count(at_10m(mask), label == 1, ok)


def load_without_prior(path: Path):
    model, card = load_model(path)
    model.prior = None  # the gains here are added to the network's own logits
    return model, card


def main(crossval: Path, realdata: Path, holdout: Path, weights: Path) -> None:
    torch.set_num_threads(2)
    keys = [(kind, gain) for kind in KINDS for gain in GAINS]
    bolivia, shanghai, synthetic = ({key: Counts() for key in keys} for _ in range(3))
    for k in range(3):
        fold_model, fold_card = load_without_prior(crossval / f"fold{k}" / "model.safetensors")
        score_10m(fold_model, fold_card, [(p.image, p.mask) for p in read_manifest(crossval / f"fold{k}_test.csv")],
                  bolivia)
    model, card = load_without_prior(weights)
    score_10m(model, card, [(realdata / "shanghai_esw_s2_l2a_6band_10m.tif", realdata / "shanghai_esw_water_10m.tif")],
              shanghai)
    for pair in read_manifest(holdout / "manifest.csv"):
        with rasterio.open(pair.image) as src:
            image = src.read().astype(np.float32)
        with rasterio.open(pair.mask) as src:
            truth = src.read(1)
        masks, valid = fused_masks(model, card, image)
        ok = ~np.isnan(truth) & np.repeat(np.repeat(valid, SCALE_FACTOR, 0), SCALE_FACTOR, 1)
        for key, mask in masks.items():
            scene = count(mask, truth == 1, ok)
            scene.edges = tuple(int(n) for n in boundary_counts(mask, truth == 1, ok, tolerance=2))
            synthetic[key] += scene
    rows = {"Bolivia, cross-validated (10 m)": {key: c.scores()["f1"] for key, c in bolivia.items()},
            "Shanghai (10 m)": {key: c.scores()["f1"] for key, c in shanghai.items()},
            "synthetic hold-out (2 m)": {key: c.scores()["f1"] for key, c in synthetic.items()},
            "synthetic hold-out, boundary F1": {key: c.scores()["boundary_f1"] for key, c in synthetic.items()}}
    print(f"{'gain':>46} " + " ".join(f"{g:>7}" for g in GAINS))
    for kind in KINDS:
        for name, row in rows.items():
            print(f"{kind + ': ' + name:>46} " + " ".join(f"{row[(kind, g)]:7.4f}" for g in GAINS))


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5):
        print("usage: python scripts/ndwi_fusion.py CROSSVAL REALDATA HOLDOUT [WEIGHTS]", file=sys.stderr)
        sys.exit(2)
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]),
         Path(sys.argv[4]) if len(sys.argv) > 4 else DEFAULT_WEIGHTS)
