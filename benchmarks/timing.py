"""The benchmarks' one timer: the best of a few calls after a warm-up."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_of(call: Callable[[], object], repeats: int = 3) -> float:
    """Seconds of the fastest of ``repeats`` calls of ``call``, after one call not counted."""
    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)
