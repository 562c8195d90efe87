"""A picture of `s2s2net rivers` on a real scene: the 2 m mask, the centrelines coloured by
width, and the transects drawn across the channels, over the scene in false colour.

    python scripts/rivers_figure.py SCENE.tif OUT.png [--weights FILE] [--zoom ROW,COL,SIZE] [--spacing 30]

The scene is predicted as `predict` does (fp32), then measured as `rivers` does with its
defaults (and --spacing); the zoom is a window in 10 m pixels. Prints the reaches' summary.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import geopandas as gpd  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import rasterio  # noqa: E402
from rasterio.windows import Window  # noqa: E402

from s2s2net_cli.evaluation.report import false_colour  # noqa: E402
from s2s2net_cli.hydrology.rivers import RiverOptions, measure_rivers  # noqa: E402
from s2s2net_cli.inference.predictor import PredictOptions, Predictor  # noqa: E402
from s2s2net_cli.weights_header import default_weights  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("scene")
    ap.add_argument("out")
    ap.add_argument("--weights", default=None)
    ap.add_argument("--zoom", default="250,80,160")
    ap.add_argument("--spacing", type=float, default=30.0)
    args = ap.parse_args()
    row, col, size = (int(v) for v in args.zoom.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        mask_path, rivers_path = Path(tmp) / "water.tif", Path(tmp) / "rivers.gpkg"
        Predictor(args.weights or default_weights(), PredictOptions(precision="32")).predict_scene(args.scene, mask_path)
        summary = measure_rivers(mask_path, rivers_path, RiverOptions(spacing_m=args.spacing))
        print(summary.to_dict())
        reaches = gpd.read_file(rivers_path, layer="reaches")
        widths = gpd.read_file(rivers_path, layer="widths")
        with rasterio.open(mask_path) as src:
            mask = src.read(1, window=Window(col * 5, row * 5, size * 5, size * 5))
            t = src.window_transform(Window(col * 5, row * 5, size * 5, size * 5))
    with rasterio.open(args.scene) as src:
        side = max(src.width, src.height)
    picture = false_colour(args.scene, max_side=side)[row:row + size, col:col + size]
    left, top = t.c, t.f
    extent = (left, left + size * 10, top - size * 10, top)  # 10 m pixels
    fig, axes = plt.subplots(1, 2, figsize=(12, 6.2), dpi=110)
    axes[0].imshow(picture, extent=extent)
    axes[0].set_title("Sentinel-2, 10 m (false colour)")
    axes[1].imshow(np.where(mask == 1, 1.0, np.where(mask == 255, np.nan, 0.0)), cmap="Blues", vmin=-0.3, vmax=1.4,
                   extent=extent, interpolation="nearest")
    view = gpd.GeoSeries.from_xy([extent[0], extent[1]], [extent[2], extent[3]]).total_bounds
    shown = reaches.cx[view[0]:view[2], view[1]:view[3]]
    if len(shown):
        shown.plot(ax=axes[1], column="width_median_m", cmap="plasma", linewidth=1.6, legend=True,
                   legend_kwds={"label": "reach median width (m)", "shrink": 0.7})
    near = widths.cx[view[0]:view[2], view[1]:view[3]]
    axes[1].scatter(near.geometry.x, near.geometry.y, s=6, c="k")
    for p, w in zip(near.geometry, near.width_m):
        axes[1].annotate(f"{w:.0f}", (p.x, p.y), fontsize=5, color="k", xytext=(2, 2), textcoords="offset points")
    axes[1].set_title("2 m mask, centrelines and widths (m) every 30 m")
    for ax in axes:
        ax.set_xlim(extent[0], extent[1])
        ax.set_ylim(extent[2], extent[3])
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel("")
        ax.set_ylabel("")
    fig.tight_layout()
    fig.savefig(args.out)
    print(f"wrote {args.out}: {len(shown)} reaches and {len(near)} transects in view")


if __name__ == "__main__":
    main()
