"""Killing a worker process at random points with SIGKILL and reopening its database: the
loop the durability tests share (``test_durability.py``, ``test_arrow_keys.py``)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import upkeep


def kill_and_reopen(script: Path, path: Path, argument: object, rounds: int,
                    pause: tuple[float, float], check: Callable[[object, int], None]) -> None:
    """Run ``script`` (a worker on the database at ``path`` that prints ``start i`` for the
    batch it starts from, then ``ack i`` as each batch commits, keeping ``next`` in the
    batch's metadata) ``rounds`` times, each killed after a random pause drawn from
    ``pause`` (seconds, seeded by ``argument``, which the worker gets too).  After each kill
    the database is reopened: every acknowledged batch is in, at most the one batch more,
    and ``check(db, committed batches)`` runs before it is closed."""
    rng = random.Random(argument)
    acked = -1
    for _ in range(rounds):
        proc = subprocess.Popen([sys.executable, str(script), str(path), str(argument)],
                                stdout=subprocess.PIPE, text=True)
        start = proc.stdout.readline().split()
        assert start[0] == "start" and int(start[1]) == acked + 1, start
        time.sleep(rng.uniform(*pause))
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        # an acknowledgement counts once its line is complete: the kill may cut the last one
        complete = out.split("\n")[:-1]
        acks = [int(line.split()[1]) for line in complete if line.startswith("ack ")]
        acked = max(acks, default=acked)
        db = upkeep.connect(path)
        committed = db.metadata().get("next", 0)
        assert acked + 1 <= committed <= acked + 2
        check(db, committed)
        db.close()
        acked = committed - 1
