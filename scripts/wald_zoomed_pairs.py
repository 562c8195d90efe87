"""Training pairs for the network at its own pixel size under Wald's protocol (a probe's data).

    python scripts/wald_zoomed_pairs.py REALDATA WORK

Each Bolivia chip degraded 5x as the protocol degrades it (`wald_ceiling.degraded`), interpolated
bilinearly back to 10 m pixels (`wald_ceiling.zoomed`: what `wald_ceiling.py --zoom 5` hands
the models), written beside its 10 m label cut to the same grid (0 land, 1 water, 255 not
labelled): WORK/zoomed/CHIP_zoom5.tif and CHIP_label.tif, and one manifest per fold,
WORK/foldK_train.csv, of the ten chips the fold trains on (`bolivia_folds.FOLDS`). `s2s2net chip`
cuts them as 10 m-label chips; docs/model-history.md says what a model trained on them scores.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import rasterio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bolivia_folds import FOLDER, FOLDS  # noqa: E402
from wald_ceiling import FACTOR, degraded, zoomed  # noqa: E402


def write_pair(image: Path, label: Path, work: Path, name: str) -> tuple[Path, Path]:
    """The chip degraded and zoomed back, and its label on the same grid."""
    scene, mask = work / "zoomed" / f"{name}_zoom{FACTOR}.tif", work / "zoomed" / f"{name}_label.tif"
    scene.parent.mkdir(parents=True, exist_ok=True)
    zoomed(degraded(image, work, name), scene, FACTOR)
    with rasterio.open(scene) as src:
        profile = src.profile
    with rasterio.open(label) as src:
        labels = src.read(1)[:profile["height"], :profile["width"]]
    profile.update(count=1, dtype="uint8", nodata=255)
    with rasterio.open(mask, "w", **profile) as dst:
        dst.write(labels, 1)
    return scene, mask


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("realdata", type=Path)
    parser.add_argument("work", type=Path)
    args = parser.parse_args(argv)
    folder = args.realdata / FOLDER
    if not folder.is_dir():
        print(f"{folder}: not here; nothing to write")
        return
    pairs = {c: write_pair(folder / f"Bolivia_{c}_s2_6band_10m.tif", folder / f"Bolivia_{c}_water_10m.tif",
                           args.work, c) for fold in FOLDS for c in fold}
    for k, held in enumerate(FOLDS):
        with open(args.work / f"fold{k}_train.csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["image", "mask", "id"])
            writer.writerows([str(pairs[c][0].resolve()), str(pairs[c][1].resolve()), f"Bolivia_{c}"]
                             for c in pairs if c not in held)
    print(f"{len(pairs)} pairs and {len(FOLDS)} manifests in {args.work}")


if __name__ == "__main__":
    main()
