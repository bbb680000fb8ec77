"""Builds upkeep with the modules on the per-change path compiled by Cython.

The compiled modules are the plain Python sources in ``src/upkeep`` (one implementation:
Cython compiles the same file CPython would run, annotations not enforced as C types), so
every change of a row runs through C instead of the interpreter's loop: 1.3-1.45x faster per
change on the loaded-tables benchmark (docs/benchmarks.md).  A few classes and functions
every change touches are declared in a ``.pxd`` beside their module (``dyn.pxd``, ``dyn_walk.pxd``,
``views.pxd``, ``aggregates.pxd``, ``arrow_keys.pxd``, ``key_table.pxd``, ``row_store.pxd``, ``table.pxd``, ``local/catalog.pxd``, ``local/commit.pxd``,
``local/durability.pxd``, ``local/connection.pxd``, ``gc_pause.pxd``,
``types.pxd``, ``exact.pxd``, ``operators.pxd``, ``zset.pxd``; for update provenance
``update_provenance/expression.pxd``, ``annotators.pxd``, ``relation.pxd``):
classes become extension types whose fields are C slots (typed memoryviews over ``array``
for per-column codes) and whose methods are direct calls, and ``@cython.locals`` makes
loop variables C integers and doubles, while the ``.py`` stays the one implementation.
Two classes that cannot be in a reference cycle, ``update_provenance.expression.Node`` and
``aggregates.DualWeight``, are left out of CPython's cyclic collector by ``@cython.no_gc``,
which Cython reads only in the ``.py`` (beside ``@cython.cclass``): those two modules
``import cython``, with ``compiled.cython_stand_in``, whose decorators do nothing, where
Cython is not installed.
Code generated at run time (the ENUM loops of ``dyn_loops``, select lists, a row store's
decoder) stays interpreted; push mode's walks of Dynamic Yannakakis (an anchor key's
context, a single-row change's rows) are compiled instead (``dyn_walk``).  Everything else is in pyproject.toml.
"""

from Cython.Build import cythonize
from setuptools import setup

#: the modules every committed change passes through (profiled: bench/tpch/loaded.py)
COMPILED = [
    "src/upkeep/aggregates.py",
    "src/upkeep/arrow_keys.py",
    "src/upkeep/dyn.py",
    "src/upkeep/dyn_walk.py",
    "src/upkeep/engine.py",
    "src/upkeep/exact.py",
    "src/upkeep/gc_pause.py",
    "src/upkeep/hashing.py",
    "src/upkeep/key_table.py",
    "src/upkeep/local/catalog.py",
    "src/upkeep/local/commit.py",
    "src/upkeep/local/connection.py",
    "src/upkeep/local/durability.py",
    "src/upkeep/local/provenance.py",
    "src/upkeep/local/staging.py",
    "src/upkeep/operators.py",
    "src/upkeep/ranked.py",
    "src/upkeep/row_store.py",
    "src/upkeep/table.py",
    "src/upkeep/threshold.py",
    "src/upkeep/topk.py",
    "src/upkeep/types.py",
    "src/upkeep/update_provenance/annotators.py",
    "src/upkeep/update_provenance/expression.py",
    "src/upkeep/update_provenance/relation.py",
    "src/upkeep/views.py",
    "src/upkeep/zset.py",
]

setup(ext_modules=cythonize(
    COMPILED, quiet=True,
    compiler_directives={"language_level": 3, "binding": True, "annotation_typing": False}))
