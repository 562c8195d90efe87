#!/usr/bin/env bash
# The README's river figures: `s2s2net rivers` scored against the rivers `s2s2net synth
# --landscape rivers` drew, on the exact 2 m truth masks and end to end (`predict` on the 10 m
# scenes, then `rivers`), 8 scenes of 128 px (seeds 9500-9507), widths 10-80 m.
#
#   scripts/score_rivers.sh [WORK_DIR]        (WEIGHTS=FILE to score another model than the bundled one)
set -euo pipefail
WORK=${1:-work/rivers}
python "$(dirname "$0")/score_rivers.py" "$WORK" --count 8 --size 128 --seed 9500 ${WEIGHTS:+--weights "$WEIGHTS"}
