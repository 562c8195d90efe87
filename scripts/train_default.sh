#!/usr/bin/env bash
# The recipe of the bundled default model (s2s2net_cli/weights/default.safetensors), v6.
#
#   scripts/train_default.sh [WORK_DIR]            STAGE1=FILE to start stage 2 from weights stage 1 made
#
# Stage 1 (synthetic water only, 74 minutes on a 2-core CPU): makes synthetic scenes with exact
# 2 m truth (seeds 1000-1299; hold-out seeds from 9000 on are never used here) and paints
# synthetic water into real unlabelled Sentinel-2 scenes (scripts/real_backgrounds.py fetches
# them from PyPI: a Virginia L1C scene, CC0, and six BigEarthNet L2A patches; seeds 3000-3139),
# chips them all and trains with `s2s2net train` in bf16.
# Stage 2 (real 10 m labels): scripts/finetune_real.sh fine-tunes stage 1 on the same
# synthetic chips mixed with all 15 Sen1Floods11 Bolivia chips (Bonafilia et al. 2020; 10 m
# hand labels, scored on their 10 m cells), chooses the weights on synthetic, Bolivia and
# Shanghai validation at once, and calibrates the threshold and the NDWI prior (gain x max(NDWI, 0)
# added to the logits) on them; its settings are those
# scripts/crossval_bolivia.sh cross-validated (finetune_real.sh's defaults: 1200 steps, the
# Bolivia chips drawn 8 times as often as each synthetic chip). The model is bundled with the recipe,
# the threshold and the NDWI prior in its metadata. (v6 is v5's weights with the NDWI prior
# calibrated: the network was not trained again.)
set -euo pipefail
WORK=${1:-work/default}
STEPS1=${STEPS1:-8000}
REAL=${REALDATA:-$(dirname "$0")/../../shared/realdata}
mkdir -p "$WORK"
start=$(date +%s)
if [ -z "${STAGE1:-}" ]; then
    python scripts/real_backgrounds.py "$WORK/synthetic-scenes/backgrounds"
    s2s2net -q synth "$WORK/synthetic-scenes/mixed" --count 300 --size 192 --seed 1000 --level mixed --overwrite
    s2s2net -q synth "$WORK/synthetic-scenes/virginia" --background "$WORK/synthetic-scenes/backgrounds/virginia.tif" \
        --count 80 --size 192 --seed 3000 --overwrite
    ben=()
    for f in "$WORK"/synthetic-scenes/backgrounds/ben_*.tif; do ben+=(--background "$f"); done
    s2s2net -q synth "$WORK/synthetic-scenes/ben" "${ben[@]}" --count 60 --size 192 --seed 3100 --overwrite
    s2s2net -q chip --manifest "$WORK/synthetic-scenes/mixed/manifest.csv" \
        --manifest "$WORK/synthetic-scenes/virginia/manifest.csv" --manifest "$WORK/synthetic-scenes/ben/manifest.csv" \
        -o "$WORK/synthetic" --size 64 --stride 64 --max-nodata 0.5 --val-fraction 0.05 --seed 1 --overwrite
    s2s2net -q train "$WORK/synthetic" -o "$WORK/stage1" --max-steps "$STEPS1" --batch-size 8 --lr 5e-4 \
        --warmup-steps 200 --val-every 500 --augment full --precision bf16 --seed 1 --overwrite
    STAGE1="$WORK/stage1/best.safetensors"
fi
python scripts/bolivia_folds.py manifests "$REAL" "$WORK"
scripts/finetune_real.sh "$STAGE1" "$WORK/all.csv" "$WORK/stage2"
end=$(date +%s)
s2s2net weights annotate "$WORK/stage2/model.safetensors" "$WORK/annotated.safetensors" --overwrite \
    --set default_model=v6 \
    --set "calibration=threshold and NDWI prior by scripts/calibrate_threshold.py (synthetic validation scenes, Shanghai, the 15 Bolivia chips)" \
    --set recipe=scripts/train_default.sh --set "data=stage 1: 300 synthetic scenes (seeds 1000-1299, 192 px) and 140 with water painted into real unlabelled scenes (seeds 3000-3139), 64 px chips; stage 2: the same with the 15 Sen1Floods11 Bolivia chips (Bonafilia et al. 2020), 10 m labels scored on their 10 m cells" \
    --set precision=bf16 --set "stage2_seconds=$((end - start))" --set "machine=$(nproc) CPU cores"
# the water gate (predict skips the head where it rules water out): 40 synthetic scenes and the 15 Bolivia chips
scenes=()
for f in "$REAL"/sen1floods11_bolivia/*_s2_6band_10m.tif; do scenes+=(--scene "$f"); done
s2s2net weights gate "$WORK/annotated.safetensors" s2s2net_cli/weights/default.safetensors "${scenes[@]}" --overwrite
echo "bundled s2s2net_cli/weights/default.safetensors (stage 2 in $((end - start)) s)"
