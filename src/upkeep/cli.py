"""The ``upkeep`` command: ``upkeep run``, ``upkeep explain`` and ``upkeep why`` on a pipeline
file, and ``upkeep repair`` on a damaged database directory.

Errors a user can fix (a bad pipeline file, a rejected change record under
``--on-error stop``) are printed as one message and exit with status 1, never a traceback.
Ctrl-C or SIGTERM ends a run cleanly after the current batch (status 0); a second Ctrl-C
aborts at once (status 130).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console

from .errors import Error
from .pipeline import PipelineRunner, explain_pipeline, load_config
from .pipeline.config import ENGINES, ON_ERROR
from .pipeline.progress import MODES
from .pipeline.runner import check_engine


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="upkeep", description="Keep SQL views fresh over streams of change records.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="run a pipeline",
                              description="Apply the pipeline's change records in batches and "
                                          "deliver its views to their sinks.")
    run.add_argument("pipeline", type=Path, help="the pipeline file (TOML)")
    run.add_argument("--follow", action=argparse.BooleanOptionalAction, default=None,
                     help="keep watching the source for new records until stopped "
                          "(default: source.follow)")
    run.add_argument("--on-error", choices=ON_ERROR, default=None,
                     help="what to do with a bad change record (default: on_error, or stop)")
    run.add_argument("--dead-letter", type=Path, default=None, metavar="PATH",
                     help="the file rejected records go to with --on-error dead-letter")
    run.add_argument("--state-dir", default=None, metavar="DIR",
                     help="the durable database directory (default: state_dir); "
                          "':memory:' keeps no state")
    run.add_argument("--engine", choices=ENGINES, default=None,
                     help="the engine that maintains the views: local (in this process) or "
                          "spark (a Structured Streaming query; see docs/spark.md)")
    run.add_argument("--progress", choices=MODES, default="auto",
                     help="live display, plain lines, or none (default: live on a terminal)")

    explain = commands.add_parser("explain", help="show each view's strategy and join tree")
    explain.add_argument("pipeline", type=Path, help="the pipeline file (TOML)")
    explain.add_argument("view", nargs="?", help="only this view")

    why = commands.add_parser(
        "why", help="why a row is in a recursive view: its minimal derivations from base rows",
        description="Open the pipeline's durable state and print the row's provenance as a "
                    "minimal sum of products of base rows, with its BDD size.")
    why.add_argument("pipeline", type=Path, help="the pipeline file (TOML)")
    why.add_argument("view", help="the view")
    why.add_argument("row", help='the row as a JSON array, e.g. \'["A", "C"]\'')

    repair = commands.add_parser(
        "repair", help="keep every intact record of a damaged database directory",
        description="Rewrite each damaged log of the directory with its intact records only "
                    "and report what was dropped (the batches in the dropped records are "
                    "lost). A damaged snapshot cannot be repaired: restore it from a backup.")
    repair.add_argument("target", type=Path,
                        help="the database directory, or a pipeline file (its state_dir)")
    return parser


def _repair(target: Path) -> str:
    """``upkeep repair``: what was kept and dropped."""
    from .storage import repair

    if target.is_file():
        target = Path(load_config(target).state_dir)
    if not target.is_dir():
        raise Error(f"{target} is not a database directory")
    report = repair(target)
    lines = [f"kept {report.kept} intact record(s) in {target}"]
    lines += [f"dropped {size} damaged byte(s) of {name} at byte {offset}"
              for name, offset, size in report.dropped]
    if report.torn:
        lines.append(f"cut a torn tail of {report.torn} byte(s)")
    if not report.dropped and not report.torn:
        lines.append("nothing was damaged")
    return "\n".join(lines)


def _why(config, view: str, row_text: str) -> str:
    """``upkeep why``: the explanation of one row, from the pipeline's state directory."""
    import json

    from .io.errors import PipelineError
    from .pipeline.config import MEMORY
    from .pipeline.runner import open_database

    if config.state_dir == MEMORY:
        raise PipelineError(f"{config.file} keeps no state (state_dir is :memory:), so there "
                            "is nothing to explain; run it with a state directory first")
    try:
        row = json.loads(row_text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise PipelineError(f"the row must be a JSON array: {exc}") from None
    if not isinstance(row, list):
        raise PipelineError(f"the row must be a JSON array, not {row_text}")
    db = open_database(config)
    try:
        if view.lower() not in db.views():
            raise PipelineError(f"no view named {view!r} in {config.state_dir} (views: "
                                f"{', '.join(db.views()) or 'none'})")
        return str(db.why(view, row))
    finally:
        db.close()


@contextmanager
def _graceful_stop(stop: threading.Event, console: Console) -> Iterator[None]:
    """SIGINT/SIGTERM set ``stop`` (the run ends after its current batch); a second
    SIGINT raises KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: object) -> None:
        if stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop.set()
        console.print("stopping after the current batch (Ctrl-C again aborts)", style="yellow")

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def main(argv: Sequence[str] | None = None, spark=None) -> int:
    """Entry point of the ``upkeep`` console script; returns the exit status.  ``spark``:
    the session a Spark pipeline runs on (``spark-submit``, :mod:`upkeep.spark.submit`),
    instead of one made from the pipeline's ``[spark]`` settings."""
    args = build_parser().parse_args(argv)
    console = Console()
    errors = Console(stderr=True)
    try:
        if args.command == "repair":
            console.print(_repair(args.target), highlight=False, markup=False)
            return 0
        config = load_config(args.pipeline)
        if args.command == "why":
            console.print(_why(config, args.view, args.row), highlight=False, soft_wrap=True,
                          markup=False)
            return 0
        if args.command == "explain":
            console.print(explain_pipeline(config, args.view), highlight=False, soft_wrap=True,
                          markup=False)
            return 0
        config = config.replace(follow=args.follow, on_error=args.on_error,
                                dead_letter=args.dead_letter, state_dir=args.state_dir,
                                engine=args.engine)
        stop = threading.Event()
        if config.engine == "spark":
            from .spark.pipeline import SparkPipelineRunner

            runner = SparkPipelineRunner(config, console=console, stop=stop, spark=spark)
            with _graceful_stop(stop, console):
                runner.run()
            return 0
        check_engine(config)
        with _graceful_stop(stop, console):
            PipelineRunner(config, console=console, progress=args.progress, stop=stop).run()
        return 0
    except Error as exc:
        errors.print(f"upkeep: error: {exc}", style="red", highlight=False, soft_wrap=True,
                     markup=False)
        return 1
    except KeyboardInterrupt:
        errors.print("upkeep: interrupted", style="red")
        return 130


if __name__ == "__main__":
    sys.exit(main())
