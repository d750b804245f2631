"""Shared settings of the framework's own tests."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

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

SUITE_DEFAULTS: dict[str, Any] = {"backend": "cpu", "schedule": "per-commit",
                                  "shard_budget_s": 600}


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return repr(value)


def catalog_text(suites: Mapping[str, Mapping[str, Any]], *,
                 markers: Mapping[str, str] | None = None) -> str:
    """A suite catalog (``suites/catalog.toml``) for ``{name: {key: value}}``.

    Each suite gets ``SUITE_DEFAULTS`` and ``description = name`` unless given; a
    dict value (``hardware = {"gpu_count": 1}``) becomes the ``[suites.NAME.KEY]`` table.
    """
    lines = []
    if markers:
        lines += ["[markers]"] + [f"{k} = {_toml(v)}" for k, v in markers.items()]
    for name, given in suites.items():
        spec = {"description": name, **SUITE_DEFAULTS, **given}
        tables = {k: v for k, v in spec.items() if isinstance(v, Mapping)}
        lines.append(f"[suites.{name}]")
        lines += [f"{k} = {_toml(v)}" for k, v in spec.items() if k not in tables]
        for table, body in tables.items():
            lines.append(f"[suites.{name}.{table}]")
            lines += [f"{k} = {_toml(v)}" for k, v in body.items()]
    return "\n".join(lines) + "\n"


@pytest.fixture
def catalog_tree(tmp_path: Path) -> Callable[..., Path]:
    """make(suites, files) -> a repository root holding ``suites/catalog.toml`` and the
    files ``{relative path: text}`` (default: one ``cpu`` suite, no files)."""

    def make(suites: Mapping[str, Mapping[str, Any]] | None = None,
             files: Mapping[str, str] | None = None, *, root: Path | None = None,
             markers: Mapping[str, str] | None = None) -> Path:
        base = root or tmp_path
        (base / "suites").mkdir(parents=True, exist_ok=True)
        (base / "suites" / "catalog.toml").write_text(
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
