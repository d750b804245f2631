"""Nox sessions from a catalog: one per suite, from one call in any repository's noxfile.

    # noxfile.py of the repository that adopts the tool
    from ci_register.running.nox_sessions import install
    install("ci/catalog.toml")          # relative to this noxfile's folder

Each suite becomes a session of its name, tagged with its backend, GPU count, schedule
and ``gpu``/``cpu``, whose docstring is the suite's description; it runs
``python -m ci_register run SUITE --catalog ... --root ...`` with the session's
arguments after ``--``.

- GPU suites run in the interpreter that runs nox (the GPU image's Python, with its
  CUDA or ROCm torch): that interpreter must have this package's dependencies
  (``pip install -e /path/to/gpu-ci-gates`` beside the image's torch, or
  ``"/path/to/gpu-ci-gates[gpu]"`` without one); the session checks and says so, with
  the install line for where this package came from (:func:`install_hint`), instead of
  failing later on a missing import.
- CPU suites get a virtualenv per session; ``prepare(session, suite)`` installs into
  it. The default (:func:`prepare_commands`) installs this package (from where it came
  from, :func:`distribution_spec`) together with the adopting repository's own package
  when the root has a ``pyproject.toml`` or ``setup.py`` (editable), then the suite's
  ``install`` list (a package kept elsewhere, SGLang's ``python/``: ``install = ["-e",
  "./python"]``), then its ``uninstall`` list. ``-- --dry-run`` (the plan only)
  installs nothing and runs in the interpreter that runs nox.
- :func:`default_sessions` names the CPU per-commit suites: ``nox.options.sessions =
  default_sessions(install(...))`` makes a bare ``nox`` run only those.

Histories: outside CI (no ``CI`` variable) a run with neither ``--history`` nor
``GATES_HISTORY`` records into ``.gates/local-history.db`` under the root (keep it out of
git): a laptop's run never becomes a committed baseline by accident; ``--history
history.db`` writes the committed one on purpose.

Exit codes: ``ci_register run`` exits 2 for bad input or a hardware mismatch and 1 for
a failing test or gate. Nox reduces every failed session to 1, so a session whose
command exited 2 marks it, and nox's process exits 2 at the end (after its summary):
CI can tell a wrong runner from a failing test.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import importlib.metadata
import importlib.util
import inspect
import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ci_register.running.executed import begin, in_nox

# Before this module's own imports: what the nox session executes is recorded for test
# selection (ci_register.running.executed); nox runs in the noxfile's folder, the root. Only
# the runner's command gets the environment that traces it (pip installs stay untraced).
_TRACE_ENV = begin(Path.cwd(), watch_spawns=False, set_environ=False) if in_nox(sys.argv) else {}

from ci_register.registered.catalog import Catalog, Suite, load_catalog  # noqa: E402 - after the tracer
from ci_register.running.runner_map import SESSION_FILES_ENV, loaded_files  # noqa: E402

__all__ = ["DIST", "EXIT_INPUT", "LOCAL_HISTORY", "RUN_NEEDS", "install", "default_sessions",
           "distribution_spec", "history_env", "install_hint", "mark_exit", "missing_message",
           "missing_modules", "plan_only_call",
           "prepare_commands", "venv_lock"]

DIST = "gpu-ci-gates"
EXIT_INPUT = 2  # bad input or wrong hardware: nothing was run
LOCAL_HISTORY = Path(".gates") / "local-history.db"
_PACKAGE_PARENT = Path(__file__).resolve().parents[2]
_EXIT = {"code": 0}


def _exit_hook() -> None:
    # Runs after nox's main has printed its summary and called sys.exit(1).
    if _EXIT["code"]:
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
        os._exit(_EXIT["code"])


def mark_exit(code: int) -> None:
    """Make the nox process exit with ``code`` (the highest asked for) once nox is done."""
    if not _EXIT["code"]:
        atexit.register(_exit_hook)
    _EXIT["code"] = max(_EXIT["code"], code)


def _origin() -> tuple[str, str]:
    """Where this package comes from: ("checkout", folder), ("git", "git+URL@COMMIT"),
    ("path", folder or wheel) or ("index", version) (PEP 610's direct_url.json)."""
    if (_PACKAGE_PARENT / "pyproject.toml").is_file():
        return "checkout", str(_PACKAGE_PARENT)
    try:
        dist = importlib.metadata.distribution(DIST)
    except importlib.metadata.PackageNotFoundError:
        raise RuntimeError(f"{DIST} is neither installed nor a source checkout; install it from a "
                           "checkout (pip install /path/to/gpu-ci-gates) or a git URL "
                           f"(pip install '{DIST} @ git+URL@COMMIT')") from None
    info = json.loads(dist.read_text("direct_url.json") or "{}")
    url = str(info.get("url", ""))
    vcs = info.get("vcs_info") or {}
    if vcs.get("vcs") == "git" and url:
        if url.startswith("file:///"):  # pip <= 23.2 (Python 3.11's own) rejects a file URL
            url = "file://localhost/" + url[len("file:///"):]  # without a host in a requirement
        return "git", f"git+{url}@{vcs.get('commit_id') or vcs.get('requested_revision') or 'HEAD'}"
    if url.startswith("file://"):
        return "path", url[len("file://"):]
    return "index", dist.version


def distribution_spec() -> list[str]:
    """pip arguments that install this package into a fresh virtualenv: the source
    checkout it is imported from, else where it was installed from (a git URL at the
    commit it was installed at, a local wheel or folder), else the same version from the
    configured index."""
    kind, where = _origin()
    if kind == "git":
        return [f"{DIST} @ {where}"]
    if kind == "index":
        return [f"{DIST}=={where}"]
    return [where]


def install_hint(extras: str = "") -> str:
    """The pip line that installs this package (with ``extras``) as it was installed
    here: a checkout's folder, the git URL and commit, or the wheel."""
    try:
        kind, where = _origin()
    except RuntimeError:
        kind, where = "git", "git+URL@COMMIT"
    more = f"[{extras}]" if extras else ""
    if kind == "checkout":
        return f"pip install -e '{where}{more}'"
    if kind == "git":
        return f"pip install '{DIST}{more} @ {where}'"
    if kind == "path":  # a folder or a wheel file (pip takes extras on either)
        return f"pip install '{where}{more}'"
    return f"pip install '{DIST}{more}=={where}'"


def missing_message(suite: str, missing: list[str]) -> str:
    """A GPU session's one line when nox's Python lacks what a run imports."""
    return (f"{suite}: {sys.executable} lacks {', '.join(missing)}; install this package into it "
            f"first: {install_hint()} beside the image's torch, or {install_hint('gpu')} without one")


def _own_project(root: Path) -> bool:
    """The adopting repository is a Python package (its own code is what suites test)."""
    return (root.resolve() != _PACKAGE_PARENT
            and ((root / "pyproject.toml").is_file() or (root / "setup.py").is_file()))


def prepare_commands(suite: Suite, root: Path) -> list[list[str]]:
    """What the default ``prepare`` runs in a CPU suite's venv, in order: ``["install",
    ...]`` is ``session.install(...)``, ``["uninstall", ...]`` is ``pip uninstall -y``.
    This package and the repository's own (editable, where the root has a pyproject)
    go in one resolve."""
    cmds = [["install", *distribution_spec(), *(["-e", str(root)] if _own_project(root) else [])]]
    if suite.install:
        cmds.append(["install", *suite.install])
    if suite.uninstall:
        cmds.append(["uninstall", *suite.uninstall])
    return cmds


RUN_NEEDS = ("pytest", "sqlite_utils", "scipy")  # what `ci_register run` imports beyond stdlib


def missing_modules(names: tuple[str, ...] = RUN_NEEDS) -> list[str]:
    """The modules of ``names`` this interpreter cannot import (a GPU session's check)."""
    return [m for m in names if importlib.util.find_spec(m) is None]


@contextlib.contextmanager
def venv_lock(session: Any):
    """One pip at a time per session venv: concurrent `nox -s cpu` in one checkout share
    .nox/cpu (reuse_venv), and two pips installing into it at once break it."""
    location = getattr(getattr(session, "virtualenv", None), "location", None)
    if not location:
        yield
        return
    with open(f"{location}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _default_prepare(root: Path) -> Callable[[Any, Suite], None]:
    def prepare(session: Any, suite: Suite) -> None:
        with venv_lock(session):
            for verb, *args in prepare_commands(suite, root):
                if verb == "install":
                    session.install(*args)
                else:
                    # run_install: an install step, which `--install-only` runs too
                    # (session.run is skipped there, and the CUDA builds stay).
                    session.run_install("python", "-m", "pip", "uninstall", "-y", *args)
    return prepare


def _caller_folder() -> Path:
    for frame in inspect.stack()[2:]:
        if frame.filename != __file__:
            return Path(frame.filename).resolve().parent
    return Path.cwd()


def history_env(env: dict[str, str], args: list[str], root: Path) -> Path | None:
    """The untracked history a local run records into, or None where the caller chose
    (``--history``, ``GATES_HISTORY``) or CI runs (``CI`` set, as on GitHub Actions)."""
    if env.get("CI") or env.get("GATES_HISTORY") or any(a == "--history" or a.startswith("--history=") for a in args):
        return None
    return root / LOCAL_HISTORY


def history_url_to_env(args: list[str]) -> tuple[list[str], str | None]:
    """``args`` without a ``--history`` that names a database URL, and that URL (or None).

    nox prints each command it runs, and a command line is readable by every user of the
    host: a URL's password given as ``nox -s S -- --history postgresql://...`` was in the
    CI log. The session hands it to the runner in ``GATES_HISTORY`` instead."""
    from ci_register.planning.history_value import is_database_url  # noqa: PLC0415

    out: list[str] = []
    url = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--history" and i + 1 < len(args) and is_database_url(args[i + 1]):
            url, i = args[i + 1], i + 2
            continue
        if arg.startswith("--history=") and is_database_url(arg.partition("=")[2]):
            url, i = arg.partition("=")[2], i + 1
            continue
        out.append(arg)
        i += 1
    return out, url


def default_sessions(catalog: Catalog) -> list[str]:
    """The CPU per-commit suites: what a bare ``nox`` should run (never a missing name)."""
    return [s.name for s in catalog.suites.values() if not s.is_gpu and not s.nightly]


def _session(suite: Suite, catalog_path: Path, root: Path, python: str | None,
             prepare: Callable[[Any, Suite], None]) -> Callable[..., None]:
    import nox  # noqa: PLC0415 - only a noxfile calls install()

    def session_fn(session: nox.Session) -> None:
        # A plan-only call (--dry-run) reads only the catalog, the registrations and the
        # history: nox's own interpreter does it, with nothing installed (a CPU suite's
        # install took minutes before the plan printed).
        plan_only = "--dry-run" in session.posargs
        posargs, url = history_url_to_env(list(session.posargs))
        if url is not None:
            session.env["GATES_HISTORY"] = url  # prepare (the postgres extra) reads it too
        if plan_only:
            session.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PACKAGE_PARENT), os.environ.get("PYTHONPATH")]))
            interpreter = sys.executable
        elif suite.is_gpu:
            # The machine's own Python (the image's CUDA/ROCm torch), with this package (it
            # imported this module) and, checked below, its dependencies.
            session.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PACKAGE_PARENT), os.environ.get("PYTHONPATH")]))
            session.env.setdefault("NCCL_NVLS_ENABLE", "0")  # never NVLink multicast (shared hosts)
            missing = missing_modules()
            if missing:
                mark_exit(EXIT_INPUT)
                session.error(missing_message(suite.name, missing))
            interpreter = sys.executable
        else:
            prepare(session, suite)
            interpreter = "python"
        local = history_env({**os.environ, **session.env}, posargs, root)
        if local is not None:
            local.parent.mkdir(parents=True, exist_ok=True)
            session.env["GATES_HISTORY"] = str(local)
            session.log(f"local run: history {local} (not CI; --history history.db writes the committed one)")
        # The runner map: what this nox process loaded (the noxfile and its imports) goes
        # with the runner's own files into the recorded map that test selection reads.
        session.env[SESSION_FILES_ENV] = json.dumps(loaded_files(root))
        if _TRACE_ENV:  # the runner, pytest and what they start trace into this process's folder
            paths = (session.env.get("PYTHONPATH") or os.environ.get("PYTHONPATH") or "").split(os.pathsep)
            session.env.update(_TRACE_ENV, PYTHONPATH=os.pathsep.join(
                dict.fromkeys([_TRACE_ENV["PYTHONPATH"].split(os.pathsep)[0], *filter(None, paths)])))
        cmd = [interpreter, "-m", "ci_register", "run", suite.name, "--catalog", str(catalog_path),
               "--root", str(root), *posargs]
        try:
            # On Ctrl-C nox waits this long for the runner, which forwards the interrupt to
            # pytest and records the run `interrupted` (nox's default kills it after 0.3 s).
            with relaying_sigint():
                session.run(*cmd, external=suite.is_gpu or plan_only, interrupt_timeout=120,
                            terminate_timeout=10)
        except nox.command.CommandFailed as exc:
            if exc.return_code == EXIT_INPUT:
                mark_exit(EXIT_INPUT)
                session.error(f"{suite.name}: exit {EXIT_INPUT}: bad input, wrong hardware, or pytest "
                              "stopped early; the runner's error line above says which, and what ran")
            raise

    session_fn.__doc__ = suite.description
    session_fn.__name__ = suite.name.replace("-", "_").replace(".", "_")
    # A plan-only call makes no virtualenv either: nox builds one (pip included) before
    # the session runs, 60 s on a loaded machine for a plan that needs none.
    bare = suite.is_gpu or plan_only_call()
    return nox.session(
        name=suite.name,
        python=None if bare else python,
        venv_backend="none" if bare else None,
        tags=suite.tags(),
        reuse_venv=not bare,
    )(session_fn)


def plan_only_call(argv: list[str] | None = None) -> bool:
    """Whether this nox call asks for plans only: ``--dry-run`` after ``--`` (nox hands
    what follows ``--`` to every session it runs)."""
    argv = sys.argv if argv is None else argv
    return "--" in argv and "--dry-run" in argv[argv.index("--") + 1:]


@contextlib.contextmanager
def relaying_sigint():
    """While nox waits for the runner, a SIGINT that reaches nox alone (``kill -INT``
    of its pid, a CI agent signalling the top process) is passed on to nox's children.

    nox assumes a terminal's Ctrl-C reached the whole group and only waits
    (``interrupt_timeout``) for the child: the runner never heard of it, ran on, and
    nox exited 0. The runner takes a second SIGINT within a second as the same one (the
    terminal's and this relay both arrive on a real Ctrl-C)."""
    import signal  # noqa: PLC0415

    from ci_register.running.procs import _proc_stats  # noqa: PLC0415

    me = os.getpid()

    def relay(signum: int, frame: Any) -> None:
        for pid, fields in _proc_stats():
            if len(fields) > 1 and int(fields[1]) == me and fields[0] != b"Z":
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGINT)
        raise KeyboardInterrupt  # what nox expects: it then waits for the runner

    try:
        old = signal.signal(signal.SIGINT, relay)
    except ValueError:  # not the main thread: leave nox's handling as it is
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def install(
    catalog: str | Path,
    *,
    root: str | Path | None = None,
    python: str | None = None,
    prepare: Callable[[Any, Suite], None] | None = None,
) -> Catalog:
    """Register one nox session per suite of ``catalog`` and return the catalog.

    ``root``: the repository root (default: the calling noxfile's folder); a relative
    ``catalog`` is taken from there. ``python``: the CPU sessions' Python version
    (default: the one running nox). ``prepare``: installs a CPU suite's virtualenv.
    """
    root = Path(root).resolve() if root is not None else _caller_folder()
    path = Path(catalog)
    path = path if path.is_absolute() else root / path
    cat = load_catalog(path)
    version = python or f"{sys.version_info.major}.{sys.version_info.minor}"
    for suite in cat.suites.values():
        _session(suite, path, root, version, prepare or _default_prepare(root))
    return cat
