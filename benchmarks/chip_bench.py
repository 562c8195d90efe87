"""Benchmark chip: time and peak memory of `s2s2net chip` on a large scene and its 2 m mask.

    python benchmarks/chip_bench.py [--size 4096] [--chip 512] [--json]

Writes a --size x --size px 6-band scene and its 2 m uint8 mask (a 512 px synthetic pair
repeated, written block by block), runs `s2s2net chip` on them in a child process and
reports wall time and the child's peak resident memory. Run two sizes to see that memory
does not grow with the scene (windowed reads, one chip in memory at a time).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import rasterio
from rasterio.windows import Window

from s2s2net_cli.synthetic.scenes import make_pair


def write_big_pair(size: int, scene_path: Path, mask_path: Path) -> None:
    pair = make_pair(512, seed=3, nodata_margin=False)
    common = dict(driver="GTiff", crs=pair.crs, tiled=True, blockxsize=512, blockysize=512, compress="deflate", BIGTIFF="YES")
    mask_u8 = np.nan_to_num(pair.mask, nan=255).astype(np.uint8)
    with rasterio.open(scene_path, "w", width=size, height=size, count=6, dtype="uint16", nodata=0,
                       transform=pair.transform, **common) as s, \
            rasterio.open(mask_path, "w", width=5 * size, height=5 * size, count=1, dtype="uint8", nodata=255,
                          transform=pair.mask_transform, **common) as m:
        for r in range(0, size, 512):
            for c in range(0, size, 512):
                h, w = min(512, size - r), min(512, size - c)
                s.write(pair.scene[:, :h, :w], window=Window(c, r, w, h))
                m.write(mask_u8[: 5 * h, : 5 * w], 1, window=Window(5 * c, 5 * r, 5 * w, 5 * h))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--chip", type=int, default=512)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_big_pair(args.size, tmp / "scene.tif", tmp / "mask.tif")
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "s2s2net_cli", "-q", "chip", "--pair", str(tmp / "scene.tif"),
                              str(tmp / "mask.tif"), "-o", str(tmp / "chips"), "--size", str(args.chip), "--json"],
                             capture_output=True, text=True, check=True, cwd=tmp)  # in tmp: -m runs the cwd's package
        seconds = time.perf_counter() - start
        summary = json.loads(out.stdout)
    result = {"scene_px": args.size ** 2, "chip": args.chip, "chips": sum(summary["chips"].values()),
              "seconds": round(seconds, 1), "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)}
    print(json.dumps(result) if args.json else "\n".join(f"{k:>12}: {v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
