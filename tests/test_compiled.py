"""The check that refuses compiled modules older than their sources (``upkeep.compiled``)."""

from __future__ import annotations

import os

from upkeep.compiled import stale_modules


def _package(tmp_path, checkout: bool):
    package = tmp_path / "src" / "pkg"
    package.mkdir(parents=True)
    if checkout:
        (tmp_path / "setup.py").write_text("")
    for name in ("fast", "slow"):
        (package / f"{name}.py").write_text("")
        (package / f"{name}.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    return package


def _age(path, seconds: float) -> None:
    st = path.stat()
    os.utime(path, (st.st_atime - seconds, st.st_mtime - seconds))


def test_a_source_edited_after_its_build_is_reported(tmp_path):
    package = _package(tmp_path, checkout=True)
    assert stale_modules(package) == []
    _age(package / "slow.cpython-311-x86_64-linux-gnu.so", 10)
    assert stale_modules(package) == ["pkg/slow.py"]


def test_declarations_edited_after_the_build_are_reported(tmp_path):
    package = _package(tmp_path, checkout=True)
    (package / "fast.pxd").write_text("")
    _age(package / "fast.py", 20)
    _age(package / "fast.cpython-311-x86_64-linux-gnu.so", 10)
    assert stale_modules(package) == ["pkg/fast.py"]


def test_an_installed_package_is_not_checked(tmp_path):
    package = _package(tmp_path, checkout=False)
    _age(package / "slow.cpython-311-x86_64-linux-gnu.so", 10)
    assert stale_modules(package) == []


def test_this_checkouts_compiled_modules_are_current():
    import upkeep.dyn

    assert stale_modules() == []
    assert upkeep.dyn.__file__.endswith(".so"), "make build compiles the per-change modules"
