"""A lighter head learnt from a trained one: stage 3 of scripts/train_default.sh (v6.1's head).

    python scripts/distill_head.py OUT.safetensors CHIPS_DIR [CHIPS_DIR ...] [--teacher default]
        [--channels 64,32,32,16] [--steps 1500] [--lr 2e-3] [--batch-size 8] [--init STUDENT | --init-from-teacher]
        [--edge-weight 0] [--truth-weight 0]

The student is the teacher's encoder and decoder, frozen, with a new head of ``--channels``
(from random weights), trained to give the teacher head's logits on the chips' images (their
masks are not read): soft BCE against the teacher's probabilities plus 0.05 x the squared
difference of the logits clipped to +-10; with ``--edge-weight W`` each 2 m pixel's terms
weigh 1 + W where the teacher's probability lies between 0.1 and 0.9 (its shores), 1 elsewhere.
With ``--truth-weight T`` the chips' masks are read too and T x the training loss (soft BCE 0.1 +
Dice, coarse labels on their own cells, as ``s2s2net train`` scores them) is added: the shores
taught by the truth as well as by the teacher.
``--init`` starts from a student made before (its head's channels); ``--init-from-teacher`` starts
each step whose shapes are the teacher's from the teacher's weights (the rest from random ones).
OUT keeps the teacher's threshold and NDWI prior; it has no water gate and no int8 ranges (fit
them with `s2s2net weights gate`). docs/model-history.md, "v6.1", has what (64, 32, 32, 16) gave
after each round of the recipe; "A lighter last step still", (64, 32, 16, 8) from v6.1's.
"""

from __future__ import annotations

import argparse
import math
import time

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from s2s2net_cli.checkpoint import WeightsCard, load_model, save_weights
from s2s2net_cli.model import ModelConfig, S2S2Net
from s2s2net_cli.training.data import Augment, ChipDataset, source_splits
from s2s2net_cli.training.losses import WaterLoss


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("chips", nargs="+", help="chips folders (s2s2net chip): their training chips' images")
    ap.add_argument("--teacher", default="default")
    ap.add_argument("--channels", default="64,32,32,16")
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--init", default=None, help="a student to go on from")
    ap.add_argument("--init-from-teacher", action="store_true",
                    help="start each head step whose shape is the teacher's from the teacher's weights")
    ap.add_argument("--edge-weight", type=float, default=0.0)
    ap.add_argument("--truth-weight", type=float, default=0.0)
    args = ap.parse_args()
    torch.manual_seed(0)
    teacher, card = load_model(args.teacher, "cpu")
    teacher.eval()
    config = ModelConfig(in_channels=card.model.in_channels, encoder=card.model.encoder,
                         decoder_channels=card.model.decoder_channels,
                         head_channels=tuple(int(c) for c in args.channels.split(",")))
    student = S2S2Net(config=config, spec=card.bands, ndwi_prior=card.ndwi_prior)
    shared = {k: v for k, v in teacher.state_dict().items() if not k.startswith(("head.", "gate."))}
    missing, unexpected = student.load_state_dict(shared, strict=False)
    if unexpected or not all(k.startswith("head.") for k in missing):
        raise SystemExit(f"{args.teacher}: not a network this student can share (missing {missing}, unexpected {unexpected})")
    if args.init and args.init_from_teacher:
        raise SystemExit("--init and --init-from-teacher: give one")
    if args.init:
        start_from, _ = load_model(args.init, "cpu")
        if start_from.config.head_channels != config.head_channels:
            raise SystemExit(f"{args.init}: head channels {start_from.config.head_channels}, not {config.head_channels}")
        student.head.load_state_dict(start_from.head.state_dict())
    if args.init_from_teacher:  # whole modules (a convolution's weight and bias), where every shape matches
        own, theirs = student.head.state_dict(), teacher.head.state_dict()

        def module_matches(module: str) -> bool:
            return all(k in theirs and theirs[k].shape == v.shape for k, v in own.items() if k.rsplit(".", 1)[0] == module)

        taken = {k: theirs[k] for k in own if module_matches(k.rsplit(".", 1)[0])}
        student.head.load_state_dict(taken, strict=False)
        print(f"from the teacher's head: {', '.join(sorted(taken))}")
    student.requires_grad_(False)
    student.head.requires_grad_(True)
    train, _ = source_splits(args.chips)
    loader = DataLoader(ChipDataset(train, card.bands, Augment()), batch_size=args.batch_size, shuffle=True,
                        num_workers=1, drop_last=True, persistent_workers=True)
    optimizer = torch.optim.AdamW(student.head.parameters(), lr=args.lr, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / 50) * 0.5 * (1 + math.cos(math.pi * s / args.steps)))
    truth_loss = WaterLoss()
    step, start = 0, time.time()
    student.head.train()
    while step < args.steps:
        for x, y, label_scale in loader:
            with torch.no_grad():
                features = teacher.features(x)
                target = teacher.head(features)
            logits = student.head(features)
            soft = torch.sigmoid(target)
            weight = 1 + args.edge_weight * ((soft > 0.1) & (soft < 0.9)).float()
            loss = ((F.binary_cross_entropy_with_logits(logits, soft, reduction="none")
                     + 0.05 * (logits.clamp(-10, 10) - target.clamp(-10, 10)) ** 2) * weight).mean() / weight.mean()
            if args.truth_weight:
                loss = loss + args.truth_weight * truth_loss(logits, y, label_scale)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            step += 1
            if step % 50 == 0:
                agree = float(((logits > 0) == (target > 0)).float().mean())
                print(f"step {step}: loss {loss.item():.4f}, sign as the teacher's {agree:.4f}, {time.time() - start:.0f} s",
                      flush=True)
            if step >= args.steps:
                break
    student.eval()
    save_weights(args.out, student.state_dict(), WeightsCard(
        model=config, bands=card.bands, threshold=card.threshold, ndwi_prior=card.ndwi_prior,
        training={"distilled_from": str(args.teacher), "steps": args.steps, "frozen": "encoder, decoder",
                  "edge_weight": args.edge_weight, "truth_weight": args.truth_weight, "init": str(args.init)}))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
