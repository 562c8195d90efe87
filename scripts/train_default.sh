#!/usr/bin/env bash
# The recipe of the bundled default model (s2s2net_cli/weights/default.safetensors).
#
#   scripts/train_default.sh [WORK_DIR]
#
# Makes synthetic scenes with exact 2 m truth (seeds 1000-1299; hold-out seeds from 9000 on
# are never used here), chips them, trains with `s2s2net train`, calibrates the water
# threshold (scripts/calibrate_threshold.py: synthetic validation scenes, seeds 8000-8011,
# and the real Shanghai scene when ../shared/realdata/ holds it) and bundles the best
# weights with the recipe and threshold in their metadata. About 80 minutes on a 2-core CPU.
set -euo pipefail
WORK=${1:-work/default}
STEPS=${STEPS:-5000}
mkdir -p "$WORK"
start=$(date +%s)
s2s2net -q synth "$WORK/scenes" --count 300 --size 192 --seed 1000 --level mixed --overwrite
s2s2net -q chip --manifest "$WORK/scenes/manifest.csv" -o "$WORK/chips" --size 64 --stride 64 \
    --max-nodata 0.3 --val-fraction 0.05 --seed 1 --overwrite
s2s2net -q train "$WORK/chips" -o "$WORK/run" --max-steps "$STEPS" --batch-size 8 --lr 5e-4 \
    --warmup-steps 200 --val-every 500 --augment full --seed 1 --overwrite
threshold=$(python scripts/calibrate_threshold.py "$WORK/run/best.safetensors" "$WORK/calibration")
end=$(date +%s)
python -m s2s2net_cli.checkpoint annotate "$WORK/run/best.safetensors" s2s2net_cli/weights/default.safetensors \
    --threshold "$threshold" \
    --set recipe=scripts/train_default.sh --set "data=300 synthetic scenes (seeds 1000-1299, 192 px), 64 px chips" \
    --set "train_seconds=$((end - start))" --set "machine=$(nproc) CPU cores"
echo "bundled s2s2net_cli/weights/default.safetensors in $((end - start)) s"
