"""Live progress of a run (rich) or, without a terminal, plain periodic lines; the summary.

``mode`` is ``"live"`` (a rich live display: counters, per-view deltas, terminal sinks),
``"plain"`` (a line every ``interval`` seconds, for CI logs), ``"none"`` (only the
summary), or ``"auto"``: live on a terminal, plain otherwise.  The display is refreshed
from the runner's thread only, so nothing it reads changes under it.
"""

from __future__ import annotations

import time
from types import TracebackType

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ..io.sinks import Sink
from .stats import RunStats

MODES = ("auto", "live", "plain", "none")


class Progress:
    """Shows ``stats`` while a run goes on, and its summary at the end."""

    def __init__(self, stats: RunStats, sinks: list[Sink], mode: str = "auto",
                 console: Console | None = None, interval: float = 5.0):
        self.stats = stats
        self.sinks = sinks
        self.console = console or Console()
        if mode == "auto":
            mode = "live" if self.console.is_terminal else "plain"
        self.mode = mode
        self.interval = interval
        self._live: Live | None = None
        self._last = 0.0
        self._printed = ""
        self._notes = 0

    def __enter__(self) -> Progress:
        if self.mode == "live":
            self._live = Live(self._render(), console=self.console, auto_refresh=False,
                              redirect_stdout=False, redirect_stderr=False)
            self._live.start(refresh=True)
        self._last = time.monotonic()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._live is not None:
            self._live.update(self._render(), refresh=True)
            self._live.stop()
            self._live = None

    def update(self, force: bool = False) -> None:
        """Refresh the live display (at most 5 times a second) or print a plain line."""
        now = time.monotonic()
        if self._live is not None:
            if force or now - self._last >= 0.2:
                self._live.update(self._render(), refresh=True)
                self._last = now
        elif self.mode == "plain" and (force or now - self._last >= self.interval):
            line = self.line()
            if force and line == self._printed:
                return  # the run's last line, already printed
            self.console.print(line, highlight=False, soft_wrap=True, markup=False)
            self._printed = line
            self._last = now

    def note(self, text: str, limit: int = 20) -> None:
        """A message for the user (e.g. a skipped record); only the first ``limit`` show."""
        self._notes += 1
        if self._notes <= limit:
            self.console.print(Text(text, style="yellow"), soft_wrap=True)
        elif self._notes == limit + 1:
            self.console.print(Text("(further messages are not shown; see the summary)",
                                    style="yellow"))

    # ------------------------------------------------------------ rendering
    def line(self) -> str:
        """The one-line progress report of plain mode."""
        s = self.stats
        views = ", ".join(f"{name} +{v.last_inserted}/-{v.last_deleted}"
                          for name, v in s.views.items())
        return (f"[{s.elapsed:7.1f}s] {s.read:,} records ({s.rate:,.0f}/s), {s.batches:,} "
                f"batches, lag {s.lag:,}, rejected {s.rejected:,}"
                + (f"; last deltas: {views}" if views else ""))

    def _render(self) -> RenderableType:
        s = self.stats
        head = Text.assemble(
            ("upkeep ", "bold"), (s.pipeline, "bold cyan"), f"  {s.source}  state {s.state}")
        counters = Text.assemble(
            ("records ", "dim"), f"{s.read:,}", ("  rate ", "dim"), f"{s.rate:,.0f}/s",
            ("  batches ", "dim"), f"{s.batches:,}", ("  lag ", "dim"), f"{s.lag:,}",
            ("  rejected ", "dim"), (f"{s.rejected:,}", "red" if s.rejected else ""),
            ("  elapsed ", "dim"), f"{s.elapsed:.1f}s",
            ("  caught up" if s.caught_up else "", "green"))
        parts: list[RenderableType] = [head, counters]
        if s.views:
            table = Table(box=None, padding=(0, 2), show_edge=False)
            for col in ("view", "last batch", "rows in", "rows out", "batches"):
                table.add_column(col, justify="left" if col == "view" else "right",
                                 style="dim" if col != "view" else "")
            for name, v in s.views.items():
                table.add_row(name, f"+{v.last_inserted:,}/-{v.last_deleted:,}",
                              f"{v.inserted:,}", f"{v.deleted:,}", f"{v.batches:,}")
            parts.append(table)
        parts.extend(r for sink in self.sinks if (r := sink.renderable()) is not None)
        return Group(*parts)

    def summary(self) -> None:
        """Print what the run did (and, without a live display, the terminal sinks)."""
        s = self.stats
        out = self.console
        if self.mode != "live":
            for sink in self.sinks:
                r = sink.renderable()
                if r is not None:
                    out.print(r)
        how = "stopped" if s.stopped else "done"
        out.print(Text.assemble(
            (f"{how}: ", "bold"),
            f"{s.applied:,} records applied, {s.rejected:,} rejected, in {s.batches:,} batches "
            f"over {s.elapsed:.1f}s ({s.rate:,.0f} records/s); last batch id {s.batch}"),
            soft_wrap=True)
        if s.resumed_from:
            out.print(f"  resumed after {s.resumed_from}", highlight=False, soft_wrap=True,
                      markup=False)
        for name, v in s.views.items():
            out.print(f"  view {name}: {v.inserted:,} rows in, {v.deleted:,} rows out over "
                      f"{v.batches:,} batches", highlight=False, soft_wrap=True,
                      markup=False)
        for sink in self.sinks:
            out.print(f"  sink {sink.view.name} -> {sink.label}", highlight=False,
                      soft_wrap=True, markup=False)
