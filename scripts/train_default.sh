#!/usr/bin/env bash
# The recipe of the bundled default model (s2s2net_cli/weights/default.safetensors), v6.1.
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
# Bolivia chips drawn 8 times as often as each synthetic chip). Stage 2's model is v6.
# Stage 3 (the lighter head, about 81 minutes): scripts/distill_head.py gives v6's encoder and
# decoder, frozen, a head of (64, 32, 32, 16) channels in place of (128, 64, 32, 16), 0.8-0.9 of
# the time of a scene: 1500 steps from random weights to v6's head's logits, 1500 more with its shores
# weighed five times, then twice 1500 with the chips' own masks too (soft BCE + Dice as `train`
# scores them), on the mixed synthetic scenes' chips and the Bolivia chips. The result is v6.1,
# bundled with v6's threshold and NDWI prior and a water gate fitted to it.
# (v6 is v5's weights with the NDWI prior calibrated: the network was not trained again.)
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
# stage 3: the lighter head, distilled from stage 2's and taught by the chips' masks
s2s2net -q chip --manifest "$WORK/synthetic-scenes/mixed/manifest.csv" -o "$WORK/mixed" --size 64 --stride 64 \
    --max-nodata 0.5 --val-fraction 0.05 --seed 1 --overwrite
chips=("$WORK/mixed" "$WORK/stage2/bolivia")
teacher=(--teacher "$WORK/stage2/model.safetensors")
python scripts/distill_head.py "$WORK/head1.safetensors" "${chips[@]}" "${teacher[@]}"
python scripts/distill_head.py "$WORK/head2.safetensors" "${chips[@]}" "${teacher[@]}" --init "$WORK/head1.safetensors" \
    --edge-weight 4 --lr 5e-4
python scripts/distill_head.py "$WORK/head3.safetensors" "${chips[@]}" "${teacher[@]}" --init "$WORK/head2.safetensors" \
    --edge-weight 4 --lr 5e-4 --truth-weight 1
python scripts/distill_head.py "$WORK/head4.safetensors" "${chips[@]}" "${teacher[@]}" --init "$WORK/head3.safetensors" \
    --edge-weight 4 --lr 5e-4 --truth-weight 1
end=$(date +%s)
s2s2net weights annotate "$WORK/head4.safetensors" "$WORK/annotated.safetensors" --overwrite \
    --set default_model=v6.1 \
    --set "calibration=threshold and NDWI prior v6's (s2s2net weights calibrate: synthetic validation scenes, Shanghai, the 15 Bolivia chips)" \
    --set recipe=scripts/train_default.sh --set "data=stage 1: 300 synthetic scenes (seeds 1000-1299, 192 px) and 140 with water painted into real unlabelled scenes (seeds 3000-3139), 64 px chips; stage 2: the same with the 15 Sen1Floods11 Bolivia chips (Bonafilia et al. 2020), 10 m labels scored on their 10 m cells; stage 3 (the head of 64, 32, 32, 16 channels, encoder and decoder frozen): the 300 mixed synthetic scenes' chips and the Bolivia chips, distilled from stage 2's head and taught by their masks" \
    --set "training_seconds=$((end - start))" --set "machine=$(nproc) CPU cores"
# the water gate (predict skips the head where it rules water out): 40 synthetic scenes and the 15 Bolivia chips
scenes=()
for f in "$REAL"/sen1floods11_bolivia/*_s2_6band_10m.tif; do scenes+=(--scene "$f"); done
s2s2net weights gate "$WORK/annotated.safetensors" s2s2net_cli/weights/default.safetensors "${scenes[@]}" --overwrite
echo "bundled s2s2net_cli/weights/default.safetensors (trained in $((end - start)) s)"
