"""Running a pipeline: read change records, commit them in batches, deliver view deltas.

Each batch commits in one ``db.transaction(metadata=...)`` whose metadata carries the
position of the batch's last record; on start the runner reads ``db.metadata()`` and the
source resumes right after it, so with a durable state directory no record is applied
twice or skipped.  A batch the engine rejects is replayed one record at a time (rolled
back) to name the bad records: ``on_error = "stop"`` rejects the batch whole and raises
:class:`RecordError`; ``skip`` and ``dead-letter`` commit the batch's good records (once)
and report or dead-letter the bad ones.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from rich.console import Console

from ..engine import Engine, connect
from ..errors import Error
from ..io.apply import Applier, BadRecord, Change
from ..io.deadletter import DeadLetter
from ..io.errors import PipelineError, RecordError
from ..io.formats import BOM, READERS, format_of
from ..io.locations import is_uri
from ..io.records import ChangeRecord, Position
from ..io.sinks import Sink, make_sink
from .batching import batches
from .config import MEMORY, PipelineConfig
from .progress import Progress
from .schema import ensure_schema
from .source import FileSource
from .stats import RunStats, ViewStats


def _holds_change_records(path: Path) -> bool:
    """Whether ``path``'s first record is a change record and not a dead letter: what a
    sink writes (JSON lines of batch, weight and row, a view's columns in Parquet) is not
    one, and a dead letter carries ``_error``."""
    fmt = format_of(path)
    if fmt is None:
        return False
    for record in READERS[fmt](path, path.name).read(final=True):
        if record.error is not None:
            return False
        if fmt != "jsonl":
            return True
        with path.open("rb") as f:  # the line it was read from: has it an _error?
            for _ in range(record.position.number):
                line = f.readline()
        try:
            return "_error" not in json.loads(line.removeprefix(BOM))
        except ValueError:
            return False
    return False


def check_engine(config: PipelineConfig) -> None:
    """This runner is the local engine's (``upkeep.spark.pipeline`` runs the spark engine),
    whose files are local: a URI (a Hadoop file system's) is the spark engine's."""
    if config.engine != "local":
        raise PipelineError(f"engine {config.engine!r}: use upkeep.spark.pipeline."
                            f"SparkPipelineRunner (upkeep run --engine spark does)")
    named = [("source.path", config.source.path), ("state_dir", config.state_dir),
             *((sink.label, sink.path) for sink in config.sinks)]
    for what, where in named:
        if is_uri(where):
            raise PipelineError(f"{config.file}: {what}: {where} is a URI: the local engine "
                                f"keeps its files on local paths; Hadoop file systems are "
                                f"for the spark engine (engine = \"spark\")")


def open_database(config: PipelineConfig) -> Engine:
    """The pipeline's database: durable in ``state_dir`` (or in memory for ``:memory:``)."""
    if config.state_dir == MEMORY:
        return connect()
    try:
        return connect(config.state_dir)
    except Error as exc:
        raise PipelineError(f"cannot open the state directory {config.state_dir}: {exc}") from None
    except OSError as exc:
        raise PipelineError(f"cannot open the state directory {config.state_dir}: {exc}") from None


class PipelineRunner:
    """Runs one pipeline until its source is exhausted (or, following, until stopped).

    ``db`` may be passed in (it is then left open, for inspection); ``stop`` is an event
    that ends the run cleanly after the current batch.
    """

    def __init__(self, config: PipelineConfig, *, db: Engine | None = None,
                 console: Console | None = None, progress: str = "auto",
                 stop: threading.Event | None = None, progress_interval: float = 5.0,
                 lock: AbstractContextManager | None = None):
        self.config = config
        # held around each batch (and the set-up) when others share ``db``: a server's lock
        self._lock = lock if lock is not None else nullcontext()
        self.db = db
        self._own_db = db is None
        self.console = console or Console()
        self.progress_mode = progress
        self.progress_interval = progress_interval
        self.stop = stop or threading.Event()
        self.sinks: list[Sink] = []
        self.stats = RunStats(config.name, "", "in memory" if config.state_dir == MEMORY
                              else config.state_dir)
        self.dead_letter = DeadLetter(config.dead_letter or Path("dead-letter.jsonl"))
        self._collected: dict[str, list[tuple[tuple, int]]] = {}
        self._unsubscribe: list[Callable[[], None]] = []
        self._totals = {"applied": 0, "rejected": 0}
        self._progress: Progress | None = None
        self._per_txn = False  # one commit per source transaction (provenance tables)
        self._offset: dict | None = None  # where the source stands (the last commit's)

    # ------------------------------------------------------------ the run
    def run(self) -> RunStats:
        """Run to the end of the source (or until stopped); returns the run's counters."""
        check_engine(self.config)
        if self.db is None:
            self.db = open_database(self.config)
        try:
            return self._run(self.db)
        finally:
            self._close()

    def _close(self) -> None:
        with self._lock:
            for unsubscribe in self._unsubscribe:
                unsubscribe()
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as exc:  # noqa: BLE001 - report, keep closing the others
                self.console.print(f"closing {sink.label} failed: {exc}", markup=False)
        self.dead_letter.close()
        if self._own_db:
            self.db.close()

    def _run(self, db: Engine) -> RunStats:
        with self._lock:
            self._start(db)
        outputs = [self.config.dead_letter, *(s.options["path"] for s in self.config.sinks
                                               if "path" in s.options)]
        source = FileSource(self.config.source, self._offset, stop=self.stop, warn=self._note,
                            outputs=outputs)
        self.stats.source = source.describe()
        self.stats.lag = source.lag()
        with Progress(self.stats, self.sinks, self.progress_mode, self.console,
                      self.progress_interval) as progress:
            self._progress = progress
            try:
                for batch in batches(source, self.config.batch, self.stop):
                    if batch:
                        self.stats.caught_up = False
                        with self._lock:
                            self._process(batch)
                    else:
                        self.stats.caught_up = True
                        with self._lock:
                            self._deliver_outside_writes()
                    self.stats.lag = source.lag()
                    progress.update()
                    if self.stop.is_set():
                        break
                else:
                    self.stats.caught_up = True
                with self._lock:
                    self._deliver_outside_writes()
            finally:
                self.stats.stopped = self.stop.is_set()
                self.stats.finished = self.stats.finished or time.monotonic()
                progress.update(force=True)
        progress.summary()
        return self.stats

    def _start(self, db: Engine) -> None:
        """The schema, where the last run stopped, the views' subscriptions and the sinks."""
        ensure_schema(db, self.config)
        for sink in self.config.sinks:
            if sink.view not in db.views():
                raise PipelineError(f"{self.config.file}: {sink.label}: no view named "
                                    f"{sink.view!r} (views: {', '.join(db.views()) or 'none'})")
        meta = db.metadata() or {}
        self.stats.batch = int(meta.get("batch", 0))
        self._totals = {k: int(meta.get(k, 0)) for k in self._totals}
        offset = self._offset = meta.get("source")
        if offset:
            self.stats.resumed_from = str(Position(offset["file"], offset["position"],
                                                   offset.get("unit", "line")))
        self._refuse_outputs_over_inputs()
        self.applier = Applier(db)
        # provenance tables annotate each committed transaction: there, each source
        # transaction of a batch commits on its own (its id in the metadata)
        self._per_txn = any(db.has_update_provenance(t) for t in db.tables())
        # the subscriptions and the sinks' first rows in one (empty) transaction: rows due
        # to expire go before it, as a batch neither sees, or after it, as one both see
        # (reading the rows in a sink's start ran the expiry: the sink's rows left the
        # expired rows out and the subscription handed their deletes to it again)
        with db.transaction():
            for view in db.views():
                self._collected[view] = []
                self.stats.views[view] = ViewStats()
                self._unsubscribe.append(db.view(view).subscribe(self._collected[view].extend))
            for sink_config in self.config.sinks:
                try:
                    sink = make_sink(sink_config, db)
                    self.sinks.append(sink)
                    sink.start(self.stats.batch)
                except PipelineError as exc:  # a sink's option at fault: name the file too
                    text = str(exc)
                    if not text.startswith(str(self.config.file)):
                        raise PipelineError(f"{self.config.file}: {text}") from exc.__cause__
                    raise

    def _refuse_outputs_over_inputs(self) -> None:
        """A sink or the dead-letter file written over one of the source's change files
        would replace (or append to) that input, and the source, which leaves the
        pipeline's own files out, would never read it: refused.  That is the source
        itself, or a file in the source directory that holds change records
        (:func:`_holds_change_records`); what the pipeline writes there itself (a sink's
        rows, dead letters) holds none, so a rerun goes ahead.  Checked at every start:
        a run that has committed batches skips such a file too (its records were lost
        without a word when only a fresh run was checked)."""
        root = self.config.source.path.resolve()
        outputs = [("dead_letter", self.config.dead_letter),
                   *((s.label, s.options["path"]) for s in self.config.sinks
                     if "path" in s.options)]
        for label, path in outputs:
            at = path.resolve()
            if at == root or (at.parent == root and at.is_file()
                              and at.stat().st_size and _holds_change_records(at)):
                raise PipelineError(f"{self.config.file}: {label} writes to {path}, a change "
                                    "file of the source: give it another path")

    def _note(self, text: str) -> None:
        if self._progress is not None:
            self._progress.note(text)
        else:
            self.console.print(text, highlight=False, soft_wrap=True, markup=False)

    # ------------------------------------------------------------ one batch
    def _process(self, records: list[ChangeRecord]) -> None:
        """Commit one batch; on a database with provenance tables, which annotate each
        committed transaction, each source transaction of the batch (contiguous records
        with the same ``txn``) on its own, with the offset of its last record."""
        if not self._per_txn:
            self._process_records(records)
            return
        start, txn = 0, records[0].txn
        for i in range(1, len(records)):
            if records[i].error is not None and records[i].txn is None:
                continue  # an unreadable record stays in the transaction it interrupts
            if records[i].txn != txn:
                self._process_records(records[start:i])
                start, txn = i, records[i].txn
        self._process_records(records[start:])

    def _process_records(self, records: list[ChangeRecord]) -> None:
        self.stats.read += len(records)
        stop = self.config.on_error == "stop"
        changes: list[Change] = []
        bad: list[tuple[ChangeRecord, str]] = []
        for record in records:
            try:
                changes.append(self.applier.prepare(record))
            except BadRecord as exc:
                bad.append((record, str(exc)))
        if bad and stop:  # name the first bad record, though the engine rejects an earlier one
            self._refuse(bad + [(c.record, str(why)) for c, why in self.applier.find_bad(changes)],
                         records)
        self._reject(bad)
        last = records[-1].position
        try:
            self._commit(changes, last)
            return
        except PipelineError:
            raise
        except Error as exc:
            failure = exc
        found = self.applier.find_bad(changes)
        if stop:
            if found:
                self._refuse([(c.record, str(why)) for c, why in found], records)
            raise PipelineError(
                f"the batch of records {records[0].position} to {last} failed: {failure}; "
                f"nothing of it was applied (--on-error stop)")
        self._reject([(c.record, str(why)) for c, why in found])
        rejected = {id(c) for c, _ in found}
        good = [c for c in changes if id(c) not in rejected]
        try:
            self._commit(good, last)
        except PipelineError:
            raise
        except Error:
            self._commit_singly(good, last)

    def _commit_singly(self, changes: list[Change], last: Position) -> None:
        """Last resort when a batch fails at commit time: one transaction per record."""
        committed: Position | None = None
        for change in changes:
            try:
                self._commit([change], change.record.position)
                committed = change.record.position
            except PipelineError:
                raise
            except Error as exc:
                self._reject([(change.record, str(exc))])
        if committed != last:
            self._commit([], last)

    def _commit(self, changes: list[Change], last: Position | None) -> None:
        """Commit ``changes`` with the offset ``last`` (None: where the source stands, for
        no records) and the id of their source transaction when they are all of one; then
        deliver the views' deltas."""
        batch = self.stats.batch + 1
        applied = self._totals["applied"] + len(changes)
        offset = self._offset if last is None else last.offset()
        metadata: dict[str, Any] = {"pipeline": self.config.name, "batch": batch,
                                    "applied": applied, "rejected": self._totals["rejected"]}
        if offset is not None:
            metadata["source"] = offset
        txn = changes[0].record.txn if changes else None
        if txn is not None and all(c.record.txn == txn for c in changes):
            metadata["txn"] = txn
        assert self.db is not None
        with self.db.transaction(metadata=metadata):
            self.applier.apply(changes)
        self._totals["applied"] = applied
        self._offset = offset
        self.stats.batch = batch
        self.stats.batches += 1
        self.stats.applied += len(changes)
        self._deliver(batch)

    def _deliver_outside_writes(self) -> None:
        """Views changed by another writer of the database (``upkeep run --serve``: a
        ``POST /sql`` between two batches) reach the sinks now, through a commit of no
        records: the batch id the sinks write them under is then in the database, as for
        records, so a run that starts again neither repeats nor loses them."""
        if any(self._collected.values()):
            self._commit([], None)

    def _deliver(self, batch: int) -> None:
        by_view: dict[str, list[Sink]] = {}
        for sink in self.sinks:
            by_view.setdefault(sink.view.name, []).append(sink)
        for view, collected in self._collected.items():
            if not collected:
                continue
            changes = list(collected)
            collected.clear()
            self.stats.views[view].add(changes)
            for sink in by_view.get(view, []):
                sink.collect(changes)
        for sink in self.sinks:
            try:
                sink.flush(batch)
            except PipelineError as exc:
                raise PipelineError(f"{exc} (batch {batch} is committed; a restart rebuilds "
                                    f"the sink)") from None

    # ------------------------------------------------------------ bad records
    def _reject(self, bad: list[tuple[ChangeRecord, str]]) -> None:
        """Skip or dead-letter bad records (before the batch holding them commits)."""
        if not bad:
            return
        bad.sort(key=lambda entry: entry[0].position)
        if self.config.on_error == "dead-letter":
            self.dead_letter.write(bad)
        verb = "dead-lettered" if self.config.on_error == "dead-letter" else "skipped"
        for record, why in bad:
            self._note(f"{verb} {record.position}: {why}")
        self.stats.rejected += len(bad)
        self._totals["rejected"] += len(bad)

    def _refuse(self, bad: list[tuple[ChangeRecord, str]], records: list[ChangeRecord]) -> None:
        """``--on-error stop``: the first bad record ends the run; its batch is not applied."""
        bad.sort(key=lambda entry: entry[0].position)
        record, why = bad[0]
        more = f"; {len(bad) - 1} more bad record(s) in the batch" if len(bad) > 1 else ""
        raise RecordError(
            record.position, why,
            f"{more}. Nothing of its batch (records {records[0].position} to "
            f"{records[-1].position}) was applied; {self.stats.batches} batch(es) were committed "
            f"before it. Fix or remove the record, or run with --on-error skip or dead-letter")


def run_pipeline(config: PipelineConfig, **options: Any) -> RunStats:
    """Run ``config`` with :class:`PipelineRunner` (``options`` are its keyword arguments)."""
    return PipelineRunner(config, **options).run()
