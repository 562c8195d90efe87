"""The launcher's world: this process's rank, its rank on its node, and how many ranks there are.

Launchers (deepspeed, torchrun) say it in the environment: RANK, LOCAL_RANK and WORLD_SIZE,
and where rank 0 listens, MASTER_ADDR and MASTER_PORT. The CLI reads it once
(``World.from_environment``) and hands it down; nothing else reads those variables. Without a
launcher the world is one process. ``join`` sets up the one process group of the world.
"""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass
from datetime import timedelta
from typing import Callable

from .rulebook import refuse


@dataclass(frozen=True)
class World:
    rank: int = 0
    local_rank: int = 0
    size: int = 1

    @classmethod
    def from_environment(cls, local_rank: int | None = None) -> "World":
        """The launcher's world (``local_rank``: DeepSpeed's --local_rank, where LOCAL_RANK is unset).
        UsageError for variables no launcher would set so: a rank outside the world, a world of
        several ranks with nowhere to meet (no MASTER_ADDR or MASTER_PORT)."""
        rank = _whole("RANK", 0, 0)
        if local_rank is None:
            local_rank = _whole("LOCAL_RANK", rank, 0)
        size = _whole("WORLD_SIZE", 1, 1)
        if rank >= size:
            raise refuse("S2N-WORLD-RANK", f"RANK={rank}", size=size)
        missing = [name for name in ("MASTER_ADDR", "MASTER_PORT") if size > 1 and not os.environ.get(name)]
        if missing:
            raise refuse("S2N-WORLD-NO-MASTER", f"WORLD_SIZE={size}", missing=" and ".join(missing))
        return cls(rank, local_rank, size)

    @property
    def is_shared(self) -> bool:
        """Whether there are several ranks."""
        return self.size > 1

    @property
    def leads(self) -> bool:
        """Rank 0 reports and writes what all ranks share."""
        return self.rank == 0

    def join(self, timeout: timedelta, backend: str = "gloo", init: Callable | None = None) -> None:
        """Join this world's process group, once. A world of one that no launcher started is
        given the environment torch.distributed reads (rank 0 of 1, a free port on this host).
        ``init(backend, timeout)`` sets the group up (default: torch.distributed's env://)."""
        import torch.distributed as dist  # heavy: only commands that join a group load it

        # torch.distributed.nn takes group.WORLD as the default of its functions' ``group``: imported
        # once the group is up (torch._dynamo imports it, and the model's runtime imports
        # torch._dynamo), it holds the group past destroy_process_group, gloo's threads outlive it,
        # and one that lets a finished collective go while Python shuts down aborts the process
        # ("terminate called without an active exception"). Imported first, its defaults are None.
        import torch.distributed.nn  # noqa: F401

        if dist.is_initialized():
            return
        _JOINED.update(environ={name: os.environ.get(name) for name in WORLD_VARIABLES}, excepthook=sys.excepthook)
        if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
            os.environ.update(RANK=str(self.rank), LOCAL_RANK=str(self.local_rank), WORLD_SIZE=str(self.size))
            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ.setdefault("MASTER_PORT", str(free_port()))
        os.environ.setdefault("LOCAL_RANK", str(self.local_rank))
        try:
            if init is None:
                dist.init_process_group(backend, init_method="env://", timeout=timeout)
            else:
                init(backend, timeout)
        except BaseException:
            _put_back()
            raise

    @staticmethod
    def leave(wait: bool = True) -> None:
        """Leave the process group; with ``wait``, once every rank is there: a rank that exits
        while gloo still runs aborts ("terminate called without an active exception")."""
        import torch.distributed as dist  # heavy, as in join

        if dist.is_initialized():
            if wait:
                dist.barrier()
            dist.destroy_process_group()
        _put_back()


WORLD_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
# What ``join`` changed of the process, put back by ``leave``: the world's variables it set (a
# notebook's next run, and the processes it starts, saw a world of one on a port long closed) and
# sys.excepthook, which torch.distributed wraps to add "[rank0]: " to every traceback (once more
# each run)
_JOINED: dict = {}


def _put_back() -> None:
    if not _JOINED:
        return
    for name, value in _JOINED.pop("environ").items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    sys.excepthook = _JOINED.pop("excepthook")


def _whole(name: str, default: int, least: int) -> int:
    """The environment variable ``name`` as a whole number of at least ``least`` (``default`` unset)."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = least - 1
    if value < least:
        raise refuse("S2N-WORLD-NOT-COUNT", f"{name}={text}", least=least)
    return value


def free_port() -> int:
    """A TCP port free on this host now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
