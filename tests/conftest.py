"""Shared settings of the framework's own tests."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from catalog_seed import catalog_text

pytest_plugins = ["pytester"]


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # Exit 5 ("no tests collected") from the framework's own test run means the test
    # tree is broken or filtered to nothing: make it a failure on purpose, with a
    # reason, rather than let CI read it either way by accident.
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        print("\nerror: no framework tests were collected; check the path or -k filter")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# ------------------------------------------------------------- shared fixtures

@pytest.fixture
def catalog_tree(tmp_path: Path) -> Callable[..., Path]:
    """make(suites, files) -> a repository root holding ``suites/catalog.toml`` (or ``at``;
    ``text`` instead of ``catalog_seed.catalog_text(suites)``) and the files
    ``{relative path: text}`` (default: one ``cpu`` suite, no files)."""

    def make(suites: Mapping[str, Mapping[str, Any]] | None = None,
             files: Mapping[str, str] | None = None, *, root: Path | None = None,
             markers: Mapping[str, str] | None = None, text: str | None = None,
             at: str = "suites/catalog.toml") -> Path:
        base = root or tmp_path
        catalog = base / at
        catalog.parent.mkdir(parents=True, exist_ok=True)
        catalog.write_text(text if text is not None else
                           catalog_text(suites if suites is not None else {"cpu": {}}, markers=markers))
        for rel, text in (files or {}).items():
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            (base / rel).write_text(text)
        return base

    return make


@pytest.fixture
def history_factory(tmp_path: Path) -> Callable[..., Path]:
    """make(runs, suite=, fingerprint=, path=, failed=, start=) -> a history file with one
    complete trusted run per ``{file: seconds}`` mapping (``history_seed.seed``)."""
    from history_seed import seed  # noqa: PLC0415 - imports gates (sqlite-utils) on use

    def make(runs: Sequence[Mapping[str, float]], *, suite: str = "cpu",
             fingerprint: str = "cpu", path: Path | None = None, **kw: Any) -> Path:
        target = path or tmp_path / "history.db"
        seed(target, suite, fingerprint, runs, **kw)
        return target

    return make
