"""What a set of real labels calls water, by NDWI and MNDWI: the share of the labelled 10 m
pixels in each cell of an NDWI x MNDWI table that the labels call water.

    python scripts/label_spectra.py MANIFEST [MANIFEST ...] [--window NDWI_FROM NDWI_TO MNDWI_FROM MNDWI_TO]

Each MANIFEST is a CSV of image,mask pairs on one grid (what `scripts/bolivia_folds.py
manifests` writes; the Bolivia chips' 10 m labels: 1 water, 0 land, 255 nodata). The images
are read as reflectance x 10000 (the bands B02, B03, B04, B08, B11, B12); nodata labels and
pixels with a zero band are left out. Rows are NDWI, columns MNDWI, in steps of 0.1; a cell
shows the water share and the pixels (thousands), or "-" under 500 pixels. --window adds a
last line: the pixels of the cells from NDWI_FROM up to NDWI_TO and MNDWI_FROM up to MNDWI_TO
(cell edges), pooled, and the share of them labelled water.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import rasterio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from s2s2net_cli.indices import water_index  # noqa: E402
from s2s2net_cli.manifest import read_manifest  # noqa: E402

EDGES = np.arange(-6, 9) / 10  # NDWI and MNDWI cells; outside them, the first or last


def water_share(ndwi: np.ndarray, mndwi: np.ndarray, water: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pixels and water pixels in each (NDWI, MNDWI) cell of EDGES."""
    n = len(EDGES) - 1
    row = np.clip(np.digitize(ndwi, EDGES) - 1, 0, n - 1)
    col = np.clip(np.digitize(mndwi, EDGES) - 1, 0, n - 1)
    cell = row * n + col
    pixels = np.bincount(cell, minlength=n * n).reshape(n, n)
    wet = np.bincount(cell, weights=water.astype(np.float64), minlength=n * n).reshape(n, n)
    return pixels, wet


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("manifests", type=Path, nargs="+")
    parser.add_argument("--window", type=float, nargs=4, metavar=("NDWI_FROM", "NDWI_TO", "MNDWI_FROM", "MNDWI_TO"))
    args = parser.parse_args(argv)
    n = len(EDGES) - 1
    pixels, wet = np.zeros((n, n), np.int64), np.zeros((n, n))
    for manifest in args.manifests:
        for pair in read_manifest(manifest):
            with rasterio.open(pair.image) as src:
                reflectance = src.read().astype(np.float32) / 10000
            with rasterio.open(pair.mask) as src:
                label = src.read(1)
            ok = (label != 255) & (reflectance > 0).all(0)
            p, w = water_share(water_index(reflectance, "ndwi")[ok], water_index(reflectance, "mndwi")[ok],
                               label[ok] == 1)
            pixels += p
            wet += w
    print(f"{pixels.sum()} labelled pixels, {wet.sum() / max(pixels.sum(), 1):.1%} water; rows NDWI, columns MNDWI "
          "(from); water share / thousands of pixels")
    print("NDWI \\ MNDWI " + "".join(f"{e:>10.1f}" for e in EDGES[:-1]))
    for i in range(n):
        cells = [f"{wet[i, j] / pixels[i, j]:.2f}/{pixels[i, j] // 1000:<4d}" if pixels[i, j] >= 500 else "-"
                 for j in range(n)]
        print(f"{EDGES[i]:>12.1f} " + "".join(f"{c:>10}" for c in cells))
    if args.window:
        lo_n, hi_n, lo_m, hi_m = (int(np.searchsorted(np.round(EDGES, 1), round(v, 1))) for v in args.window)
        p, w = pixels[lo_n:hi_n, lo_m:hi_m].sum(), wet[lo_n:hi_n, lo_m:hi_m].sum()
        print(f"NDWI {args.window[0]:g} to {args.window[1]:g}, MNDWI {args.window[2]:g} to {args.window[3]:g}: "
              f"{p} labelled pixels, {w / max(p, 1):.1%} water")


if __name__ == "__main__":
    main()
