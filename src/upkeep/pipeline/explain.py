"""``upkeep explain``: each view's strategy and join tree, with the sinks it feeds.

The views are planned in a scratch in-memory database from the pipeline's SQL files, so
explaining never touches (or waits for) the state directory of a running pipeline.
"""

from __future__ import annotations

from ..engine import connect
from ..io.errors import PipelineError
from .config import PipelineConfig
from .schema import ensure_schema, pipeline_views


def explain_pipeline(config: PipelineConfig, view: str | None = None) -> str:
    """The EXPLAIN text of every view of the pipeline (or of ``view``)."""
    db = connect()
    try:
        ensure_schema(db, config)
        names = pipeline_views(config)
        if view is not None:
            if view.lower() not in db.views():
                raise PipelineError(f"no view named {view!r} in {config.file} (views: "
                                    f"{', '.join(names) or 'none'})")
            names = [view.lower()]
        layout: dict[str, str] = {}
        if config.engine == "spark":  # how each view's shards are laid out (docs/spark.md)
            from ..spark.routing import plan_groups

            for group in plan_groups(db.local_catalog, config.spark_shards or 4):
                for name in group.views:
                    layout[name] = f"spark: {group.describe()}"
        parts = []
        for name in names:
            sinks = [f"{s.type}" + (f" {s.path}" if s.path else "")
                     for s in config.sinks if s.view == name]
            text = db.explain(name)
            if name in layout:
                text += "\n" + layout[name]
            text += "\nsinks: " + ("; ".join(sinks) if sinks else "none")
            parts.append(text)
        return "\n\n".join(parts)
    finally:
        db.close()
