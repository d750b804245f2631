"""pytest plugin: the `metrics` fixture and recording of every outcome into the history.

Registered through the ``pytest11`` entry point, so it is loaded in every pytest
run; it records only when ``--gates-suite`` is given. Without it the fixture still
validates each `record` call (a bad metric fails the test either way) and stores
nothing. Heavy imports (sqlite-utils, which pulls numpy) happen only when recording.

Options (group "gates"): ``--gates-suite NAME``, ``--gates-shard I/N``,
``--gates-run-id ID``, ``--gates-plan PATH`` and ``--gates-history PATH``
(env ``GATES_HISTORY``, default ``history.db`` in the rootdir).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ci_register.planning.history_value import history_problem
from ci_register.registered.paths import MAX_PLAN_BYTES, read_json
from gates.model.verdicts import GATE_MODES
from gates.store.backend import display_location, history_location, mask_secrets
from gates.store.metrics import Metric, MetricBook, MetricError, validate_metric
from gates.store.rows import planned_shards

if TYPE_CHECKING:
    from gates.store.history import History, TestResult
    from gates.store.provenance import Provenance

__all__ = ["ERROR_CHARS", "GatesOptions", "MetricsRecorder", "metrics", "parse_options"]

ERROR_CHARS = 2000  # the tail of a traceback holds the assertion; keep that much
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
_SESSION_NODE = "<session>"  # nodeid for collection errors not tied to a file
_OPTIONS_KEY = pytest.StashKey["GatesOptions"]()
_BOOK_KEY = pytest.StashKey[MetricBook]()
_UNITS_KEY = pytest.StashKey["_UnitBook"]()


# ------------------------------------------------------------------ options


@dataclass(frozen=True)
class GatesOptions:
    """The validated ``--gates-*`` options of a session."""

    history: Path | str  # a file, or a postgresql:// URL
    suite: str | None = None
    shard: tuple[int, int] = (1, 1)
    run_id: str | None = None
    plan: dict[str, Any] | None = None
    plan_path: Path | None = None

    @property
    def recording(self) -> bool:
        return self.suite is not None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gates", "metric history (gates)")
    group.addoption("--gates-suite", metavar="NAME", default=None,
                    help="record this run into the history under suite NAME (enables recording)")
    group.addoption("--gates-shard", metavar="I/N", default=None,
                    help="which shard of the suite this run is (default 1/1)")
    group.addoption("--gates-run-id", metavar="ID", default=None,
                    help="run id to record under (default: the plan's, else a fresh uuid4 hex)")
    group.addoption("--gates-plan", metavar="PATH", default=None,
                    help="plan JSON written by the suite runner (planned files and gates)")
    group.addoption("--gates-history", metavar="PATH", default=None,
                    help="history file (default: $GATES_HISTORY, else history.db in the rootdir)")


def _partial_run(session: pytest.Session, deselected: int) -> str | None:
    """Why this session ran less than its files' every test (a record of what it executed
    would then miss what the rest runs), else None."""
    if deselected:
        return f"{deselected} test(s) deselected (-k, -m, --deselect)"
    if session.shouldfail or session.shouldstop:
        return "the session stopped early (-x, --maxfail)"
    if any("::" in str(a) for a in session.config.args):
        return "node ids named on the command line"
    if int(session.exitstatus) not in (0, 1):
        return f"pytest exit {int(session.exitstatus)}"
    return None


def _executed_record(from_plan: object, partial: str | None = None) -> list[str] | None:
    """The ``<executed>`` record (``ci_register.running.executed``): what nox, the runner,
    this process and their children executed; None when the runner traced nothing (pytest
    run by hand, ``CI_REGISTER_TRACE=0``, a partial run of the suite). Taken at the end of
    the session, once every test and teardown ran: what runs later cannot change what was
    recorded."""
    if from_plan is not True:
        return None
    if partial:
        return [f"<incomplete: {partial}>"]
    from ci_register.running.executed import DIR_ENV, ROOT_ENV, collect, process_tracer  # noqa: PLC0415

    folder, root = os.environ.get(DIR_ENV), os.environ.get(ROOT_ENV)
    if not folder or not root:
        return ["<incomplete: pytest's process was not traced (no CI_REGISTER_EXECUTED_DIR)>"]
    tracer = process_tracer()
    if tracer is not None:
        tracer.check()
    return collect(folder, Path(root), need_pid=os.getpid())




def _usage(option: str, value: object, what: str) -> pytest.UsageError:
    return pytest.UsageError(f"{option} {value!r}: {what}")


def parse_options(
    *,
    suite: str | None,
    shard: str | None,
    run_id: str | None,
    plan_path: str | None,
    history: str | None,
    rootdir: Path,
    env: dict[str, str] | os._Environ[str],
) -> GatesOptions:
    """Validate raw option values; raise `pytest.UsageError` naming the bad value."""
    if suite is not None and not _NAME.fullmatch(suite):
        raise _usage("--gates-suite", suite, "use letters, digits and . _ - (e.g. base-b-1gpu)")
    shard_t = (1, 1)
    if shard is not None:
        match = _SHARD.match(shard)
        if not match or not 1 <= int(match[1]) <= int(match[2]):
            raise _usage("--gates-shard", shard, "expected I/N with 1 <= I <= N, e.g. 2/4")
        shard_t = (int(match[1]), int(match[2]))
    if run_id is not None and not _NAME.fullmatch(run_id):
        raise _usage("--gates-run-id", run_id,
                     "use at most 128 letters, digits and . _ - (e.g. a uuid4 hex)")
    plan = None
    if plan_path is not None:
        try:
            # A regular file, bounded: /dev/zero read until memory ran out, a FIFO hung.
            plan = read_json(plan_path, MAX_PLAN_BYTES)
        except (OSError, ValueError) as exc:  # UnicodeDecodeError, JSONDecodeError too
            raise _usage("--gates-plan", plan_path, f"cannot read the plan JSON ({exc})") from None
        if not isinstance(plan, dict) or not isinstance(plan.get("files", []), list) \
                or not isinstance(plan.get("gates", []), list):
            raise _usage("--gates-plan", plan_path,
                         "not a plan (a JSON object with 'files' and 'gates' lists)")
        if suite is not None and plan.get("suite") not in (None, suite):
            raise _usage("--gates-plan", plan_path,
                         f"is for suite {plan.get('suite')!r}, not --gates-suite {suite!r}")
        plan_run = plan.get("run_id")
        if run_id is not None and plan_run not in (None, run_id):
            raise _usage("--gates-plan", plan_path,
                         f"is for run {plan_run!r}, not --gates-run-id {run_id!r}")
        if run_id is None and isinstance(plan_run, str):
            if not _NAME.fullmatch(plan_run):
                raise _usage("--gates-plan", plan_path, f"has an invalid run_id {plan_run!r}")
            run_id = plan_run
        if shard is None and isinstance(plan.get("shard"), list) and len(plan["shard"]) == 2:
            shard_t = (int(plan["shard"][0]), int(plan["shard"][1]))
        if plan.get("gates"):
            # A register_ci_gate value the gate would refuse (min_change=-1, mode="strict")
            # stops the session here, before any test runs, not after them at the gate.
            # Lazily: the declarations pull the statistics model (numpy, scipy).
            from gates.record.declarations import DeclarationError, parse_plan_gates  # noqa: PLC0415

            try:
                parse_plan_gates(plan["gates"])
            except DeclarationError as exc:
                raise pytest.UsageError(str(exc)) from None
    source, given = (("--gates-history", history) if history is not None
                     else ("GATES_HISTORY", env.get("GATES_HISTORY") or None))
    if given is not None and (problem := history_problem(given)):
        # A file nobody meant would be created (ci_register.planning.history_value).
        raise pytest.UsageError(f"{source} {display_location(repr(given))}: {problem}")
    history_value = history or env.get("GATES_HISTORY") or None
    history_path = history_location(history_value) if history_value else rootdir / "history.db"
    if isinstance(history_path, Path) and history_path.is_dir():
        source = "--gates-history" if history else "GATES_HISTORY"
        raise _usage(source, str(history_path), "is a directory; give a file path")
    return GatesOptions(history=history_path, suite=suite, shard=shard_t, run_id=run_id,
                        plan=plan, plan_path=Path(plan_path) if plan_path else None)


def pytest_configure(config: pytest.Config) -> None:
    options = parse_options(
        suite=config.getoption("--gates-suite"),
        shard=config.getoption("--gates-shard"),
        run_id=config.getoption("--gates-run-id"),
        plan_path=config.getoption("--gates-plan"),
        history=config.getoption("--gates-history"),
        rootdir=config.rootpath,
        env=os.environ,
    )
    config.stash[_OPTIONS_KEY] = options
    if not options.recording or hasattr(config, "workerinput") \
            or config.option.collectonly or config.option.help:
        return  # nothing will run: recording would only add an empty run
    if getattr(config.option, "numprocesses", None):
        raise pytest.UsageError("--gates-suite cannot record under pytest-xdist (-n); "
                                "run each shard as its own process with --gates-shard")
    recorder = _Recorder(config, options)
    recorder.start()
    suite = options.suite
    config.stash.setdefault(_UNITS_KEY, _UnitBook()).lookup = \
        lambda key: recorder.unit_of(suite, key)
    config.pluginmanager.register(recorder, "gates-recorder")


def pytest_report_header(config: pytest.Config) -> list[str]:
    options = config.stash.get(_OPTIONS_KEY, None)
    if options is None:
        return []
    if not options.recording:
        return [f"gates: recording off (no --gates-suite); history {display_location(options.history)}"]
    recorder = config.pluginmanager.get_plugin("gates-recorder")
    run_id = recorder.provenance.run_id if recorder else options.run_id
    fingerprint = recorder.provenance.fingerprint if recorder else "?"
    i, n = options.shard
    return [f"gates: history {display_location(options.history)}, suite {options.suite}, shard {i}/{n}, "
            f"run {run_id}, hardware {fingerprint}"]


# ------------------------------------------------------------------ fixture


class _UnitBook:
    """The unit of each key across a session, and in history: one key, one unit.

    Two tests recording one key in ``s`` and ``ms`` would be pooled into one series
    by the gate; the second `record` fails instead, naming the first.
    """

    def __init__(self) -> None:
        self.units: dict[str, tuple[str, str]] = {}  # key -> (unit, where)
        self.lookup: Callable[[str], tuple[str, str] | None] | None = None

    def check(self, key: str, unit: str, nodeid: str) -> None:
        known = self.units.get(key)
        if known is None and self.lookup is not None:
            found = self.lookup(key)
            if found is not None:
                known = self.units[key] = (found[0], f"run {found[1]} in the history")
        if known is not None and known[0] != unit:
            raise MetricError(
                f"metric {key!r} recorded in unit {unit!r}, but {known[1]} recorded it in "
                f"{known[0]!r}; use one unit per key (convert the values, or use a new key)")

    def note(self, key: str, unit: str, nodeid: str) -> None:
        self.units.setdefault(key, (unit, nodeid))


class MetricsRecorder:
    """What a test gets as ``metrics``: call `record` once or more per key."""

    def __init__(self, book: MetricBook, units: _UnitBook | None = None,
                 nodeid: str = "?") -> None:
        self._book = book
        self._units = units
        self._nodeid = nodeid

    def record(self, key: str, values: Any, *, unit: str, better: str, n: int | None = None,
               min_value: float | None = None, max_value: float | None = None) -> Metric:
        """Record one value or several samples of metric `key` for this test.

        Raises `gates.MetricError` on bad input; nothing of that call is stored.
        Returns the metric as stored so far (samples of earlier calls included).
        """
        metric = validate_metric(key, values, unit=unit, better=better, n=n,
                                 min_value=min_value, max_value=max_value)
        if self._units is not None:
            self._units.check(metric.key, metric.unit, self._nodeid)
        added = self._book.add(metric)
        if self._units is not None:
            self._units.note(metric.key, metric.unit, self._nodeid)
        return added

    def __getitem__(self, key: str) -> Metric:
        return self._book.metrics[key]

    def __contains__(self, key: object) -> bool:
        return key in self._book.metrics

    def __iter__(self) -> Iterator[Metric]:
        return iter(self._book)

    def __len__(self) -> int:
        return len(self._book)


@pytest.fixture
def metrics(request: pytest.FixtureRequest) -> MetricsRecorder:
    """Record metrics of this test: ``metrics.record(key, values, unit=..., better=...)``."""
    book = request.node.stash.setdefault(_BOOK_KEY, MetricBook())
    units = request.config.stash.setdefault(_UNITS_KEY, _UnitBook())
    return MetricsRecorder(book, units, request.node.nodeid)


# ----------------------------------------------------------------- recording


@dataclass
class _TestState:
    nodeid: str
    path: str | None  # None for a session-level error (e.g. a broken conftest)
    outcome: str | None = None  # None until a phase decides it
    duration: float = 0.0
    skip_reason: str | None = None
    errors: list[str] = field(default_factory=list)


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str | None:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        reason = str(longrepr[2])
        return reason.removeprefix("Skipped: ")
    return str(longrepr) if longrepr else None


def mask_report(report: pytest.TestReport | pytest.CollectReport) -> None:
    """`report` with credentials masked in what pytest prints and writes of it: the
    traceback or skip reason (``longrepr``), an xfail reason and the captured output
    sections. A traceback that held one becomes its masked text (the terminal prints it
    plain, the JUnit XML takes it as it is); one that held none is left untouched."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        reason = str(longrepr[2])
        if mask_secrets(reason) != reason:
            report.longrepr = (longrepr[0], longrepr[1], mask_secrets(reason))
    elif longrepr is not None:
        text = str(longrepr)
        masked = mask_secrets(text)
        if masked != text:
            report.longrepr = masked
    wasxfail = getattr(report, "wasxfail", None)
    if isinstance(wasxfail, str) and wasxfail:
        report.wasxfail = mask_secrets(wasxfail)
    report.sections = [(title, mask_secrets(content)) for title, content in report.sections]


def _error_text(report: pytest.TestReport | pytest.CollectReport) -> str:
    text = report.longreprtext or ""
    return text[-ERROR_CHARS:]


def outcome_of(when: str, report_outcome: str, wasxfail: bool) -> str | None:
    """Map one phase report to a test outcome; None when the phase changes nothing.

    Pure: setup/teardown failures are ``error``, a failing call is ``failed``, a
    skip is ``skipped`` (``xfailed`` when expected), a passing call is
    ``passed`` (``xpassed`` when a failure was expected).
    """
    if report_outcome == "failed":
        return "failed" if when == "call" else "error"
    if report_outcome == "skipped":
        return "xfailed" if wasxfail else "skipped"
    if when == "call":
        return "xpassed" if wasxfail else "passed"
    return None


def _interrupt_on_sigterm() -> bool:
    """SIGTERM (CI cancel, the runner forwarding one) ends the session as Ctrl-C does:
    pytest stops, tears down and the run is recorded ``interrupted`` with what finished.
    True when installed (`_restore_sigterm` undoes it at the session's end)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return False
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, _raise_interrupt)
        return True
    return False


def _restore_sigterm() -> None:
    import signal
    import threading

    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGTERM) in (_raise_interrupt, _once):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _raise_interrupt(signum: int, frame: object) -> None:
    import signal

    # Once: a second SIGTERM (PDEATHSIG and the runner's watchdog both send one) would
    # interrupt pytest's own handling of the first, and the run would be recorded with
    # the exit status of an uninterrupted session. SIGKILL is the way to insist.
    signal.signal(signal.SIGTERM, _once)
    raise KeyboardInterrupt(f"signal {signum}")


def _once(signum: int, frame: object) -> None:
    """SIGTERM after the first: the session is already being interrupted."""


class _Recorder:
    """Collects a session's outcomes and metrics and writes them as one run."""

    def __init__(self, config: pytest.Config, options: GatesOptions) -> None:
        from gates.store.history import HistoryError
        from gates.store.open import open_history
        from gates.store.provenance import ProvenanceError, collect_provenance

        self.config = config
        self.options = options
        self.states: dict[str, _TestState] = {}
        self.metrics: dict[str, list[Metric]] = {}  # nodeid -> its metrics, in order
        self.written: str | None = None
        self.problem: str | None = None
        self.attempt = 1
        self.saved: set[str] = set()  # nodeids whose final rows are written
        self.running: str | None = None  # the test between logstart and logfinish
        self.sigterm = False  # our SIGTERM handler is installed
        assert options.suite is not None
        # The history first: a bad file fails fast, before the hardware probes run.
        try:
            self.history: History = open_history(options.history)
        except HistoryError as exc:
            raise pytest.UsageError(str(exc)) from None
        self._history_error = HistoryError
        try:
            self.provenance: Provenance = collect_provenance(
                options.suite, run_id=options.run_id, shard=options.shard,
                root=config.rootpath)
        except ProvenanceError as exc:  # a CI variable no run may store; nothing written yet
            self.history.close()
            raise pytest.UsageError(str(exc)) from None
        if options.plan:
            confirm_of = options.plan.get("confirm_of")
            self.provenance.confirm_of = confirm_of if isinstance(confirm_of, str) else None
            # The runner's --gate: with it on, the run reads as failed until its gate saves.
            gate_mode = options.plan.get("gate_mode")
            self.provenance.gate_mode = gate_mode if gate_mode in GATE_MODES else None
            shards = planned_shards(json.dumps(options.plan.get("planned_shards")))
            self.provenance.planned_shards = sorted(set(shards)) if shards else None
        self.import_maps = None  # the run-time import tracker (`gates.record.import_map`), from start()
        self.maps_problem: str | None = None
        self.deselected = 0  # tests -k/-m/--deselect left out: the run is not the whole suite

    def start(self) -> None:
        try:
            stale = self.history.hold_writer_lock()
            if stale:
                print(f"gates: closed {len(stale)} run(s) left incomplete by writers that "
                      f"died as crashed: {', '.join(r[:12] for r in stale[:5])}",
                      file=sys.stderr)
            self.attempt = self.history.run_writes.start_run(self.provenance)
        except self._history_error as exc:
            self.history.close()
            raise pytest.UsageError(str(exc)) from None
        self.sigterm = _interrupt_on_sigterm()
        if os.environ.get("GATES_IMPORT_MAPS", "1") != "0":  # 0: do not record import maps
            from gates.record.import_map import ImportMapPlugin, ImportTracker

            tracker = ImportTracker(self.config.rootpath)
            tracker.install()
            self.import_maps = ImportMapPlugin(tracker)
            self.config.pluginmanager.register(self.import_maps, "gates-import-maps")

    def _save_import_maps(self, exitstatus: int, partial: str | None = None) -> None:
        """The newest import map of each file that ran (test selection reads them); an
        interrupted session records none: its files may not have run whole."""
        if self.import_maps is None or int(exitstatus) == int(pytest.ExitCode.INTERRUPTED):
            return
        maps = self.import_maps.maps()
        runner = self.import_maps.runner_map((self.options.plan or {}).get("runner_files"))
        from gates.record.import_map import EXECUTED_MAP_PATH, RUNNER_MAP_PATH

        # Run by `ci_register run`: what it and pytest's plugins loaded. An empty list (the
        # tool installed outside this tree: none of its files run the tests) is not stored:
        # selection refuses an empty record (ci_register.planning.record_check), and a
        # missing runner map already means "unknown", the safe reading.
        if runner:
            maps[RUNNER_MAP_PATH] = runner
        executed = _executed_record((self.options.plan or {}).get("executed"), partial)
        if executed is not None:  # what nox, the runner and this process executed (selection)
            maps[EXECUTED_MAP_PATH] = executed
        try:
            self.history.after_writes.record_import_maps(self.options.suite or "", self.provenance.run_id,
                                            self.provenance.commit, maps)
        except self._history_error as exc:
            self.maps_problem = str(exc)  # the run is recorded; selection falls back to the static graph

    def unit_of(self, suite: str, key: str) -> tuple[str, str] | None:
        try:
            return self.history.planning_reads.unit_of(suite, key)
        except self._history_error:
            return None  # the run's own writes will say what is wrong with the file

    def _state(self, nodeid: str) -> _TestState:
        state = self.states.get(nodeid)
        if state is None:
            path = nodeid.split("::", 1)[0] if nodeid != _SESSION_NODE else None
            state = self.states[nodeid] = _TestState(nodeid, path)
        return state

    def _save(self, nodeids: list[str], *, running: bool = False) -> None:
        """Write these tests now (one short transaction), so a crash later loses nothing.

        `running`: the test is starting; its row says it did not finish until its
        outcome replaces it. A failed write is kept for the session's end.
        """
        from gates.store.history import UNFINISHED, TestResult

        if running:
            tests = [TestResult(n, self._state(n).path, "error", 0.0, None,
                                f"{UNFINISHED}: its process ended while it ran (crash, hang "
                                "or kill)") for n in nodeids]
            metrics: list[tuple[str, Metric]] = []
        else:
            tests = self.results(nodeids)
            metrics = [(n, m) for n in nodeids for m in self.metrics.get(n, ())]
        try:
            self.history.run_writes.record_tests(self.provenance.run_id, self.attempt, tests, metrics)
        except self._history_error as exc:
            self.problem = self.problem or str(exc)
            return
        if not running:
            self.saved.update(nodeids)

    # The history masks what it stores; pytest's own output of the same report (the CI
    # log, the JUnit XML the runner writes and CI uploads) is masked before anything
    # reads the report.
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: Any) -> Iterator[Any]:
        report = yield
        mask_report(report)
        return report

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(self, collector: Any) -> Iterator[Any]:
        report = yield
        mask_report(report)
        return report

    def pytest_deselected(self, items: list) -> None:
        self.deselected += len(items)

    @pytest.hookimpl
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            # A file that fails to import counts against that file (and its durations).
            state = self._state(report.nodeid or _SESSION_NODE)
            state.outcome = "error"
            state.errors.append(_error_text(report))
            self.saved.discard(state.nodeid)
            self._save([state.nodeid])

    def pytest_runtest_logstart(self, nodeid: str, location: object) -> None:
        self._state(nodeid)
        self.running = nodeid
        self._save([nodeid], running=True)

    def pytest_runtest_logfinish(self, nodeid: str, location: object) -> None:
        self.running = None
        self._save([nodeid])

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        state = self._state(report.nodeid)
        state.duration += report.duration
        outcome = outcome_of(report.when, report.outcome, hasattr(report, "wasxfail"))
        if outcome is None:
            return
        if report.when == "teardown":
            # A teardown error turns a pass into an error but keeps "failed" informative.
            if state.outcome not in ("failed", "error"):
                state.outcome = "error"
            state.errors.append(_error_text(report))
            return
        state.outcome = outcome
        if outcome == "skipped":
            state.skip_reason = _skip_reason(report)
        elif outcome in ("xfailed", "xpassed"):
            state.skip_reason = str(getattr(report, "wasxfail", "")) or None
        elif outcome in ("failed", "error"):
            state.errors.append(_error_text(report))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Iterator[None]:
        try:
            return (yield)
        finally:
            self._take_metrics(item)

    def _take_metrics(self, item: pytest.Item) -> None:
        # Read the book after fixtures tore down, so nothing recorded late is lost.
        book = item.stash.get(_BOOK_KEY, None)
        if book:
            self.metrics.setdefault(item.nodeid, []).extend(book)

    def results(self, nodeids: list[str] | None = None) -> list[TestResult]:
        from gates.store.history import TestResult

        out = []
        for s in (self.states.values() if nodeids is None
                  else [self.states[n] for n in nodeids if n in self.states]):
            errors = s.errors if s.outcome else [*s.errors, "test did not finish (no call phase)"]
            error = "\n".join(errors)[-ERROR_CHARS:] if errors else None
            out.append(TestResult(s.nodeid, s.path, s.outcome or "error", round(s.duration, 6),
                                  s.skip_reason, error))
        return out

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        from gates.store.history import UNFINISHED, RunRecord
        from gates.store.provenance import utc_now

        if self.running is not None:  # interrupted mid-test (Ctrl-C, SIGTERM)
            state = self._state(self.running)
            state.errors.append(f"{UNFINISHED}: the session was interrupted while it ran")
            state.outcome = "error"
        left = [n for n in self.states if n not in self.saved]
        self.provenance.finished_at = utc_now()
        record = RunRecord(self.provenance, self.results(left),
                           [(n, m) for n, ms in self.metrics.items() if n not in self.saved
                            for m in ms],
                           # session's: ci_register's plugin may have failed it (tryfirst)
                           self.options.plan, int(session.exitstatus))
        try:
            self.history.run_writes.record_run(record, attempt=self.attempt)
            self.written = self.provenance.run_id
            self._save_import_maps(exitstatus, _partial_run(session, self.deselected))
        except self._history_error as exc:
            # The run happened but is not in history: nothing can gate it, so fail.
            self.problem = str(exc)
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.maps_problem:
            terminalreporter.write_line(f"gates: import maps NOT recorded (selection will use the static "
                                        f"graph for these files): {self.maps_problem}", yellow=True)
        if self.problem:
            terminalreporter.write_line(f"gates: run NOT recorded: {self.problem}", red=True)
        elif self.written:
            terminalreporter.write_line(
                f"gates: recorded run {self.written} ({len(self.states)} tests, "
                f"{sum(map(len, self.metrics.values()))} metrics) in {display_location(self.options.history)}")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.sigterm:
            _restore_sigterm()
        if self.import_maps is not None:
            self.import_maps.tracker.uninstall()
        self.history.close()
