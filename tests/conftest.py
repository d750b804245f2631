"""Shared settings of the framework's own tests."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import scipy.special  # noqa: F401  (see below)
from catalog_seed import catalog_text

# pytester's in-process runs (`pytester.runpytest`) drop from sys.modules whatever a run
# imported, but numpy.fft (which scipy.special loads) cannot load twice in one process: a
# later test importing scipy.special then failed "cannot load module more than once per
# process". Imported here, before any pytester fixture, it stays.
pytest_plugins = ["pytester", "still_running"]  # still_running: a line while one test runs long


def pytest_sessionstart(session: pytest.Session) -> None:
    # A test run started in the background by a non-interactive shell (`bash .ci/run &`,
    # `nohup`) inherits SIGINT ignored, and so does every process a test starts: a Python
    # child then installs no KeyboardInterrupt handler and ignores the Ctrl-C a test sends
    # it (POSIX; Python's startup). The tests that send Ctrl-C mean the interactive case,
    # so the run takes Python's default: a handled signal is reset for children at exec.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


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


# ------------------------------------------------------ the store on both backends


@pytest.fixture(scope="session")
def pg_cluster():
    """A throwaway PostgreSQL server for the session (``tests/pg_cluster.py``). Skips
    with the reason where PostgreSQL or psycopg is missing, but fails under CI=true:
    CI must run the PostgreSQL store tests."""
    from pg_cluster import start_cluster  # noqa: PLC0415

    why, cluster = None, None
    try:
        import psycopg  # noqa: F401, PLC0415
    except ImportError:
        why = "psycopg is not installed (pip install -e '.[postgres]')"
    if why is None:
        try:
            cluster = start_cluster()
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            why = f"no PostgreSQL server: {exc}"
    if cluster is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI must run the PostgreSQL store tests: {why}")
        pytest.skip(str(why))
    yield cluster
    cluster.stop()


_SCHEMAS = itertools.count()


@pytest.fixture
def pg_url(pg_cluster) -> str:
    """A URL of an empty schema of the session's PostgreSQL server (one per test)."""
    import psycopg  # noqa: PLC0415

    name = f"t{os.getpid()}_{next(_SCHEMAS)}"
    with psycopg.connect(pg_cluster.url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    return pg_cluster.schema_url(name)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """Where a fresh history goes, on each backend: a file path, or a PostgreSQL URL."""
    if request.param == "sqlite":
        return tmp_path / "history.db"
    return request.getfixturevalue("pg_url")


# The CI run a report is anchored to (gates.commands.common.report_anchor) comes from these;
# on the project's own CI they name that CI run, which no test history holds. A test
# that means a CI run sets them itself.
_CI_IDENTITY = ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT",
                "GITHUB_SHA", "GITHUB_HEAD_REF", "GITHUB_REF_NAME", "GATES_CI_URL",
                "GATES_COMMIT", "GATES_BRANCH")


@pytest.fixture(autouse=True)
def _no_ci_identity(monkeypatch):
    for name in _CI_IDENTITY:
        monkeypatch.delenv(name, raising=False)
