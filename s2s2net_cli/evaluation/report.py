"""Reports of a comparison: CSV rows and a PNG of scenes, references and predictions."""

from __future__ import annotations

import csv
import tempfile
from pathlib import Path

import numpy as np
import rasterio
import rasterio.windows
from rasterio.enums import Resampling

from ..formats import MASK_COLOURS
from ..io import atomic_path
from ..labels import binarise, nodata_values, open_label, warp_label
from ..manifest import Pair
from ..sources.degraded import DEGRADED_READING, degrade_scene
from ..sources.open import open_scene
from ..sources.options import SceneOptions
from .evaluate import ModelScores, prediction_path

COLUMNS = ("model", "image", "f1", "iou", "precision", "recall", "boundary_f1", "pixels")


def table_rows(results: list[ModelScores]) -> list[dict]:
    """One row per model and image, then one 'overall' row per model."""
    rows = []
    for r in results:
        for img in r.images:
            rows.append({"model": r.model, "image": img["id"], **{k: img[k] for k in COLUMNS[2:]}})
    for r in results:
        rows.append({"model": r.model, "image": "overall", **{k: r.overall[k] for k in COLUMNS[2:]}})
    return rows


def write_csv(path, results: list[ModelScores], degrade: int | None = None) -> None:
    """The table as CSV, with a last column ``degrade``: the factor each scene was degraded by
    (Wald's protocol), empty for scores at the scenes' own pixels."""
    with atomic_path(path) as tmp:
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=[*COLUMNS, "degrade"])
            writer.writeheader()
            for row in table_rows(results):
                writer.writerow({k: ("" if v is None else v) for k, v in row.items()} | {"degrade": degrade or ""})


def false_colour(scene_path, max_side: int = 400, scene_options=None) -> np.ndarray:
    """SWIR1 / NIR / green composite (water dark blue), stretched per band, at most max_side px,
    black where the scene has no data (0, or NaN in a degraded scene's float reflectance).
    ``scene_path`` is any scene source; its B11, B08 and B03 are found as predict finds them."""
    scene = open_scene(scene_path, scene_options or SceneOptions())
    scale = max(scene.width, scene.height) / max_side
    shape = (max(1, round(scene.height / max(scale, 1))), max(1, round(scene.width / max(scale, 1))))
    window = rasterio.windows.Window(scene.origin[1], scene.origin[0], scene.width, scene.height)
    with rasterio.open(scene.dataset) as src:
        data = src.read([scene.indexes[i] for i in (4, 3, 1)], out_shape=(3, *shape), window=window,
                        resampling=Resampling.average).astype(np.float32)
    valid = (data > 0).any(axis=0)
    out = np.zeros((*shape, 3), np.float32)
    for i in range(3):
        if valid.any():
            lo, hi = np.percentile(data[i][valid], (2, 98))
            out[..., i] = np.clip((data[i] - lo) / max(hi - lo, 1e-6), 0, 1)
    out[~valid] = 0  # NaN drew white beside the scene panel's black
    return out


def _mask_preview(path, shape, nodata: float | None = None, grid=None) -> np.ndarray:
    """A water mask decimated to ``shape`` (nearest): 1, 0, NaN at its nodata (the file's and
    ``nodata``). With ``grid`` (a prediction), the mask (a raster, or water polygons) is drawn
    over that raster's extent and CRS, so that it lines up with the prediction beside it: a
    reference read whole was drawn stretched where it covers more or less than the prediction
    (an area of interest, a label of part of a scene, another CRS)."""
    if grid is None:
        with rasterio.open(path) as src:
            raw = src.read(1, out_shape=shape, resampling=Resampling.nearest)
            return binarise(raw, nodata_values(src.nodata, nodata))
    with rasterio.open(grid) as src:
        crs, bounds = src.crs, tuple(src.bounds)
    label = open_label(path, nodata, near=(crs, bounds))
    return warp_label(label, rasterio.transform.from_bounds(*bounds, shape[1], shape[0]), crs, shape, False)


def degraded_colour(scene_path, factor: int, shape: tuple[int, int], scene_options=None) -> np.ndarray:
    """The false colour of ``scene_path`` degraded ``factor`` x (what the models saw under Wald's
    protocol), blown up by nearest to ``shape``, the original's preview (the degraded scene covers
    its whole 2N blocks; the rest stays black)."""
    scene = open_scene(scene_path, scene_options or SceneOptions())
    with tempfile.TemporaryDirectory(prefix="s2s2net-plot-") as tmp:
        degraded = degrade_scene(scene, factor, Path(tmp) / "degraded.tif")
        coarse = false_colour(degraded.path, max_side=max(degraded.width, degraded.height),
                              scene_options=DEGRADED_READING)
    out = np.zeros((*shape, 3), np.float32)
    rows = np.arange(shape[0]) * scene.height // shape[0] // factor
    cols = np.arange(shape[1]) * scene.width // shape[1] // factor
    inside_rows, inside_cols = rows < coarse.shape[0], cols < coarse.shape[1]
    out[np.ix_(inside_rows, inside_cols)] = coarse[np.ix_(rows[inside_rows], cols[inside_cols])]
    return out


# how --plot draws a mask, and the legend under its panels says: nodata, clouds, pixels any
# model's output leaves out
LEGEND_INCHES = 0.4
TITLE_INCHES = 0.4
PANEL_INCHES = 3.0  # each image's side
# above each row: a model's name over its F1 (rows of 3 inches had no room for them: the name was
# cut off at the picture's top, or drawn over the row above)
PANEL_TITLE_INCHES = 0.5
PLOT_MAX_IMAGES = 20  # rows of --plot (230 images made a PNG 69040 px high)


def plotted_pairs(pairs: list[Pair], results: list[ModelScores]) -> list[Pair]:
    """The pairs --plot draws, in the table's order: all of them, or the ``PLOT_MAX_IMAGES`` on
    which the models' F1 differ most (an undefined F1 left aside; the first ones on ties)."""
    if len(pairs) <= PLOT_MAX_IMAGES:
        return list(pairs)

    def spread(pair: Pair) -> float:
        f1 = [img["f1"] for r in results for img in r.images if img["id"] == pair.id and img["f1"] is not None]
        return max(f1) - min(f1) if f1 else 0.0

    chosen = sorted(range(len(pairs)), key=lambda i: (-spread(pairs[i]), i))[:PLOT_MAX_IMAGES]
    return [pairs[i] for i in sorted(chosen)]


def plot_comparison(path, pairs: list[Pair], results: list[ModelScores], predictions_dir, scene_options=None,
                    nodata: float | None = None, degrade: int | None = None) -> None:
    """A PNG: one row per image (at most ``PLOT_MAX_IMAGES``: those the models differ most on,
    said in its title); scene in false colour (with ``degrade``, the scene the models saw),
    reference (``nodata``: its nodata value, grey as in the scores, where they leave it out),
    then each model's prediction."""
    import matplotlib  # heavy: only --plot draws

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    cmap = ListedColormap([MASK_COLOURS["land"], MASK_COLOURS["water"]]).with_extremes(bad=MASK_COLOURS["left out"])
    ncols = 2 + len(results)
    total, pairs = len(pairs), plotted_pairs(pairs, results)
    top = TITLE_INCHES if len(pairs) < total else 0.0
    height = (PANEL_INCHES + PANEL_TITLE_INCHES) * len(pairs) + LEGEND_INCHES + top
    fig, axes = plt.subplots(len(pairs), ncols, figsize=(PANEL_INCHES * ncols, height), squeeze=False)
    if top:
        fig.suptitle(f"{len(pairs)} of {total} images: those on which the models' F1 differ most", fontsize=10,
                     y=1 - 0.1 / height, va="top")
    for i, pair in enumerate(pairs):
        rgb = false_colour(pair.image, scene_options=scene_options)
        shape = rgb.shape[:2]
        title = "scene (SWIR/NIR/green)"
        if degrade:
            rgb, title = degraded_colour(pair.image, degrade, shape, scene_options), f"scene degraded {degrade}x"
        first = prediction_path(predictions_dir, pair, results[0].model)
        panels = [(title, rgb), ("reference", _mask_preview(pair.mask, shape, nodata, grid=first))]
        for r in results:
            img = next(x for x in r.images if x["id"] == pair.id)
            f1 = "undefined" if img["f1"] is None else f"{img['f1']:.3f}"
            panels.append((f"{Path(r.model).stem}\nF1 {f1}", _mask_preview(prediction_path(predictions_dir, pair, r.model), shape)))
        for j, (title, data) in enumerate(panels):
            ax = axes[i, j]
            if data.ndim == 3:
                ax.imshow(data, interpolation="nearest")
            else:
                ax.imshow(np.ma.masked_invalid(data), cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
            ax.set_title(title if i == 0 or j >= 2 else "", fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
        axes[i, 0].set_ylabel(pair.id, fontsize=9)
    fig.legend(handles=[Patch(facecolor=colour, edgecolor="black", linewidth=0.5, label=name)
                        for name, colour in MASK_COLOURS.items()],
               loc="lower center", ncol=len(MASK_COLOURS), fontsize=9, frameon=False)
    # twice: the first pass places the panels before their images' aspect shapes them (a tall
    # image's title was left above the picture)
    for _ in range(2):
        fig.tight_layout(rect=(0, LEGEND_INCHES / height, 1, 1 - top / height))
        fig.draw_without_rendering()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)
