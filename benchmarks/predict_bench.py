"""Benchmark predict against the bare network run once over the same area.

    python benchmarks/predict_bench.py [--size 1024] [--tile-size 512] [--overlap 64] [--flips] [--skip-forward]
                                        [--landscape mixed|rivers] [--full-head] [--weights W] [--json]

Makes a synthetic scene of --size x --size 10 m pixels (a 512 px synthetic scene repeated to
fill larger sizes; --landscape rivers: one or two rivers on land, where a water gate skips most
of the head), runs `s2s2net predict` on it in a child process at the given (default:
predict's default) settings, taking its own timing and peak resident memory, then times the
bare network (channels-last, same threads) on 512 x 512 inputs covering the scene's area
once, in this process: as predict runs it (decoder folded, head as sub-pixel convolutions,
Mish fused where predict fused it; in the precision predict chose, int8 included) and as trained, in fp32.
``area_ratio`` is predict's seconds over the bare network's as predict runs it: what tiling,
context, blending, reading and writing cost beyond the network's necessary work;
``bare_speedup_over_fp32`` is the network's own gain, as run, over the trained network in
fp32; ``area_ratio_trained`` is predict's seconds over the trained network's (``trained_s``) in
predict's precision; ``gflop_per_s`` is the trained network's floating-point work over the area (torch's
count) per second of predict. With
--flips (predict's test-time augmentation: eight forwards per tile) expect a ratio near 8.
With --json the last line is {"pipeline_s", "bare_s", "area_ratio", "peak_rss_mb", "gflop_per_s", ...,
"machine"}: the CPU's model, cores and the flags that choose the path (benchmarks/machine.py).
--skip-forward times predict alone (a full 10980 px scene).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from s2s2net_cli.checkpoint import WeightsCard, load_model, save_weights
from s2s2net_cli.inference.runtime import inference_network
from s2s2net_cli.inference.subpixel_head import FusedMish
from s2s2net_cli.model import S2S2Net
from s2s2net_cli.synthetic.scenes import make_pair
from s2s2net_cli.weights_header import BUNDLED_WEIGHTS as DEFAULT_WEIGHTS

sys.path.insert(0, str(Path(__file__).parent))
from machine import describe  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--tile-size", type=int, default=512)
    ap.add_argument("--overlap", type=int, default=64)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="auto", choices=["auto", "32", "bf16", "16", "int8"])
    ap.add_argument("--landscape", default="mixed", choices=["mixed", "rivers"],
                    help="the synthetic scene: every kind of water (a fifth of it water), or one or two rivers on land")
    ap.add_argument("--full-head", action="store_true", help="predict --full-head: no water gate")
    ap.add_argument("--keep", type=Path, default=None, help="copy the predicted mask here")
    ap.add_argument("--scene", type=Path, default=None,
                    help="the --size x --size scene to predict: made (and kept) here when absent, read when present, "
                         "so that several runs make it once")
    ap.add_argument("--weights", type=Path, default=None)
    ap.add_argument("--flips", action="store_true", help="predict --flips (test-time augmentation)")
    ap.add_argument("--skip-forward", action="store_true",
                    help="time the pipeline only (a full 10980 px scene: the bare network would double the run)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        weights = args.weights.resolve() if args.weights else (DEFAULT_WEIGHTS if DEFAULT_WEIGHTS.exists() else None)
        if weights is None:
            torch.manual_seed(0)
            weights = save_weights(tmp / "random.safetensors", S2S2Net().state_dict(), WeightsCard())
        scene = (args.scene or tmp / "scene.tif").resolve()  # the child runs in tmp (below)
        if not scene.exists():
            _write_scene(make_pair(min(args.size, 512), seed=7, nodata_margin=False, landscape=args.landscape), args.size,
                         scene)
        else:
            import rasterio

            with rasterio.open(scene) as src:
                if (src.width, src.height) != (args.size, args.size):
                    sys.exit(f"{scene}: {src.width} x {src.height} px, not --size {args.size}")

        cmd = [sys.executable, "-m", "s2s2net_cli", "-q", "predict", str(scene), "-o", str(tmp / "out.tif"),
               "--weights", str(weights), "--tile-size", str(args.tile_size), "--overlap", str(args.overlap),
               "--device", args.device, "--precision", args.precision, "--json", *(["--flips"] if args.flips else []),
               *(["--full-head"] if args.full_head else [])]
        # run in tmp: ``-m`` puts the current directory first on sys.path, so run from a checkout's
        # root the child timed that checkout's code, whatever PYTHONPATH said (an A/B turn with
        # PYTHONPATH=B run from A's root timed A twice)
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=tmp)
        summary = json.loads(out.stdout)["scenes"][0]
        pipeline_s = summary["seconds"]
        peak_rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        if args.keep:
            shutil.copyfile(tmp / "out.tif", args.keep)

        precision = summary.get("precision", "fp32")  # what --precision chose
        fused = summary.get("fused_mish", False)
        flop = _network_flop(weights, args) * (8 if args.flips else 1)  # the bare network once over the area
        bare_s = bare_fp32_s = trained_s = None
        if not args.skip_forward:
            bare_fp32_s = _time_bare(weights, args, None, as_run=False)
            trained_s = (bare_fp32_s if precision not in AUTOCAST  # fp32, and int8 (the rest of it fp32)
                         else _time_bare(weights, args, AUTOCAST[precision], as_run=False))
            bare_s = _time_bare(weights, args, AUTOCAST.get(precision), as_run=True, fused=fused,
                                int8=precision == "int8")

    result = {"pipeline_s": round(pipeline_s, 2), "bare_s": bare_s and round(bare_s, 2),
              "area_ratio": bare_s and round(pipeline_s / bare_s, 3), "peak_rss_mb": round(peak_rss_mb, 1),
              "gflop_per_s": round(flop / pipeline_s / 1e9, 1), "bare_gflop_per_s": bare_s and round(flop / bare_s / 1e9, 1),
              "bare_fp32_s": bare_fp32_s and round(bare_fp32_s, 2),
              "trained_s": trained_s and round(trained_s, 2),
              "area_ratio_trained": trained_s and round(pipeline_s / trained_s, 3),
              "bare_speedup_over_fp32": bare_s and round(bare_fp32_s / bare_s, 3),
              "scene_px": args.size * args.size, "tiles": math.ceil(args.size / args.tile_size) ** 2,
              "tile_size": args.tile_size, "overlap": args.overlap, "flips": args.flips, "threads": torch.get_num_threads(),
              "device": args.device, "precision": precision, "fused_mish": fused, "head": summary.get("head", "full"),
              "landscape": args.landscape, "machine": describe()}
    if args.device.startswith("cuda"):
        result.update(gpu=torch.cuda.get_device_name(), gpu_peak_mb=summary.get("gpu_peak_mb"))
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:>12}: {v}")


AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}


def _network_flop(weights, args, side: int = 512) -> float:
    """Floating-point operations of the bare network over the scene's area once (torch's own
    count of one side x side forward, scaled by area; a multiply-add counts as two)."""
    from torch.utils.flop_counter import FlopCounterMode

    model, _ = load_model(weights, "cpu")
    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        model(torch.zeros(1, 6, side, side))
    return counter.get_total_flops() * args.size * args.size / side ** 2


def _time_bare(weights, args, dtype=None, as_run: bool = True, fused: bool = False, side: int = 512,
               int8: bool = False) -> float:
    """Seconds of the bare network (channels-last; fp32, or autocast to ``dtype``) over the
    scene's area: as many side x side forwards as cover it once (fractions of a forward
    scaled), after one warm-up. ``as_run``: as predict runs it (decoder folded, head as
    sub-pixel convolutions, its last step in pieces; Mish fused with ``fused``; its convolutions
    in 8-bit integers with ``int8``); else as trained."""
    model, card = load_model(weights, args.device)
    if as_run:
        model = inference_network(model, FusedMish(enabled=fused))
        if int8:
            model.head.quantize(card.int8_ranges)
        forward = lambda x: model.forward_window(x, 0, 0, side, side)  # noqa: E731 - the head in pieces
    else:
        model, forward = model.to(memory_format=torch.channels_last), model
    x = torch.randn(1, 6, side, side, device=args.device).contiguous(memory_format=torch.channels_last)
    n = args.size * args.size / side ** 2
    with torch.inference_mode(), torch.autocast(x.device.type, dtype=dtype, enabled=dtype is not None):
        torch.sigmoid(forward(x).float()).cpu()
        start = time.perf_counter()
        for _ in range(math.ceil(n)):
            torch.sigmoid(forward(x).float()).cpu()
    return (time.perf_counter() - start) * n / math.ceil(n)


def _write_scene(pair, size: int, path) -> None:
    """The pair's scene repeated to size x size, written block by block (never whole in memory)."""
    import rasterio
    from rasterio.windows import Window

    block = pair.scene.shape[-1]
    with rasterio.open(path, "w", driver="GTiff", width=size, height=size, count=6, dtype="uint16", nodata=0,
                       crs=pair.crs, transform=pair.transform, tiled=True, compress="deflate",
                       BIGTIFF="IF_SAFER") as dst:
        for r in range(0, size, block):
            for c in range(0, size, block):
                h, w = min(block, size - r), min(block, size - c)
                dst.write(pair.scene[:, :h, :w], window=Window(c, r, w, h))


if __name__ == "__main__":
    main()
