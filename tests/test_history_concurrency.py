"""gates.store.history under real processes, on SQLite and PostgreSQL: parallel appenders and
SIGKILLed writers."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gates.store.history import RunRecord, TestResult
from gates.store.metrics import validate_metric
from gates.store.open import open_history
from gates.store.provenance import Provenance

WRITERS = 8
RUNS_EACH = 4
METRICS_EACH = 40

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and fork")


def _record(worker: int, i: int) -> RunRecord:
    prov = Provenance(run_id=f"w{worker}-r{i}", suite="s", fingerprint="cpu",
                      commit=f"{worker:07d}")
    tests = [TestResult(f"t.py::test_{k}", "t.py", "passed", 0.1) for k in range(10)]
    metrics = [("t.py::test_0", validate_metric(f"m/{k}", [float(k)] * 5, unit="s",
                                                better="lower"))
               for k in range(METRICS_EACH)]
    return RunRecord(prov, tests, metrics, None, 0)


def _writer(path: str, worker: int, barrier, errors) -> None:
    try:
        barrier.wait(timeout=30)
        with open_history(path) as h:  # all 8 race to create and migrate the file
            for i in range(RUNS_EACH):
                record = _record(worker, i)
                h.run_writes.start_run(record.provenance)
                h.run_writes.record_run(record)
    except BaseException as exc:  # reported to the parent, which fails the test
        errors.put(f"writer {worker}: {type(exc).__name__}: {exc}")
        raise


def _count(h, table: str) -> int:
    return h._rows(f"SELECT count(*) AS n FROM {table}")[0]["n"]


def test_eight_processes_append_without_losing_a_run(store_location: Path | str):
    path = str(store_location)
    ctx = multiprocessing.get_context("fork")
    barrier, errors = ctx.Barrier(WRITERS), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(path, w, barrier, errors))
             for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    problems = []
    while not errors.empty():
        problems.append(errors.get())
    assert problems == []
    assert [p.exitcode for p in procs] == [0] * WRITERS
    with open_history(path) as h:
        runs = h.report_reads.runs(limit=1000)
        assert len(runs) == WRITERS * RUNS_EACH
        assert {r["status"] for r in runs} == {"complete"}
        assert _count(h, "metrics") == WRITERS * RUNS_EACH * METRICS_EACH
        assert h.merge_reads.sample_count() == WRITERS * RUNS_EACH * METRICS_EACH * 5
        # metric ids were assigned under the write lock: every metric owns its 5 samples
        assert h.conn.execute("SELECT count(*) FROM metric_rows "
                              "WHERE length(samples) != 5 * 8").fetchone()[0] == 0
        assert len(h.baseline_reads.metric_series("s", "m/3", "cpu", limit=100)) == WRITERS * RUNS_EACH
        h.check()


# A child that starts a run, then stops inside the results transaction (rows
# written, COMMIT not reached) and waits there to be killed.
_STALL_CHILD = """
import sys, time
import gates.store.run_writes as run_writes
from gates.store.history import RunRecord, TestResult
from gates.store.open import open_history
from gates.store.metrics import validate_metric
from gates.store.provenance import Provenance

real = run_writes._insert_metrics
def stall(conn, metrics):
    real(conn, metrics)
    print("in-transaction", flush=True)
    time.sleep(60)
run_writes._insert_metrics = stall

with open_history(sys.argv[1]) as h:
    prov = Provenance(run_id="killed", suite="s", fingerprint="cpu")
    h.run_writes.start_run(prov)
    metric = validate_metric("m", [1.0, 2.0], unit="s", better="lower")
    h.run_writes.record_run(RunRecord(prov, [TestResult("t.py::a", "t.py", "passed", 1.0)],
                           [("t.py::a", metric)] * 1, None, 0))
"""


def test_sigkill_inside_the_write_leaves_run_incomplete(store_location: Path | str):
    path = store_location
    with open_history(path) as h:
        record = _record(0, 0)
        h.run_writes.start_run(record.provenance)
        h.run_writes.record_run(record)
    child = subprocess.Popen([sys.executable, "-c", _STALL_CHILD, str(path)],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "in-transaction"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL
    with open_history(path) as h:
        h.check()
        assert h.report_reads.run("killed")["status"] == "incomplete"
        assert h.report_reads.tests("killed") == [] and h.report_reads.metrics("killed") == []
        assert h.report_reads.run("w0-r0")["status"] == "complete"
        assert h.baseline_reads.metric_series("s", "m", "cpu") == []  # incomplete is never a baseline
        more = _record(0, 1)  # the file still takes writes
        h.run_writes.start_run(more.provenance)
        h.run_writes.record_run(more)
        assert h.report_reads.run("w0-r1")["status"] == "complete"


_LOOP_CHILD = """
import sys
from gates.store.history import RunRecord, TestResult
from gates.store.open import open_history
from gates.store.metrics import validate_metric
from gates.store.provenance import Provenance

with open_history(sys.argv[1]) as h:
    print("open", flush=True)
    for i in range(100000):
        prov = Provenance(run_id=f"loop{i}", suite="s", fingerprint="cpu")
        h.run_writes.start_run(prov)
        metrics = [("t.py::a", validate_metric(f"m/{k}", [1.0] * 20, unit="s", better="lower"))
                   for k in range(200)]
        h.run_writes.record_run(RunRecord(prov, [TestResult("t.py::a", "t.py", "passed", 1.0)],
                               metrics, None, 0))
        if i == 0:
            print("wrote", flush=True)
"""


def test_sigkill_at_a_random_moment_never_leaves_a_partial_run(store_location: Path | str):
    path = store_location
    child = subprocess.Popen([sys.executable, "-c", _LOOP_CHILD, str(path)],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "open"
        # One run written, then a moment into the next ones: a fixed 0.7 s from "open" was
        # all spent opening on a loaded machine, and nothing had been written to check.
        assert child.stdout.readline().strip() == "wrote"
        time.sleep(0.7)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
    with open_history(path) as h:
        h.check()
        rows = h.conn.execute(
            "SELECT r.status, (SELECT count(*) FROM metrics m WHERE m.run_id = r.run_id), "
            "(SELECT count(*) FROM tests t WHERE t.run_id = r.run_id) FROM runs r").fetchall()
    assert rows, "the writer was killed before writing anything; raise the sleep"
    for status, n_metrics, n_tests in rows:
        assert (status, n_metrics, n_tests) in (("complete", 200, 1), ("incomplete", 0, 0))
