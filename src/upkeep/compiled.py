"""Refuses compiled modules older than their sources, in a source checkout; stands in for
Cython where it is not installed.

setup.py compiles the modules on the per-change path with Cython, and an extension module
is imported in preference to the ``.py`` beside it.  In a checkout (``setup.py`` two levels
above the package) an edit to such a source would otherwise run the old compiled code
silently; ``make build`` (or any ``make`` target) compiles again.  An installed wheel has
no ``setup.py`` there and is not checked.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

PACKAGE = Path(__file__).resolve().parent

#: ``cython`` where Cython is not installed (plain Python): its class decorators change
#: nothing.  A module whose classes carry them (``no_gc`` in ``aggregates`` and
#: ``update_provenance.expression``) imports ``cython`` itself, which Cython reads as it
#: compiles the module, and this in its place when the import fails.
cython_stand_in = SimpleNamespace(cclass=lambda cls: cls, no_gc=lambda cls: cls)


def stale_modules(package: Path = PACKAGE) -> list[str]:
    """The compiled modules under ``package`` whose source, or the Cython declarations
    beside it (``.pxd``), is newer than they are."""
    if not (package.parent.parent / "setup.py").exists():
        return []
    stale = []
    for built in package.rglob("*.so"):
        stem = built.name.split(".", 1)[0]
        source = built.with_name(stem + ".py")
        if source.exists() and any(
                f.exists() and f.stat().st_mtime > built.stat().st_mtime
                for f in (source, built.with_name(stem + ".pxd"))):
            stale.append(str(source.relative_to(package.parent)))
    return sorted(stale)


def check_compiled() -> None:
    """Raise ImportError naming the stale modules, if any."""
    stale = stale_modules()
    if stale:
        raise ImportError(
            "upkeep's compiled modules are older than their sources ("
            + ", ".join(stale) + "): run `make build` to compile them again")
