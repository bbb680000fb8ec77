"""The ``upkeep`` command: ``upkeep run``, ``upkeep explain`` and ``upkeep why`` on a pipeline
file, ``upkeep repair`` on a damaged database directory, and ``upkeep provenance`` /
``upkeep what-if`` on the provenance tables of a database directory or pipeline.

Errors a user can fix (a bad pipeline file, a rejected change record under
``--on-error stop``) are printed as one message and exit with status 1, never a traceback.
Ctrl-C or SIGTERM ends a run cleanly after the current batch (status 0); a second Ctrl-C
aborts at once (status 130).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console

from .errors import Error, UnsupportedError
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
    run.add_argument("--serve", type=Path, default=None, metavar="TOKENS",
                     help="also serve the pipeline's database while it runs, as upkeep serve "
                          "does (SQL and subscriptions over HTTP), with this tokens file")
    run.add_argument("--host", default="127.0.0.1", help="with --serve: address to listen on")
    run.add_argument("--port", type=_port, default=8765, help="with --serve: port to listen on")

    explain = commands.add_parser("explain", help="show each view's strategy and join tree")
    explain.add_argument("pipeline", type=Path, help="the pipeline file (TOML)")
    explain.add_argument("view", nargs="?", help="only this view")

    why = commands.add_parser(
        "why", help="why a row is in a view: its derivations from input rows",
        description="Open a durable database (a directory, or a pipeline's state_dir) and "
                    "print the row's provenance: for "
                    "a recursive view a minimal sum of products of base rows with its BDD "
                    "size, for a view created WITH (provenance = 'why') every derivation.")
    why.add_argument("target", type=_directory_argument,
                     help="the database directory, or a pipeline file (its state_dir)")
    why.add_argument("view", help="the view")
    why.add_argument("row", help='the row as a JSON array, e.g. \'["A", "C"]\'')

    provenance = commands.add_parser(
        "provenance", help="a row's update provenance in a provenance table",
        description="Print the UP[X] annotation (normal form) of a row of a table created "
                    "WITH (provenance = 'update'): which transactions and input rows made it.")
    provenance.add_argument("target", type=_directory_argument,
                            help="the database directory, or a pipeline file (its state_dir)")
    provenance.add_argument("table", help="the provenance table")
    provenance.add_argument("row", help='the row as a JSON array, e.g. \'["a", 1]\'')

    what_if = commands.add_parser(
        "what-if", help="a table or view as if transactions had aborted or input rows were gone",
        description="Print the rows a table or view would gain (+) and lose (-) had the "
                    "given transactions not run and the given input rows never been loaded, "
                    "computed from update provenance; the database is not changed.")
    what_if.add_argument("target", type=_directory_argument,
                         help="the database directory, or a pipeline file (its state_dir)")
    what_if.add_argument("name", help="the table or view")
    what_if.add_argument("--abort", type=int, nargs="+", action="extend", default=[],
                         metavar="TXN",
                         help="transaction ids (see `upkeep provenance`: T<id>); repeatable")
    what_if.add_argument("--abort-txn", nargs="+", action="extend", default=[],
                         metavar="SOURCE_TXN",
                         help="source transaction ids: the 'txn' of a pipeline's change "
                              "records (every transaction committed with it); repeatable")
    what_if.add_argument("--without", nargs=2, action="append", default=[],
                         metavar=("TABLE", "ROW"), help="an input row, as a JSON array")

    plan = commands.add_parser(
        "plan", help="which subscriptions can be fed from other subscriptions",
        description="Plan the dissemination of subscriptions (CREATE VIEW name AS SELECT ... "
                    "over the tables' CREATE TABLE statements, each with a PRIMARY KEY): "
                    "rewritings of each subscription over the others, the configuration of "
                    "least utilisation under the fan-out bounds (an integer program), then "
                    "lower latency (LOGA). Prints each subscription's level, what feeds it, "
                    "its fan-out, utilisation and latency estimate.")
    plan.add_argument("subscriptions", type=Path, help="SQL file of CREATE VIEW statements")
    plan.add_argument("--tables", type=Path, required=True,
                      help="SQL file of the published tables' CREATE TABLE statements")
    plan.add_argument("-k", type=_at_least(1), default=30,
                      help="rewritings kept per subscription (the paper's 30)")
    plan.add_argument("--bound", type=_at_least(0), default=None,
                      help="the most rewritings one subscription may feed in the least "
                           "utilisation configuration; lowering latency may go to "
                           "--loga-factor times it (default: no bound)")
    plan.add_argument("--source-bound", type=_at_least(0), default=None,
                      help="the most subscriptions the server feeds itself, with the same "
                           "--loga-factor (default: no bound)")
    plan.add_argument("--loga-factor", type=_factor, default=1.5, metavar="FACTOR",
                      help="lowering latency keeps the bounds times FACTOR, rounded down "
                           "(default 1.5, the paper's; 1 keeps the bounds hard)")
    plan.add_argument("--candidates", type=_at_least(0), default=32,
                      help="subscriptions considered to feed each one, the most specific "
                           "first (default 32; 0: all, which grows with the square of the "
                           "subscriptions)")
    plan.add_argument("--latency-budget", type=_not_negative, default=None, metavar="FRACTION",
                      help="the most lowering latency may add to the utilisation, as a "
                           "fraction of it (e.g. 0.07; default: no limit)")
    plan.add_argument("--sql", action="store_true", help="also print each rewriting's SQL")

    serve = commands.add_parser(
        "serve", help="serve a database's SQL and subscriptions over HTTP",
        description="Serve a database directory: SQL over HTTP (JSON or Arrow) and "
                    "subscriptions (a snapshot, then every committed change, over Server-Sent "
                    "Events or WebSocket, each with a resume token). Every request needs a "
                    "bearer token of the tokens file, which also grants the tables each "
                    "token may read and write (docs/service.md).")
    serve.add_argument("database", type=_directory_argument, help="the database directory")
    serve.add_argument("--engine", choices=("local", "spark"), default="local",
                       help="the engine that keeps the database (default local; spark: "
                            "its working directory, on local[2] unless SPARK_MASTER is set)")
    serve.add_argument("--schema", type=Path, default=None,
                       help="with --engine spark: a SQL file of the CREATE TABLE statements "
                            "(a Spark connection's owner declares its tables)")
    serve.add_argument("--tokens", type=Path, required=True, help="the tokens file (JSON)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--port", type=_port, default=8765, help="port to listen on")
    serve.add_argument("--retention", type=_at_least(1), default=100_000,
                       help="batches of subscription changes kept for clients to resume")
    serve.add_argument("--fanout", type=_at_least(0), default=None,
                       help="members the server feeds itself before placing the rest at "
                            "relays only (default: no bound)")
    serve.add_argument("--capacity", type=_at_least(1), default=20,
                       help="a relay's fan-out bound when it names none (default 20)")
    serve.add_argument("--replan", type=_not_negative, default=60.0,
                       help="seconds between re-optimisations of the placements (ILP + "
                            "LOGA; 0 or inf: never; default 60)")
    serve.add_argument("--statement-seconds", type=_not_negative, default=60.0,
                       help="seconds one request's query may run before it is stopped "
                            "(requests run one at a time; 0 or inf: no limit; default 60)")

    subscribe = commands.add_parser(
        "subscribe", help="follow a subscription of an upkeep server",
        description="Subscribe to a query on a server and print its snapshot and every change "
                    "as JSON lines; reconnects from its resume token when the connection or "
                    "the server drops. With --state the token and rows are kept in a file, so "
                    "a restarted subscriber resumes where it stopped.")
    subscribe.add_argument("url", help="the server, e.g. http://127.0.0.1:8765")
    subscribe.add_argument("query", help="SELECT-PROJECT-JOIN over the published tables")
    subscribe.add_argument("--token", required=True, help="bearer token (or @FILE)")
    subscribe.add_argument("--state", type=Path, default=None,
                           help="JSON file keeping the replica and its token")
    subscribe.add_argument("--batches", type=_at_least(0), default=None,
                           help="stop once the replica is at this batch")
    subscribe.add_argument("--placed", action=argparse.BooleanOptionalAction, default=True,
                           help="let the server place it at a relay that can feed it "
                                "(default); --no-placed: follow the server itself")
    subscribe.add_argument("--timeout", type=_not_negative, default=float("inf"),
                           help="stop after this many seconds (an error if --batches "
                                "is given and not reached by then)")

    relay = commands.add_parser(
        "relay", help="follow a subscription and serve the subscriptions computable from it",
        description="A subscriber that serves other subscribers (a site of the Delta paper): "
                    "it joins SERVER's placements with QUERY, follows it where the server "
                    "places it (the server or another relay), and serves, with the endpoints "
                    "of upkeep serve, every subscription that can be computed from QUERY's "
                    "rows; the server places such subscribers at it, up to its capacity. "
                    "Tokens are the server's, so its subscribers resume at the server if it "
                    "leaves or fails (docs/service.md).")
    relay.add_argument("source", help="the server, e.g. http://127.0.0.1:8765")
    relay.add_argument("query", help="the subscription to follow")
    relay.add_argument("--token", required=True, help="bearer token at the server (or @FILE)")
    relay.add_argument("--tokens", type=Path, required=True,
                       help="the tokens file of the relay's own subscribers (JSON)")
    relay.add_argument("--host", default="127.0.0.1", help="address to listen on")
    relay.add_argument("--port", type=_port, default=8766, help="port to listen on")
    relay.add_argument("--name", default=None,
                       help="its member name at the server (default: one is drawn)")
    relay.add_argument("--capacity", type=_at_least(1), default=None,
                       help="how many subscribers it feeds at most (default: the server's)")
    relay.add_argument("--no-compose", dest="compose", action="store_false",
                       help="follow one feeder only (by default the server may feed it by a "
                            "rewriting over several relays, which it computes itself)")

    repair = commands.add_parser(
        "repair", help="keep the intact records of a damaged database directory before the "
                       "damage",
        description="Rewrite the damaged log of the directory with its intact records before "
                    "the first damage and report what was dropped (the batches in the dropped "
                    "records are lost; records after the damage are dropped too, since one may "
                    "depend on a lost record). A damaged snapshot cannot be repaired: restore "
                    "it from a backup.")
    repair.add_argument("target", type=_directory_argument,
                        help="the database directory, or a pipeline file (its state_dir)")
    return parser


def _relay(args: argparse.Namespace, console: Console) -> None:
    """``upkeep relay``: serve until interrupted."""
    from .service import Tokens
    from .service.relay import RelaySite

    relay = RelaySite(args.source, _bearer(args.token), args.query, Tokens.load(args.tokens), host=args.host,
                      port=args.port, name=args.name, capacity=args.capacity,
                      compose=args.compose).start()
    console.print(f"upkeep: relaying subscription {relay.info.id} of {args.source} on "
                  f"{relay.url}", highlight=False, markup=False)
    stop = threading.Event()
    with _graceful_stop(stop, console):
        while not stop.wait(0.5):
            pass
    relay.stop()


def _repair(target: Path) -> str:
    """``upkeep repair``: what was kept and dropped."""
    from .storage import repair

    if target.is_file():
        target = Path(load_config(target).state_dir)
    if not target.is_dir():
        raise Error(f"{target} is not a database directory")
    if not _holds_database(target):
        raise Error(f"{target} holds no upkeep database (no log or snapshot): nothing to "
                    "repair")
    report = repair(target)
    lines = [f"kept {report.kept} intact record(s) in {target}"]
    lines += [f"dropped {size} damaged byte(s) of {name} at byte {offset}"
              for name, offset, size in report.dropped]
    lines += [f"dropped {count} intact record(s) of {name} after the damage (they may "
              f"depend on a lost one)" for name, count in report.after_damage]
    if report.torn:
        lines.append(f"cut a torn tail of {report.torn} byte(s)")
    if not report.dropped and not report.torn:
        lines.append("nothing was damaged")
    return "\n".join(lines)


def _json_row(text: str) -> list:
    import json

    from .io.errors import PipelineError

    try:
        row = json.loads(text)
    except (ValueError, RecursionError) as exc:  # a JSONDecodeError, an over-long integer
        raise PipelineError(f"the row must be a JSON array: {exc}") from None
    if not isinstance(row, list):
        raise PipelineError(f"the row must be a JSON array, not {text}")
    return row


def _typed_row(db, name: str, row: list) -> list:
    """A row given on the command line read as the commands print rows: each value as
    :func:`~upkeep.codecs.json_values.to_json` spells one of its column's type
    (``"NaN"``, ``"Infinity"`` in a DOUBLE column).  A value that is no such spelling is
    left for the database to report."""
    from .codecs.json_values import from_json

    try:
        columns = db.schema_of(name)
    except Error:
        return row  # no such table or view: reported by the command itself
    if len(columns) != len(row):
        return row
    out = []
    for value, (_, typ) in zip(row, columns, strict=True):
        try:
            out.append(from_json(value, typ))
        except (ValueError, TypeError):
            out.append(value)
    return out


def _directory_argument(value: str) -> Path:
    """A database directory (or pipeline file) on the command line: a local path or a local
    ``file:`` URI; another URI is refused as ``upkeep.connect`` refuses it, where a path
    made of it would name a local directory ``s3a:/bucket/...``."""
    from .engine import database_directory

    try:
        return Path(database_directory(value))
    except UnsupportedError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _open_target(target: Path):
    """The durable database of a directory, or of a pipeline file's state_dir."""
    import upkeep

    if target.is_file():
        from .io.errors import PipelineError
        from .pipeline.config import MEMORY
        from .pipeline.runner import open_database

        config = load_config(target)
        if config.state_dir == MEMORY:
            raise PipelineError(f"{config.file} keeps no state (state_dir is :memory:), so "
                                "there is nothing to ask; run it with a state directory first")
        if not _holds_database(Path(config.state_dir)):
            raise PipelineError(f"{config.file}: its state directory {config.state_dir} holds "
                                "no database yet, so there is nothing to ask; run the "
                                "pipeline first (upkeep run)")
        return open_database(config)
    if not target.is_dir():
        raise Error(f"{target} is not a database directory or a pipeline file")
    if not _holds_database(target):  # asking must not make a database of it
        raise Error(f"{target} holds no upkeep database (no log or snapshot)")
    return upkeep.connect(target)


def _holds_database(path: Path) -> bool:
    """Whether ``path`` is a directory holding a database's log or snapshot."""
    try:
        return any(p.name.startswith(("wal-", "snapshot-")) for p in path.iterdir())
    except OSError:
        return False


def _run_served(config, args: argparse.Namespace, console: Console,
                stop: threading.Event) -> None:
    """``upkeep run --serve``: the pipeline's database served while the pipeline runs; the
    pipeline's batches and the server's requests take turns on the server's lock."""
    from .pipeline.runner import open_database
    from .pipeline.schema import ensure_schema
    from .service import Server

    if config.engine != "local":
        raise UnsupportedError("upkeep run --serve runs the local engine's pipeline; serve "
                               "a Spark database with upkeep serve --engine spark")
    check_engine(config)  # (before its database is opened: a URI is refused, not made)
    db = open_database(config)
    try:
        ensure_schema(db, config)
        server = Server(db, args.serve, host=args.host, port=args.port).start()
        console.print(f"upkeep: serving the pipeline's database on {server.url}",
                      highlight=False, markup=False)
        try:
            with _graceful_stop(stop, console):
                PipelineRunner(config, db=db, lock=server.hub.lock, console=console,
                               progress=args.progress, stop=stop).run()
        finally:
            server.stop()
    finally:
        db.close()


def _served_database(args: argparse.Namespace):
    """What ``upkeep serve`` serves: the local directory itself, or a Spark connection on
    it with the schema file's tables declared."""
    if args.engine == "local":
        if args.schema is not None:
            raise UnsupportedError("--schema is for --engine spark (a local database keeps "
                                   "its tables)")
        return args.database
    from .engine import connect

    options = {"master": os.environ["SPARK_MASTER"]} if "SPARK_MASTER" in os.environ else {}
    db = connect(args.database, engine="spark", **options)
    try:
        if args.schema is not None:
            db.execute(_text(args.schema))
    except BaseException:
        db.close()
        raise
    return db


def _provenance(target: Path, table: str, row_text: str) -> str:
    """``upkeep provenance``: one row's annotation."""
    row = _json_row(row_text)
    db = _open_target(target)
    try:
        annotation = str(db.provenance(table, _typed_row(db, table, row)))
        return annotation if annotation != "0" else f"0 (the row was never in {table})"
    finally:
        db.close()


def _what_if(target: Path, name: str, abort: list[int], without: list[list[str]],
             source_txns: list[str] = ()) -> str:
    """``upkeep what-if``: the change of a table or view in the hypothetical world, each
    row as a JSON array (as ``--without`` reads them)."""
    from .codecs.json_values import dumps, to_json

    rows = [(table, _json_row(text)) for table, text in without]
    db = _open_target(target)
    try:
        by_source: dict[str, list[int]] = {}
        for t, m in db.transactions().items():
            if "txn" in m:
                by_source.setdefault(m["txn"], []).append(t)
        for source in source_txns:
            if source not in by_source:
                raise Error(f"no committed transaction has source txn {source!r} (a pipeline "
                            "records the 'txn' of its change records on provenance tables)")
            abort = [*abort, *by_source[source]]
        rows = [(table, _typed_row(db, table, row)) for table, row in rows]
        world = db.what_if(name, abort=abort, without=rows)
    finally:
        db.close()
    lines = [f"+ {dumps(to_json(r))}" for r in sorted(world.added, key=repr)]
    lines += [f"- {dumps(to_json(r))}" for r in sorted(world.removed, key=repr)]
    return "\n".join(lines) or f"{name} would not change"


def _port(text: str) -> int:
    """A TCP port argument (0: any free one)."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0-65535)")
    return port


def _at_least(least: int) -> Callable[[str], int]:
    """An integer argument of at least ``least`` (a count or a bound)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"{value} is less than {least}")
        return value
    return parse


def _not_negative(text: str) -> float:
    """A number argument of at least 0 (a fraction, seconds; ``inf`` allowed)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0:  # NaN too
        raise argparse.ArgumentTypeError(f"{text} is not a number >= 0")
    return value


def _factor(text: str) -> float:
    """A finite number argument of at least 1 (a bound's multiplier)."""
    value = _not_negative(text)
    if not 1 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"{text} is not a finite number >= 1")
    return value


def _text(path: Path) -> str:
    """A text file given on the command line, or an :class:`Error` naming it."""
    try:
        return path.read_text()
    except OSError as exc:
        raise Error(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise Error(f"{path} is not UTF-8 text (byte {exc.start})") from None


def _bearer(token: str) -> str:
    """A ``--token`` argument: the token itself, or ``@FILE`` holding it."""
    return _text(Path(token[1:])).strip() if token.startswith("@") else token


@contextmanager
def _reaching(url: str) -> Iterator[None]:
    """A server that cannot be reached is an :class:`Error` naming it, not a traceback."""
    import httpx

    try:
        yield
    except httpx.TransportError as exc:
        raise Error(f"cannot reach {url}: {exc or type(exc).__name__}") from None


def _subscribe(args: argparse.Namespace) -> None:
    """``upkeep subscribe``: follow until ``--batches`` is reached or ``--timeout``
    passes (an error only if ``--batches`` was not reached)."""
    from .agent import follow_subscription

    token = _bearer(args.token)
    with _reaching(args.url):
        try:
            follow_subscription(args.url, args.query, token, state=args.state,
                                batches=args.batches, timeout=args.timeout,
                                placed=args.placed)
        except TimeoutError as exc:
            if args.batches is not None:
                raise Error(f"{exc}, not at batch {args.batches}") from None


def _plan(args) -> str:
    """``upkeep plan``: the dissemination configuration of a file of subscriptions."""
    from .dissemination.plan import load, plan

    tables, subscriptions = _text(args.tables), _text(args.subscriptions)
    loaded = load(tables, subscriptions)
    if not loaded:  # empty, or comments only
        raise Error(f"{args.subscriptions} holds no subscriptions")
    budget = args.latency_budget
    with Console(stderr=True).status("planning") as status:
        result = plan(loaded, k=args.k, bound=args.bound,
                      source_bound=args.source_bound, loga_factor=args.loga_factor,
                      candidates=args.candidates or None,
                      latency_budget=budget,
                      on_phase=lambda phase: status.update(f"planning: {phase}"))
    text = result.describe()
    if args.sql:
        text += "\n" + "\n".join(f"{v}: {result.sql(v) or 'from the publisher'}"
                                  for v in result.rg.views)
    return text


def _why(target: Path, view: str, row_text: str) -> str:
    """``upkeep why``: the explanation of one row, from a database directory or a
    pipeline's state directory."""
    from .io.errors import PipelineError

    row = _json_row(row_text)
    db = _open_target(target)
    try:
        if view.lower() not in db.views():
            raise PipelineError(f"no view named {view!r} in {target} (views: "
                                f"{', '.join(db.views()) or 'none'})")
        return str(db.why(view, _typed_row(db, view, row)))
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
        if args.command == "provenance":
            console.print(_provenance(args.target, args.table, args.row), highlight=False,
                          markup=False, soft_wrap=True)
            return 0
        if args.command == "serve":
            from .service import serve

            database = _served_database(args)
            try:
                serve(database, args.tokens, host=args.host, port=args.port,
                      retention=args.retention, fanout=args.fanout, capacity=args.capacity,
                      replan=args.replan, statement_seconds=args.statement_seconds,
                      on_ready=lambda server: console.print(
                          f"upkeep: serving {args.database} on {server.url}",
                          highlight=False, markup=False, soft_wrap=True))
            finally:
                if database is not args.database:
                    database.close()
            return 0
        if args.command == "subscribe":
            _subscribe(args)
            return 0
        if args.command == "relay":
            with _reaching(args.source):
                _relay(args, console)
            return 0
        if args.command == "plan":
            console.print(_plan(args), highlight=False, markup=False, soft_wrap=True)
            return 0
        if args.command == "what-if":
            console.print(_what_if(args.target, args.name, args.abort, args.without,
                                   args.abort_txn),
                          highlight=False, markup=False, soft_wrap=True)
            return 0
        if args.command == "why":
            console.print(_why(args.target, args.view, args.row), highlight=False,
                          soft_wrap=True, markup=False)
            return 0
        config = load_config(args.pipeline)
        if args.command == "explain":
            console.print(explain_pipeline(config, args.view), highlight=False, soft_wrap=True,
                          markup=False)
            return 0
        config = config.replace(follow=args.follow, on_error=args.on_error,
                                dead_letter=args.dead_letter, state_dir=args.state_dir,
                                engine=args.engine)
        stop = threading.Event()
        if args.serve is not None:
            _run_served(config, args, console, stop)
            return 0
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
    except (Error, OSError) as exc:  # an unreadable or vanished file: named, no traceback
        errors.print(f"upkeep: error: {exc}", style="red", highlight=False, soft_wrap=True,
                     markup=False)
        return 1
    except KeyboardInterrupt:
        errors.print("upkeep: interrupted", style="red")
        return 130


if __name__ == "__main__":
    sys.exit(main())
