"""Pipelines: change records from files, kept views, and sinks, driven by a TOML file.

``upkeep run PIPELINE.toml`` and ``upkeep explain PIPELINE.toml`` (see upkeep.cli) are thin
wrappers around :func:`load_config`, :class:`PipelineRunner` and :func:`explain_pipeline`;
docs/pipelines.md is the reference.
"""

from ..io.errors import ConfigError, PipelineError, RecordError
from .config import PipelineConfig, load_config
from .explain import explain_pipeline
from .runner import PipelineRunner, run_pipeline
from .stats import RunStats

__all__ = [
    "ConfigError",
    "PipelineConfig",
    "PipelineError",
    "PipelineRunner",
    "RecordError",
    "RunStats",
    "explain_pipeline",
    "load_config",
    "run_pipeline",
]
