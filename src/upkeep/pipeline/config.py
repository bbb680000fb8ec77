"""The pipeline file: TOML read with :mod:`tomllib` into validated, typed settings.

Every key is checked (unknown keys, wrong types and missing required keys raise
:class:`ConfigError` naming the file and the key); relative paths are resolved against the
directory of the pipeline file.  See docs/pipelines.md for the reference.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine import SPARK_DEFAULT_STATE, SPARK_STATES
from ..io.errors import ConfigError
from ..io.locations import location, same_location
from ..io.sinks.base import SinkConfig

ON_ERROR = ("stop", "skip", "dead-letter")
ENGINES = ("local", "spark")
FORMATS = ("jsonl", "csv", "parquet")
MEMORY = ":memory:"

# sink type -> {key: (expected python type(s), default, required)}
_PATH = ((str,), None, True)
SINK_KEYS: dict[str, dict[str, tuple[tuple[type, ...], Any, bool]]] = {
    "terminal": {"limit": ((int,), 10, False), "order_by": ((str,), None, False)},
    "jsonl": {"path": _PATH},
    "parquet": {"path": _PATH, "every": ((int,), 1, False)},
    "parquet-deltas": {"path": _PATH},
    "duckdb": {"path": _PATH, "table": ((str,), None, False)},
    "sqlite": {"path": _PATH, "table": ((str,), None, False)},
}


@dataclass(frozen=True)
class SourceConfig:
    """``[source]``: where change records come from."""

    path: Path | str  # a URI: a Hadoop file system's, for the spark engine
    format: str | None = None
    follow: bool = False
    poll_interval: float = 1.0


@dataclass(frozen=True)
class BatchConfig:
    """``[batch]``: when a batch is committed (whichever limit is reached first)."""

    rows_per_batch: int | None = 1000
    commit_interval: float | None = None


@dataclass(frozen=True)
class PipelineConfig:
    """A whole pipeline file."""

    file: Path
    name: str
    state_dir: str
    tables: list[Path]
    views: list[Path]
    source: SourceConfig
    batch: BatchConfig
    sinks: list[SinkConfig]
    on_error: str = "stop"
    dead_letter: Path | None = None
    engine: str = "local"
    spark_master: str = "local[2]"
    spark_shards: int | None = None
    spark_files_per_batch: int | None = None
    spark_conf: dict[str, str] = field(default_factory=dict)
    spark_rates: list[dict[str, Any]] = field(default_factory=list)
    spark_run_seconds: float | None = None
    spark_state: str = SPARK_DEFAULT_STATE  # where views' state lives (engine.SPARK_STATES)

    def replace(self, **changes: Any) -> PipelineConfig:
        """A copy with some settings overridden (command-line options); ``None`` keeps one."""
        changes = {k: v for k, v in changes.items() if v is not None}
        if "follow" in changes:
            changes["source"] = dataclasses.replace(self.source, follow=changes.pop("follow"))
        if "state_dir" in changes:
            changes["state_dir"] = _state_dir(str(changes["state_dir"]), Path.cwd())
        for key in ("on_error", "engine"):
            if key in changes:
                _choice(self.file, f"--{key.replace('_', '-')}", changes[key],
                        ON_ERROR if key == "on_error" else ENGINES)
        if "dead_letter" in changes:
            _check_dead_letter(self.file, self.sinks, changes["dead_letter"], "--dead-letter")
        return dataclasses.replace(self, **changes)


def load_config(path: str | Path) -> PipelineConfig:
    """Read and validate a pipeline file."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(file, "is a directory, not a pipeline file (a TOML file)"
                          if file.is_dir() else "pipeline file does not exist")
    try:
        with file.open("rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(file, f"invalid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(file, f"not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(file, f"cannot read: {exc}") from None
    return parse_config(data, file)


def parse_config(data: dict[str, Any], file: Path) -> PipelineConfig:
    """Validate the parsed TOML of ``file`` (a dict) into a :class:`PipelineConfig`."""
    base = file.parent
    known = {"name", "state_dir", "engine", "tables", "views", "on_error", "dead_letter",
             "source", "batch", "sinks", "spark"}
    _unknown(file, data, known, "")
    name = _get(file, data, "name", (str,), file.stem)
    state_dir = _state_dir(_get(file, data, "state_dir", (str,), f"{file.stem}.state"), base)
    engine = _choice(file, "engine", _get(file, data, "engine", (str,), "local"), ENGINES)
    on_error = _choice(file, "on_error", _get(file, data, "on_error", (str,), "stop"), ON_ERROR)
    dead_letter = base / _get(file, data, "dead_letter", (str,), f"{file.stem}.dead-letter.jsonl")
    if "tables" not in data:
        raise ConfigError(file, "missing key 'tables' (a list of SQL files with CREATE TABLE)")
    tables = _sql_files(file, data, "tables")
    if not tables:
        raise ConfigError(file, "key 'tables' names no SQL file (at least one CREATE TABLE)")
    views = _sql_files(file, data, "views") if "views" in data else []
    sinks = _sinks(file, data.get("sinks", []))
    _check_dead_letter(file, sinks, dead_letter, "key 'dead_letter'")
    return PipelineConfig(
        file=file, name=name, state_dir=state_dir, tables=tables, views=views,
        source=_source(file, _table(file, data, "source", required=True)),
        batch=_batch(file, _table(file, data, "batch")), sinks=sinks,
        on_error=on_error, dead_letter=dead_letter, engine=engine,
        **_spark(file, _table(file, data, "spark")))


def _check_dead_letter(file: Path, sinks: list, dead_letter: Path, given: str) -> None:
    """A sink writing to the dead-letter file would take rejected records into its rows."""
    for sink in sinks:
        if "path" in sink.options and _resolved(sink.options["path"]) == _resolved(dead_letter):
            raise ConfigError(file, f"{sink.label} writes to the dead-letter file "
                                    f"{dead_letter.name} ({given}): give one of them "
                                    "another path")


# ---------------------------------------------------------------- sections


MAX_SECONDS = 86_400.0  # a day: what a timer may wait (TOML's inf would overflow it)


def _seconds(file: Path, data: dict[str, Any], key: str, default: float | None,
             prefix: str) -> float | None:
    """A duration in seconds: a positive finite number, at most :data:`MAX_SECONDS`."""
    value = _get(file, data, key, (int, float), default, prefix)
    if value is None:
        return None
    if not 0 < value <= MAX_SECONDS:  # also NaN, which compares false
        raise ConfigError(file, f"key '{prefix}{key}' must be a number of seconds above 0 "
                                f"and at most {MAX_SECONDS:,.0f}, got {value}")
    return float(value)


def _source(file: Path, data: dict[str, Any]) -> SourceConfig:
    _unknown(file, data, {"path", "format", "follow", "poll_interval"}, "source.")
    if "path" not in data:
        raise ConfigError(file, "missing key 'source.path' (a file or directory of change records)")
    path = location(file.parent, _get(file, data, "path", (str,), None, "source."))
    fmt = data.get("format")
    if fmt is not None:
        fmt = _choice(file, "source.format", _get(file, data, "format", (str,), None, "source."),
                      FORMATS)
    poll = _seconds(file, data, "poll_interval", 1.0, "source.")
    return SourceConfig(path=path, format=fmt,
                        follow=_get(file, data, "follow", (bool,), False, "source."),
                        poll_interval=poll)


def _spark(file: Path, data: dict[str, Any]) -> dict[str, Any]:
    """``[spark]``: where and how the spark engine runs (docs/spark.md)."""
    _unknown(file, data, {"master", "shards", "files_per_batch", "conf", "rate", "run_seconds",
                          "state"}, "spark.")
    out: dict[str, Any] = {
        "spark_master": _get(file, data, "master", (str,), "local[2]", "spark."),
        "spark_shards": _get(file, data, "shards", (int,), None, "spark."),
        "spark_files_per_batch": _get(file, data, "files_per_batch", (int,), None, "spark."),
    }
    for key in ("spark_shards", "spark_files_per_batch"):
        if out[key] is not None and out[key] < 1:
            raise ConfigError(file, f"key 'spark.{key[6:]}' must be at least 1, got {out[key]}")
    conf = _get(file, data, "conf", (dict,), {}, "spark.")
    out["spark_conf"] = {str(k): str(v) for k, v in conf.items()}
    seconds = _seconds(file, data, "run_seconds", None, "spark.")
    out["spark_run_seconds"] = seconds
    state = _get(file, data, "state", (str,), SPARK_DEFAULT_STATE, "spark.")
    if state not in SPARK_STATES:
        raise ConfigError(file, f"key 'spark.state' must be one of "
                                f"{', '.join(SPARK_STATES)}, got {state!r}")
    out["spark_state"] = state
    rates = data.get("rate", [])
    if not isinstance(rates, list) or not all(isinstance(r, dict) for r in rates):
        raise ConfigError(file, "key 'spark.rate' must be an array of tables ([[spark.rate]])")
    out["spark_rates"] = []
    for i, rate in enumerate(rates, 1):
        label = f"[[spark.rate]] #{i}"
        _unknown(file, rate, {"table", "rows_per_second", "columns"}, "", label)
        for key in ("table", "rows_per_second", "columns"):
            if key not in rate:
                raise ConfigError(file, f"{label}: missing key '{key}'")
        per_second = _get(file, rate, "rows_per_second", (int,), None, label=label)
        if per_second < 1:
            raise ConfigError(file, f"{label}: key 'rows_per_second' must be at least 1")
        columns = _get(file, rate, "columns", (dict,), None, label=label)
        out["spark_rates"].append({
            "table": _get(file, rate, "table", (str,), None, label=label).lower(),
            "rows_per_second": per_second,
            "columns": {str(k).lower(): str(v) for k, v in columns.items()}})
    return out


def _batch(file: Path, data: dict[str, Any]) -> BatchConfig:
    _unknown(file, data, {"rows_per_batch", "commit_interval"}, "batch.")
    rows = _get(file, data, "rows_per_batch", (int,), None, "batch.")
    interval = _seconds(file, data, "commit_interval", None, "batch.")
    if rows is not None and rows < 1:
        raise ConfigError(file, f"key 'batch.rows_per_batch' must be at least 1, got {rows}")
    if rows is None and interval is None:
        rows = 1000
    return BatchConfig(rows_per_batch=rows,
                       commit_interval=float(interval) if interval is not None else None)


def _sinks(file: Path, entries: Any) -> list[SinkConfig]:
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(file, "key 'sinks' must be an array of tables ([[sinks]] entries)")
    sinks = []
    targets: dict[tuple[str, str, str], str] = {}
    files: dict[str, tuple[str, str]] = {}  # path -> the kind and label of its first sink
    for i, entry in enumerate(entries, 1):
        label = f"[[sinks]] #{i}"
        for key in ("view", "type"):
            if key not in entry:
                raise ConfigError(file, f"{label}: missing key '{key}'")
        view = _get(file, entry, "view", (str,), None, label=label).lower()
        kind = _get(file, entry, "type", (str,), None, label=label)
        label = f"{label} (view {view})"
        if kind not in SINK_KEYS:
            raise ConfigError(file, f"{label}: unknown sink type {kind!r} in key 'type'; expected "
                                    f"one of {', '.join(sorted(SINK_KEYS))}")
        spec = SINK_KEYS[kind]
        _unknown(file, entry, {"view", "type", *spec}, "", label)
        options: dict[str, Any] = {}
        for key, (types, default, required) in spec.items():
            if required and key not in entry:
                raise ConfigError(file, f"{label}: missing key '{key}' for a {kind} sink")
            options[key] = _get(file, entry, key, types, default, label=label)
        if "path" in options:
            options["path"] = location(file.parent, options["path"])
        for key in ("limit", "every"):
            if key in options and options[key] < 1:
                raise ConfigError(file, f"{label}: key '{key}' must be at least 1")
        if kind in ("duckdb", "sqlite"):
            options["table"] = options["table"] or view
            target = (kind, _resolved(options["path"]), options["table"].lower())
        elif kind in ("jsonl", "parquet", "parquet-deltas"):
            target = ("file", _resolved(options["path"]), "")
        else:
            target = (kind, view, str(i))
        if target in targets:
            raise ConfigError(file, f"{label} writes to the same {kind} target as {targets[target]}")
        targets[target] = label
        if "path" in options:  # one file, one format: sinks of one database kind share it
            first_kind, first = files.setdefault(target[1], (kind, label))
            if first != label and (first_kind != kind or kind not in ("duckdb", "sqlite")):
                raise ConfigError(file, f"{label} writes to the file of the {first_kind} "
                                        f"sink {first}")
        sinks.append(SinkConfig(view=view, type=kind, label=label, options=options))
    return sinks


# ---------------------------------------------------------------- helpers


def _resolved(path: Path | str) -> str:
    """A sink's or the dead-letter file's location, comparable (:func:`same_location`)."""
    return same_location(path) if isinstance(path, str) else str(path.resolve())


def _state_dir(value: str, base: Path) -> str:
    """``:memory:``, a local directory, or a URI (:func:`location`)."""
    return MEMORY if value == MEMORY else str(location(base, value))


def _sql_files(file: Path, data: dict[str, Any], key: str) -> list[Path]:
    value = data[key]
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(file, f"key '{key}' must be a path or a list of paths to SQL files")
    paths = [file.parent / v for v in value]
    for p, v in zip(paths, value, strict=True):
        if not p.is_file():
            raise ConfigError(file, f"key '{key}': SQL file {v!r} does not exist ({p})")
    return paths


def _table(file: Path, data: dict[str, Any], key: str, required: bool = False) -> dict[str, Any]:
    if key not in data:
        if required:
            raise ConfigError(file, f"missing table [{key}]")
        return {}
    value = data[key]
    if not isinstance(value, dict):
        raise ConfigError(file, f"key '{key}' must be a table ([{key}])")
    return value


def _get(file: Path, data: dict[str, Any], key: str, types: tuple[type, ...], default: Any,
         prefix: str = "", label: str = "") -> Any:
    if key not in data:
        return default
    value = data[key]
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
    if not ok:
        names = "a number" if float in types else {
            str: "a string", int: "an integer", bool: "true or false", dict: "a table"}[types[0]]
        where = f"{label}: " if label else ""
        raise ConfigError(file, f"{where}key '{prefix}{key}' must be {names}, got {value!r}")
    return value


def _choice(file: Path, key: str, value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(file, f"key '{key}' must be one of {', '.join(choices)}, got {value!r}")
    return value


def _unknown(file: Path, data: dict[str, Any], known: set[str], prefix: str,
             label: str = "") -> None:
    extra = sorted(set(data) - known)
    if extra:
        where = f"{label}: " if label else ""
        raise ConfigError(file, f"{where}unknown key '{prefix}{extra[0]}' (known keys: "
                                f"{', '.join(sorted(known))})")
