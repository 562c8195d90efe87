#!/usr/bin/env bash
# A full Sentinel-2 tile (10980 x 10980 px at 10 m) on a GPU: seconds, tiles per second, peak
# GPU memory, what the water gate saves there (--precision auto with and without --full-head),
# and how far the mask of --precision auto (what predict chooses: bf16 on GPUs that have it)
# lies from the fp32 one. One prepared run for a lent GPU; the same script runs small on the
# CPU (SIZE=512 DEVICE=cpu) to check it works. The scene is made once (OUT_DIR/scene.tif) and
# each run is then predict's own time: on an H200 about 2-3 minutes a run.
#
#   bash benchmarks/gpu_full_tile.sh [OUT_DIR]
#
# On the lent H200 machines (python 3.12 with torch, no rasterio): put /opt/torch/.venv/bin
# first on PATH (a link to its python is not that environment) and carry wheels of rasterio
# 1.3.11 (1.4's is 36 MB, too large beside the tree's 64 MiB), pyproj, shapely, affine, snuggs,
# cligj, click-plugins, pystac-core, pystac-ext-raster and segmentation-models-pytorch, installed
# with pip --target and put on PYTHONPATH beside the repository.
set -euo pipefail
OUT=${1:-work/gpu_full_tile}
SIZE=${SIZE:-10980}
DEVICE=${DEVICE:-cuda}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
python -c "import torch; print('torch', torch.__version__)"
bench() {  # NAME, then predict_bench's options
    local name=$1; shift
    python benchmarks/predict_bench.py --size "$SIZE" --device "$DEVICE" --scene "$OUT/scene.tif" --skip-forward --json "$@" \
        | tail -1 | tee "$OUT/bench_$name.json"
}
report() {
python - "$OUT" <<'PY'
import json, sys
import numpy as np
import rasterio
out = sys.argv[1]
with rasterio.open(f"{out}/mask_auto.tif") as a, rasterio.open(f"{out}/mask_32.tif") as b:
    same = total = 0
    for _, window in a.block_windows(1):
        x, y = a.read(1, window=window), b.read(1, window=window)
        same += int((x == y).sum()); total += x.size
for name in ("auto", "32", "auto_full_head"):
    try:
        r = json.load(open(f"{out}/bench_{name}.json"))
    except FileNotFoundError:
        continue
    print(f"{name:>14} ({r['precision']}, head {r['head']}): {r['pipeline_s']:.1f} s, "
          f"{r['tiles'] / r['pipeline_s']:.2f} tiles/s, {r['gflop_per_s']} GFLOP/s, "
          f"peak RSS {r['peak_rss_mb']:.0f} MB, peak GPU {r.get('gpu_peak_mb', 'n/a')} MB")
print(f"auto and fp32 masks agree on {100 * same / total:.4f} % of {total} pixels")
PY
}
# The comparison first: a lease that ends during the last run still leaves both masks' figures.
bench auto --precision auto --keep "$OUT/mask_auto.tif"
bench 32 --precision 32 --keep "$OUT/mask_32.tif"
report | tee "$OUT/report.txt"
bench auto_full_head --precision auto --full-head
report | tee "$OUT/report.txt"
