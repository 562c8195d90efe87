"""Real labelled scenes for scoring: find them, make SWIR variants, draw the Shanghai figure.

    python scripts/score_real.py manifest REALDATA WORK     # WORK/real.csv, WORK/swir.csv
    python scripts/score_real.py figure REALDATA WORK PNG   # false colour, label, model, best index
    python scripts/score_real.py errors REALDATA WORK       # where the model's errors lie, at 10 m

A labelled scene is a label ``NAME_water*.tif`` beside one image ``NAME_*.tif`` (6 bands, B02,
B03, B04, B08, B11, B12 at 10 m). The SWIR variants of each scene bring B11/B12 to 20 m (2 x 2
means) and back to 10 m by nearest (as s2s2net reads products) and bilinearly, to measure how
much the model's score depends on how the SWIR reached 10 m.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np
import rasterio

ROOT = Path(__file__).resolve().parent.parent


def labelled_scenes(realdata: Path) -> list[tuple[str, Path, Path]]:
    out = []
    for label in sorted(realdata.glob("*_water*.tif")):
        name = label.name.split("_water")[0]
        images = [p for p in sorted(realdata.glob(f"{name}_*.tif")) if "_water" not in p.name]
        if len(images) == 1:
            out.append((name, images[0], label))
    return out


def swir_variant(image: Path, out: Path, method: str) -> None:
    from s2s2net_cli.baselines import bilinear_to_fine

    with rasterio.open(image) as src:
        data, profile = src.read(), src.profile
        descriptions = src.descriptions
    _, h, w = data.shape
    swir = np.pad(data[4:].astype(np.float64), ((0, 0), (0, h % 2), (0, w % 2)), mode="edge")
    coarse = swir.reshape(2, swir.shape[1] // 2, 2, swir.shape[2] // 2, 2).mean(axis=(2, 4))
    if method == "nearest":
        fine = np.repeat(np.repeat(coarse, 2, axis=1), 2, axis=2)
    else:
        ones = np.ones(coarse.shape[1:], dtype=bool)
        fine = np.stack([bilinear_to_fine(b, ones, factor=2) for b in coarse])
    data[4:] = np.clip(np.rint(fine[:, :h, :w]), 1, 65535).astype(data.dtype) * (data[4:] > 0)
    with rasterio.open(out, "w", **profile) as dst:
        dst.write(data)
        dst.descriptions = descriptions


def write_manifests(realdata: Path, work: Path) -> None:
    work.mkdir(parents=True, exist_ok=True)
    scenes = labelled_scenes(realdata)
    with open(work / "real.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["image", "mask", "id"])
        for name, image, label in scenes:
            writer.writerow([image.resolve(), label.resolve(), name])
    with open(work / "swir.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["image", "mask", "id"])
        for name, image, label in scenes:
            for method in ("nearest", "bilinear"):
                variant = work / f"{name}_swir_{method}.tif"
                swir_variant(image, variant, method)
                writer.writerow([variant.resolve(), label.resolve(), f"{name}_swir_{method}"])
    print(f"{len(scenes)} labelled scene(s): {', '.join(n for n, _, _ in scenes)}")


def figure(realdata: Path, work: Path, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from s2s2net_cli.report import false_colour

    name, image, label = next(s for s in labelled_scenes(realdata) if s[0].startswith("shanghai"))
    scores = json.loads((work / "real_scores.json").read_text())["rows"]
    model = next(r for r in scores if r["model"].endswith(".safetensors"))
    indices = [r for r in scores if not r["model"].endswith(".safetensors")]
    best = max(indices, key=lambda r: r["images"][0]["f1"] if r["images"] else -1)

    def prediction(row):
        img = next(i for i in row["images"] if i["id"] == name)
        with rasterio.open(img["prediction"]) as src:
            return src.read(1)

    with rasterio.open(label) as src:
        truth = src.read(1)
    rgb = false_colour(image, max_side=max(truth.shape))
    panels = [(rgb, "Sentinel-2 L2A, SWIR1/NIR/green (10 m)"), (truth, "hand label (10 m)"),
              (prediction(model), f"s2s2net default (2 m): F1 {model['images'][0]['f1']:.3f}"),
              (prediction(best), f"best index, {best['model']} (2 m): F1 {best['images'][0]['f1']:.3f}")]
    fig, axes = plt.subplots(1, 4, figsize=(24, 6.5))
    for ax, (data, title) in zip(axes, panels):
        if data.ndim == 2:
            data = np.where(data == 255, np.nan, data)
            ax.imshow(data, cmap="Blues", vmin=0, vmax=1, interpolation="nearest")
        else:
            ax.imshow(data, interpolation="nearest")
        ax.set_title(title)
        ax.axis("off")
    fig.suptitle("Shanghai, 2019-08-17 (Earth Surface Water dataset, Luo, Tong & Hu 2021, CC BY 4.0)")
    fig.tight_layout()
    fig.savefig(png, dpi=80)
    print(f"wrote {png}")


def errors(realdata: Path, work: Path) -> None:
    """The model's false and missed water at 10 m (its 2 m mask brought onto the label's grid
    as compare does it): how much of each touches the other class of the label (a shore), how
    much of that lies beside labelled water under 50 m wide (what a 5 x 5 px opening removes),
    the mean reflectance of the shore part and of the rest (DN / 10000, as compare reads these
    stacks), and the F1 the model would score were every error off the shores put right."""
    from scipy.ndimage import binary_dilation, binary_opening

    from s2s2net_cli.align import binarise, open_mask, warp_mask

    rows = json.loads((work / "real_scores.json").read_text())["rows"]
    model = next(r for r in rows if r["model"].endswith(".safetensors"))
    for name, image, label in labelled_scenes(realdata):
        img = next(i for i in model["images"] if i["id"] == name)
        with rasterio.open(label) as src:
            truth = binarise(src.read(1), src.nodata)
            predicted = warp_mask(open_mask(img["prediction"], 255), src.transform, src.crs, truth.shape, finer=True)
        with rasterio.open(image) as src:
            reflectance = src.read().astype(np.float64) / 10000
        valid = ~np.isnan(truth) & ~np.isnan(predicted)
        water, labelled = predicted == 1, truth == 1
        near_water = binary_dilation(labelled, np.ones((3, 3), bool))
        near_land = binary_dilation(truth == 0, np.ones((3, 3), bool))
        narrow = labelled & ~binary_opening(labelled, np.ones((5, 5), bool))
        beside_narrow = binary_dilation(narrow, np.ones((3, 3), bool))
        false, missed, found = valid & water & ~labelled, valid & ~water & labelled, valid & water & labelled
        print(f"{name}: {model['model']} at 10 m: {found.sum()} water found, {false.sum()} false, {missed.sum()} missed")
        shore_errors = 0
        for what, wrong, shore, other in (("false water", false, near_water, "labelled water"),
                                          ("missed water", missed, near_land, "labelled land")):
            on_shore, rest = wrong & shore, wrong & ~shore
            shore_errors += on_shore.sum()
            share = on_shore.sum() / max(1, wrong.sum())
            narrow_share = (on_shore & beside_narrow).sum() / max(1, on_shore.sum())
            print(f"  {what}: {share:.0%} touches {other} ({narrow_share:.0%} of that beside water under 50 m wide; "
                  f"mean reflectance {mean_reflectance(reflectance, on_shore)}); "
                  f"the rest ({rest.sum()} px) mean reflectance {mean_reflectance(reflectance, rest)}")
        # every error off the shores put right: false water there gone, missed water there found
        tp = found.sum() + (missed & ~near_land).sum()
        print(f"  F1 were every error off the shores put right: {2 * tp / (2 * tp + shore_errors):.4f}")


def mean_reflectance(reflectance: np.ndarray, where: np.ndarray) -> str:
    return ", ".join(f"{v:.3f}" for v in reflectance[:, where].mean(axis=1)) if where.any() else "-"


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    command, realdata, work = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    if command == "manifest":
        write_manifests(realdata, work)
    elif command == "errors":
        errors(realdata, work)
    else:
        figure(realdata, work, Path(sys.argv[4]))
