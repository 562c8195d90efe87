#!/usr/bin/env bash
# The model card's real-scene figures: the bundled model and every water index on the real
# labelled scenes in ../shared/realdata/ (pooled F1 at 10 m, as `s2s2net compare` scores a
# 10 m label) and by Wald's protocol (degraded 5x, scored against the 10 m labels: the 2 m
# detail), where the model's errors lie, its sensitivity to how B11/B12 reached 10 m, the
# model with --flips, the model at other tile sizes than predict's 512 px, docs/shanghai.png
# and docs/shanghai_errors.png (the largest errors off the label's shores).
#
#   scripts/score_real.sh [WORK_DIR]        (REALDATA=DIR to read the scenes elsewhere)
#
# The card's figures are fp32 (PRECISION=32, the default here); PRECISION=auto scores what
# predict runs by default on this machine (bf16 on CPUs that do it natively, int8 on other x86
# CPUs; PRECISION=int8 scores that path here).
# QUICK=1 leaves out --flips and the other tile sizes. Without the real scenes it says so and
# exits 0. Shanghai is for validation only: no recipe trains on it. The default model trained
# on the Sen1Floods11 Bolivia chips: their row is marked so (scripts/crossval_bolivia.sh gives
# the figure on chips a model did not train on).
set -euo pipefail
REAL=${REALDATA:-$(dirname "$0")/../../shared/realdata}
PRECISION=${PRECISION:-32}
QUICK=${QUICK:-0}
WORK=${1:-work/real}
if ! ls "$REAL"/*_water*.tif >/dev/null 2>&1; then
    echo "no real labelled scenes in $REAL: nothing to score"
    exit 0
fi
python scripts/score_real.py manifest "$REAL" "$WORK"
table() {
    python - "$1" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
ids = [img["id"] for img in rows[0]["images"]]
print(f"{'model':>22}  " + "  ".join(f"{i:>28}" for i in ids) + "    pooled F1 / boundary F1")
bf1 = lambda v: "undefined" if v is None else f"{v:.4f}"
for r in rows:
    cells = [f"F1 {img['f1']:.4f} P {img['precision']:.3f} R {img['recall']:.3f}" for img in r["images"]]
    print(f"{r['model']:>22}  " + "  ".join(f"{c:>28}" for c in cells) + f"    {r['f1']:.4f} / {bf1(r['boundary_f1'])}")
PY
}
s2s2net -q compare --precision "$PRECISION" --manifest "$WORK/real.csv" --json --save-predictions "$WORK/predictions" --overwrite \
    > "$WORK/real_scores.json"
table "$WORK/real_scores.json"
echo "by Wald's protocol (each scene degraded 5x, mapped back up, scored against its 10 m label):"
s2s2net -q compare --precision "$PRECISION" --manifest "$WORK/real.csv" --degrade 5 --json --overwrite \
    --plot "$WORK/wald.png" > "$WORK/wald_scores.json"
table "$WORK/wald_scores.json"
python scripts/score_real.py errors "$REAL" "$WORK"
echo "B11/B12 brought to 20 m and back by nearest and bilinearly (the model only):"
s2s2net -q compare --precision "$PRECISION" --manifest "$WORK/swir.csv" --weights s2s2net_cli/weights/default.safetensors --json \
    --overwrite > "$WORK/swir_scores.json"
table "$WORK/swir_scores.json"
if [ "$QUICK" = 0 ]; then
echo "with test-time augmentation (predict --flips: the mean over eight flips and quarter turns):"
s2s2net -q compare --precision "$PRECISION" --manifest "$WORK/real.csv" --weights s2s2net_cli/weights/default.safetensors --flips --json \
    --overwrite > "$WORK/flips_scores.json"
table "$WORK/flips_scores.json"
echo "at other tile sizes (predict --tile-size; the encoder attends across the whole tile):"
for size in 64 128 256 768; do
    s2s2net -q compare --precision "$PRECISION" --manifest "$WORK/real.csv" --weights s2s2net_cli/weights/default.safetensors \
        --tile-size "$size" --json --overwrite > "$WORK/tile_${size}_scores.json"
    echo "--tile-size $size"
    table "$WORK/tile_${size}_scores.json"
done
echo "--tile-size 768 --flips"
s2s2net -q compare --precision "$PRECISION" --manifest "$WORK/real.csv" --weights s2s2net_cli/weights/default.safetensors \
    --tile-size 768 --flips --json --overwrite > "$WORK/tile_768_flips_scores.json"
table "$WORK/tile_768_flips_scores.json"
fi
if [ "$(wc -l < "$WORK/bolivia.csv")" -gt 1 ]; then
    echo "Sen1Floods11 Bolivia chips, pooled (Bonafilia et al. 2020; the bundled model TRAINED on them: in-sample):"
    s2s2net -q compare --precision "$PRECISION" --manifest "$WORK/bolivia.csv" --json --overwrite \
        > "$WORK/bolivia_scores.json"
    python - "$WORK/bolivia_scores.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    print(f"{r['model']:>22}  pooled F1 {r['f1']:.4f} P {r['precision']:.3f} R {r['recall']:.3f} over {r['pixels']} px")
PY
fi
python scripts/score_real.py figure "$REAL" "$WORK" docs/shanghai.png
python scripts/score_real.py error-figure "$REAL" "$WORK" docs/shanghai_errors.png
