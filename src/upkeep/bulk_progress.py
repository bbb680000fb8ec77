"""Progress of long bulk work in a session: loading many rows, building a view over them.

A bar appears on standard error when the work is big (``BULK_ROWS`` rows or more) and
standard error is a terminal; ``UPKEEP_PROGRESS=1`` forces it (logs, tests) and
``UPKEEP_PROGRESS=0`` silences it.  Small work never shows one, so scripts and tests stay
quiet.  The bar is transient: it disappears when the work ends.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

BULK_ROWS = 200_000
STEP = 1 << 16  # rows between two advances of a row counter's bar


def _enabled() -> bool:
    forced = os.environ.get("UPKEEP_PROGRESS")
    if forced is not None:
        return forced not in ("", "0")
    return sys.stderr.isatty()


@contextmanager
def bulk_progress(description: str, rows: int | None,
                  counted: bool = True) -> Iterator[Callable[[int], None]]:
    """A bar for work over ``rows`` rows; yields ``advance(n)``.  ``counted=False``: the
    work reports no progress of its own (a view build), so the bar is a spinner with the
    elapsed time."""
    if rows is None or rows < BULK_ROWS or not _enabled():
        yield lambda n: None
        return
    console = Console(file=sys.stderr, force_terminal=os.environ.get("UPKEEP_PROGRESS") == "1")
    columns = [SpinnerColumn(), TextColumn("{task.description}")]
    if counted:
        columns += [BarColumn(), MofNCompleteColumn()]
    with Progress(*columns, TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task(description, total=rows if counted else None)
        yield lambda n: bar.advance(task, n)
