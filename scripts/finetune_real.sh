#!/usr/bin/env bash
# Stage 2 of the default model's recipe (scripts/train_default.sh) and of its cross-validation
# (scripts/crossval_bolivia.sh): fine-tune INIT_WEIGHTS on exact 2 m synthetic and painted
# chips mixed with real chips whose labels are 10 m (Sen1Floods11 Bolivia, Bonafilia et al.
# 2020): `chip` keeps those masks at 10 m and `train` scores them on their 10 m cells (the 2 m
# probabilities averaged over each), so the network learns real water without learning 10 m
# blocks. The weights are chosen on three sources at once, each scored on its own: synthetic
# validation chips (2 m), validation blocks of the real training scenes (10 m) and, when
# ../shared/realdata/ holds it, the Shanghai scene (10 m; validation only, never trained on).
# The water threshold and the gain of the NDWI prior (gain x max(NDWI, 0) added to the logits,
# GAINS tried: 0,4,8,16,32) are then calibrated on the same kinds of data
# (s2s2net weights calibrate: synthetic validation scenes, Shanghai, and the real training
# pairs of REAL_MANIFEST) and written into WORK_DIR/model.safetensors with the weights.
#
#   scripts/finetune_real.sh INIT_WEIGHTS REAL_MANIFEST WORK_DIR
#
# STEPS (1200), REAL_WEIGHT (8: the real chips' source weight, how many times as often each is
# drawn as a synthetic chip), LR (2e-4), AUGMENT (full: train's --augment) and SEED (1: train's
# --seed, which draws the chips, their order and augmentation) set the fine-tune, GAINS
# (0,4,8,16,32) the NDWI prior gains the calibration tries (0 alone: none); the defaults are the
# recipe's (v6, stage 2 of the bundled v6.1). WATER_INDICES=1 gives the network NDWI and MNDWI
# as inputs (train's --water-indices; INIT_WEIGHTS without them are widened). LABEL_EDGES (whole) is train's
# --label-edges: what the 10 m labels ask of their shore cells. DEGRADE=5 adds the real chips a
# second way, by Wald's protocol (`chip --degrade 5`: the scenes degraded 5x, their 10 m labels
# exact truth on the 5x grid, 64 px chips every 16 px), as the source bolivia_wald drawn
# DEGRADED_WEIGHT (8) times as often as a synthetic chip; DEGRADE=0 (the default, v6) leaves it out.
# SYNTH_DEGRADED=W adds synthetic scenes the same way (45 mixed scenes of 640 px, seeds 7000-7044,
# degraded 5x: 394 chips of exact truth, the source synthetic-degraded drawn W times as often as a
# synthetic chip); 0 (the default) leaves them out. The research record measured W=3 beside DEGRADE=5.
#
# Needs WORK_DIR/../synthetic (made here when absent: the stage-1 synthetic and painted scenes).
set -euo pipefail
INIT=$1
MANIFEST=$2
WORK=$3
STEPS=${STEPS:-1200}
REAL_WEIGHT=${REAL_WEIGHT:-8}
LR=${LR:-2e-4}
AUGMENT=${AUGMENT:-full}
SEED=${SEED:-1}
GAINS=${GAINS:-0,4,8,16,32}
LABEL_EDGES=${LABEL_EDGES:-whole}
DEGRADE=${DEGRADE:-0}
DEGRADED_WEIGHT=${DEGRADED_WEIGHT:-8}
extra=()
if [ "${WATER_INDICES:-0}" = 1 ]; then extra+=(--water-indices); fi
REAL=${REALDATA:-$(dirname "$0")/../../shared/realdata}
SYN=$(dirname "$WORK")/synthetic
mkdir -p "$WORK"
if [ ! -f "$SYN/index.gpkg" ]; then
    python scripts/real_backgrounds.py "$SYN-scenes/backgrounds"
    s2s2net -q synth "$SYN-scenes/mixed" --count 300 --size 192 --seed 1000 --level mixed --overwrite
    s2s2net -q synth "$SYN-scenes/virginia" --background "$SYN-scenes/backgrounds/virginia.tif" --count 80 --size 192 \
        --seed 3000 --overwrite
    ben=()
    for f in "$SYN-scenes"/backgrounds/ben_*.tif; do ben+=(--background "$f"); done
    s2s2net -q synth "$SYN-scenes/ben" "${ben[@]}" --count 60 --size 192 --seed 3100 --overwrite
    s2s2net -q chip --manifest "$SYN-scenes/mixed/manifest.csv" --manifest "$SYN-scenes/virginia/manifest.csv" \
        --manifest "$SYN-scenes/ben/manifest.csv" -o "$SYN" --size 64 --stride 64 --max-nodata 0.5 --val-fraction 0.05 \
        --seed 1 --overwrite
fi
s2s2net -q chip --manifest "$MANIFEST" -o "$WORK/bolivia" --size 64 --stride 64 --max-nodata 0.5 --val-fraction 0.1 \
    --seed 1 --overwrite
sources=("$SYN" "$WORK/bolivia")
if [ "$DEGRADE" != 0 ]; then
    s2s2net -q chip --manifest "$MANIFEST" -o "$WORK/bolivia_wald" --degrade "$DEGRADE" --size 64 --stride 16 \
        --max-nodata 0.5 --val-fraction 0.1 --seed 1 --overwrite
    sources+=("$WORK/bolivia_wald")
    extra+=(--source-weight "bolivia_wald=$DEGRADED_WEIGHT")
fi
if [ "${SYNTH_DEGRADED:-0}" != 0 ]; then
    if [ ! -f "$SYN-degraded/index.gpkg" ]; then
        s2s2net -q synth "$SYN-scenes/mixed640" --count 45 --size 640 --seed 7000 --level mixed --overwrite
        s2s2net -q chip --manifest "$SYN-scenes/mixed640/manifest.csv" -o "$SYN-degraded" --degrade 5 --size 64 \
            --stride 32 --max-nodata 0.5 --val-fraction 0.1 --seed 1 --overwrite
    fi
    sources+=("$SYN-degraded")
    extra+=(--source-weight "synthetic-degraded=$SYNTH_DEGRADED")
fi
if [ -f "$REAL/shanghai_esw_water_10m.tif" ]; then
    s2s2net -q chip --pair "$REAL/shanghai_esw_s2_l2a_6band_10m.tif" "$REAL/shanghai_esw_water_10m.tif" \
        -o "$WORK/shanghai" --size 64 --stride 64 --val-fraction 1 --overwrite
    sources+=("$WORK/shanghai")
fi
s2s2net -q train "${sources[@]}" -o "$WORK/run" --init-weights "$INIT" --max-steps "$STEPS" --batch-size 8 --lr "$LR" \
    --warmup-steps 50 --val-every 200 --augment "$AUGMENT" --precision bf16 --seed "$SEED" --source-weight "bolivia=$REAL_WEIGHT" \
    --label-edges "$LABEL_EDGES" "${extra[@]}" --overwrite
shanghai=()
if [ -f "$REAL/shanghai_esw_water_10m.tif" ]; then
    shanghai=(--pair "$REAL/shanghai_esw_s2_l2a_6band_10m.tif" "$REAL/shanghai_esw_water_10m.tif")
fi
s2s2net weights calibrate "$WORK/run/best.safetensors" "$WORK/model.safetensors" "${shanghai[@]}" \
    --manifest "$MANIFEST" --gains "$GAINS" --overwrite 2> "$WORK/calibration.txt"
