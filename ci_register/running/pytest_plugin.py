"""pytest side of a suite run: per-file time limits and "registered but ran no tests".

Loaded by the runner with ``-p ci_register.running.pytest_plugin --ci-plan PLAN.json``.
Without ``--ci-plan`` it does nothing.

- Each planned file gets a wall-time budget derived from its expected duration
  (:func:`file_timeout`); each test's pytest-timeout limit is what is left of
  its file's budget, so one hung test cannot eat a shard.
- A planned file that collects zero tests fails the session: SGLang users have
  seen CI green while a registered file ran nothing.
- A session fails, in one line saying why, when it executed no test (every test
  skipped, on any backend), and a GPU suite's when it skipped tests because torch here
  sees no GPU (a CPU-only torch in nox's Python on a GPU host, or faked hardware):
  green would mean nothing was tested.
- A session that ends with exit 0 before every selected test ran to its end
  (``pytest.exit(returncode=0)`` in a test or a hook, a plugin's ``shouldstop``) exits 2,
  interrupted: a suite that stops early never passes.

Both set pytest's exit status before the gates plugin records it (``tryfirst``), so
the stored run says what the session said.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from ci_register.registered.paths import MAX_PLAN_BYTES, read_json
from ci_register.running.budget import file_timeout

__all__ = ["NO_GPU_SKIP", "file_timeout", "suite_problem"]

_PLAN_KEY = pytest.StashKey[dict]()


def _write_progress(path: Path | None, data: dict) -> None:
    """Tell the supervising runner what runs now and until when (atomic replace)."""
    if path is None:
        return
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass  # the runner then falls back to the run's overall deadline


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ci-register", "suite runs (ci_register)")
    group.addoption("--ci-plan", default=None, metavar="PATH", help="plan JSON written by `python -m ci_register run`")
    group.addoption("--ci-progress", default=None, metavar="PATH", help="file the running test and its file's deadline are written to (read by the runner)")


class _PlanState:
    def __init__(self, plan: dict, rootdir: Path, progress: Path | None = None) -> None:
        self.rootdir = rootdir
        self.progress = progress
        self.budget = {f["path"]: file_timeout(float(f["expected"])) for f in plan.get("files", [])}
        self.collected: dict[str, int] = dict.fromkeys(self.budget, 0)
        self.skipped_modules: set[str] = set()
        self.started: dict[str, float] = {}
        self.ran: set[str] = set()  # nodeids whose run protocol ended (not cut short)
        self.suite = str(plan.get("suite") or "")
        self.gpu = bool(plan.get("gpu"))
        self.exitstatus: int | None = None  # the session's, as this plugin left it

    def rel(self, fspath: str | Path) -> str:
        try:
            return Path(fspath).resolve().relative_to(self.rootdir.resolve()).as_posix()
        except ValueError:
            return Path(fspath).as_posix()


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("--ci-plan")
    if not path:
        return
    try:
        # A regular file, bounded: /dev/zero read until memory ran out, a FIFO hung.
        plan = read_json(path, MAX_PLAN_BYTES)
    except (OSError, ValueError) as exc:  # UnicodeDecodeError, JSONDecodeError too
        raise pytest.UsageError(f"--ci-plan {path}: cannot read the plan ({exc}); rerun through `python -m ci_register run`") from None
    if not isinstance(plan, dict) or not isinstance(plan.get("files", []), list):
        raise pytest.UsageError(f"--ci-plan {path}: not a plan (a JSON object with a 'files' list); "
                                "rerun through `python -m ci_register run`")
    progress = config.getoption("--ci-progress")
    try:
        root = Path(plan.get("root") or config.rootpath)
        state = _PlanState(plan, root, Path(progress) if progress else None)
    except (KeyError, TypeError, ValueError) as exc:
        raise pytest.UsageError(f"--ci-plan {path}: not a plan the runner wrote ({type(exc).__name__}: "
                                f"{exc}); rerun through `python -m ci_register run`") from None
    config.stash[_PLAN_KEY] = state


def _state(config: pytest.Config) -> _PlanState | None:
    return config.stash.get(_PLAN_KEY, None)


def pytest_itemcollected(item: pytest.Item) -> None:
    # Counted before -k/-m deselection: the question is "does the file define
    # tests", not "did the user's filter leave any".
    state = _state(item.config)
    if state is None:
        return
    rel = state.rel(item.path)
    if rel in state.collected:
        state.collected[rel] += 1


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    # Runs before pytest-timeout's own wrapper, so the marker we add is the one it reads.
    state = _state(item.config)
    progress: dict = {}
    if state is not None:
        rel = state.rel(item.path)
        if rel in state.budget:
            start = state.started.setdefault(rel, time.monotonic())
            left = state.budget[rel] - (time.monotonic() - start)
            if not any(m.name == "timeout" for m in item.iter_markers()):
                item.add_marker(pytest.mark.timeout(max(left, 1.0)))
            started = time.time() - (time.monotonic() - start)
            progress = {"path": rel, "started": started, "deadline": started + state.budget[rel]}
        _write_progress(state.progress, {**progress, "nodeid": item.nodeid})
    outcome = yield
    if state is not None:
        if outcome.excinfo is None:  # pytest.exit() or Ctrl-C inside it: it never ended
            state.ran.add(item.nodeid)
        _write_progress(state.progress, progress)



# What ``suitelib.hardware`` says when torch sees no GPU ("needs a CUDA GPU (found
# none)", "needs 2 CUDA GPUs (found none)"): on a GPU suite, whose hardware check
# found one, the GPU stack of this Python is missing, not the GPU.
NO_GPU_SKIP = "(found none)"
_RAN = ("passed", "failed", "error", "xfailed", "xpassed")


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return str(text).removeprefix("Skipped: ")


def suite_problem(suite: str, gpu: bool, executed: int, skip_reasons: list[str]) -> str | None:
    """Why a suite's session must fail though pytest passed it, in one line, or None.

    A session that executed no test proves nothing, whatever its backend: every test
    skipped (a missing dependency, a GPU not seen, a skip marker left in) reads as green
    otherwise. A GPU suite also fails when any test skipped for want of a GPU stack.
    """
    no_stack = [r for r in skip_reasons if NO_GPU_SKIP in r] if gpu else []
    if no_stack:
        import sys  # noqa: PLC0415

        return (f"suite {suite}: {len(no_stack)} test(s) skipped because torch in "
                f"{sys.executable} sees no GPU ({no_stack[0]}); install a CUDA build of "
                "torch there (a GPU suite never passes by skipping its GPU tests)")
    if executed == 0:
        why = f"{len(skip_reasons)} skipped: {skip_reasons[0]}" if skip_reasons else "none ran"
        return (f"suite {suite}: no test executed ({why}); a suite that runs nothing "
                "fails, it never skips its way to green")
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = _state(session.config)
    if state is None:
        return
    # The session reached its end (recording follows; the overall deadline covers it):
    # the runner need not look for an unfinished run.
    _write_progress(state.progress, {"session": "finished"})
    # A module skipped at collection (allow_module_level) counts as having run: it
    # reports a skip with its reason, not silence.
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    for report in tr.stats.get("skipped", []) if tr else []:
        fspath = report.nodeid.split("::")[0] if report.nodeid else None
        if fspath:
            state.skipped_modules.add(state.rel(Path(session.config.rootpath, fspath)))
    empty = sorted(p for p, n in state.collected.items() if n == 0 and p not in state.skipped_modules)
    if empty and exitstatus in (0, 1, 5):
        for p in empty:
            msg = f"{p}: registered but ran no tests; add tests or remove its registration"
            if tr:
                tr.write_line(f"ERROR {msg}", red=True, bold=True)
            else:
                print(f"ERROR {msg}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if tr is not None and exitstatus in (0, 1, 5):
        # An error (in setup or collection) counts as run: it already fails the session.
        executed = sum(1 for k in _RAN for r in tr.stats.get(k, [])
                       if k == "error" or getattr(r, "when", "call") == "call")
        reasons = [_skip_reason(r) for r in tr.stats.get("skipped", [])]
        problem = suite_problem(state.suite, state.gpu, executed, reasons)
        if problem:
            tr.write_line(f"ERROR {problem}", red=True, bold=True)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if int(session.exitstatus) == 0 and not session.config.option.collectonly:
        # pytest.exit(returncode=0) in a test or a hook, or a plugin's shouldstop: the
        # session ended "passed" with tests of the plan never run. Stopped early: exit 2.
        left = [i.nodeid for i in session.items if i.nodeid not in state.ran]
        if left:
            msg = (f"the session ended with exit 0 before {len(left)} test(s) ran to their "
                   f"end (first: {left[0]}): pytest.exit() or a hook stopped it; a suite "
                   "that stops early never passes")
            if tr is not None:
                tr.write_line(f"ERROR {msg}", red=True, bold=True)
            else:
                print(f"ERROR {msg}")
            session.exitstatus = pytest.ExitCode.INTERRUPTED
    state.exitstatus = int(session.exitstatus)


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config: pytest.Config):  # noqa: ANN201 - pytest's own result type
    # `--fixtures` and `--fixtures-per-test` run a session that executes no test, which the
    # check above fails, then return 0 whatever the session's status: the suite ran
    # nothing and exited 0. The session's status wins over a 0.
    result = yield
    state = _state(config)
    if state is not None and result == 0 and state.exitstatus:
        return state.exitstatus
    return result
