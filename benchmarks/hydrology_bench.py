"""Benchmark rivers and occurrence: time and peak memory on a full-tile 2 m mask.

    python benchmarks/hydrology_bench.py [--size 54900] [--dates 12] [--distinct 3] [--skip-rivers | --skip-occurrence]
                                         [--workers N] [--json]

Records the machine (benchmarks/machine.py). Writes --distinct masks of --size x --size px at 2 m (a full Sentinel-2 tile is 54900 px):
meandering rivers 10-80 m wide across the whole mask, with tributaries and lakes, drawn
window by window (uint8, tiled, deflate, 255 nodata; each mask shifts the rivers and floods
them a little). Then, each in a child process, reports wall time and the child's peak resident
memory for:

- `s2s2net rivers` on the first mask;
- `s2s2net occurrence --from-masks` over --dates dates (the distinct masks taken in turn, each
  date a hard link of its own name, as occurrence counts a file named twice once: each date is
  read and warped from its file as any date is) and over 3 dates, to show that memory does not
  grow with the number of dates.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import rasterio
from affine import Affine
from rasterio.features import rasterize
from rasterio.windows import Window
from shapely.geometry import LineString, Point, box

from s2s2net_cli.io import geotiff_profile

sys.path.insert(0, str(Path(__file__).parent))
from machine import describe  # noqa: E402

STRIP = 4096


def shapes(size: int, shift: int, rng: np.random.Generator) -> list:
    """River channels and lakes in pixel coordinates."""
    out = []
    for k in range(max(2, size // 6000)):
        y0 = (k + 0.5) * size / max(2, size // 6000)
        x = np.linspace(-100, size + 100, max(200, size // 25))
        period, amp = rng.uniform(600, 2000), rng.uniform(50, 300)
        y = y0 + amp * np.sin(2 * np.pi * x / period + rng.uniform(0, 6)) + shift
        width = rng.uniform(5, 40) + shift / 4
        out.append(LineString(np.c_[x, y]).buffer(width / 2, cap_style="flat"))
    for _ in range(size * size // 20_000_000):
        out.append(Point(rng.uniform(0, size), rng.uniform(0, size)).buffer(rng.uniform(20, 300)))
    return out


def write_mask(path: Path, size: int, seed: int, shift: int) -> None:
    rng = np.random.default_rng(seed)
    geoms = shapes(size, shift, rng)
    profile = geotiff_profile((1, size, size), "uint8", "EPSG:32631", Affine(2, 0, 600000, 0, -2, 5900020), 255,
                              block=512)
    with rasterio.open(path, "w", **profile) as dst:
        for row in range(0, size, STRIP):
            h = min(STRIP, size - row)
            strip = box(0, row, size, row + h)
            local = [(g, 1) for g in geoms if g.intersects(strip)]
            data = rasterize(local, out_shape=(h, size), transform=Affine.translation(0, row), dtype="uint8") \
                if local else np.zeros((h, size), "uint8")
            dst.write(data, 1, window=Window(0, row, size, h))


def run(args: list[str], tmp: Path) -> dict:
    """Wall time, the peak memory of the child and its own workers together (their PSS summed,
    read from /proc every 0.1 s; os.wait4's peak RSS where there is no /proc) and its JSON
    summary."""
    out, err = tmp / "stdout.json", tmp / "stderr.txt"
    start = time.perf_counter()
    with open(out, "w") as fo, open(err, "w") as fe:
        # in tmp: ``-m`` puts the current directory first on sys.path, which from a checkout's root
        # is that checkout's code, whatever PYTHONPATH says
        proc = subprocess.Popen([sys.executable, "-m", "s2s2net_cli", "-q", *args, "--json"], stdout=fo, stderr=fe,
                                cwd=tmp)
        peak = [0]
        stop = threading.Event()
        sampler = threading.Thread(target=_sample_tree, args=(proc.pid, peak, stop), daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        stop.set()
        sampler.join()
    seconds = time.perf_counter() - start
    if status:
        sys.exit(err.read_text())
    # os.wait4's ru_maxrss would count this process's own memory, which the child shares from the
    # fork until it execs: the masks made here put 726 MB into every figure it gave
    peak_mb = peak[0] / 2**20 if peak[0] else usage.ru_maxrss / 1024
    return {"seconds": round(seconds, 1), "peak_mb": round(peak_mb), "summary": json.loads(out.read_text())}


def _resident(proc: Path, page: int) -> int:
    """Bytes a process holds: its proportional share (PSS: pages shared with others, such as
    the libraries its workers also map, divided among them) where Linux reports it, else RSS."""
    try:
        for line in (proc / "smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int((proc / "statm").read_text().split()[1]) * page


def _sample_tree(pid: int, peak: list, stop: threading.Event) -> None:
    """peak[0]: the most bytes that ``pid`` and its descendants held at once."""
    page = os.sysconf("SC_PAGE_SIZE")
    while not stop.wait(0.1):
        parents, rss = {}, {}
        for entry in Path("/proc").iterdir() if Path("/proc/self").exists() else []:
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                parents[int(entry.name)] = int(fields[1])
                rss[int(entry.name)] = _resident(entry, page)
            except (OSError, IndexError, ValueError):
                continue
        tree, grew = {pid}, True
        while grew:
            more = {p for p, parent in parents.items() if parent in tree} - tree
            tree |= more
            grew = bool(more)
        peak[0] = max(peak[0], sum(rss.get(p, 0) for p in tree))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=54900)
    ap.add_argument("--dates", type=int, default=12)
    ap.add_argument("--distinct", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--skip-rivers", action="store_true", help="Measure occurrence only.")
    ap.add_argument("--skip-occurrence", action="store_true", help="Measure rivers only (one mask is made).")
    ap.add_argument("--workers", type=int, default=None, help="rivers --workers (default: rivers' own).")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="s2s2net-hydrology-bench-") as tmp:
        tmp = Path(tmp)
        start = time.perf_counter()
        masks = []
        for k in range(1 if args.skip_occurrence else args.distinct):
            masks.append(tmp / f"mask_{k}.tif")
            write_mask(masks[-1], args.size, seed=1, shift=6 * k)
        made = time.perf_counter() - start
        result = {"size": args.size, "mask_seconds": round(made / len(masks), 1), "machine": describe()}
        if not args.skip_occurrence:
            dates = []
            for k in range(max(args.dates, 3)):
                dates.append(tmp / f"date_{k:03d}.tif")
                os.link(masks[k % len(masks)], dates[-1])
            few = run(["occurrence", *map(str, dates[:3]), "--from-masks", "-o", str(tmp / "occ3.tif")], tmp)
            many = run(["occurrence", *map(str, dates[:args.dates]), "--from-masks", "-o", str(tmp / "occ.tif")], tmp)
            result.update({
                "occurrence_3_dates": {"seconds": few["seconds"], "peak_mb": few["peak_mb"]},
                f"occurrence_{args.dates}_dates": {"seconds": many["seconds"], "peak_mb": many["peak_mb"]},
            })
            print(json.dumps(result), file=sys.stderr, flush=True)  # what is measured so far
        if not args.skip_rivers:
            workers = ["--workers", str(args.workers)] if args.workers else []
            rivers = run(["rivers", str(masks[0]), "-o", str(tmp / "rivers.gpkg"), *workers], tmp)
            result["rivers"] = {"seconds": rivers["seconds"], "peak_mb": rivers["peak_mb"],
                                "workers": args.workers or min(os.cpu_count() or 1, rivers["summary"]["windows"]),
                                "reaches": rivers["summary"]["reaches"], "transects": rivers["summary"]["transects"],
                                "length_km": rivers["summary"]["length_km"], "windows": rivers["summary"]["windows"],
                                "flags": rivers["summary"]["flags"]}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for k, v in result.items():
            print(f"{k}: {v}")


if __name__ == "__main__":
    main()
