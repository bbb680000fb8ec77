"""Errors crossing from Spark's executors to the driver, as structured records.

A shard that rejects a batch raises :class:`ShardError` holding the upkeep error's record
(:meth:`upkeep.errors.Error.to_record`, plus the change record's ``position`` in its file);
the processor re-raises it inside Spark as :class:`BatchRejected`, whose text is one
:func:`upkeep.errors.error_marker`; Spark hands the driver only text, and
:func:`query_error` rebuilds the very same exception class with the same fields (row,
index, position) as the local engine raises.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import Error, error_from_record, error_marker, record_in_text


class ShardError(Exception):
    """A batch a shard rejects (or a shard that cannot serve); ``record`` describes it."""

    def __init__(self, record: dict | str):
        if isinstance(record, str):
            record = {"class": "Error", "message": record}
        super().__init__(record["message"])
        self.record = record

    @classmethod
    def of(cls, exc: Error, position: object = None) -> ShardError:
        """The shard-side form of an upkeep error (and the record's position, if any)."""
        extra = {} if position is None else {"position": str(position)}
        return cls(exc.to_record(**extra))


class BatchRejected(Exception):
    """Raised inside Spark for a rejected micro-batch; its text is the error's marker."""

    def __init__(self, record: dict):
        super().__init__(error_marker(record))
        self.record = record


def _raised_in_python(text: str) -> str:
    """The last Python exception a Spark failure's text quotes (``KeyError: 'x'``), said
    after its first line, which ends where the Python traceback begins."""
    raised = re.findall(r"^\s*((?:\w+\.)*\w*(?:Error|Exception)\b.*)$", text, re.M)
    return f" ({raised[-1].strip()[:1000]})" if raised else ""


def query_error(exc: BaseException) -> Error:
    """The upkeep error a failed micro-batch reports, rebuilt from its marker (or a
    generic :class:`Error` naming Spark's failure).  A change record's position, where the
    shard knew it, is kept as ``position``."""
    text = str(exc)
    record = record_in_text(text)
    if record is None:
        raised = re.search(r"\[USER_RAISED_EXCEPTION\] (.*?)(?: SQLSTATE: \w+)?$", text, re.M)
        if raised:  # a check upkeep put in the query (raise_error), said as itself
            return Error(raised[1])
        return Error(f"the Spark streaming query failed: {text.splitlines()[0][:2000]}"
                     + _raised_in_python(text))
    error = error_from_record(record)
    error.position = record.get("position")
    return error


@contextmanager
def spark_job_errors() -> Iterator[None]:
    """Around a Spark job (a bulk build, a statement's search of the tables): an upkeep
    error raised on an executor is raised again on the driver as itself, with its fields;
    any other failure of the job as it was."""
    try:
        yield
    except Error:
        raise
    except Exception as exc:  # Spark reports a failed job as its own exception
        error = query_error(exc)
        if type(error) is Error:
            raise
        raise error from None
