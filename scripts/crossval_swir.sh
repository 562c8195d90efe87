#!/usr/bin/env bash
# How much the cross-validated models of scripts/crossval_bolivia.sh depend on how B11/B12
# reached 10 m: each fold's model on its held-out chips with the SWIR brought to 20 m and back
# by nearest and bilinearly, pooled over the folds.
#
#   scripts/crossval_swir.sh [WORK_DIR]        (the crossval_bolivia.sh work folder)
set -euo pipefail
WORK=${1:-work/crossval}
PRECISION=${PRECISION:-32}
python scripts/bolivia_folds.py swir "$WORK"
for method in nearest bilinear; do
    scores=()
    for k in 0 1 2; do
        s2s2net -q compare --precision "$PRECISION" --manifest "$WORK/fold${k}_test_swir_${method}.csv" \
            --weights "$WORK/fold$k/model.safetensors" --json --overwrite > "$WORK/fold${k}_swir_${method}.json"
        scores+=("$WORK/fold${k}_swir_${method}.json")
    done
    echo "B11/B12 by $method:"
    python scripts/bolivia_folds.py pool "${scores[@]}" 2> /dev/null
done
