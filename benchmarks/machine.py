"""The machine a benchmark ran on, recorded with every figure: CPU model, cores, the
instruction-set flags that choose predict's path (AVX2, AVX-512, bf16, AMX) and set int8's pace
(VNNI), the CPU's family and model numbers, and torch's own reading of them when torch is loaded.

The family and model tell apart CPUs that a cloud machine names alike: an "AMD EPYC" of family 25
is a Zen 3 or Zen 4 (Zen 4 runs AVX-512 and bf16 on 256-bit units), of family 26 a Zen 5 (512-bit
units); docs/performance.md has what that does to predict's pace."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

FLAGS = ("avx2", "avx512f", "avx_vnni", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_tile")  # VNNI: int8 dot products


def describe(cpuinfo: str | None = None) -> dict:
    """{"cpu", "cores", "flags", "family" and "model" (where /proc/cpuinfo, or ``cpuinfo``, has
    them), "torch_cpu_capability" (when torch is imported)}."""
    if cpuinfo is None:
        path = Path("/proc/cpuinfo")
        cpuinfo = path.read_text() if path.exists() else ""
    name, flags, ids = platform.processor() or platform.machine(), None, {}
    for line in cpuinfo.splitlines():
        key, _, value = (part.strip() for part in line.partition(":"))
        if not key and ids:
            break  # the first processor's block is enough
        if key == "model name":
            name = value
        elif key == "flags":
            flags = set(value.split())
        elif key in ("cpu family", "model") and value.isdigit():
            ids[key.removeprefix("cpu ")] = int(value)
    out = {"cpu": name, "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
           "flags": [f for f in FLAGS if f in (flags or ())], **ids}
    if "torch" in sys.modules:
        out["torch_cpu_capability"] = sys.modules["torch"].backends.cpu.get_cpu_capability()
    return out
