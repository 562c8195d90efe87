#!/usr/bin/env bash
# The cross-validated figure of the default model's recipe on real labels: the 15 Sen1Floods11
# Bolivia chips (Bonafilia et al. 2020) in three fixed folds (scripts/bolivia_folds.py); for
# each fold, stage 2 of the recipe (scripts/finetune_real.sh: fine-tune, choose the weights,
# calibrate the threshold) learns from the other ten chips, and its model is scored with every
# water index on the five it never saw (`s2s2net compare`: the same pixels for all); the
# counts are pooled over the folds, so every chip is scored once, by a model that neither
# trained on it nor chose its weights or threshold on it. The stage-1 weights are scored too.
# Beside the native figures, the same models and indices by Wald's protocol (`compare --degrade
# 5`: the held-out chips degraded 5x, mapped back up, scored against their 10 m labels): the
# 2 m detail, cross-validated (WORK/crossval_wald.txt).
#
#   scripts/crossval_bolivia.sh STAGE1_WEIGHTS [WORK_DIR]
#
# STEPS, REAL_WEIGHT, LR, AUGMENT, SEED, WATER_INDICES, GAINS, DEGRADE and SYNTH_DEGRADED reach
# scripts/finetune_real.sh. PRECISION (default 32) is compare's.
set -euo pipefail
INIT=$1
WORK=${2:-work/crossval}
REAL=${REALDATA:-$(dirname "$0")/../../shared/realdata}
PRECISION=${PRECISION:-32}
if [ ! -d "$REAL/sen1floods11_bolivia" ]; then
    echo "no Sen1Floods11 Bolivia chips in $REAL: nothing to cross-validate"
    exit 0
fi
python scripts/bolivia_folds.py manifests "$REAL" "$WORK"
cp "$INIT" "$WORK/stage1.safetensors"
scores=()
wald=()
for k in 0 1 2; do
    scripts/finetune_real.sh "$INIT" "$WORK/fold${k}_train.csv" "$WORK/fold$k"
    s2s2net -q compare --precision "$PRECISION" --manifest "$WORK/fold${k}_test.csv" \
        --weights "$WORK/fold$k/model.safetensors" --weights "$WORK/stage1.safetensors" \
        --baseline ndwi --baseline mndwi --baseline ndwi-otsu --baseline mndwi-otsu --baseline ndwi-bilinear --baseline mndwi-bilinear \
        --json --overwrite > "$WORK/fold${k}_scores.json"
    scores+=("$WORK/fold${k}_scores.json")
    s2s2net -q compare --precision "$PRECISION" --manifest "$WORK/fold${k}_test.csv" --degrade 5 \
        --weights "$WORK/fold$k/model.safetensors" --weights "$WORK/stage1.safetensors" \
        --baseline ndwi --baseline mndwi --baseline ndwi-otsu --baseline mndwi-otsu --baseline ndwi-bilinear --baseline mndwi-bilinear \
        --json --overwrite > "$WORK/fold${k}_wald_scores.json"
    wald+=("$WORK/fold${k}_wald_scores.json")
done
python scripts/bolivia_folds.py pool "${scores[@]}" 2> "$WORK/crossval.json" | tee "$WORK/crossval.txt"
echo "by Wald's protocol (held-out chips degraded 5x, scored against their 10 m labels):"
python scripts/bolivia_folds.py pool "${wald[@]}" 2> "$WORK/crossval_wald.json" | tee "$WORK/crossval_wald.txt"
