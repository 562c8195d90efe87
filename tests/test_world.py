"""The launcher's world: joining and leaving its process group."""

import subprocess
import sys
from pathlib import Path

import pytest

LEAVE_SCRIPT = """
import os
from datetime import timedelta

import torch.distributed as dist

from s2s2net_cli.world import World

def threads():
    return len(os.listdir("/proc/self/task"))

start = threads()
World().join(timedelta(seconds=60))
joined = threads()
import torch.distributed.nn  # as torch._dynamo does once the group is up (the model's runtime imports it)

gathered = [None]
dist.all_gather_object(gathered, {"tiles": 12})
World.leave()
print(start, joined, threads())
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
def test_leaving_the_group_stops_its_threads():
    # A group still alive after leave keeps gloo's threads to the end, and one of them letting a
    # finished collective go while Python shuts down aborts the rank (the two-rank runs' rare
    # "terminate called without an active exception"). Leaving must end them all.
    run = subprocess.run([sys.executable, "-c", LEAVE_SCRIPT], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    start, joined, left = map(int, run.stdout.split())
    assert joined > start  # the group runs threads of its own...
    assert left == start  # ...and none outlives it
