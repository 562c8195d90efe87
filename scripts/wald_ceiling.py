"""What Wald's protocol asks of a 50 m reader (Bolivia chips, Shanghai), measured without the network.

    python scripts/wald_ceiling.py REALDATA WORK                 # the ceiling and the unmixer
    python scripts/wald_ceiling.py REALDATA WORK --weights FOLD0 FOLD1 FOLD2   # + the folds' models
    python scripts/wald_ceiling.py REALDATA WORK --weights default default default  # + the bundled one
    python scripts/wald_ceiling.py REALDATA WORK --weights ... --zoom 5   # + the models at their own scale

Each chip is degraded 5x as the protocol degrades it (`s2s2net_cli.sources.degraded`, written to
WORK) and scored against its 10 m label on the label's grid, on the pixels `compare --degrade 5`
scores (label valid, coarse cell valid), with the project's F1 and boundary F1 (pooled, and the
chips' mean). A 50 m cell holds 5 x 5 label pixels; three ways of drawing them from a water
fraction per cell are scored:

- nearest: the whole cell water where its fraction is >= t;
- bilinear: the fractions interpolated bilinearly to the 10 m pixel centres, water where >= t;
- count: in each cell, exactly round(25 x fraction) pixels water, those where the bilinear
  fractions are highest (sub-pixel mapping with the cell's area kept).

Rows:

- **perfect fractions**: each cell's water fraction read from the label itself: what a perfect
  unmixer of 50 m pixels would draw, the ceiling of any reader of the degraded scene that places
  water by its cells' fractions and their neighbours';
- **fractions of NDWI > 0 at 10 m**: each cell's fraction of pixels that NDWI > 0 calls water on
  the original 10 m scene: a reader of 50 m pixels that unmixes them as well as the best fixed
  index reads the 10 m ones;
- **unmixer**: the fraction regressed from each degraded cell's six reflectances, NDWI, MNDWI and
  NDVI and their means and extremes over 3 x 3 and 5 x 5 cells (a small MLP, 2 x 64 hidden,
  600 full-batch Adam steps on the fraction as a soft target), trained on each fold's ten chips
  (`bolivia_folds.FOLDS`) and scored on its five: cross-validated;
- `ndwi` and `ndwi-bilinear` as `compare` draws them (NDWI > 0 on the degraded scene);
- with --weights (one weights file per fold, none trained on its fold's five chips): each fold's
  model's water probability on its five degraded chips (`predict --probability --precision 32
  --full-head`), cut at 0.5 and at the weights' threshold, and drawn by count from its own
  probabilities (the label smoothing's floor taken off: (p - 0.05) / 0.9, the 5 x 5 block's sum
  the count, the highest probabilities water);
- with --zoom Z as well: the same models on the degraded scene interpolated bilinearly to Z x
  finer pixels (5: 10 m, the pixels the network was trained on; Z^2 x the work), their
  probabilities averaged over Z x Z back to the label's grid.

A second table scores Shanghai (when REALDATA holds it; validation only) by the same rows, the
unmixer trained on all 15 chips and each fold's model (none trained on Shanghai), and one more:
the fractions of the bundled model's own mask of the original 10 m scene (a reader that unmixes
50 m cells as well as the model reads 10 m pixels).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import rasterio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bolivia_folds import FOLDER, FOLDS  # noqa: E402

from s2s2net_cli.bands import BAND_NAMES  # noqa: E402
from s2s2net_cli.indices import bilinear_to_fine, water_index  # noqa: E402
from s2s2net_cli.metrics import Counts, boundary_counts, boundary_f1, count  # noqa: E402
from s2s2net_cli.sources.degraded import degrade_scene  # noqa: E402
from s2s2net_cli.sources.open import open_scene  # noqa: E402

FACTOR = 5
SHANGHAI = ("shanghai_esw_s2_l2a_6band_10m.tif", "shanghai_esw_water_10m.tif")  # validation only
SMOOTH = 0.1  # train's soft-label BCE: targets 0.05 / 0.95 (training.losses)


def degraded(image: Path, work: Path, name: str) -> Path:
    """The 10 m scene degraded 5x as the protocol degrades it, written to WORK once."""
    path = work / f"{name}_degraded.tif"
    if not path.exists():
        degrade_scene(open_scene(str(image)), FACTOR, path)
    return path


def load(image: Path, label_path: Path, work: Path, name: str) -> dict:
    """A labelled 10 m scene degraded 5x (written to WORK once), its label cut to the degraded
    grid, each cell's water fractions and the unmixer's inputs."""
    path = degraded(image, work, name)
    with rasterio.open(path) as src:
        coarse = src.read().astype(np.float64)
    with rasterio.open(label_path) as src:
        label = src.read(1)
    with rasterio.open(image) as src:
        green, nir = (src.read(i).astype(np.float64) for i in (2, 4))
    ch, cw = coarse.shape[1:]
    h, w = ch * FACTOR, cw * FACTOR
    # scored as compare scores it: the label's pixels beyond the cut (not predicted) count as
    # land beside an edge; the image's own border does not
    beyond = ((0, int(label.shape[0] > h)), (0, int(label.shape[1] > w)))
    label = label[:h, :w]
    ok = np.isfinite(coarse[0])
    labelled = label != 255
    water = label == 1
    blocks = (ch, FACTOR, cw, FACTOR)
    per_block = np.maximum(labelled.reshape(blocks).sum((1, 3)), 1)
    fraction = (water & labelled).reshape(blocks).sum((1, 3)) / per_block
    ndwi_water = (green[:h, :w] - nir[:h, :w]) > 0  # NDWI > 0 on the 10 m scene
    ndwi_fraction = (ndwi_water & labelled).reshape(blocks).sum((1, 3)) / per_block
    return {"path": path, "ok": ok, "water": water, "beyond": beyond, "labelled": labelled,
            "valid": labelled & np.kron(ok, np.ones((FACTOR, FACTOR), bool)),
            "fraction": fraction, "ndwi_fraction": ndwi_fraction,
            "whole": ok & (labelled.reshape(blocks).sum((1, 3)) == FACTOR * FACTOR), "features": features(coarse)}


def features(coarse: np.ndarray) -> np.ndarray:
    """(cells, 27): what the unmixer reads of each degraded cell and its neighbours."""
    from scipy import ndimage

    bands = np.nan_to_num(coarse)
    ndwi, mndwi = (np.nan_to_num(water_index(bands, name)) for name in ("ndwi", "mndwi"))
    b4, b8, b11 = bands[2], bands[3], bands[4]
    ndvi = (b8 - b4) / np.maximum(b8 + b4, 1e-6)
    layers = [*bands, ndwi, mndwi, ndvi]
    for size in (3, 5):
        layers += [ndimage.uniform_filter(v, size, mode="nearest") for v in (ndwi, mndwi, b8, b11)]
    for v in (ndwi, mndwi):
        layers += [ndimage.maximum_filter(v, 3, mode="nearest"), ndimage.minimum_filter(v, 3, mode="nearest")]
    return np.stack(layers, -1).reshape(-1, len(layers))


def fit_unmixer(x: np.ndarray, y: np.ndarray, seed: int = 0):
    """A small MLP from cell features to water fraction (soft BCE), full batch; returns predict()."""
    import torch

    torch.manual_seed(seed)
    mean, std = x.mean(0), x.std(0) + 1e-9
    xt = torch.tensor((x - mean) / std, dtype=torch.float32)
    yt = torch.tensor(y, dtype=torch.float32)
    net = torch.nn.Sequential(torch.nn.Linear(x.shape[1], 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                              torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    for _ in range(600):
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(net(xt)[:, 0], yt)
        loss.backward()
        opt.step()

    def predict(features: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            z = torch.tensor((features - mean) / std, dtype=torch.float32)
            return torch.sigmoid(net(z)[:, 0]).numpy().astype(np.float64)

    return predict


def upsample(fraction: np.ndarray, ok: np.ndarray) -> np.ndarray:
    fine = bilinear_to_fine(fraction, ok, FACTOR)
    return np.where(np.isfinite(fine), fine, 0.0)


def allocate(key: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """In each 5 x 5 block, the counts[block] pixels of highest key water (ties: a fixed draw)."""
    ch, cw = counts.shape
    key = key + 1e-9 * np.random.default_rng(0).random(key.shape)
    per_block = key.reshape(ch, FACTOR, cw, FACTOR).transpose(0, 2, 1, 3).reshape(ch, cw, FACTOR * FACTOR)
    rank = np.argsort(np.argsort(-per_block, axis=-1), axis=-1)
    return (rank < counts[..., None]).reshape(ch, cw, FACTOR, FACTOR).transpose(0, 2, 1, 3).reshape(key.shape)


def by_fraction(fraction: np.ndarray, ok: np.ndarray, prefix: str, thresholds=(0.5,)) -> dict:
    fine = upsample(fraction, ok)
    rows = {f"{prefix}, nearest >= {t}": np.kron(fraction, np.ones((FACTOR, FACTOR))) >= t for t in thresholds}
    rows |= {f"{prefix}, bilinear >= {t}": fine >= t for t in thresholds}
    rows[f"{prefix}, count"] = allocate(fine, np.round(np.clip(fraction, 0, 1) * FACTOR * FACTOR))
    return rows


def probability(chip: dict, weights: Path, work: Path, zoom: int = 1) -> np.ndarray:
    """The model's water probability on the chip's 10 m label grid: predicted on the degraded
    scene, or on it zoomed ``zoom`` x bilinearly (50 / zoom m pixels) and averaged back."""
    from s2s2net_cli.api import predict
    from s2s2net_cli.weights_header import weights_digest

    source = chip["path"]
    if zoom > 1:
        source = work / f"{chip['path'].stem}_zoom{zoom}.tif"
        if not source.exists():
            zoomed(chip["path"], source, zoom)
    out = work / f"{source.stem}_{weights_digest(weights)[:12]}_probability.tif"
    if not out.exists():
        with warnings.catch_warnings():  # pixels of 50 / zoom m: expected here
            warnings.simplefilter("ignore")
            predict(str(source), out, probability=True, weights=str(weights), precision="32", full_head=True)
    with rasterio.open(out) as src:
        raw = src.read(1)
    p = np.where(raw == 255, 0, raw).astype(np.float64) / 100
    h, w = p.shape[0] // zoom, p.shape[1] // zoom
    return p.reshape(h, zoom, w, zoom).mean((1, 3))


def zoomed(path: Path, out: Path, zoom: int) -> None:
    """The degraded scene interpolated bilinearly to ``zoom`` x finer pixels (cell centres kept;
    invalid cells filled with the band's mean for the interpolation, then NaN again)."""
    from affine import Affine
    from scipy import ndimage

    with rasterio.open(path) as src:
        coarse, profile = src.read(), src.profile
    ok = np.isfinite(coarse[0])
    filled = np.where(ok, coarse, np.nanmean(coarse[:, ok], axis=1)[:, None, None])
    fine = np.stack([ndimage.zoom(band, zoom, order=1, grid_mode=True, mode="nearest") for band in filled])
    fine[:, ~np.kron(ok, np.ones((zoom, zoom), bool))] = np.nan
    profile.update(width=fine.shape[2], height=fine.shape[1], transform=profile["transform"] @ Affine.scale(1 / zoom))
    with rasterio.open(out, "w", **profile) as dst:
        dst.write(fine.astype("float32"))
        dst.descriptions = BAND_NAMES


def probability_rows(chip: dict, weights: Path, work: Path, zoom: int) -> dict:
    from s2s2net_cli.weights_header import header_metadata, weights_file

    weights = weights_file(weights)  # "default": the bundled model
    threshold = float(header_metadata(weights).get("threshold", 0.5))
    p = probability(chip, weights, work)
    unsmoothed = np.clip((p - SMOOTH / 2) / (1 - SMOOTH), 0, 1)
    ch, cw = chip["ok"].shape
    counts = np.round(unsmoothed.reshape(ch, FACTOR, cw, FACTOR).sum((1, 3)))
    rows = {"model, >= 0.5": p >= 0.5, "model, >= its threshold": p >= threshold,
            "model, count of its own probabilities": allocate(unsmoothed, counts)}
    if zoom > 1:
        p = probability(chip, weights, work, zoom)
        rows |= {f"model on the scene zoomed {zoom} x, >= {t}": p >= t for t in (0.3, 0.5)}
        rows[f"model on the scene zoomed {zoom} x, >= its threshold"] = p >= threshold
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("realdata", type=Path)
    parser.add_argument("work", type=Path)
    parser.add_argument("--weights", nargs=3, metavar=("FOLD0", "FOLD1", "FOLD2"),
                        help="each fold's weights (default: the bundled model, in-sample at 10 m)")
    parser.add_argument("--zoom", type=int, default=1,
                        help="also run the models on the degraded scene zoomed this many times (5: 10 m pixels)")
    args = parser.parse_args(argv)
    if not (args.realdata / FOLDER).is_dir():
        print(f"{args.realdata / FOLDER}: not here; nothing to measure")
        return
    args.work.mkdir(parents=True, exist_ok=True)
    folder = args.realdata / FOLDER
    chips = {c: load(folder / f"Bolivia_{c}_s2_6band_10m.tif", folder / f"Bolivia_{c}_water_10m.tif", args.work, c)
             for fold in FOLDS for c in fold}
    table = Table()
    for k, held in enumerate(FOLDS):
        unmix = fit_unmixer(*training_cells([chips[c] for fold in FOLDS for c in fold if c not in held]))
        for c in held:
            rows = fraction_rows(chips[c], unmix)
            if args.weights:
                rows |= probability_rows(chips[c], args.weights[k], args.work, args.zoom)
            table.add(chips[c], rows)
    table.print("Bolivia, 15 chips by the protocol")
    image, label = args.realdata / SHANGHAI[0], args.realdata / SHANGHAI[1]
    if image.exists() and label.exists():
        scene = load(image, label, args.work, "shanghai")
        rows = fraction_rows(scene, fit_unmixer(*training_cells(list(chips.values()))))
        rows |= by_fraction(model_fraction(image, scene, args.work), scene["ok"],
                            "fractions of the bundled model's 10 m mask")
        for k, weights in enumerate(args.weights or ()):  # none trained on Shanghai
            if weights in args.weights[:k]:
                continue  # one file given for several folds is scored once
            name = "bundled model" if weights == "default" else f"fold {k}'s model"
            rows |= {key.replace("model", name, 1): mask
                     for key, mask in probability_rows(scene, weights, args.work, args.zoom).items()}
        table = Table()
        table.add(scene, rows)
        table.print("Shanghai by the protocol (the unmixer trained on the 15 Bolivia chips)")


def training_cells(chips: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """The unmixer's inputs and targets: the cells of ``chips`` whose pixels are all labelled."""
    return (np.concatenate([chip["features"][chip["whole"].ravel()] for chip in chips]),
            np.concatenate([chip["fraction"][chip["whole"]] for chip in chips]))


def fraction_rows(chip: dict, unmix) -> dict:
    ok = chip["ok"]
    ndwi_cells = chip["features"][:, 6].reshape(ok.shape)
    rows = by_fraction(chip["fraction"], ok, "perfect fractions")
    rows |= by_fraction(chip["ndwi_fraction"], ok, "fractions of NDWI > 0 at 10 m")
    rows |= by_fraction(np.where(ok, unmix(chip["features"]).reshape(ok.shape), 0), ok, "unmixer",
                        thresholds=(0.4, 0.5))
    rows["ndwi"] = np.kron(ndwi_cells, np.ones((FACTOR, FACTOR))) > 0
    rows["ndwi-bilinear"] = upsample(ndwi_cells, ok) > 0
    return rows


def model_fraction(image: Path, scene: dict, work: Path) -> np.ndarray:
    """Each 50 m cell's fraction of the 10 m pixels the bundled model calls water on the original
    10 m scene (its 2 m mask's water fraction >= 0.5 in a 10 m pixel, as compare scores it)."""
    from s2s2net_cli.api import predict

    out = work / f"{image.stem}_default_mask.tif"
    if not out.exists():
        predict(str(image), out, precision="32", full_head=True)
    with rasterio.open(out) as src:
        fine = src.read(1)
    h, w = scene["water"].shape
    water10 = (fine[:h * FACTOR, :w * FACTOR] == 1).reshape(h, FACTOR, w, FACTOR).mean((1, 3)) >= 0.5
    labelled = scene["labelled"]
    blocks = (h // FACTOR, FACTOR, w // FACTOR, FACTOR)
    return (water10 & labelled).reshape(blocks).sum((1, 3)) / np.maximum(labelled.reshape(blocks).sum((1, 3)), 1)


class Table:
    """Counts pooled over scenes, row by row, and the chips' boundary F1 for their mean."""

    def __init__(self):
        self.pooled: dict[str, Counts] = {}
        self.per_chip: dict[str, list] = {}

    def add(self, chip: dict, rows: dict) -> None:
        water, valid = (np.pad(a, chip["beyond"]) for a in (chip["water"], chip["valid"]))
        for name, mask in rows.items():
            mask = np.pad(mask, chip["beyond"])
            counted = count(mask, water, valid)
            counted.edges = tuple(boundary_counts(mask, water, valid))
            self.pooled.setdefault(name, Counts())
            self.pooled[name] += counted
            self.per_chip.setdefault(name, []).append(boundary_f1(np.array(counted.edges)))

    def print(self, title: str) -> None:
        print(f"| {title} | F1 | boundary F1 (chips' mean) | precision | recall |")
        print("|---|---|---|---|---|")
        for name, counted in self.pooled.items():
            s = counted.scores()
            mean = np.mean([b for b in self.per_chip[name] if b is not None])
            print(f"| {name} | {s['f1']:.4f} | {s['boundary_f1']:.4f} ({mean:.4f}) | {s['precision']:.3f} | {s['recall']:.3f} |")
        print(f"pixels: {next(iter(self.pooled.values())).pixels}\n")


if __name__ == "__main__":
    main()
