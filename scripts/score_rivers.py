"""Score `s2s2net rivers` against the rivers `s2s2net synth --landscape rivers` drew.

    python scripts/score_rivers.py WORK_DIR [--count 16] [--size 160] [--seed 9500] [--weights FILE]

For each synthetic scene (one or two rivers 10-80 m wide on land, seeds from --seed): the
rivers of its exact 2 m truth mask, and end to end the rivers of the mask `s2s2net predict`
makes from its 10 m scene, each scored with s2s2net_cli.evaluation.rivers against the drawn
centrelines and widths. Prints both pooled over the scenes (every transect, every metre of
centreline) and writes WORK_DIR/rivers_scores.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import rasterio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from s2s2net_cli.evaluation.rivers import nodata_area_of, score_rivers  # noqa: E402


def run(*args) -> None:
    subprocess.run(["s2s2net", "-q", *map(str, args)], check=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("work")
    parser.add_argument("--count", type=int, default=16)
    parser.add_argument("--size", type=int, default=160)
    parser.add_argument("--seed", type=int, default=9500)
    parser.add_argument("--weights", default=None)
    args = parser.parse_args()
    work = Path(args.work)
    run("synth", work / "scenes", "--landscape", "rivers", "--count", args.count, "--size", args.size, "--seed",
        args.seed, "--overwrite")
    pooled = {"truth": {"err": [], "near": 0.0, "length": 0.0, "found": 0.0, "drawn": 0.0},
              "predicted": {"err": [], "near": 0.0, "length": 0.0, "found": 0.0, "drawn": 0.0}}
    per_scene = []
    for k in range(args.count):
        seed = args.seed + k
        scene, mask, truth = (work / "scenes" / f"synth_{seed}_{name}" for name in ("scene.tif", "mask.tif", "rivers.gpkg"))
        predicted = work / f"predicted_{seed}.tif"
        extra = ["--weights", args.weights] if args.weights else []
        run("predict", scene, "-o", predicted, "--precision", "32", "--overwrite", *extra)
        with rasterio.open(mask) as src:
            bounds = tuple(src.bounds)
        nodata = nodata_area_of(mask)
        row = {"seed": seed}
        for kind, source in (("truth", mask), ("predicted", predicted)):
            out = work / f"rivers_{kind}_{seed}.gpkg"
            run("rivers", source, "-o", out, "--overwrite")
            score = score_rivers(out, truth, bounds, with_errors=True, nodata_area=nodata)
            p = pooled[kind]
            p["err"] += score.pop("errors")
            p["near"] += (score["centreline_within_tolerance"] or 0) * score["centreline_length_m"]
            p["length"] += score["centreline_length_m"]
            p["found"] += (score["found"] or 0) * score["drawn_length_m"]
            p["drawn"] += score["drawn_length_m"]
            row[kind] = score
        per_scene.append(row)
    result = {}
    for kind, p in pooled.items():
        err = np.abs(np.asarray(p["err"]))
        result[kind] = {"transects": int(err.size), "width_median_abs_error_m": round(float(np.median(err)), 3),
                        "width_p90_abs_error_m": round(float(np.percentile(err, 90)), 3),
                        "width_median_error_m": round(float(np.median(p["err"])), 3),
                        "centreline_within_2m": round(p["near"] / p["length"], 4), "found": round(p["found"] / p["drawn"], 4)}
        r = result[kind]
        print(f"{kind:>10}: {r['transects']} transects, median |width error| {r['width_median_abs_error_m']:.2f} m "
              f"(90 %: {r['width_p90_abs_error_m']:.2f} m, median error {r['width_median_error_m']:+.2f} m), "
              f"centreline within 2 m {r['centreline_within_2m']:.1%}, drawn rivers found {r['found']:.1%}")
    (work / "rivers_scores.json").write_text(json.dumps({"pooled": result, "scenes": per_scene}, indent=2))


if __name__ == "__main__":
    main()
