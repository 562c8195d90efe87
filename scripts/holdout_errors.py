"""Where models go wrong on the synthetic hold-out: their 2 m errors by the generator's class
under them and by distance from the truth's water edge.

    python scripts/holdout_errors.py PREDICTIONS NAME [NAME ...] [--seed 9000] [--count 48] [--size 192]

PREDICTIONS is what `s2s2net compare --save-predictions` wrote for the hold-out that
`scripts/score_default.sh` makes (`s2s2net synth --count 48 --size 192 --seed 9000`):
PREDICTIONS/synth_<seed>__<NAME>.tif for each model NAME (the file's stem, `default` for the
bundled model). Each scene's 2 m classes are drawn again from its seed (synth: same seed, same
pair), so no more than the predictions is read. Prints, for each model: F1, the missed water
and the false water in bands of distance from the truth's edge (2 m pixels; 0 is the edge
itself, on either side), the share of each kind of water missed and of each kind of land
called water.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import rasterio
from scipy import ndimage

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from s2s2net_cli.synthetic.scenes import CLASSES, WATER_CLASSES, make_pair  # noqa: E402

DISTANCE_BANDS = (0, 1, 2, 3, 5, 10)  # lower ends, in 2 m pixels from the truth's edge


class Breakdown:
    """Error counts of one model, summed over scenes."""

    def __init__(self) -> None:
        n = len(CLASSES)
        self.pixels, self.missed, self.false = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
        self.missed_at = np.zeros(len(DISTANCE_BANDS), np.int64)
        self.false_at = np.zeros(len(DISTANCE_BANDS), np.int64)
        self.found = 0

    def add(self, classes: np.ndarray, truth: np.ndarray, water: np.ndarray) -> None:
        """Count one scene: its 2 m ``classes``, ``truth`` (0/1, NaN nodata) and predicted ``water``."""
        valid = ~np.isnan(truth)
        wet = truth == 1
        shore = (wet & ~ndimage.binary_erosion(wet, border_value=1)) | (~wet & ndimage.binary_dilation(wet))
        distance = ndimage.distance_transform_edt(~shore) if shore.any() else np.full(wet.shape, np.inf)
        band = np.digitize(distance, DISTANCE_BANDS[1:])
        missed, false = wet & valid & ~water, ~wet & valid & water
        n = len(CLASSES)
        self.pixels += np.bincount(classes[valid], minlength=n)
        self.missed += np.bincount(classes[missed], minlength=n)
        self.false += np.bincount(classes[false], minlength=n)
        self.missed_at += np.bincount(band[missed], minlength=len(DISTANCE_BANDS))
        self.false_at += np.bincount(band[false], minlength=len(DISTANCE_BANDS))
        self.found += int((wet & valid & water).sum())

    def lines(self) -> list[str]:
        found, false, missed = self.found, int(self.false.sum()), int(self.missed.sum())
        f1 = 2 * found / (2 * found + false + missed) if found + false + missed else float("nan")
        bands = [f"{lo}-{hi - 1}" if hi - lo > 1 else str(lo) for lo, hi in zip(DISTANCE_BANDS, DISTANCE_BANDS[1:])]
        bands.append(f"{DISTANCE_BANDS[-1]}+")
        out = [f"F1 {f1:.4f}: {found} water pixels found, {false} false, {missed} missed",
               "  px from the truth's edge " + " ".join(f"{b:>8}" for b in bands),
               "  missed                   " + " ".join(f"{v:8d}" for v in self.missed_at),
               "  false                    " + " ".join(f"{v:8d}" for v in self.false_at)]
        for i, name in enumerate(CLASSES):
            if not self.pixels[i]:
                continue
            if i in WATER_CLASSES:
                out.append(f"  water {name:<19} {self.pixels[i]:9d} px, missed {self.missed[i]:7d} "
                           f"({self.missed[i] / self.pixels[i]:6.2%})")
            elif self.false[i]:
                out.append(f"  land  {name:<19} {self.pixels[i]:9d} px, called water {self.false[i]:7d} "
                           f"({self.false[i] / self.pixels[i]:6.2%})")
        return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("predictions", type=Path)
    parser.add_argument("names", nargs="+")
    parser.add_argument("--seed", type=int, default=9000)
    parser.add_argument("--count", type=int, default=48)
    parser.add_argument("--size", type=int, default=192)
    args = parser.parse_args(argv)
    paths = {(s, name): args.predictions / f"synth_{s}__{name}.tif"
             for s in range(args.seed, args.seed + args.count) for name in args.names}
    absent = [p for p in paths.values() if not p.is_file()]
    if absent:
        parser.exit(2, f"{absent[0]}: no such prediction ({len(absent)} of {len(paths)} absent)\n")
    breakdowns = {name: Breakdown() for name in args.names}
    for s in range(args.seed, args.seed + args.count):
        pair = make_pair(args.size, seed=s)
        for name in args.names:
            with rasterio.open(paths[s, name]) as src:
                prediction = src.read(1)
            if prediction.shape != pair.mask.shape:
                parser.exit(2, f"{paths[s, name]}: {prediction.shape[1]} x {prediction.shape[0]} px, not the "
                               f"{pair.mask.shape[1]} x {pair.mask.shape[0]} of seed {s}'s 2 m truth\n")
            breakdowns[name].add(pair.classes, pair.mask, prediction == 1)
    for name, breakdown in breakdowns.items():
        print(f"== {name}: " + "\n".join(breakdown.lines()))


if __name__ == "__main__":
    main()
