"""The Sen1Floods11 Bolivia chips in three fixed folds, for a cross-validated figure.

    python scripts/bolivia_folds.py manifests REALDATA WORK   # WORK/fold{0,1,2}_{train,test}.csv, WORK/all.csv
    python scripts/bolivia_folds.py pool WORK/fold*_scores.json   # the folds' held-out counts, pooled
    python scripts/bolivia_folds.py swir WORK          # WORK/fold{k}_test_swir_{nearest,bilinear}.csv

Each chip is held out in exactly one fold; a fold's model trains on the other ten and is
scored on its five. The folds are fixed, not drawn: each holds one of the three chips that
MNDWI > 0 misses most (turbid and vegetated flood water: 242570, 379434, 432776), the two
dry chips go to different folds, and the water-rich ones are spread. Pooled over the folds,
every chip is predicted by a model that never saw it (nor chose its weights on it), and every
index is scored on the same pixels.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np

FOLDS = (
    ("242570", "233925", "129334", "195474", "290290"),
    ("379434", "76104", "314919", "360519", "312675"),
    ("432776", "103757", "23014", "294583", "60373"),
)
FOLDER = "sen1floods11_bolivia"
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from s2s2net_cli.inference.options import BASELINES  # noqa: E402  (the index baselines' names)
from s2s2net_cli.metrics import boundary_f1  # noqa: E402


def pair(realdata: Path, chip: str) -> dict:
    folder = realdata / FOLDER
    return {"image": str((folder / f"Bolivia_{chip}_s2_6band_10m.tif").resolve()),
            "mask": str((folder / f"Bolivia_{chip}_water_10m.tif").resolve()), "id": f"Bolivia_{chip}"}


def write(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["image", "mask", "id"])
        writer.writeheader()
        writer.writerows(rows)


def manifests(realdata: Path, work: Path) -> None:
    work.mkdir(parents=True, exist_ok=True)
    everyone = [c for fold in FOLDS for c in fold]
    for k, held in enumerate(FOLDS):
        write(work / f"fold{k}_train.csv", [pair(realdata, c) for c in everyone if c not in held])
        write(work / f"fold{k}_test.csv", [pair(realdata, c) for c in held])
    write(work / "all.csv", [pair(realdata, c) for c in everyone])


def swir(work: Path) -> None:
    """Each fold's held-out chips with B11/B12 brought to 20 m and back to 10 m by nearest and
    bilinearly (scripts/score_real.py's variants), to measure how much the fold's model depends
    on how the SWIR reached 10 m."""
    from score_real import swir_variant  # the variants score_real.sh makes of the real scenes

    for k in range(len(FOLDS)):
        with open(work / f"fold{k}_test.csv", newline="") as fh:
            rows = list(csv.DictReader(fh))
        for method in ("nearest", "bilinear"):
            out = []
            for row in rows:
                variant = work / f"{row['id']}_swir_{method}.tif"
                swir_variant(Path(row["image"]), variant, method)
                out.append({"image": str(variant.resolve()), "mask": row["mask"], "id": row["id"]})
            write(work / f"fold{k}_test_swir_{method}.csv", out)


def pool(paths: list[str]) -> None:
    """Sum each model's counts over the folds' `compare --json` documents and print the table:
    pooled F1, boundary F1 from the pooled edge counts, and the mean of the chips' boundary F1."""
    totals: dict[str, dict] = {}
    for path in paths:
        for row in json.loads(Path(path).read_text())["rows"]:
            stem = row["model"].removesuffix(".safetensors")
            name = stem if stem in BASELINES else {"model": "model", "stage1": "stage 1 weights"}.get(stem, stem)
            t = totals.setdefault(name, {"counts": [0, 0, 0, 0], "edges": [0, 0, 0, 0], "chips": []})
            for i, key in enumerate(("tp", "fp", "fn", "tn")):
                t["counts"][i] += int(row[key])
            t["edges"] = [a + int(b) for a, b in zip(t["edges"], row.get("edges", (0, 0, 0, 0)))]
            t["chips"] += [img["boundary_f1"] for img in row["images"] if img["boundary_f1"] is not None]
    out = []
    for name, t in totals.items():
        tp, fp, fn, tn = t["counts"]
        f1 = 2 * tp / max(2 * tp + fp + fn, 1)
        edges = boundary_f1(np.array(t["edges"]))
        out.append({"model": name, "f1": round(f1, 4), "precision": round(tp / max(tp + fp, 1), 4),
                    "recall": round(tp / max(tp + fn, 1), 4), "pixels": tp + fp + fn + tn,
                    "boundary_f1": None if edges is None else round(edges, 4),
                    "mean_boundary_f1": round(float(np.mean(t["chips"])), 4) if t["chips"] else None})
    for r in sorted(out, key=lambda r: -r["f1"]):
        print(f"{r['model']:>22}  cross-validated pooled F1 {r['f1']:.4f} P {r['precision']:.3f} "
              f"R {r['recall']:.3f}  boundary F1 {r['boundary_f1']}, chips' mean {r['mean_boundary_f1']}  "
              f"over {r['pixels']} px")
    print(json.dumps(out), file=sys.stderr)


if __name__ == "__main__":
    if sys.argv[1:2] == ["manifests"] and len(sys.argv) == 4:
        manifests(Path(sys.argv[2]), Path(sys.argv[3]))
    elif sys.argv[1:2] == ["pool"] and len(sys.argv) > 2:
        pool(sys.argv[2:])
    elif sys.argv[1:2] == ["swir"] and len(sys.argv) == 3:
        swir(Path(sys.argv[2]))
    else:
        sys.exit(__doc__)
