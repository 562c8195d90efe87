"""What 8-bit integers would do to predict's masks: the head simulated in int8 (fake
quantization in fp32: weights rounded to 8 bits per output channel, the decoder features, each
step's output before and after Mish and the logit rounded to 8 bits per tensor, on ranges
measured on calibration scenes) against the fp32 head, both the full head, on the scenes given.
Pairs with int8_head_bench.py, which measures the speed.

    python benchmarks/int8_head_accuracy.py --calibrate CAL.tif ... --scene SCENE.tif ... [--json]

Calibration: the ranges each tensor takes on the calibration scenes (the logit clipped to
-16..16, each step's input to Mish below -8 clipped to -8, where Mish is within 0.003 of 0).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import rasterio
import torch
import torch.nn.functional as F
from machine import describe

import s2s2net_cli as s2n
from s2s2net_cli import model as network
from s2s2net_cli.inference import runtime

LOGIT_RANGE = (-16.0, 16.0)
MISH_INPUT_FLOOR = -8.0


class Int8Head:
    """ProgressiveUpsamplingHead.forward, its tensors recorded (``calibrating``) or rounded to 8 bits."""

    def __init__(self):
        self.ranges: dict[str, tuple[float, float]] = {}
        self.calibrating = True

    def tensor(self, t: torch.Tensor, key: str) -> torch.Tensor:
        if self.calibrating:
            lo, hi = self.ranges.get(key, (float("inf"), float("-inf")))
            self.ranges[key] = (min(lo, float(t.min())), max(hi, float(t.max())))
            return t
        lo, hi = self.ranges[key]
        scale = (hi - lo) / 255
        zero = round(-lo / scale)
        return (torch.clamp(torch.round(t / scale) + zero, 0, 255) - zero) * scale

    def weight(self, w: torch.Tensor) -> torch.Tensor:
        if self.calibrating:
            return w
        scale = w.abs().amax(dim=(1, 2, 3), keepdim=True).clamp_min(1e-12) / 127
        return torch.round(w / scale).clamp(-127, 127) * scale

    def forward(self, head, x: torch.Tensor, last_step_rows=None, active=None) -> torch.Tensor:
        x = self.tensor(x, "features")
        for k, (factor, step) in enumerate(zip(head.factors, head.steps)):
            conv = step[0]
            before = self.tensor(F.conv2d(network._upsample(x, factor), self.weight(conv.weight), conv.bias, padding=1),
                                 f"step {k} before Mish")
            x = self.tensor(F.mish(before), f"step {k} after Mish")
        logits = F.conv2d(x, self.weight(head.logit.weight), head.logit.bias)
        return logits if self.calibrating else self.tensor(logits.clamp(*LOGIT_RANGE), "logit")


def masks(scenes: list[Path], folder: Path) -> list[np.ndarray]:
    out = []
    for k, scene in enumerate(scenes):
        path = folder / f"{k}.tif"
        s2n.predict(scene, path, precision="32", full_head=True, overwrite=True)
        with rasterio.open(path) as src:
            out.append(src.read(1))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calibrate", type=Path, action="append", required=True)
    parser.add_argument("--scene", type=Path, action="append", required=True)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = masks(args.scene, Path(tmp))
        int8 = Int8Head()
        # the trained head, not predict's sub-pixel rewrite (the same numbers), with its tensors rounded
        runtime.inference_network = lambda model, mish=None: model.to(memory_format=torch.channels_last)
        network.ProgressiveUpsamplingHead.forward = lambda head, x, *rest, **kw: int8.forward(head, x)
        masks(args.calibrate, Path(tmp))
        int8.ranges["logit"] = LOGIT_RANGE
        for key, (lo, hi) in int8.ranges.items():
            if key.endswith("before Mish"):
                int8.ranges[key] = (max(lo, MISH_INPUT_FLOOR), hi)
        int8.calibrating = False
        rounded = masks(args.scene, Path(tmp))
    rows = []
    for scene, a, b in zip(args.scene, fp32, rounded):
        valid = a != 255
        rows.append({"scene": str(scene), "pixels": int(valid.sum()), "equal": float((a[valid] == b[valid]).mean()),
                     "water_fp32": float((a[valid] == 1).mean()), "water_int8": float((b[valid] == 1).mean())})
    report = {"machine": describe(), "torch": torch.__version__, "calibration": [str(p) for p in args.calibrate],
              "ranges": int8.ranges, "scenes": rows}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for row in rows:
        print(f"{row['scene']}: {100 * row['equal']:.3f} % of {row['pixels']} pixels equal; water "
              f"{100 * row['water_fp32']:.3f} % fp32, {100 * row['water_int8']:.3f} % int8")


if __name__ == "__main__":
    main()
