"""The launcher's world: joining and leaving its process group."""

import subprocess
import sys
from pathlib import Path

import numpy as np
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


def test_a_half_set_launcher_environment_is_one_line_before_any_work(tmp_path, monkeypatch):
    """RANK and WORLD_SIZE set by hand (a SLURM script, say) without MASTER_ADDR ended in
    torch.distributed's traceback, WORLD_SIZE=abc in int()'s, and RANK=5 of 2 waited for a world
    that never came. Each is one line naming the variable, exit 2, nothing written."""
    from s2s2net_cli.errors import UsageError
    from s2s2net_cli.world import World

    from .conftest import run_cli, write_raster

    scene = write_raster(tmp_path / "s.tif", np.full((6, 40, 40), 900, "uint16"), nodata=0)
    cases = [
        ({"WORLD_SIZE": "2", "RANK": "0"}, "WORLD_SIZE=2: several ranks meet where rank 0 listens, but MASTER_ADDR "
                                           "and MASTER_PORT unset", "S2N-WORLD-NO-MASTER"),
        ({"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "127.0.0.1"}, "but MASTER_PORT unset", "S2N-WORLD-NO-MASTER"),
        ({"WORLD_SIZE": "abc"}, "WORLD_SIZE=abc: is not a whole number of 1 or more", "S2N-WORLD-NOT-COUNT"),
        ({"WORLD_SIZE": "0"}, "WORLD_SIZE=0: is not a whole number of 1 or more", "S2N-WORLD-NOT-COUNT"),
        ({"RANK": "-1"}, "RANK=-1: is not a whole number of 0 or more", "S2N-WORLD-NOT-COUNT"),
        ({"WORLD_SIZE": "2", "RANK": "5", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999"},
         "RANK=5: lies outside a world of WORLD_SIZE=2 ranks", "S2N-WORLD-RANK"),
    ]
    for variables, message, code in cases:
        for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
            monkeypatch.delenv(name, raising=False)
        for name, value in variables.items():
            monkeypatch.setenv(name, value)
        out = tmp_path / "w.tif"
        r = run_cli("predict", scene, "-o", out, timeout=120)
        assert r.returncode == 2, (variables, r.stderr)
        assert r.stderr.strip().splitlines() == [r.stderr.strip()] and message in r.stderr and code in r.stderr
        assert "Traceback" not in r.stderr and not out.exists()
        with pytest.raises(UsageError, match=message) as refused:
            World.from_environment()
        assert refused.value.finding.code == code
    for name in ("WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RANK", "0")  # rank 0 of a world of one: what it says
    assert World.from_environment() == World(0, 0, 1)
