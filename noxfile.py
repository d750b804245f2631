"""The doors: one session per hardware suite (generated from suites/catalog.toml),
plus the framework's tests, lint, reports and planning.

Sessions parse nothing themselves: each calls one library entry point.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).parent
sys.path.insert(0, str(ROOT))  # ci_register.catalog is stdlib-only: safe before any venv

from ci_register.catalog import CatalogError, Suite, load_catalog  # noqa: E402

nox.options.default_venv_backend = "venv"
nox.options.error_on_external_run = True
# Only CPU-safe sessions run by default.
nox.options.sessions = ["tests", "cpu"]

try:
    CATALOG = load_catalog(ROOT / "suites" / "catalog.toml")
except CatalogError as _exc:  # one line naming file, line and fix; never a traceback
    print(f"error: {_exc}", file=sys.stderr)
    raise SystemExit(2) from None
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
CPU_TORCH = "torch==2.13.0"  # the local CPU wheel; a bare "torch" pulls a multi-GB CUDA build


@contextlib.contextmanager
def _venv_lock(session: nox.Session):
    """One pip at a time per session venv: concurrent `nox -s cpu` in one checkout share
    .nox/cpu (reuse_venv), and two pips installing into it at once break it."""
    location = getattr(session.virtualenv, "location", None)
    if not location:
        yield
        return
    with open(f"{location}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _install_project(session: nox.Session, *extras: str) -> None:
    # CPU torch first, so nothing later resolves "torch" to a CUDA build.
    with _venv_lock(session):
        if "cpu" in extras:
            session.install(CPU_TORCH)
        spec = f".[{','.join(extras)}]" if extras else "."
        session.install("-e", spec)


def _suite_session(suite: Suite):
    def session_fn(session: nox.Session) -> None:
        if suite.is_gpu:
            # GPU images carry their own CUDA torch: run in the machine's Python, with
            # this checkout importable even where the package is not installed.
            session.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
            session.env.setdefault("NCCL_NVLS_ENABLE", "0")  # never NVLink multicast (shared hosts)
        else:
            _install_project(session, "cpu")
            with _venv_lock(session):
                if suite.install:
                    session.install(*suite.install)
                if suite.uninstall:
                    session.run("pip", "uninstall", "-y", *suite.uninstall)
        # GPU: the interpreter running nox is the machine's own (the one with CUDA torch).
        python = sys.executable if suite.is_gpu else "python"
        # On Ctrl-C nox waits this long for the runner, which forwards the interrupt to
        # pytest and records the run `interrupted` (nox's default kills it after 0.3 s).
        session.run(python, "-m", "ci_register", "run", suite.name, *session.posargs,
                    external=suite.is_gpu, interrupt_timeout=120, terminate_timeout=10)

    session_fn.__doc__ = suite.description
    session_fn.__name__ = suite.name.replace("-", "_")
    return nox.session(
        name=suite.name,
        python=None if suite.is_gpu else PYTHON,
        venv_backend="none" if suite.is_gpu else None,
        tags=suite.tags(),
        reuse_venv=not suite.is_gpu,
    )(session_fn)


for _suite in CATALOG.suites.values():
    globals()[f"suite_{_suite.name.replace('-', '_')}"] = _suite_session(_suite)


@nox.session(python=PYTHON, tags=["cpu", "framework"])
def tests(session: nox.Session) -> None:
    """The framework's own tests (CPU only)."""
    _install_project(session, "cpu", "dev")
    args = session.posargs or ["tests"]
    # pytest exit 5 means "no tests collected": here that is a broken tree, never a pass.
    session.run("python", "-m", "pytest", *args, success_codes=[0])


@nox.session(python=PYTHON, tags=["cpu", "framework"])
def lint(session: nox.Session) -> None:
    """Ruff over the framework, the suites and this noxfile."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")


@nox.session(venv_backend="none", tags=["cpu", "framework"])
def registry(session: nox.Session) -> None:
    """List every suite and its registered files (static; nothing imported)."""
    session.run(sys.executable, "-m", "ci_register", "list", *session.posargs, external=True)


@nox.session(venv_backend="none", tags=["cpu", "framework"])
def matrix(session: nox.Session) -> None:
    """GitHub Actions matrix JSON: -- --event pull_request|push|schedule [--base REF | --changed-files F...]."""
    session.run(sys.executable, "-m", "ci_register", "matrix", *session.posargs, external=True)


@nox.session(venv_backend="none", tags=["cpu", "framework"])
def rerun(session: nox.Session) -> None:
    """The suite command for the files a SPEC names (path, name, glob, folder[::test]); --run runs it."""
    if not session.posargs:
        session.error("usage: nox -s rerun -- SPEC [--suite NAME] [--run] [pytest args]")
    session.run(sys.executable, "-m", "ci_register", "rerun", *session.posargs, external=True)


@nox.session(name="history-browse", python=PYTHON)  # no tag: a server, never in `nox -t`
def history_browse(session: nox.Session) -> None:
    """Browse the metric history in datasette, read-only: -- [PATH] (default history.db)."""
    session.install("datasette", "sqlite-utils>=4.2,<5")
    path = session.posargs[0] if session.posargs else os.environ.get("GATES_HISTORY") or str(ROOT / "history.db")
    if not Path(path).is_file():
        session.error(f"no history at {path}; run a suite first or pass -- PATH")
    # -i (immutable) skips the write-ahead log: fold it into the file first.
    session.run("sqlite-utils", path, "PRAGMA wal_checkpoint(TRUNCATE)", silent=True)
    session.run("datasette", "-i", path)


@nox.session(name="gate-report", python=PYTHON, reuse_venv=True, tags=["cpu", "framework"])
def gate_report(session: nox.Session) -> None:
    """Report runs from the history: -- [--suite S] [--since 30d] [--format text|md|json|html]."""
    _install_project(session)  # no torch: reports need sqlite-utils, numpy, tabulate only
    session.run("gate-report", *session.posargs)


@nox.session(name="bench-gates", python=PYTHON, reuse_venv=True, tags=["bench"])
def bench_gates(session: nox.Session) -> None:
    """Gate detection benchmark vs Otava, E-divisive, bands, z-score and oracles: -- [--quick]."""
    # Otava 0.8.0 pins numpy==2.2.0 and scipy<1.17; E-divisive declares numpy<2 and gevent
    # (which does not build here), so it goes in without its declared dependencies.
    session.install("numpy==2.2.0", "scipy>=1.13,<1.17", "tabulate>=0.9")
    for args in (("apache-otava==0.8.0",),
                 ("--no-deps", "signal-processing-algorithms", "more-itertools", "structlog",
                  "typing-extensions", "pyyaml")):
        try:
            session.install(*args)
        except nox.command.CommandFailed:
            session.warn(f"could not install {args[-1] if len(args) == 1 else args[1]}; "
                         "the benchmark runs without that peer and says so")
    # A full run refreshes the committed results; --quick only prints.
    out = [] if "--quick" in session.posargs else ["--out", "benchmarks/results/bench_gates.md"]
    session.run("python", "benchmarks/bench_gates.py", *out, *session.posargs)
