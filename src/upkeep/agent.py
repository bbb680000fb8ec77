"""``upkeep subscribe``: a subscriber that keeps its subscription's result locally and
prints every change, resuming from its token after a disconnect, a server restart, or (with
a state file) its own restart.

The state file holds the subscription, the token and the rows together, replaced
atomically after every event: a subscriber killed at any point resumes from a token that
matches its rows, so no change is lost or applied twice.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections import Counter
from pathlib import Path

from .client import Client, Replica, decode_row
from .codecs.json_values import to_json
from .errors import Error


def _save(path: Path, replica: Replica) -> None:
    data = {"subscription": replica.info.id, "token": replica.token, "batch": replica.batch,
            "rows": [[[to_json(v) for v in r], n] for r, n in replica.rows.items()]}
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        with open(tmp, "w") as f:
            json.dump(data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise Error(f"state file {path} cannot be written: {exc.strerror or exc}") from None


def _check_writable(path: Path) -> None:
    """Refuse a state file that could not be saved before anything is followed."""
    if path.is_dir():
        raise Error(f"state file {path} is a directory")
    if not path.parent.is_dir():
        raise Error(f"state file {path}: its directory {path.parent} does not exist")
    if not os.access(path.parent, os.W_OK):
        raise Error(f"state file {path}: its directory {path.parent} is not writable")


def _restore(path: Path, replica: Replica) -> None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("subscription") != replica.info.id:
            return  # another query: start afresh
        rows = Counter({decode_row(r, replica.types): n for r, n in data["rows"]})
        token, batch = data["token"], data["batch"]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError,
            AttributeError) as exc:
        raise Error(f"state file {path} is not one upkeep subscribe wrote ({exc}); remove "
                    "it to start from a fresh snapshot") from None
    replica.rows, replica.token, replica.batch = rows, token, batch


def follow_subscription(url: str, query: str, token: str, *, state: Path | None = None,
                        batches: int | None = None, timeout: float = math.inf,
                        placed: bool = True) -> Replica:
    """Follow ``query`` from the server at ``url`` (``placed``: from the relay it places
    this subscriber at), printing each event as a JSON line.  Raises TimeoutError when
    ``timeout`` seconds pass first."""
    if state is not None:
        _check_writable(state)
    client = Client(url, token)
    replica = client.replica(query, placed=placed)
    if state is not None and state.exists():
        try:
            _restore(state, replica)
        except Error:
            replica.close()
            raise

    def emit(event: dict) -> None:
        if state is not None:
            _save(state, replica)
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()

    until = None if batches is None else (lambda r: r.batch >= batches)
    try:
        replica.follow(until=until, timeout=timeout, on_event=emit)
    finally:
        replica.close()
    return replica
