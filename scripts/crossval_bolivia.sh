#!/usr/bin/env bash
# The cross-validated figure of the default model's recipe on real labels: the 15 Sen1Floods11
# Bolivia chips (Bonafilia et al. 2020) in three fixed folds (scripts/bolivia_folds.py); for
# each fold, stage 2 of the recipe (scripts/finetune_real.sh) fine-tunes the stage-1 weights on
# the other ten chips and is scored with every water index on the five it never saw; the
# counts are pooled over the folds (every chip scored once, by a model that did not train on it
# nor chose its weights on it). Also the stage-1 weights alone on the same pixels.
#
#   scripts/crossval_bolivia.sh [STAGE1_WEIGHTS] [WORK_DIR]
set -euo pipefail
INIT=${1:-s2s2net_cli/weights/v3.safetensors}
WORK=${2:-work/crossval}
REAL=${REALDATA:-$(dirname "$0")/../../shared/realdata}
PRECISION=${PRECISION:-32}
if [ ! -d "$REAL/sen1floods11_bolivia" ]; then
    echo "no Sen1Floods11 Bolivia chips in $REAL: nothing to cross-validate"
    exit 0
fi
python scripts/bolivia_folds.py manifests "$REAL" "$WORK"
scores=()
for k in 0 1 2; do
    scripts/finetune_real.sh "$INIT" "$WORK/fold${k}_train.csv" "$WORK/fold$k"
    s2s2net -q compare --precision "$PRECISION" --manifest "$WORK/fold${k}_test.csv" --weights "$WORK/fold$k/run/best.safetensors" \
        --weights "$INIT" --json --overwrite > "$WORK/fold${k}_scores.json"
    scores+=("$WORK/fold${k}_scores.json")
done
python scripts/bolivia_folds.py pool "${scores[@]}" 2> "$WORK/crossval.json"
