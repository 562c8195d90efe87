#!/usr/bin/env bash
# A full Sentinel-2 tile (10980 x 10980 px at 10 m) on two cores of the CPU that runs this, in
# the paths #47's two goals name: `--precision auto` (bf16 where the CPU multiplies it natively:
# AVX512_BF16 or AMX) and, with RUNS="auto avx2", the same CPU held to AVX2 kernels (where auto
# runs fp32, as on a CPU without bf16 or VNNI; int8 on such kernels before 2026-12-07). One prepared run for a machine of
# another CPU kind (a lent GPU's host: an Intel Xeon with AMX), so that the figure per CPU kind
# is measured, not scaled; the same script runs small here (SIZE=1024) to check it works. The
# scene is made once (OUT_DIR/scene.tif, on all cores: about 3 minutes for a tile); each run is
# predict's own time.
#
#   [RUNS="auto avx2"] [CORES=0,1] bash benchmarks/two_cores_full_tile.sh [OUT_DIR]
#
# Each run writes OUT_DIR/bench_NAME.json (predict_bench's line: seconds, peak memory, the CPU's
# model and flags); OUT_DIR/cpu.txt says what lscpu and torch see.
set -euo pipefail
OUT=${1:-work/two_cores}
SIZE=${SIZE:-10980}
CORES=${CORES:-0,1}
RUNS=${RUNS:-auto}
mkdir -p "$OUT"
{ lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-2000
  python -c "import torch; print('torch', torch.__version__, torch.backends.cpu.get_cpu_capability())"; } > "$OUT/cpu.txt"
python - "$OUT/scene.tif" "$SIZE" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, "benchmarks")
from predict_bench import _write_scene
from s2s2net_cli.synthetic.scenes import make_pair
path, size = Path(sys.argv[1]), int(sys.argv[2])
if not path.exists():
    _write_scene(make_pair(min(size, 512), seed=7, nodata_margin=False, landscape="mixed"), size, path)
PY
for run in $RUNS; do
    case $run in
        auto) isa=() ;;
        avx2) isa=(ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2) ;;
        *) echo "RUNS: auto or avx2, not $run" >&2; exit 2 ;;
    esac
    env "${isa[@]}" OMP_NUM_THREADS=2 taskset -c "$CORES" python benchmarks/predict_bench.py --size "$SIZE" \
        --device cpu --precision auto --scene "$OUT/scene.tif" --skip-forward --json | tail -1 | tee "$OUT/bench_$run.json"
done
