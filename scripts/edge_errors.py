"""Where a model's errors on the Bolivia folds lie against NDWI's: on the label's water edge or
off it, and how much each loses when shifted by one 10 m pixel (how closely it follows the
label's pixels).

    python scripts/edge_errors.py WORK [MODEL]   # WORK/fold{k}_test.csv and WORK/fold{k}/MODEL

Each chip is scored by its own fold's model (MODEL, default model.safetensors: the model that
never trained on it), the whole chip in one forward pass in fp32 at the weights' threshold, the
2 m mask counted at 10 m as `evaluate` counts it (water where half the 2 m cells are); NDWI > 0
on the same pixels (nodata labels and nodata image pixels left out, and the chip's outer ring,
which a shift wraps). Prints, pooled over the folds, F1, the mean F1 of the four one-pixel
shifts, the errors in all and those within one pixel of the label's edge.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import rasterio
import torch
from scipy import ndimage

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from s2s2net_cli.bands import normalise  # noqa: E402
from s2s2net_cli.checkpoint import load_model  # noqa: E402
from s2s2net_cli.grid import SCALE_FACTOR  # noqa: E402
from s2s2net_cli.indices import water_index  # noqa: E402
from s2s2net_cli.manifest import read_manifest  # noqa: E402
from s2s2net_cli.metrics import Counts, count  # noqa: E402

SHIFTS = ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1))


def masks_at_10m(model, card, image: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The model's and NDWI's water at 10 m for one (6, h, w) DN chip, and its valid pixels."""
    valid = (image != 0).all(0)
    reflectance = image / card.bands.scale
    x = torch.from_numpy(normalise(reflectance, valid, card.bands))[None]
    with torch.no_grad():
        probability = torch.sigmoid(model(x))[0, 0].numpy()
    h, w = valid.shape
    fine = (probability >= card.threshold).reshape(h, SCALE_FACTOR, w, SCALE_FACTOR)
    return {"model": fine.mean((1, 3)) >= 0.5, "ndwi": water_index(reflectance, "ndwi") > 0}, valid


def main(work: Path, model_name: str) -> None:
    shifted = {name: [Counts() for _ in SHIFTS] for name in ("model", "ndwi")}
    errors = {name: np.zeros(2, int) for name in ("model", "ndwi")}
    for k in range(3):
        model, card = load_model(work / f"fold{k}" / model_name)
        for pair in read_manifest(work / f"fold{k}_test.csv"):
            with rasterio.open(pair.image) as src:
                image = src.read().astype(np.float32)
            with rasterio.open(pair.mask) as src:
                label = src.read(1)
            masks, valid = masks_at_10m(model, card, image)
            water = label == 1
            inner = (slice(1, -1), slice(1, -1))
            ok = (valid & (label != 255))[inner]
            edge = (ndimage.binary_dilation(water) & ~ndimage.binary_erosion(water))[inner]
            for name, mask in masks.items():
                for i, shift in enumerate(SHIFTS):
                    shifted[name][i] += count(np.roll(mask, shift, (0, 1))[inner], water[inner], ok)
                wrong = ok & (mask[inner] != water[inner])
                errors[name] += [np.count_nonzero(wrong), np.count_nonzero(wrong & edge)]
    for name in ("model", "ndwi"):
        f1 = [c.scores()["f1"] for c in shifted[name]]
        total, on_edge = errors[name]
        print(f"{name:>5}: F1 {f1[0]:.4f}, shifted one pixel {np.mean(f1[1:]):.4f} (-{f1[0] - np.mean(f1[1:]):.4f}); "
              f"errors {total}: {on_edge} within one pixel of the label's edge, {total - on_edge} off it")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        print("usage: python scripts/edge_errors.py WORK [MODEL]", file=sys.stderr)
        sys.exit(2)
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "model.safetensors")
