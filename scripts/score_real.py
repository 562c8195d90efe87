"""Real labelled scenes for scoring: find them, make SWIR variants, draw the Shanghai figure.

    python scripts/score_real.py manifest REALDATA WORK     # WORK/real.csv, WORK/swir.csv, WORK/bolivia.csv
    python scripts/score_real.py figure REALDATA WORK PNG   # false colour, label, model, best index
    python scripts/score_real.py errors REALDATA WORK       # where the model's errors lie, at 10 m
    python scripts/score_real.py error-figure REALDATA WORK PNG   # the largest errors off the shores

A labelled scene is a label ``NAME_water*.tif`` beside one image ``NAME_*.tif`` (6 bands, B02,
B03, B04, B08, B11, B12 at 10 m). The SWIR variants of each scene bring B11/B12 to 20 m (2 x 2
means) and back to 10 m by nearest (as s2s2net reads products) and bilinearly, to measure how
much the model's score depends on how the SWIR reached 10 m. The Sen1Floods11 Bolivia chips
(REALDATA/sen1floods11_bolivia/, the only real labels that may be trained on) go to their own
manifest, scored as one pooled row a model.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np
import rasterio
from affine import Affine

ROOT = Path(__file__).resolve().parent.parent
PIECES = 3  # the largest pieces of each kind of error off the shores, printed and drawn
BOLIVIA = "sen1floods11_bolivia"  # the folder of the Bolivia chips inside REALDATA


def labelled_scenes(realdata: Path) -> list[tuple[str, Path, Path]]:
    out = []
    for label in sorted(realdata.glob("*_water*.tif")):
        name = label.name.split("_water")[0]
        images = [p for p in sorted(realdata.glob(f"{name}_*.tif")) if "_water" not in p.name]
        if len(images) == 1:
            out.append((name, images[0], label))
    return out


def swir_variant(image: Path, out: Path, method: str) -> None:
    from s2s2net_cli.indices import bilinear_to_fine

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
    chips = labelled_scenes(realdata / BOLIVIA) if (realdata / BOLIVIA).is_dir() else []
    with open(work / "bolivia.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["image", "mask", "id"])
        writer.writerows([image.resolve(), label.resolve(), name] for name, image, label in chips)
    print(f"{len(chips)} Sen1Floods11 Bolivia chip(s)")


def figure(realdata: Path, work: Path, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from s2s2net_cli.evaluation.report import false_colour

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


def error_maps(image: Path, label: Path, prediction: Path) -> dict[str, np.ndarray]:
    """The model's 2 m mask brought onto the label's 10 m grid as compare does it, and where it
    is right and wrong there: ``found``, ``false`` and ``missed`` water, ``near_water`` and
    ``near_land`` (the label's classes grown by one pixel, 8 neighbours), ``beside_narrow``
    (next to labelled water under 50 m wide: what a 5 x 5 px opening removes), ``wide`` (in or
    within 2 px of labelled water 150 m wide or more: what a 15 x 15 px opening keeps), ``reflectance``
    (DN / 10000, as compare reads these stacks) and ``prediction`` (the 2 m mask)."""
    from scipy.ndimage import binary_dilation, binary_opening

    from s2s2net_cli.labels import binarise, open_label, warp_label

    with rasterio.open(label) as src:
        truth = binarise(src.read(1), src.nodata)
        mask = open_label(prediction, 255)
        predicted = warp_label(mask, src.transform, src.crs, truth.shape, finer=True)
    with rasterio.open(image) as src:
        reflectance = src.read().astype(np.float64) / 10000
    with rasterio.open(prediction) as src:
        fine = src.read(1)
    valid = ~np.isnan(truth) & ~np.isnan(predicted)
    water, labelled = predicted == 1, truth == 1
    narrow = labelled & ~binary_opening(labelled, np.ones((5, 5), bool))
    wide = binary_opening(labelled, np.ones((15, 15), bool))
    return {"truth": truth, "prediction": fine, "reflectance": reflectance,
            "found": valid & water & labelled, "false": valid & water & ~labelled,
            "missed": valid & ~water & labelled,
            "near_water": binary_dilation(labelled, np.ones((3, 3), bool)),
            "near_land": binary_dilation(truth == 0, np.ones((3, 3), bool)),
            "beside_narrow": binary_dilation(narrow, np.ones((3, 3), bool)),
            "wide": binary_dilation(wide, np.ones((3, 3), bool), iterations=2)}


def model_predictions(work: Path) -> tuple[str, dict[str, Path]]:
    rows = json.loads((work / "real_scores.json").read_text())["rows"]
    model = next(r for r in rows if r["model"].endswith(".safetensors"))
    return model["model"], {img["id"]: Path(img["prediction"]) for img in model["images"]}


def errors(realdata: Path, work: Path) -> None:
    """The model's false and missed water at 10 m: how much of each touches the other class of
    the label (a shore), how much of that lies beside labelled water under 50 m wide, the mean
    reflectance of the shore part and of the rest, the largest pieces of the rest, the errors in
    and beside wide water (rivers, lakes), and the F1 the model would score were every error off
    the shores put right."""
    model, predictions = model_predictions(work)
    for name, image, label in labelled_scenes(realdata):
        e = error_maps(image, label, predictions[name])
        reflectance = e["reflectance"]
        print(f"{name}: {model} at 10 m: {e['found'].sum()} water found, {e['false'].sum()} false, "
              f"{e['missed'].sum()} missed")
        shore_errors = 0
        for what, wrong, shore, other in (("false water", e["false"], e["near_water"], "labelled water"),
                                          ("missed water", e["missed"], e["near_land"], "labelled land")):
            on_shore, rest = wrong & shore, wrong & ~shore
            shore_errors += on_shore.sum()
            share = on_shore.sum() / max(1, wrong.sum())
            narrow_share = (on_shore & e["beside_narrow"]).sum() / max(1, on_shore.sum())
            print(f"  {what}: {share:.0%} touches {other} ({narrow_share:.0%} of that beside water under 50 m wide; "
                  f"mean reflectance {mean_reflectance(reflectance, on_shore)}); "
                  f"the rest ({rest.sum()} px) mean reflectance {mean_reflectance(reflectance, rest)}")
            count, largest = error_pieces(rest, PIECES)
            if count:
                print(f"    the rest in {count} piece{'s' if count > 1 else ''}; the largest: " + "; ".join(
                    f"{where.sum()} px at row {round(r)}, col {round(c)}: {mean_reflectance(reflectance, where)}"
                    for where, (r, c) in largest))
        wide = e["wide"]
        print(f"  in or beside labelled water 150 m wide or more: {(e['missed'] & wide).sum()} missed "
              f"({(e['missed'] & wide & ~e['near_land']).sum()} off the shores), {(e['false'] & wide).sum()} false")
        # every error off the shores put right: false water there gone, missed water there found
        tp = e["found"].sum() + (e["missed"] & ~e["near_land"]).sum()
        print(f"  F1 were every error off the shores put right: {2 * tp / (2 * tp + shore_errors):.4f}")


def error_pieces(wrong: np.ndarray, largest: int) -> tuple[int, list[tuple[np.ndarray, tuple[float, float]]]]:
    """How many 8-connected pieces ``wrong`` has, and the ``largest`` of them (ties: the one
    that starts first in row order), each as its pixels and its centre (row, col)."""
    from scipy.ndimage import center_of_mass, label

    pieces, count = label(wrong, np.ones((3, 3), bool))
    sizes = np.bincount(pieces.ravel(), minlength=count + 1)[1:]
    order = sorted(range(count), key=lambda i: -sizes[i])[:largest]
    return count, [(pieces == i + 1, center_of_mass(pieces == i + 1)) for i in order]


def mean_reflectance(reflectance: np.ndarray, where: np.ndarray) -> str:
    return ", ".join(f"{v:.3f}" for v in reflectance[:, where].mean(axis=1)) if where.any() else "-"


def error_figure(realdata: Path, work: Path, png: Path, side: int = 48) -> None:
    """The largest pieces of false and of missed water off the shores in the Shanghai scene,
    one row each: true colour, SWIR1/NIR/green, the label and the model's 2 m mask, ``side``
    px at 10 m around the piece, which is outlined in red."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name, image, label = next(s for s in labelled_scenes(realdata) if s[0].startswith("shanghai"))
    model, predictions = model_predictions(work)
    with rasterio.open(label) as ten, rasterio.open(predictions[name]) as two:
        if not two.transform.almost_equals(ten.transform @ Affine.scale(1 / 5)):
            sys.exit(f"{predictions[name]}: not on the 5 x sub-grid of {label}, which the crops need")
    e = error_maps(image, label, predictions[name])
    rows = [(what, piece) for what, wrong, shore in (("false water", e["false"], e["near_water"]),
                                                     ("missed water", e["missed"], e["near_land"]))
            for piece in error_pieces(wrong & ~shore, PIECES)[1]]
    refl = e["reflectance"]
    height, width = e["truth"].shape
    fig, axes = plt.subplots(len(rows), 4, figsize=(12, 3 * len(rows)), squeeze=False)
    for ax_row, (what, (where, (r, c))) in zip(axes, rows):
        y0 = int(np.clip(round(r) - side // 2, 0, max(0, height - side)))
        x0 = int(np.clip(round(c) - side // 2, 0, max(0, width - side)))
        crop = np.s_[y0:y0 + side, x0:x0 + side]
        h, w = where[crop].shape
        true_colour = np.clip(np.stack([refl[2], refl[1], refl[0]], -1)[crop] / 0.25, 0, 1)
        false_colour = np.clip(np.stack([refl[4], refl[3], refl[1]], -1)[crop] / 0.35, 0, 1)
        fine = e["prediction"][y0 * 5:(y0 + h) * 5, x0 * 5:(x0 + w) * 5]  # the label's 5 x sub-grid
        panels = [(true_colour, f"{what}, {where.sum()} px: true colour"), (false_colour, "SWIR1/NIR/green"),
                  (e["truth"][crop], "label (10 m)"), (np.where(fine == 255, np.nan, fine), "model (2 m)")]
        for ax, (data, title) in zip(ax_row, panels):
            extent = (x0 - 0.5, x0 + w - 0.5, y0 + h - 0.5, y0 - 0.5)
            if data.ndim == 2:
                ax.imshow(data, cmap="Blues", vmin=0, vmax=1, interpolation="nearest", extent=extent)
            else:
                ax.imshow(data, interpolation="nearest", extent=extent)
            ax.contour(np.arange(x0, x0 + w), np.arange(y0, y0 + h), where[crop].astype(float), [0.5],
                       colors="red", linewidths=1)
            ax.set_title(title)
            ax.axis("off")
    fig.suptitle(f"Shanghai: the largest errors of {model} off the label's shores (outlined in red)")
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(png, dpi=70)
    print(f"wrote {png}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    operand_count = {"manifest": 2, "errors": 2, "figure": 3, "error-figure": 3}
    if len(sys.argv) < 2 or operand_count.get(sys.argv[1]) != len(sys.argv) - 2:
        print("usage:\n" + "\n".join(line for line in __doc__.splitlines() if "score_real.py" in line), file=sys.stderr)
        sys.exit(2)
    command, realdata, work = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    if command == "manifest":
        write_manifests(realdata, work)
    elif command == "errors":
        errors(realdata, work)
    elif command == "error-figure":
        error_figure(realdata, work, Path(sys.argv[4]))
    else:
        figure(realdata, work, Path(sys.argv[4]))
