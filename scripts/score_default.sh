#!/usr/bin/env bash
# The figures of the model card: the bundled model against every baseline on 48 synthetic
# hold-out scenes (generator seeds 9000-9047, never used in training), scored at 2 m, alone
# and with --flips, with each one's boundary F1 (water edges within 2 px, 4 m, of the truth's),
# where the bundled model and the best indices go wrong (by the generator's class and distance
# from the truth's edge: WORK_DIR/holdout_errors.txt, from scripts/holdout_errors.py), and a
# picture of the real Sentinel-2 crop, its MNDWI and the 2 m prediction.
#
#   scripts/score_default.sh [WORK_DIR]          (QUICK=1: without --flips)
set -euo pipefail
WORK=${1:-work/score}
QUICK=${QUICK:-0}
mkdir -p "$WORK"
s2s2net -q synth "$WORK/holdout" --count 48 --size 192 --seed 9000 --overwrite
s2s2net -q compare --precision 32 --manifest "$WORK/holdout/manifest.csv" --json --csv "$WORK/holdout_scores.csv" \
    --plot "$WORK/holdout.png" --tile-size 192 --save-predictions "$WORK/predictions" --overwrite \
    > "$WORK/holdout_scores.json"
flips=()
if [ "$QUICK" = 0 ]; then
    s2s2net -q compare --precision 32 --manifest "$WORK/holdout/manifest.csv" \
        --weights s2s2net_cli/weights/default.safetensors --flips --json --tile-size 192 --overwrite \
        > "$WORK/holdout_flips_scores.json"
    flips=("$WORK/holdout_flips_scores.json")
fi
python - "$WORK/holdout_scores.json" "${flips[@]}" <<'PY'
import json, sys
rows = [r for path in sys.argv[1:] for r in json.load(open(path))["rows"]]
for r in rows:
    print(f"{r['model']:>25}  F1 {r['f1']:.4f}  IoU {r['iou']:.4f}  P {r['precision']:.4f}  R {r['recall']:.4f}  "
          f"boundary F1 (2 px) {r['boundary_f1']:.4f}  px {r['pixels']}")
PY
python scripts/holdout_errors.py "$WORK/predictions" default ndwi mndwi-bilinear > "$WORK/holdout_errors.txt"
python scripts/real_crop_figure.py sample_data/virginia_shoreline_s2_6band_10m.tif docs/real_crop.png
