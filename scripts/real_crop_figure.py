"""A picture of a real scene: false colour, MNDWI at 10 m, and the bundled model's 2 m mask.

    python scripts/real_crop_figure.py SCENE.tif OUT.png [--weights FILE] [--zoom ROW,COL,SIZE]

The last row zooms into a window (10 m pixels) so that thin creeks can be compared.
Also prints how often the model and MNDWI > 0 agree, at 10 m.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import rasterio

from s2s2net_cli.evaluation.report import false_colour
from s2s2net_cli.indices import water_index
from s2s2net_cli.inference.predictor import PredictOptions, Predictor
from s2s2net_cli.weights_header import default_weights


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("scene")
    ap.add_argument("out")
    ap.add_argument("--weights", default=None)
    ap.add_argument("--zoom", default="300,120,96")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pred_path = Path(tmp) / "pred.tif"
        Predictor(args.weights or default_weights(), PredictOptions(tile_size=512, overlap=64, precision="32")).predict_scene(args.scene, pred_path)
        with rasterio.open(pred_path) as src:
            pred = src.read(1)
    with rasterio.open(args.scene) as src:
        raw = src.read()
    mndwi = water_index(raw, "mndwi")
    rgb = false_colour(args.scene, max_side=max(raw.shape[1:]))
    frac = np.where(pred == 255, np.nan, pred).reshape(raw.shape[1], 5, raw.shape[2], 5).mean(axis=(1, 3))
    agree = np.nanmean((frac >= 0.5) == (mndwi > 0))
    print(f"model vs MNDWI>0 agreement at 10 m: {agree:.3f}; water: model {np.nanmean(frac >= 0.5):.3f}, MNDWI {np.mean(mndwi > 0):.3f}")
    r, c, s = (int(v) for v in args.zoom.split(","))
    fig, axes = plt.subplots(2, 3, figsize=(15, 10))
    panels = [(rgb, "Sentinel-2 L1C (SWIR1/NIR/green), 10 m"), (mndwi, "MNDWI, 10 m"), (pred, "s2s2net water, 2 m")]
    for ax, (data, title) in zip(axes[0], panels):
        show(ax, data, title)
        ax.add_patch(plt.Rectangle(((c if data is not pred else 5 * c) - 0.5, (r if data is not pred else 5 * r) - 0.5),
                                   s if data is not pred else 5 * s, s if data is not pred else 5 * s,
                                   fill=False, edgecolor="red", linewidth=1.5))
    zooms = [(rgb[r:r + s, c:c + s], "zoom: false colour"), (mndwi[r:r + s, c:c + s], "zoom: MNDWI"),
             (pred[5 * r:5 * (r + s), 5 * c:5 * (c + s)], "zoom: 2 m water")]
    for ax, (data, title) in zip(axes[1], zooms):
        show(ax, data, title)
    fig.tight_layout()
    fig.savefig(args.out, dpi=80)
    print(f"wrote {args.out}")


def show(ax, data, title):
    if data.ndim == 3:
        ax.imshow(data, interpolation="nearest")
    elif data.dtype == np.uint8:
        from matplotlib.colors import ListedColormap

        ax.imshow(np.ma.masked_equal(data, 255), cmap=ListedColormap(["#d9c89e", "#1f5fbf"]), vmin=0, vmax=1,
                  interpolation="nearest")
    else:
        ax.imshow(data, cmap="RdBu", vmin=-0.6, vmax=0.6, interpolation="nearest")
    ax.set_title(title)
    ax.set_xticks([])
    ax.set_yticks([])


if __name__ == "__main__":
    main()
