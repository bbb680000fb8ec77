"""Errors of the pipeline runner, all subclasses of :class:`upkeep.Error`."""

from __future__ import annotations

from ..errors import Error


class PipelineError(Error):
    """A pipeline that cannot run: a bad pipeline file, a missing input, a failing sink."""


class ConfigError(PipelineError):
    """A pipeline file that is malformed; the message names the file and the key."""

    def __init__(self, file: object, message: str):
        super().__init__(f"{file}: {message}")
        self.file = file


class RecordError(PipelineError):
    """A change record that cannot be applied; the message names its file and line."""

    def __init__(self, position: object, reason: str, note: str = ""):
        super().__init__(f"{position}: {reason}{note}")
        self.position = position
        self.reason = reason
