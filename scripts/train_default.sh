#!/usr/bin/env bash
# The recipe of the bundled default model (s2s2net_cli/weights/default.safetensors).
#
#   scripts/train_default.sh [WORK_DIR]
#
# Makes synthetic scenes with exact 2 m truth (seeds 1000-1299; hold-out seeds from 9000 on
# are never used here) and paints synthetic water into real unlabelled Sentinel-2 scenes
# (scripts/real_backgrounds.py fetches them from PyPI: a Virginia L1C scene, CC0, and six
# BigEarthNet L2A patches; seeds 3000-3139), chips them all, trains with `s2s2net train` in
# bf16, calibrates the water threshold (scripts/calibrate_threshold.py: synthetic validation
# scenes, seeds 8000-8011, and the real Shanghai scene when ../shared/realdata/ holds it) and
# bundles the best weights with the recipe and threshold in their metadata. 4438 s (74 minutes)
# on a 2-core CPU.
set -euo pipefail
WORK=${1:-work/default}
STEPS=${STEPS:-8000}
mkdir -p "$WORK"
start=$(date +%s)
python scripts/real_backgrounds.py "$WORK/backgrounds"
s2s2net -q synth "$WORK/scenes" --count 300 --size 192 --seed 1000 --level mixed --overwrite
s2s2net -q synth "$WORK/virginia" --background "$WORK/backgrounds/virginia.tif" --count 80 --size 192 --seed 3000 \
    --overwrite
ben=()
for f in "$WORK"/backgrounds/ben_*.tif; do ben+=(--background "$f"); done
s2s2net -q synth "$WORK/ben" "${ben[@]}" --count 60 --size 192 --seed 3100 --overwrite
s2s2net -q chip --manifest "$WORK/scenes/manifest.csv" --manifest "$WORK/virginia/manifest.csv" \
    --manifest "$WORK/ben/manifest.csv" -o "$WORK/chips" --size 64 --stride 64 \
    --max-nodata 0.5 --val-fraction 0.05 --seed 1 --overwrite
s2s2net -q train "$WORK/chips" -o "$WORK/run" --max-steps "$STEPS" --batch-size 8 --lr 5e-4 \
    --warmup-steps 200 --val-every 500 --augment full --precision bf16 --seed 1 --overwrite
threshold=$(python scripts/calibrate_threshold.py "$WORK/run/best.safetensors" "$WORK/calibration")
end=$(date +%s)
s2s2net weights annotate "$WORK/run/best.safetensors" s2s2net_cli/weights/default.safetensors --overwrite \
    --threshold "$threshold" \
    --set recipe=scripts/train_default.sh --set "data=300 synthetic scenes (seeds 1000-1299, 192 px) and 140 with water painted into real unlabelled scenes (seeds 3000-3139), 64 px chips" \
    --set precision=bf16 --set "train_seconds=$((end - start))" --set "machine=$(nproc) CPU cores"
echo "bundled s2s2net_cli/weights/default.safetensors in $((end - start)) s"
