"""One suite run, as a pipeline of small steps.

collect -> select -> plan -> check hardware -> run pytest -> gate (-> confirm) -> exit code

Each step either returns the next value or an int, which ends the run as its
exit code (nox's workflow has the same shape). Exit codes: 0 passed, 1 tests or
a gate failed, 2 usage or bad input (including hardware that cannot run the suite).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ci_register.planning import durations
from ci_register.planning.history_value import HISTORY_ENV, history_argv, history_problem
from ci_register.planning.partition import (
    PartitionError,
    Shard,
    assign,
    lower_bound,
    parse_partition,
)
from ci_register.registered.catalog import (
    DEFAULT_CATALOG,
    Catalog,
    CatalogError,
    Suite,
    load_catalog,
)
from ci_register.registered.collect import Collection, Registration, collect
from ci_register.running.budget import file_timeout
from ci_register.running.executed import runner_entries
from ci_register.running.hardware import check, detect_for
from ci_register.running.redact import mask_secrets, raw_stream, show_controls
from ci_register.running.relay import Relay, commands_stopped
from ci_register.running.runner_map import runner_files
from ci_register.running.supervise import Supervised, die_with_parent, run_supervised

__all__ = ["Attempt", "RunOptions", "confirm_chain", "parse_run_args", "run_suite", "plan_text", "Plan", "make_plan", "GATE_MODES"]

GATE_MODES = ("enforce", "warn", "off")
DEFAULT_CONFIRM = 4  # confirm reruns at most: each after the first only while the reruns'
# mean is borderline (gates.model.stats.DEFAULTS.confirm_attempts; the sequential confirm)
MAX_CONFIRM = 4  # the sequential confirm's boundaries are set for at most 4 reruns
# The steps after pytest (the gate, marking an unfinished run, the baseline snapshot)
# each end within this many seconds: a gate waiting on a locked database or a hung
# PostgreSQL server would otherwise hold the CI job until the job's own limit, silent.
STEP_TIMEOUT_ENV = "GATES_STEP_TIMEOUT_S"
DEFAULT_STEP_TIMEOUT_S = 1800.0


RUN_HELP = """usage: python -m ci_register run SUITE [options] [pytest args...]
       nox -s SUITE -- [options] [pytest args...]

Run one suite: collect, check hardware, partition, pytest, record, gate.

options:
  --partition I/N       run shard I of N (default 1/1)
  --dry-run             print the plan only; touch no GPU
  --history PATH        history file (default $GATES_HISTORY, else ./history.db)
  --baseline SNAPSHOT   gate and plan against this baseline snapshot (default
                        $GATES_BASELINE; `gate-report snapshot`): the history starts
                        as its copy and keeps only this shard's runs at the end
  --gate MODE           enforce (default), warn or off
  --confirm N           reruns of tripped tests, 0 to 4 (default 4)
  --nightly             include nightly-only files
  --file PATH[::TEST]   only this file (repeatable)
  --labels A,B          only files without labels or with one of these (miles' PR gating)
  --results DIR         plan, JUnit and progress files (default results)
  --catalog FILE        suite catalog (default suites/catalog.toml)
  --root PATH           repository root (default .)
Anything else goes to pytest in order.

exit codes: 0 passed; 1 a test or an enforced gate failed, a registered file ran
no tests, the session executed no test, or pytest crashed or hung; 2 bad input or
hardware, or pytest stopped early (a test file that fails to import); 128+N
interrupted by signal N (the run is recorded `interrupted` with what finished).

The gate and the other steps after pytest each end within $GATES_STEP_TIMEOUT_S seconds
(default 1800); one that runs past it is killed and the session fails (exit 1)."""


class UsageError(ValueError):
    pass


class _ArgParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, like every other usage error
        raise UsageError(message)


@dataclass
class RunOptions:
    suite: str
    partition: tuple[int, int] | None = None
    dry_run: bool = False
    history: str | None = None
    baseline: str | None = None  # a baseline snapshot (gates.store.snapshot) the history starts from
    gate: str = "enforce"
    confirm: int = DEFAULT_CONFIRM
    nightly: bool | None = None
    files: list[str] = field(default_factory=list)
    labels: list[str] | None = None  # miles' PR gating: files without labels or with one of these
    results: Path = Path("results")
    catalog: Path = DEFAULT_CATALOG
    root: Path = Path(".")
    pytest_args: list[str] = field(default_factory=list)
    suite_pytest_args: list[str] = field(default_factory=list)  # from the catalog
    step_timeout_s: float = DEFAULT_STEP_TIMEOUT_S  # each step after pytest ($GATES_STEP_TIMEOUT_S)


# The pytest plugins a run cannot do without: the recorder (no history, nothing to gate),
# the progress and plan plugin (deadlines, empty-suite check), JUnit (why pytest stopped).
_OWN_PLUGINS = {
    "gates.record.plugin": "records the run in the history: without it a run is green and stores nothing",
    "ci_register.running.pytest_plugin": "enforces each file's budget and fails a suite that runs nothing",
    "junitxml": "writes the JUnit XML the run reports from",
}


def own_plugin_disabled(args: list[str] | tuple[str, ...]) -> str | None:
    """One line when pytest arguments disable a plugin the run needs (`-p no:NAME`), else None."""
    for i, arg in enumerate(args):
        if arg == "-p" and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith("-p") and not arg.startswith("--"):
            value = arg[2:]
        else:
            continue
        name = value.removeprefix("no:") if value.startswith("no:") else None
        if name in _OWN_PLUGINS:
            return (f"-p no:{name}: a suite run needs pytest plugin {name} (it "
                    f"{_OWN_PLUGINS[name]}); drop that argument")
    return None


def parse_run_args(suite: str, argv: list[str]) -> RunOptions:
    """Our options; everything else passes through to pytest in order."""
    p = _ArgParser(prog=f"nox -s {suite} --", add_help=False, allow_abbrev=False)
    p.add_argument("--partition", default=None)
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--history", default=None)
    p.add_argument("--baseline", default=os.environ.get("GATES_BASELINE") or None)
    p.add_argument("--gate", default="enforce")
    p.add_argument("--confirm", type=int, default=DEFAULT_CONFIRM)
    p.add_argument("--nightly", action="store_true", default=None)
    p.add_argument("--file", dest="files", action="append", default=[])
    p.add_argument("--labels", default=None)
    p.add_argument("--results", default="results")
    p.add_argument("--catalog", default=str(DEFAULT_CATALOG))
    p.add_argument("--root", default=".")
    ns, rest = p.parse_known_args(argv)
    if ns.gate not in GATE_MODES:
        raise UsageError(f"--gate {ns.gate!r}: use one of {', '.join(GATE_MODES)}")
    if not 0 <= ns.confirm <= MAX_CONFIRM:
        # The sequential confirm's boundaries hold ~2% of null trips for up to 4 reruns.
        raise UsageError(f"--confirm {ns.confirm}: give 0 to {MAX_CONFIRM} (the gate's confirm "
                         f"reruns a tripped test at most {MAX_CONFIRM} times, each after the "
                         "first only while the reruns' mean is borderline)")
    # An unset CI variable (`--history "$SHARD_DB"`) fell through to the root's committed
    # history.db, which a run must only write on purpose; a blank or padded one made a
    # file named " " (ci_register.planning.history_value). An empty GATES_HISTORY is unset.
    source, value = (("--history", ns.history) if ns.history is not None
                     else ("GATES_HISTORY", os.environ.get("GATES_HISTORY") or None))
    if value is not None and (problem := history_problem(value)):
        leave_out = " (or leave --history out)" if source == "--history" and not value.strip() else ""
        raise UsageError(f"{source} {mask_secrets(repr(value))}: {problem}{leave_out}")
    if problem := own_plugin_disabled(rest):
        raise UsageError(problem)
    try:
        part = parse_partition(ns.partition) if ns.partition is not None else None
    except PartitionError as exc:
        raise UsageError(str(exc)) from None
    return RunOptions(
        step_timeout_s=step_timeout(os.environ),
        suite=suite,
        partition=part,
        dry_run=ns.dry_run,
        history=ns.history,
        baseline=ns.baseline,
        gate=ns.gate,
        confirm=ns.confirm,
        nightly=ns.nightly,
        files=ns.files,
        labels=[x for x in ns.labels.split(",") if x] if ns.labels is not None else None,
        results=Path(ns.results),
        catalog=Path(ns.catalog),
        root=Path(ns.root),
        pytest_args=rest,
    )


def step_timeout(env: os._Environ[str] | dict[str, str]) -> float:
    """Seconds each step after pytest may run, from ``$GATES_STEP_TIMEOUT_S``."""
    raw = env.get(STEP_TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_STEP_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise UsageError(f"{STEP_TIMEOUT_ENV}={mask_secrets(repr(raw))}: give seconds > 0 "
                         f"(default {DEFAULT_STEP_TIMEOUT_S:g}), or unset it")
    return value


def _step(opts: RunOptions, cmd: list[str], what: str, **kwargs: object) -> int | None:
    """Run one step after pytest; its exit status, or None when it ran past
    ``opts.step_timeout_s`` (then it is killed and one line names it and the setting)."""
    try:
        return subprocess.run(cmd, cwd=opts.root, check=False, timeout=opts.step_timeout_s,
                              **kwargs).returncode  # type: ignore[call-overload]
    except subprocess.TimeoutExpired:
        print(f"error: {what} ran past its {opts.step_timeout_s:g} s limit and was killed; "
              f"{STEP_TIMEOUT_ENV}=SECONDS sets the limit (default {DEFAULT_STEP_TIMEOUT_S:g})",
              file=sys.stderr, flush=True)
        return None


@dataclass
class Plan:
    suite: Suite
    shards: list[Shard]
    index: int  # 1-based shard this process runs
    registrations: dict[str, Registration]
    expected: dict[str, float]
    disabled: list[Registration]
    source: dict[str, str]  # path -> "history" | "est_time"
    note: str = ""  # how the shard count was chosen, when the plan chose it

    @property
    def mine(self) -> Shard:
        return self.shards[self.index - 1]


def expected_durations(regs: list[Registration], suite: Suite, history: str | None) -> tuple[dict[str, float], dict[str, str]]:
    """Expected seconds per file: measured history where there is enough, else est_time."""
    found = durations.lookup(regs, suite, history)
    if found.warning:
        print(f"warning: {found.warning}", file=sys.stderr)
    return durations.expected(regs, found.figures)


def make_plan(collection: Collection, suite: Suite, opts: RunOptions) -> Plan:
    nightly = opts.nightly if opts.nightly is not None else suite.nightly
    regs = collection.for_suite(suite.name, nightly=nightly, labels=opts.labels)
    disabled = [r for r in collection.for_suite(suite.name, include_disabled=True, nightly=nightly, labels=opts.labels) if r.disabled]
    if opts.files:
        # `--file PATH::TEST` selects the file; the node id goes to pytest (see _targets).
        wanted = {Path(f.split("::", 1)[0]).as_posix() for f in opts.files}
        regs = [r for r in regs if r.path in wanted]
    expected, source = expected_durations(regs, suite, opts.history)
    items = [(r.path, expected[r.path]) for r in regs]
    if opts.partition is None and opts.dry_run:
        # A dry run without --partition shows the plan CI would use: shards from the budget.
        from ci_register.planning.schedule import plan_schedule  # noqa: PLC0415

        sched = plan_schedule(items, suite.shard_budget_s, suite.shards, where={r.path: f"{r.path}:{r.line}" for r in regs}, suite=suite.name)
        return Plan(suite, sched.shards, 0, {r.path: r for r in regs}, expected, disabled, source, sched.describe())
    i, n = opts.partition or (1, 1)
    shards = assign(items, n)
    return Plan(suite, shards, i, {r.path: r for r in regs}, expected, disabled, source)


def _targets(items: list[tuple[str, float]], files: list[str]) -> list[str]:
    """pytest targets: a file's node ids where only `--file PATH::TEST` named it, else the file."""
    nodes: dict[str, list[str]] = {}
    whole: set[str] = set()
    for f in files:
        path, sep, test = f.partition("::")
        path = Path(path).as_posix()
        if sep and test:
            nodes.setdefault(path, []).append(f"{path}::{test}")
        else:
            whole.add(path)
    return [t for p, _ in items for t in ([p] if p in whole or p not in nodes else nodes[p])]


def plan_text(plan: Plan) -> str:
    """The dry-run listing: every shard, its files and times, and the makespan's bound."""
    lines = [f"suite {plan.suite.name}: {plan.suite.description}", f"  needs {plan.suite.hardware.describe()}; runs on {', '.join(plan.suite.runner_labels) or '-'}"]
    if plan.note:
        lines.append(f"  {plan.note}")
    n = len(plan.shards)
    durs = list(plan.expected.values())
    makespan = max((s.total for s in plan.shards), default=0.0)
    bound = lower_bound(durs, n)
    for s in plan.shards:
        mark = "  <- this shard" if s.index == plan.index else ""
        lines.append(f"  shard {s.index}/{n}: {len(s.items)} files, expected {s.total:.0f} s{mark}")
        for path, d in s.items:
            r = plan.registrations[path]
            lines.append(f"    {path}:{r.line}  est_time {r.est_time:g} s  expected {d:.0f} s ({plan.source[path]})")
    for r in plan.disabled:
        lines.append(f"  disabled: {r.path}:{r.line}  ({r.disabled})")
    gap = (makespan / bound - 1) * 100 if bound else 0.0
    lines.append(f"  makespan {makespan:.0f} s; lower bound max(total/shards, longest) {bound:.0f} s (+{gap:.1f}%)")
    return "\n".join(lines)


def _plan_json(plan: Plan, run_id: str, root: Path, collection: Collection, confirm_of: str | None = None,
               whole: bool = False) -> dict:
    files = [
        {
            "path": path,
            "line": plan.registrations[path].line,
            "est_time": plan.registrations[path].est_time,
            "expected": plan.expected[path],
            "marker": plan.registrations[path].marker,
            "labels": list(plan.registrations[path].labels),
        }
        for path, _ in plan.mine.items
    ]
    mine = {f["path"] for f in files}
    return {
        "suite": plan.suite.name,
        "gpu": plan.suite.is_gpu,  # ci_register.running.pytest_plugin: a GPU suite must run its tests
        "shard": [plan.index, len(plan.shards)],
        "run_id": run_id,
        "root": str(root.resolve()),
        "confirm_of": confirm_of,
        "files": files,
        "gates": [g.to_json() for g in collection.gates if g.path in mine],
        # The runner map (ci_register.running.runner_map): what nox and this process loaded;
        # the gates recorder stores it with pytest's plugins for test selection.
        "runner_files": runner_files(root),
        # What nox and this process executed (ci_register.running.executed), for a run of the
        # whole suite only (one shard, no --file): a part of it would say "not executed" of
        # what the rest runs. Absent when this process is not traced (CI_REGISTER_TRACE=0).
        **({"executed": ex} if whole and (ex := runner_entries()) is not None else {}),
    }


def _history_path(opts: RunOptions) -> str:
    return opts.history or os.environ.get("GATES_HISTORY") or str(opts.root / "history.db")


def _history_args(opts: RunOptions, flag: str) -> list[str]:
    """The history on a child's command line: a file path; never a database URL, which
    `main_run` has put in GATES_HISTORY for every child (history_value.history_argv)."""
    args, env = history_argv(flag, _history_path(opts))
    if env and os.environ.get(HISTORY_ENV) != env[HISTORY_ENV]:
        os.environ.update(env)  # a caller other than main_run: the children still get it
    return args


def _one_word(args: list[str]) -> list[str]:
    """``[flag, value]`` as ``["flag=value"]`` (nothing stays nothing)."""
    return [f"{args[0]}={args[1]}"] if len(args) == 2 else args


STARTUP_S = 300.0  # start-up, collection and recording, on top of the files' budgets


def _tag(plan: dict) -> str:
    """Per-run file names: concurrent runs of one suite in one checkout never collide."""
    i, n = plan["shard"]
    return f"{plan['suite']}-{i}-of-{n}-{plan['run_id'][:12]}"


@dataclass(frozen=True)
class Ran:
    """One supervised pytest: its exit code, and whether the run it recorded never finished
    (crashed, hung, killed: marked so in the history, never gated or a baseline)."""

    rc: int
    unfinished: bool = False
    no_tests: bool = False  # pytest collected nothing (its exit 5): rc is 1, a failure


def _pytest(plan_file: Path, plan: dict, opts: RunOptions, targets: list[str], extra: list[str]) -> Ran:
    i, n = plan["shard"]
    opts.results.mkdir(parents=True, exist_ok=True)
    junit = opts.results / f"junit-{_tag(plan)}.xml"
    # Absolute: pytest runs in --root, and a test may chdir (the plugin writes this file
    # before and after every test; a relative path would blind the runner).
    progress = (opts.results / f"progress-{_tag(plan)}.json").resolve()
    plan_file = plan_file.resolve()
    # Every value of ours as one "--option=value" word: pytest takes each word not starting
    # with "-" that names an existing path into its rootdir, without an ini file. A history
    # outside the tree existed for a confirm rerun but not for the first attempt, so the
    # rerun's rootdir rose above the tree and its nodeids gained the tree's folder name.
    cmd = [sys.executable, "-m", "pytest", "-p", "ci_register.running.pytest_plugin", f"--ci-plan={plan_file}", f"--ci-progress={progress}", f"--junitxml={junit}", "-o", "junit_family=xunit2"]
    cmd += ["-p", "gates.record.plugin", f"--gates-suite={plan['suite']}", f"--gates-shard={i}/{n}", f"--gates-run-id={plan['run_id']}", f"--gates-plan={plan_file}", *_one_word(_history_args(opts, "--gates-history"))]
    cmd += [*opts.suite_pytest_args, *targets, *extra]
    print("+ " + mask_secrets(" ".join(cmd)), flush=True)
    deadline = sum(file_timeout(float(f["expected"])) for f in plan["files"]) + STARTUP_S
    try:
        # A runner killed by SIGKILL records nothing: its watchdog marks the run.
        orphaned = _finish_cmd(opts, plan["run_id"], "crashed", None,
                               "the suite runner was killed while pytest ran; its watchdog "
                               "stopped pytest's process group")
        # Everything pytest prints is the tests' text: relayed line by line through the
        # console's sanitizer, with workflow commands stopped around it (relay).
        with commands_stopped(raw_stream(sys.stdout)):
            out = run_supervised(cmd, cwd=opts.root, progress=progress, deadline_s=deadline,
                                 if_runner_dies=orphaned,
                                 relay=Relay(raw_stream(sys.stdout), raw_stream(sys.stderr)))
    finally:
        progress.unlink(missing_ok=True)
        progress.with_name(progress.name + ".tmp").unlink(missing_ok=True)
    _show_controls_in(junit)
    return _settle(out, plan, opts)


def _show_controls_in(junit: Path) -> None:
    """The JUnit XML (uploaded, shown by test-report viewers) with invisible characters
    of test names and texts as escapes, as on every other surface: a file named with
    U+202E reads as it is. Its secrets were masked as pytest made each report."""
    try:
        text = junit.read_text(encoding="utf-8", errors="surrogateescape")
        shown = show_controls(text)
        if shown != text:
            junit.write_text(shown, encoding="utf-8")
    except OSError as exc:  # no XML (pytest never started), a full disk: said, not fatal
        if junit.exists():
            print(f"warning: {junit}: invisible characters left as they are ({exc})",
                  file=sys.stderr, flush=True)


def _signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _settle(out: Supervised, plan: dict, opts: RunOptions) -> Ran:
    """The exit code of one supervised pytest; a run it left unfinished is marked and said."""
    rc = out.returncode
    if rc == 4 and not (out.signal_received or out.hung or out.tests_started):
        # pytest refused its options (a bad history): no run was started. Once a test
        # started, exit 4 is a test's os._exit(4), a crash like any other early exit.
        return Ran(rc)
    if out.leftovers:
        print(f"warning: killed {out.leftovers} process(es) the tests left running "
              "(in pytest's process group, or orphaned)", file=sys.stderr, flush=True)
    # An unfinished run stores the exit status this attempt gives the session (128 + N,
    # or 1 for a crash; the cause keeps pytest's own code): every report reads the
    # stored chain (gates.model.verdicts.pytest_exit) and must say what the runner said.
    if out.signal_received:
        _finish(opts, plan["run_id"], "interrupted", 128 + out.signal_received,
                f"interrupted by {_signame(out.signal_received)}")
        return Ran(128 + out.signal_received, unfinished=True)
    if out.hung:
        _finish(opts, plan["run_id"], "crashed", rc, f"hung: {out.hung}")
        return Ran(1, unfinished=True)
    if rc < 0:
        _finish(opts, plan["run_id"], "crashed", rc, f"pytest was killed by {_signame(-rc)}")
        return Ran(1, unfinished=True)
    # pytest ended by itself: the plugin finished the run, unless a test ended the
    # process first (os._exit, a fatal error in C that exits).
    if out.session_finished and rc == 3:
        # pytest's internal error after a finished session: the gates recorder could not
        # write the run (a full disk, a history made read-only; its "gates: run NOT
        # recorded" line says why) or another plugin broke. Nothing can gate the run, and
        # 3 means nothing to a CI reader: a crash, exit 1, the run marked if it still can be.
        cause = ("pytest ended with an internal error (exit 3) after its session: the run "
                 "was not recorded, so nothing was gated; the 'gates:' or INTERNALERROR "
                 "lines above say why")
        _finish(opts, plan["run_id"], "crashed", 1, cause)  # prints one line either way
        return Ran(1, unfinished=True)
    if out.session_finished:
        # pytest's exit 5 (no tests collected) is a failure, exit 1: the rule every report
        # reads the stored run with (gates.model.verdicts.pytest_exit).
        return Ran(1, no_tests=True) if rc == 5 else Ran(rc)
    if _finish(opts, plan["run_id"], "crashed", 1, f"pytest exited with code {rc} before finishing its session"):
        return Ran(1, unfinished=True)  # a crash is exit 1 whatever code the test exited with
    return Ran(rc)


def _finish(opts: RunOptions, run_id: str, status: str, rc: int, cause: str) -> bool:
    """Mark an unfinished run (`gates.record.finish`); False only when the history shows
    the run finished. A run it could not mark, or that was never recorded (a conftest
    that exits 0 at import), is unfinished: such a session never passes."""
    cmd = _finish_cmd(opts, run_id, status, rc, cause)
    with _ignoring_interrupts():
        rc = _step(opts, cmd, f"marking run {run_id} {status} (python -m gates.record.finish)",
                   start_new_session=True)
    if rc is None:
        return True  # not known to be marked: fail the session (exit 1), never pass it
    if rc not in (0, 3):
        print(f"error: {cause}; the run {run_id} could not be marked {status}", file=sys.stderr)
    return rc != 0


def _finish_cmd(opts: RunOptions, run_id: str, status: str, rc: int | None,
                cause: str) -> list[str]:
    return [sys.executable, "-m", "gates.record.finish", *_history_args(opts, "--history"), "--run-id",
            run_id, "--status", status, "--cause", cause,
            *(["--exit-status", str(rc)] if rc is not None else [])]


class _ignoring_interrupts:
    """Recording what happened must not be cut short by a second Ctrl-C."""

    def __enter__(self) -> None:
        self.old = {}
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            try:
                self.old[sig] = signal.signal(sig, signal.SIG_IGN)
            except ValueError:
                pass

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.old.items():
            signal.signal(sig, handler)


def _gate(opts: RunOptions, run_id: str, plan_file: Path, confirm_of: str | None, tripped_out: Path, attempts_left: int = 0) -> int | None:
    """Gate one run; None with ``--gate off``. ``attempts_left``: confirm reruns that may still follow."""
    if opts.gate == "off":
        return None
    cmd = [sys.executable, "-m", "gates.gate", *_history_args(opts, "--history"), "--run-id", run_id, "--plan", str(plan_file), "--mode", opts.gate, "--tripped-out", str(tripped_out), "--attempts-left", str(attempts_left)]
    if confirm_of:
        cmd += ["--confirm-of", confirm_of]
    tripped_out.unlink(missing_ok=True)  # a gate that dies before writing it leaves no stale list
    rc = _step(opts, cmd, f"the gate of run {run_id} (python -m gates.gate)")
    # A gate that judged the run exits 0 or 1 after writing the tripped list; 2 is its
    # bad input. Anything else (past the limit, killed by a signal, a crash's traceback
    # before the list) did not finish: its verdicts are missing or partial.
    if rc in (0, 1, 2) and tripped_out.exists():
        return rc
    if rc == 2:
        # Bad input (a register_ci_gate value, an unreadable plan): nothing was judged.
        # The gate marks the run gate-error with its line; where it could not, this does.
        _finish(opts, run_id, "gate-error", None,
                "the gate refused its input (exit 2; its error line above says why)")
        return 2
    how = ("ran past its limit" if rc is None else f"was killed by {_signame(-rc)}" if rc < 0
           else f"exited with code {rc} before it finished")
    print(f"error: run {run_id} was not gated: the gate {how}; a gate that did not finish "
          "fails the session", file=sys.stderr, flush=True)
    # The history says so too (status gate-unfinished): every report reads the run as
    # failed, as this session is, never as "no gate failed" for want of verdicts.
    _finish(opts, run_id, "gate-unfinished", None, f"the gate {how}")
    return 1


_IMPORT_ERROR = re.compile(r"^E\s+((?:ModuleNotFoundError|ImportError): .+)$", re.M)


def stopped_line(junit: Path) -> str:
    """Why pytest stopped with exit 2 and what ran, from its JUnit XML: a collection
    error names its file and its import error (a module missing from this Python);
    tests that ran before are counted (they are recorded)."""
    import xml.etree.ElementTree as ET  # noqa: PLC0415

    try:
        root = ET.parse(junit).getroot()
    except (OSError, ET.ParseError):
        return ("pytest stopped (exit 2: interrupted, or it could not collect the tests) "
                "before writing its report; its output above says why")
    broken: list[str] = []
    ran = 0
    for case in root.iter("testcase"):
        err = case.find("error")
        if err is not None and err.get("message") == "collection failure":
            where = (case.get("name") or "?").replace(".", "/") + ".py"
            found = _IMPORT_ERROR.search(err.text or "")
            broken.append(f"{where}: {found.group(1) if found else 'collection failed'}")
        elif case.find("skipped") is None:
            ran += 1
    what = f"{ran} test(s) ran and are recorded" if ran else "no test ran"
    if not broken:
        return f"pytest stopped (exit 2, interrupted); {what}"
    fix = (f"; install the missing module in {sys.executable}'s environment"
           if "ModuleNotFoundError" in broken[0] else "")
    more = f" (and {len(broken) - 1} more file(s))" if len(broken) > 1 else ""
    return f"pytest could not collect {broken[0]}{more}; {what}{fix}"


def _write(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path


def run_suite(opts: RunOptions) -> int:
    try:
        catalog: Catalog = load_catalog(opts.root / opts.catalog if not opts.catalog.is_absolute() else opts.catalog)
    except CatalogError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    suite = catalog.suites.get(opts.suite)
    if suite is None:
        print(f"error: unknown suite {opts.suite!r}; {catalog.session_suggest(opts.suite)}", file=sys.stderr)
        return 2
    if problem := own_plugin_disabled(suite.pytest_args):
        print(f"error: {opts.catalog}: [suites.{opts.suite}] pytest_args: {problem}", file=sys.stderr)
        return 2
    collection = collect(catalog, base=opts.root)
    if collection.issues:
        for issue in collection.issues:
            print(f"error: {issue}", file=sys.stderr)
        print(f"error: {len(collection.issues)} registration problem(s); nothing was run", file=sys.stderr)
        return 2
    try:
        plan = make_plan(collection, suite, opts)
    except ValueError as exc:  # ScheduleError: a file longer than the shard budget
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not plan.registrations:
        what = f"of {', '.join(opts.files)} " if opts.files else ""
        print(f"error: no enabled test file {what}is registered to suite {suite.name!r}; register one with suite=\"{suite.name}\"", file=sys.stderr)
        return 2
    print(plan_text(plan), flush=True)
    for note in collection.notes:  # e.g. a marker imported from a module the tree lacks
        if note.path in plan.registrations:
            print(f"note: {note}", file=sys.stderr, flush=True)
    if opts.dry_run:
        print("dry run: hardware not checked, nothing run")
        return 0
    # A CPU suite needs no detection (detection imports torch: seconds of overhead).
    problem = check(suite, detect_for(suite.backend)) if suite.is_gpu else None
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if not plan.mine.items:
        # More shards than files: an empty shard is a planned outcome, not a silent green.
        print(f"shard {plan.index}/{len(plan.shards)} of {suite.name} has no files in this plan; nothing to run")
        return 0
    try:
        opts.results.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"error: --results {opts.results}: cannot create the folder ({exc.strerror or exc}); give a writable folder", file=sys.stderr)
        return 2
    targets = _targets(plan.mine.items, opts.files)
    run_id = uuid.uuid4().hex
    i, n = plan.index, len(plan.shards)
    plan_data = _plan_json(plan, run_id, opts.root, collection, whole=len(plan.shards) == 1 and not opts.files)
    # Recorded with the run as pytest starts: a run with its gate on reads as failed in
    # every report until its gate saves a result, however this process ends.
    plan_data["gate_mode"] = opts.gate
    # The shards this plan gave files: a report of the commit names one that recorded
    # no run (an empty shard records none and is not missing).
    plan_data["planned_shards"] = [s.index for s in plan.shards if s.items]
    plan_file = _write(opts.results / f"plan-{_tag(plan_data)}.json", plan_data)
    opts.suite_pytest_args = list(suite.pytest_args)
    started = time.monotonic()
    ran = _pytest(plan_file, plan_data, opts, targets, opts.pytest_args)
    rc = ran.rc
    if ran.no_tests:
        print(f"error: suite {suite.name} shard {i}/{n}: pytest collected no tests from {len(targets)} registered file(s)", file=sys.stderr)
    if rc == 4:
        # pytest's usage error: bad arguments, a history or a register_ci_gate value the
        # gates plugin refused (its one line is above), before any test ran. Bad input,
        # so exit 2, as every other bad input.
        print(f"error: suite {suite.name} shard {i}/{n}: pytest refused to start (exit 4): its arguments, "
              "the history, a register_ci_gate value, or a conftest.py that failed to import; pytest's error is above", file=sys.stderr)
        return 2
    if rc not in (0, 1):
        if rc == 2:  # pytest stopped: say why, and what ran, from its JUnit file
            print(f"error: suite {suite.name} shard {i}/{n}: {stopped_line(opts.results / f'junit-{_tag(plan_data)}.xml')}", file=sys.stderr, flush=True)
        return rc
    if ran.unfinished:
        # Crashed or hung, and recorded so with what finished: there is nothing to gate
        # (the gate refuses an unfinished run as bad input, which would read as exit 2).
        print(f"suite {suite.name} shard {i}/{n}: pytest exit {rc}, gate - (the run did not finish), {time.monotonic() - started:.1f} s", flush=True)
        return rc
    tripped = opts.results / f"tripped-{_tag(plan_data)}.json"
    grc = _gate(opts, run_id, plan_file, None, tripped, opts.confirm)
    chain = [run_id]

    def rerun(attempt: int, nodeids: list[str]) -> Attempt:
        confirm_id = uuid.uuid4().hex
        # runner_files again: what this process loaded since (the gate step's code) counts too.
        # Only the files of the tests it reruns: every other planned file would "register
        # but run no tests" and fail the rerun, and their budgets are not this run's.
        paths = {n.split("::", 1)[0] for n in nodeids}
        confirm_plan = dict(plan_data, run_id=confirm_id, confirm_of=chain[-1], runner_files=runner_files(opts.root),
                            files=[f for f in plan_data["files"] if f["path"] in paths])
        confirm_plan.pop("executed", None)  # it runs some tests only: no record of the suite
        cfile = _write(opts.results / f"plan-{_tag(confirm_plan)}-confirm{attempt}.json", confirm_plan)
        ran = _pytest(cfile, confirm_plan, opts, nodeids, [a for a in opts.pytest_args if a not in ("-x", "--exitfirst")])
        crc = ran.rc
        if ran.no_tests:
            # Nothing to confirm the trip with: the session ends failed (exit 1), the
            # rerun stored ungated, so every report reads it as failed too.
            print(f"error: suite {suite.name} shard {i}/{n}: confirm attempt {attempt} collected none "
                  f"of the {len(nodeids)} tripped test(s); the trip stays unconfirmed", file=sys.stderr)
            return Attempt(crc, None, crashed=True)
        if crc not in (0, 1) or ran.unfinished:
            return Attempt(crc, None, crashed=True)
        gate = _gate(opts, confirm_id, cfile, chain[-1], tripped, opts.confirm - attempt)
        chain.append(confirm_id)
        return Attempt(crc, gate)

    def tripped_tests() -> list[str]:
        return json.loads(tripped.read_text(encoding="utf-8") or "[]") if tripped.exists() else []

    done = confirm_chain(Attempt(rc, grc), opts.confirm, tripped_tests, rerun)
    if done.crashed:
        return done.pytest
    print(f"suite {suite.name} shard {i}/{n}: pytest exit {done.pytest}, gate {'-' if done.gate is None else done.gate}, {time.monotonic() - started:.1f} s", flush=True)
    return done.exit_code


@dataclass
class Attempt:
    """One attempt's pytest exit status and gate exit code (None: gates off, or not gated)."""

    pytest: int
    gate: int | None
    crashed: bool = False  # a rerun's pytest neither passed nor failed: the session ends

    @property
    def exit_code(self) -> int:
        return self.pytest if self.crashed else max(self.pytest, self.gate or 0)


def confirm_chain(first: Attempt, confirm: int, tripped: Callable[[], list[str]],
                  rerun: Callable[[int, list[str]], Attempt]) -> Attempt:
    """The confirm protocol: while the last gate passed or failed (0, 1) and attempts are
    left, rerun the tests it tripped or suspected (``tripped()``) as attempt 1, 2, ...
    (``rerun(attempt, nodeids)``, each run ``confirm_of`` the attempt before it); a
    confirm attempt decides both. Returns the session's attempt: the worst pytest status
    and the last gate (``gates.model.verdicts.session_exit``; every report surface reads the
    stored chain with the same rule). ``benchmarks/bench_surfaces.py`` drives it too."""
    rc, grc = first.pytest, first.gate
    attempt = 0
    while grc in (0, 1) and attempt < confirm:
        nodeids = tripped()
        if not nodeids:
            break
        attempt += 1
        print(f"gate tripped or suspected {len(nodeids)} test(s); confirming (attempt {attempt} of {confirm})", flush=True)
        got = rerun(attempt, nodeids)
        if got.crashed or got.pytest not in (0, 1):
            return Attempt(max(got.pytest, 1), got.gate, crashed=True)
        rc, grc = max(rc, got.pytest), got.gate
    return Attempt(rc, grc)


def main_run(suite: str, argv: list[str]) -> int:
    die_with_parent()  # nox killed by SIGTERM forwards nothing: end (and record) with it
    try:
        opts = parse_run_args(suite, argv)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if opts.baseline and _snapshot(opts, "seed", "--snapshot", opts.baseline) != 0:
        return 2  # its one line names the file and the fix
    try:
        return run_suite(opts)
    except KeyboardInterrupt:  # Ctrl-C outside pytest (planning, the gate): nothing half-written
        print("interrupted", file=sys.stderr)
        return 128 + signal.SIGINT
    finally:
        if opts.baseline:
            # The history uploaded holds this shard's runs only; a shard killed before
            # this still merges right (merge skips the snapshot's copies).
            with _ignoring_interrupts():
                _snapshot(opts, "strip")


def _snapshot(opts: RunOptions, command: str, *args: str) -> int:
    """`python -m gates.store.snapshot seed|strip` on this run's history; its exit status."""
    cmd = [sys.executable, "-m", "gates.store.snapshot", command, *args, *_history_args(opts, "--history")]
    rc = _step(opts, cmd, f"the baseline snapshot's {command} step (python -m gates.store.snapshot)")
    return 1 if rc is None else rc
