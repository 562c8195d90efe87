"""Benchmark ZeRO-2 against plain data parallel (ZeRO stage 0) on two ranks.

    DS_ACCELERATOR=cpu python benchmarks/train_bench.py [--steps 12] [--chip 64] [--batch-size 8] [--json]

Makes synthetic chips, then for stage 2 and stage 0 launches `deepspeed --num_gpus 2` on this
script in worker mode, which trains with s2s2net's own loop and reports per rank: samples/s
(after two warm-up steps), peak resident memory, and the bytes of optimizer state (Adam
moments) and of fp32 master weights it holds. With two ranks ZeRO-2 should hold about half
the optimizer state of stage 0 per rank. On a GPU machine the same command runs on GPUs.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path


def worker(args) -> None:
    import torch

    from s2s2net_cli.training.config import TrainOptions
    from s2s2net_cli.training.loop import train

    options = TrainOptions(max_steps=args.steps, batch_size=args.batch_size, zero_stage=args.stage,
                           val_every=10 ** 9, augment="none", overwrite=True)
    options.val_every = args.steps  # one validation and export at the end
    result = train(args.chips, Path(args.out) / f"run{args.stage}", options)
    rates = [r["samples_per_s"] for r in result.records if r["kind"] == "train"][2:]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    gpu_peak = torch.cuda.max_memory_allocated() / 2 ** 20 if torch.cuda.is_available() else None
    rank = int(os.environ["RANK"])
    Path(args.out, f"stage{args.stage}_rank{rank}.json").write_text(json.dumps({
        "stage": args.stage, "rank": rank, "samples_per_s": sum(rates) / max(1, len(rates)),
        "peak_rss_mb": round(peak, 1), "gpu_peak_mb": gpu_peak,
        "optimizer_state_bytes": result.optimizer_state_bytes, "master_weight_bytes": result.master_weight_bytes}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--stage", type=int, default=2)
    ap.add_argument("--chips")
    ap.add_argument("--out")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--chip", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--local_rank", type=int, default=None)
    args = ap.parse_args()
    if args.worker:
        return worker(args)

    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    import torch

    if not torch.cuda.is_available():
        env["DS_ACCELERATOR"] = "cpu"
    launcher = str(Path(sys.executable).parent / "deepspeed")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "s2s2net_cli", "-q", "synth", f"{tmp}/scenes", "--count", "4", "--size",
                        str(args.chip * 4), "--seed", "500"], check=True, env=env)
        subprocess.run([sys.executable, "-m", "s2s2net_cli", "-q", "chip", "--manifest", f"{tmp}/scenes/manifest.csv", "-o",
                        f"{tmp}/chips", "--size", str(args.chip), "--max-nodata", "0.5"], check=True, env=env)
        rows = []
        for port, stage in ((29701, 2), (29702, 0)):
            subprocess.run([launcher, "--num_gpus", str(args.gpus), "--master_port", str(port), __file__, "--worker",
                            "--stage", str(stage), "--chips", f"{tmp}/chips", "--out", tmp, "--steps", str(args.steps),
                            "--batch-size", str(args.batch_size)], check=True, env=env, capture_output=True, text=True)
            rows += [json.loads(p.read_text()) for p in sorted(Path(tmp).glob(f"stage{stage}_rank*.json"))]
    if args.json:
        print(json.dumps({"rows": rows}))
    else:
        print(f"{'stage':>5} {'rank':>4} {'samples/s':>10} {'peak RSS MB':>12} {'optim MB':>9} {'master MB':>9}")
        for r in rows:
            print(f"{r['stage']:>5} {r['rank']:>4} {r['samples_per_s']:>10.2f} {r['peak_rss_mb']:>12.0f} "
                  f"{r['optimizer_state_bytes'] / 2**20:>9.1f} {r['master_weight_bytes'] / 2**20:>9.1f}")


if __name__ == "__main__":
    main()
