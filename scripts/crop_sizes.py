"""What a small scene costs: the water `predict` finds in crops of a scene, against the same
ground in the whole scene's mask (fp32, the tiles predict plans for each crop).

    python scripts/crop_sizes.py SCENE WORK [--sizes 64,128,256] [-- PREDICT OPTIONS...]

For each size, the scene is cut into crops of that many 10 m pixels a side (from its top-left
corner, whole crops only), every crop is predicted in one `predict` run (a crop it refuses, all
cloud or nodata, is left out), and each crop's 2 m
mask is compared with the whole scene's over the same ground: the water found (as a multiple
of the whole scene's) and the IoU. docs/guides/predict.md ("Small scenes") quotes its figures.
"""

from __future__ import annotations

import argparse
import subprocess
import time
from pathlib import Path

import numpy as np
import rasterio
from rasterio.windows import Window

FACTOR = 5  # 2 m pixels per 10 m pixel


def cut(src, size: int, work: Path) -> list[Path]:
    crops = []
    for row in range(0, src.height - size + 1, size):
        for col in range(0, src.width - size + 1, size):
            crop = work / f"c{size}_{row}_{col}.tif"
            window = Window(col, row, size, size)
            profile = {**src.profile, "width": size, "height": size, "transform": src.window_transform(window)}
            with rasterio.open(crop, "w", **profile) as dst:
                dst.write(src.read(window=window))
                dst.descriptions = src.descriptions
            crops.append(crop)
    return crops


def agreement(crops: list[Path], masks: Path, whole: np.ndarray) -> tuple[float, float]:
    """(water in the crops / water in the whole scene over the same ground, IoU)."""
    found = reference = both = either = 0
    for crop in crops:
        _, row, col = crop.stem.split("_")
        if not (masks / f"{crop.stem}_water.tif").exists():
            continue  # a crop predict refused (no valid pixel: all cloud or nodata)
        with rasterio.open(masks / f"{crop.stem}_water.tif") as src:
            part = src.read(1)
        ref = whole[int(row) * FACTOR:][: part.shape[0], int(col) * FACTOR:][:, : part.shape[1]]
        seen = (part != 255) & (ref != 255)
        a, b = (part == 1) & seen, (ref == 1) & seen
        found, reference = found + int(a.sum()), reference + int(b.sum())
        both, either = both + int((a & b).sum()), either + int((a | b).sum())
    return found / max(reference, 1), both / max(either, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scene", type=Path)
    parser.add_argument("work", type=Path)
    parser.add_argument("--sizes", default="64,128,256")
    parser.add_argument("predict_options", nargs="*", help="after --: passed to every predict")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    full = args.work / "whole.tif"
    subprocess.run(["s2s2net", "-q", "predict", args.scene, "-o", full, "--precision", "32", "--overwrite",
                    *args.predict_options], check=True)
    with rasterio.open(full) as src:
        whole = src.read(1)
    with rasterio.open(args.scene) as src:
        for size in map(int, args.sizes.split(",")):
            crops = cut(src, size, args.work)
            if not crops:
                continue
            masks = args.work / f"masks{size}"
            start = time.perf_counter()
            subprocess.run(["s2s2net", "-q", "predict", *crops, "-o", f"{masks}/", "--precision", "32", "--overwrite",
                            *args.predict_options], check=False, stderr=subprocess.DEVNULL)  # failures: skipped
            seconds = time.perf_counter() - start
            ratio, iou = agreement(crops, masks, whole)
            print(f"{args.scene.name}: {len(crops)} crops of {size} px: water {ratio:.3f} x the whole scene's, "
                  f"IoU {iou:.3f}, {seconds:.0f} s", flush=True)


if __name__ == "__main__":
    main()
