"""The machine a benchmark ran on, recorded with every figure: CPU model, cores, the
instruction-set flags that choose predict's path (AVX2, AVX-512, bf16, AMX), and torch's own
reading of them when torch is loaded."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def describe() -> dict:
    """{"cpu", "cores", "flags", "torch_cpu_capability" (when torch is imported)}."""
    model, flags = platform.processor() or platform.machine(), set()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model in ("", platform.machine(), platform.processor()):
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    out = {"cpu": model, "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
           "flags": [f for f in FLAGS if f in flags]}
    if "torch" in sys.modules:
        out["torch_cpu_capability"] = sys.modules["torch"].backends.cpu.get_cpu_capability()
    return out
