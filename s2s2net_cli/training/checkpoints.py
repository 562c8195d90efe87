"""A training run's checkpoints: DeepSpeed ZeRO checkpoints (the last few kept), loaded with a
weights-only unpickler, and consolidated into one-file weights (last.safetensors, and
best.safetensors when validation improved)."""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import shutil
from pathlib import Path

import torch
import torch.distributed as dist

from ..checkpoint import WeightsCard, save_weights
from ..errors import first_line
from ..formats import RUN_BEST, RUN_LAST
from ..io import atomic_path, write_error_text
from ..rulebook import refuse
from ..world import World
from .run_folder import CHECKPOINTS

KEEP_CHECKPOINTS = 2


@contextlib.contextmanager
def weights_only_loading(ckpt_dir):
    """Load DeepSpeed checkpoints with torch's weights-only unpickler: tensors, plain
    containers and the few DeepSpeed records a checkpoint holds, never arbitrary code. (A set
    is allowed by torch from 2.5 on; DeepSpeed's model states hold one.) A refusal names what
    the unpickler met."""
    from deepspeed.runtime.fp16.loss_scaler import DynamicLossScaler, LossScaler  # heavy: DeepSpeed
    from deepspeed.runtime.zero.config import ZeroStageEnum
    from deepspeed.utils.tensor_fragment import fragment_address

    torch.serialization.add_safe_globals([set, LossScaler, DynamicLossScaler, ZeroStageEnum, fragment_address])
    previous = os.environ.get("TORCH_FORCE_WEIGHTS_ONLY_LOAD")
    os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = "1"
    try:
        yield
    except pickle.UnpicklingError as exc:
        met = re.search(r"GLOBAL ([\w.]+)", str(exc))  # torch's words for it vary: the global it names
        said = f"it holds {met.group(1)}" if met else first_line(exc)[:200]
        raise refuse("S2N-CHECKPOINT-NOT-WEIGHTS", ckpt_dir, error=said) from exc
    finally:
        if previous is None:
            os.environ.pop("TORCH_FORCE_WEIGHTS_ONLY_LOAD", None)
        else:
            os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = previous


def save_checkpoint(engine, ckpt_dir: Path, step: int, best_f1: float | None, world: World) -> str:
    """A ZeRO checkpoint of every rank at ``step``; the oldest beyond KEEP_CHECKPOINTS removed. Its tag.

    Whole or absent: `latest` names the new checkpoint only once every rank has written its part;
    when any rank could not (a full disk), the partial checkpoint is removed, `latest` still names
    the one before (--resume goes on from there) and the write failure is raised on every rank."""
    tag = f"step{step:08d}"
    failure = None
    try:
        engine.save_checkpoint(str(ckpt_dir), tag=tag, client_state={"step": step, "best_f1": best_f1},
                               save_latest=False)
    except Exception as exc:  # noqa: BLE001 - whatever the writer raises (OSError, torch's "unexpected pos")
        failure = exc
    written = torch.tensor([0 if failure else 1], dtype=torch.int32)
    dist.all_reduce(written, op=dist.ReduceOp.MIN)
    if not written.item():
        if world.leads:
            shutil.rmtree(ckpt_dir / tag, ignore_errors=True)
        error = write_error_text(failure, ckpt_dir / tag) if failure else "another rank could not write its part"
        raise refuse("S2N-OUTPUT-WRITE-FAILED", ckpt_dir / tag, error=error) from failure
    if world.leads:
        with atomic_path(ckpt_dir / "latest") as tmp:
            tmp.write_text(tag)
    dist.barrier()
    if world.leads:
        tags = sorted(p.name for p in ckpt_dir.iterdir() if p.is_dir() and p.name.startswith("step"))
        for old in tags[:-KEEP_CHECKPOINTS]:
            shutil.rmtree(ckpt_dir / old, ignore_errors=True)
    return tag


def consolidated_state_dict(engine, ckpt_dir: Path, tag: str) -> dict:
    """Full fp32 weights: from the ZeRO checkpoint (the fp32 master copies), else the module."""
    if engine.zero_optimization_stage() >= 1:
        from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint  # heavy: DeepSpeed

        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
            state = get_fp32_state_dict_from_zero_checkpoint(str(ckpt_dir), tag=tag)
    else:
        state = engine.module.state_dict()
    return {k: v.float() if v.is_floating_point() else v for k, v in state.items()}


def export_weights(engine, run_dir: Path, tag: str, card: WeightsCard, improved: bool) -> None:
    """last.safetensors (and best.safetensors when ``improved``) from checkpoint ``tag``."""
    state = consolidated_state_dict(engine, run_dir / CHECKPOINTS, tag)
    save_weights(run_dir / RUN_LAST, state, card)
    if improved:
        save_weights(run_dir / RUN_BEST, state, card)
