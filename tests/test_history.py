"""gates.store.history: the SQLite store, its schema guard, trust, verdicts and merge."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from gates.store.history import SCHEMA_VERSION, History, HistoryError, RunRecord, TestResult
from gates.store.merge import MergeConflict, merge_histories
from gates.store.metrics import validate_metric
from gates.store.open import open_history
from gates.store.provenance import Provenance

PLAN = {
    "suite": "s", "shard": [1, 1],
    "files": [{"path": "suites/a/test_a.py", "line": 3, "est_time": 120, "expected": 131.5,
               "marker": "register_cuda_ci", "labels": ["x"]}],
    "gates": [{"path": "suites/a/test_a.py", "line": 5, "metric_key": "k",
               "options": {"better": "lower", "level": 0.05}}],
}


def prov(i: int, *, suite="s", fp="gpu-a", commit=None, run_id=None) -> Provenance:
    return Provenance(
        run_id=run_id or f"run{i:03d}", suite=suite, commit=commit or f"{i:07d}abcdef",
        branch="main", started_at=f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}+00:00",
        fingerprint=fp, hardware={"gpus": [{"name": "A"}]} if fp != "cpu" else {},
    )


def record(h: History, i: int, *, samples=(1.0, 2.0, 3.0), outcome="passed", duration=1.0,
           key="k", plan=None, start=True, **kw) -> Provenance:
    p = prov(i, **kw)
    if start:
        h.run_writes.start_run(p)
    nodeid = "suites/a/test_a.py::test_x"
    tests = [TestResult(nodeid, "suites/a/test_a.py", outcome, duration),
             TestResult("suites/b/test_b.py::test_y", "suites/b/test_b.py", "passed", 2.0)]
    metric = validate_metric(key, list(samples), unit="s", better="lower")
    h.run_writes.record_run(RunRecord(p, tests, [(nodeid, metric)], plan, 0))
    return p


@pytest.fixture
def h(store_location):
    with open_history(store_location) as history:
        yield history


def test_new_file_gets_schema_wal_and_tables(tmp_path):
    path = tmp_path / "sub" / "history.db"
    with open_history(path) as h:
        assert h.backend.schema_version == SCHEMA_VERSION
        assert h.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = set(h.backend.db.table_names())
        views = set(h.backend.db.view_names())
    assert {"runs", "test_rows", "metric_rows", "plan_file_rows", "plan_gates",
            "verdict_rows", "texts", "trust_log", "_sqlite_migrations"} <= tables
    assert {"tests", "metrics", "verdicts", "plan_files"} <= views
    with open_history(path) as h:  # reopening migrates nothing and keeps data
        assert h.backend.schema_version == SCHEMA_VERSION


def test_run_roundtrip(h):
    p = record(h, 1, plan=PLAN)
    run = h.report_reads.run(p.run_id)
    assert run["status"] == "complete" and run["exit_status"] == 0
    assert run["finished_at"] and run["hardware"] == {"gpus": [{"name": "A"}]}
    assert run["trusted"] == 1 and run["commit_sha"] == p.commit
    tests = h.report_reads.tests(p.run_id)
    assert [(t["nodeid"], t["outcome"], t["attempt"]) for t in tests] == [
        ("suites/a/test_a.py::test_x", "passed", 1), ("suites/b/test_b.py::test_y", "passed", 1)]
    [metric] = h.report_reads.metrics(p.run_id)
    assert metric["samples"] == [1.0, 2.0, 3.0]
    assert (metric["median"], metric["count"], metric["unit"], metric["better"]) == (
        2.0, 3, "s", "lower")
    assert h.planning_reads.plan_files(p.run_id)[0]["est_time"] == 120
    assert h.planning_reads.plan_files(p.run_id)[0]["labels"] == ["x"]
    assert h.planning_reads.plan_gates(p.run_id)[0]["options"] == {"better": "lower", "level": 0.05}
    assert h.report_reads.outcome_counts(p.run_id) == {"passed": 2}


def test_started_run_is_incomplete_and_never_a_baseline(h):
    p = prov(1)
    h.run_writes.start_run(p)
    assert h.report_reads.run(p.run_id)["status"] == "incomplete"
    record(h, 2)
    assert [r["run_id"] for r in h.baseline_reads.metric_series("s", "k", "gpu-a")] == ["run002"]
    assert h.planning_reads.file_durations("s", "gpu-a") == {"suites/a/test_a.py": [1.0],
                                             "suites/b/test_b.py": [2.0]}


def test_interrupted_session_is_kept_but_not_a_baseline(h):
    p = prov(1)
    metric = validate_metric("k", [1.0], unit="s", better="lower")
    h.run_writes.record_run(RunRecord(p, [TestResult("t.py::a", "t.py", "passed", 1.0)],
                           [("t.py::a", metric)], None, exit_status=2))
    assert h.report_reads.run(p.run_id)["status"] == "interrupted"
    assert h.report_reads.metrics(p.run_id)[0]["samples"] == [1.0]
    assert h.baseline_reads.metric_series("s", "k", "gpu-a") == []
    assert h.planning_reads.file_durations("s", "gpu-a") == {}


def test_credentials_in_a_test_failure_or_skip_are_never_stored(h):
    # A failing test's traceback held the URL it connected to, password included, and a
    # skip reason a token: both went into test_rows as they were, then into every report.
    p = prov(1)
    h.run_writes.record_run(RunRecord(p, [
        TestResult("t.py::a", "t.py", "failed", 1.0,
                   error='E  requests.get("https://ci:hunter2@db.example/x")'),
        TestResult("t.py::b", "t.py", "skipped", 0.0, skip_reason="no access: token=ghp_abc123")],
        [], None, exit_status=1))
    stored = repr(h._rows("SELECT * FROM tests"))
    assert "hunter2" not in stored and "ghp_abc123" not in stored
    assert "https://ci:***@db.example/x" in stored and "token=***" in stored


def test_reads_return_dicts_and_wrap_errors(h):
    record(h, 1)
    assert h._rows("SELECT run_id, status FROM runs") == [
        {"run_id": "run001", "status": "complete"}]
    with pytest.raises(HistoryError, match="no such table|does not exist") as info:
        h._rows("SELECT * FROM nope")
    assert "corrupt" not in str(info.value)


def test_same_run_id_twice_is_a_second_attempt(h):
    record(h, 1)
    record(h, 1, samples=[9.0], start=False)
    attempts = sorted({t["attempt"] for t in h.report_reads.tests("run001")})
    assert attempts == [1, 2]
    assert [m["attempt"] for m in h.report_reads.metrics("run001")] == [1, 2]


def test_run_id_of_another_suite_is_refused(h):
    record(h, 1)
    with pytest.raises(HistoryError, match="already belongs to suite 's'"):
        h.run_writes.start_run(prov(1, suite="other"))


def test_bad_outcome_refused_and_nothing_written(h):
    p = prov(1)
    with pytest.raises(HistoryError, match="outcome"):
        h.run_writes.record_run(RunRecord(p, [TestResult("t::x", "t", "exploded")]))
    assert h.report_reads.run(p.run_id) is None


def test_metric_series_newest_first_filtered(h):
    for i in range(1, 8):
        record(h, i, samples=[float(i)])
    record(h, 8, fp="gpu-b")
    record(h, 9, suite="other")
    record(h, 10, key="other-key")
    series = h.baseline_reads.metric_series("s", "k", "gpu-a", limit=5)
    assert [r["run_id"] for r in series] == ["run007", "run006", "run005", "run004", "run003"]
    assert series[0]["samples"] == [7.0] and series[0]["commit"] == prov(7).commit
    assert {"run_id", "commit", "started_at", "samples", "n", "unit", "better",
            "nodeid"} <= set(series[0])
    assert [r["run_id"] for r in h.baseline_reads.metric_series("s", "k", "gpu-a", exclude_run_id="run007",
                                                 limit=1)] == ["run006"]
    assert len(h.baseline_reads.metric_series("s", "k", None, limit=100)) == 8


def test_series_query_walks_the_index_without_sorting(tmp_path):
    h = open_history(tmp_path / "history.db")  # SQLite's query plan
    record(h, 1)
    statements: list[str] = []
    h.conn.set_trace_callback(statements.append)
    h.baseline_reads.metric_series("s", "k", "gpu-a")
    h.conn.set_trace_callback(None)
    [sql] = [q for q in statements if "FROM metrics m JOIN runs" in q]
    plan = " ".join(row[-1] for row in h.conn.execute("EXPLAIN QUERY PLAN " + sql))
    assert "SCAN m" not in plan and "SCAN r" not in plan, plan
    h.close()


def test_untrusted_runs_are_not_baselines_but_stay(h):
    for i in range(1, 4):
        record(h, i, commit=f"deadbee{i}" if i == 2 else None)
    changed = h.run_writes.set_trust(commit="deadbee2", trusted=False, reason="broken runner")
    assert changed == ["run002"]
    assert [r["run_id"] for r in h.baseline_reads.metric_series("s", "k", "gpu-a")] == ["run003", "run001"]
    assert len(h.baseline_reads.metric_series("s", "k", "gpu-a", trusted_only=False)) == 3
    assert "suites/a/test_a.py" in h.planning_reads.file_durations("s", "gpu-a")
    assert len(h.planning_reads.file_durations("s", "gpu-a")["suites/a/test_a.py"]) == 2
    assert h.report_reads.run("run002")["trust_reason"] == "broken runner"
    h.run_writes.set_trust(run_ids="run002", trusted=True, reason="runner fixed")  # a bare id works
    assert len(h.baseline_reads.metric_series("s", "k", "gpu-a")) == 3
    assert [(e["run_id"], e["trusted"]) for e in h.report_reads.trust_log()] == [
        ("run002", 0), ("run002", 1)]


def test_set_trust_errors(h):
    record(h, 1)
    with pytest.raises(HistoryError, match="run ids or a commit"):
        h.run_writes.set_trust(reason="x")
    with pytest.raises(HistoryError, match="reason"):
        h.run_writes.set_trust(run_ids=["run001"], reason=" ")
    with pytest.raises(HistoryError, match="nope"):
        h.run_writes.set_trust(run_ids=["run001", "nope"], reason="x")
    with pytest.raises(HistoryError, match="too short"):
        h.run_writes.set_trust(commit="abc", reason="x")
    assert h.report_reads.run("run001")["trusted"] == 1  # the failed call changed nothing


def test_file_durations_skip_failing_runs_and_limit(h):
    for i in range(1, 6):
        record(h, i, duration=float(i), outcome="failed" if i == 4 else "passed")
    durations = h.planning_reads.file_durations("s", "gpu-a", limit=3)
    assert durations["suites/a/test_a.py"] == [5.0, 3.0, 2.0]
    assert durations["suites/b/test_b.py"] == [2.0, 2.0, 2.0]
    assert h.planning_reads.file_durations("s", "gpu-b") == {}


def test_file_durations_skip_a_run_whose_durations_are_not_seconds(tmp_path):
    # A text duration summed as 0 on SQLite: est-time --check said "measured 0 s
    # (p90 of 15 runs); set est_time=5" from a hand-edited history, and --write would
    # have written it into the test files.
    path = tmp_path / "h.db"
    with open_history(path) as h:
        for i in range(1, 5):
            record(h, i)
    with sqlite3.connect(path) as conn:
        for i, bad in ((2, "abc"), (3, -1.0), (4, 1e308 * 10)):
            conn.execute("UPDATE test_rows SET duration = ? WHERE run_num = "
                         "(SELECT num FROM runs WHERE run_id = ?) AND path_id = "
                         "(SELECT id FROM texts WHERE text = 'suites/a/test_a.py')",
                         (bad, f"run{i:03d}"))
    with open_history(path) as h:
        assert h.planning_reads.file_durations("s", "gpu-a")["suites/a/test_a.py"] == [1.0]
        assert h.planning_reads.file_durations("s", "gpu-a")["suites/b/test_b.py"] == [2.0] * 4


def test_file_durations_sum_tests_of_a_file(h):
    p = prov(1)
    tests = [TestResult(f"f.py::t{i}", "f.py", "passed", 0.5) for i in range(4)]
    tests.append(TestResult("f.py::skip", "f.py", "skipped", 0.0, skip_reason="no gpu"))
    h.run_writes.record_run(RunRecord(p, tests))
    assert h.planning_reads.file_durations("s", "gpu-a") == {"f.py": [2.0]}


def test_file_durations_leave_out_a_run_where_every_test_of_the_file_skipped(h):
    # A run that skipped the whole file (a missing GPU stack, say) measured its setup only:
    # three such runs gave est-time and the planners a 0 s figure for a 60 s file.
    for i in range(1, 7):
        p = prov(i)
        outcome, seconds = ("skipped", 0.01) if i % 2 else ("passed", 60.0)
        tests = [TestResult(f"f.py::t{j}", "f.py", outcome, seconds / 2,
                            skip_reason="no gpu" if outcome == "skipped" else None) for j in range(2)]
        tests.append(TestResult("g.py::t", "g.py", "skipped", 0.0, skip_reason="sm100 only"))
        h.run_writes.record_run(RunRecord(p, tests))
    assert h.planning_reads.file_durations("s", "gpu-a") == {"f.py": [60.0, 60.0, 60.0]}


def test_verdicts_roundtrip_and_replace(h):
    record(h, 1)
    rows = [{"key": "k", "nodeid": "n", "verdict": "regression", "baseline": 1.0, "new": 1.2,
             "rel_change": 0.2, "p_value": 0.01, "q_value": 0.02, "mode": "enforce",
             "detail": {"method": "mwu"}, "window": 30}]
    assert h.run_writes.save_verdicts("run001", rows) == 1
    [v] = h.report_reads.verdicts("run001")
    assert v["verdict"] == "regression" and v["attempt"] == 1
    assert v["detail"] == {"method": "mwu", "window": 30}
    h.run_writes.save_verdicts("run001", [{"key": "k", "verdict": "pass"}])
    assert [v["verdict"] for v in h.report_reads.verdicts("run001")] == ["pass"]
    h.run_writes.save_verdicts("run001", [{"key": "k", "verdict": "pass", "attempt": 2}])
    assert [v["attempt"] for v in h.report_reads.verdicts("run001")] == [1, 2]
    with pytest.raises(HistoryError, match="no run"):
        h.run_writes.save_verdicts("missing", [{"key": "k", "verdict": "pass"}])
    with pytest.raises(HistoryError, match="key or verdict"):
        h.run_writes.save_verdicts("run001", [{"key": "k"}])


# ------------------------------------------------------------ bad files


def test_not_sqlite_is_refused_and_untouched(tmp_path):
    path = tmp_path / "history.db"
    path.write_text("this is a CSV, not a database\n" * 10)
    before = path.read_bytes()
    with pytest.raises(HistoryError, match=r"history\.db: not an SQLite database; move it"):
        open_history(path)
    assert path.read_bytes() == before


def test_corrupt_is_refused_and_untouched(tmp_path):
    path = tmp_path / "history.db"
    with open_history(path) as h:
        record(h, 1)
    data = bytearray(path.read_bytes())
    data[100:] = b"\xff" * (len(data) - 100)  # keep the magic header, wreck every page
    path.write_bytes(bytes(data))
    with pytest.raises(HistoryError, match="corrupt") as info:
        open_history(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)
    assert path.read_bytes() == bytes(data)


def test_newer_schema_is_refused_and_untouched(tmp_path):
    path = tmp_path / "history.db"
    with open_history(path) as h:
        record(h, 1)
        h.conn.execute("INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
                       "VALUES ('gates-history', 'm099_from_the_future', 'x')")
        h.conn.commit()
    before = path.read_bytes()
    with pytest.raises(HistoryError, match="newer gates.*m099_from_the_future.*update this checkout"):
        open_history(path)
    assert path.read_bytes() == before


@pytest.mark.parametrize("location", ["host=db password=PWSECRET dbname=gates",
                                      "mysql://u:PWSECRET@db/h", "sqlite:///x.db"])
def test_a_location_that_is_no_path_creates_no_file_named_after_it(tmp_path, monkeypatch,
                                                                   location):
    # Given to the store directly (not through a CLI's check), each of these opened an
    # SQLite file or folders named after it, the password in the name.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(HistoryError, match="^history location: a .*not a history file path") \
            as err:
        open_history(location)
    assert "PWSECRET" not in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_foreign_sqlite_database_is_refused(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE runs (x)")
    conn.commit()
    conn.close()
    with pytest.raises(HistoryError, match="not a gates history"):
        open_history(path)
    assert sqlite3.connect(path).execute(
        "SELECT name FROM sqlite_master").fetchall() == [("runs",)]


def test_missing_directory_and_readonly(tmp_path):
    with pytest.raises(HistoryError, match="no such history"):
        open_history(tmp_path / "nope.db", create=False)
    assert not (tmp_path / "nope.db").exists()
    with pytest.raises(HistoryError, match="is a directory"):
        open_history(tmp_path)
    with open_history(tmp_path / "h.db") as h:
        record(h, 1)
    with open_history(tmp_path / "h.db", readonly=True) as ro:
        assert ro.report_reads.run("run001")["status"] == "complete"
        with pytest.raises(HistoryError, match="read-only"):
            ro.run_writes.set_trust(run_ids=["run001"], reason="x")


@pytest.mark.timeout(30)
@pytest.mark.parametrize("readonly", [False, True])
def test_fifo_history_is_refused_not_waited_on(tmp_path, readonly):
    fifo = tmp_path / "h.db"
    os.mkfifo(fifo)  # reading its header blocked until a writer came: gate-report hung
    with pytest.raises(HistoryError, match="not a regular file"):
        open_history(fifo, readonly=readonly)


# ----------------------------------------------------------------- merge


def shard(tmp_path: Path, name: str, *runs: int, **kw) -> Path:
    path = tmp_path / name
    with open_history(path) as h:
        for i in runs:
            record(h, i, plan=PLAN, **kw)
        h.run_writes.save_verdicts(f"run{runs[0]:03d}", [{"key": "k", "verdict": "pass"}])
    return path


def test_merge_is_idempotent(tmp_path, store_location):
    a = shard(tmp_path, "a.db", 1, 2)
    b = shard(tmp_path, "b.db", 3)
    into = store_location
    report = merge_histories([a, b], into)
    assert sorted(report.added) == ["run001", "run002", "run003"]
    assert report.per_shard == {str(a): 2, str(b): 1}
    assert str(report).startswith("merged 3 new run(s) into ")
    with open_history(into) as h:
        snapshot = {r: h.merge_reads.export_run(r) for r in h.merge_reads.run_ids()}
        assert h.report_reads.metrics("run003")[0]["samples"] == [1.0, 2.0, 3.0]
        assert len(h.report_reads.verdicts("run001")) == 1
        assert h.planning_reads.plan_files("run002")[0]["path"] == "suites/a/test_a.py"
    again = merge_histories([a, b, a], into)
    assert again.added == [] and sorted(again.unchanged) == ["run001", "run002", "run003"]
    with open_history(into) as h:
        assert {r: h.merge_reads.export_run(r) for r in h.merge_reads.run_ids()} == snapshot
        assert h.merge_reads.sample_count() == 9


def test_merge_after_trust_change_is_not_a_conflict(tmp_path, store_location):
    a = shard(tmp_path, "a.db", 1)
    into = store_location
    merge_histories([a], into)
    with open_history(into) as h:
        h.run_writes.set_trust(run_ids=["run001"], reason="bad commit")
    assert merge_histories([a], into).unchanged == ["run001"]
    with open_history(into) as h:
        assert h.report_reads.run("run001")["trusted"] == 0


def test_merge_conflict_with_target_writes_nothing(tmp_path, store_location):
    into = store_location
    merge_histories([shard(tmp_path, "a.db", 1)], into)
    other = shard(tmp_path, "b.db", 1, 2, samples=(5.0,))  # run001 with other samples
    with pytest.raises(MergeConflict, match="run001 exists in .* different content"):
        merge_histories([other], into)
    with open_history(into) as h:
        assert h.merge_reads.run_ids() == ["run001"] and h.report_reads.metrics("run001")[0]["samples"] == [1.0, 2.0, 3.0]


def test_merge_conflict_between_shards(tmp_path, store_location):
    a = shard(tmp_path, "a.db", 1)
    b = shard(tmp_path, "b.db", 1, samples=(5.0,))
    into = store_location
    with pytest.raises(MergeConflict, match="differs from the same run"):
        merge_histories([a, b], into)
    with open_history(into) as h:
        assert h.merge_reads.run_ids() == []


def test_merge_refuses_target_as_shard_and_missing_shard(tmp_path):
    a = shard(tmp_path, "a.db", 1)
    with pytest.raises(HistoryError, match="merge target itself"):
        merge_histories([a], a)
    with pytest.raises(HistoryError, match="no such history"):
        merge_histories([tmp_path / "missing.db"], tmp_path / "h.db")


def test_a_shard_of_an_older_schema_merges_and_stays_as_it_was(tmp_path, store_location):
    # A shard artifact written before an upgrade (the saving report job merges main's
    # last 20 runs' artifacts) was refused: "schema is older than this code's; open it
    # once read-write (e.g. gate-report)", which gate-report, only reading, never did.
    import shutil

    from old_schema import to_m007

    current = shard(tmp_path, "current.db", 1, 2)
    old = tmp_path / "old.db"
    shutil.copy(current, old)
    conn = sqlite3.connect(old)
    to_m007(conn)
    conn.commit()
    conn.close()
    before = old.read_bytes()
    report = merge_histories([old], store_location)
    assert sorted(report.added) == ["run001", "run002"]
    assert old.read_bytes() == before
    # The migrated copy's runs are the runs the current code wrote: no conflict.
    assert merge_histories([current], store_location).unchanged == ["run001", "run002"]
    with open_history(store_location) as h:
        assert h.report_reads.metrics("run002")[0]["samples"] == [1.0, 2.0, 3.0]
        assert h.planning_reads.plan_files("run001")[0]["path"] == "suites/a/test_a.py"
        assert len(h.report_reads.verdicts("run001")) == 1


def test_baseline_near_reads_the_newest_runs_and_far_the_rest(h):
    import numpy as np

    for i in range(1, 7):
        record(h, i, samples=(float(i), float(i) + 1))
    record(h, 1, samples=[9.0], start=False)  # a second attempt: read too
    record(h, 7, samples=(4.0, 5.0), key="other")  # "k" not recorded in this run
    record(h, 8, samples=(1.0,), suite="t")  # another suite: never read
    h.in_transaction(lambda: h.conn.execute(
        "UPDATE metric_rows SET median = NULL WHERE id = "
        "(SELECT id FROM metrics WHERE run_id = 'run003')"))
    keys = ["absent", "k", "other"]
    near = h.baseline_reads.baseline_near("s", "gpu-a", "run007", "", ["run006"], keys, need=2, recent=1)
    # The runs from the edge on: the window read, never every run of the suite.
    assert [r.run_id for r in sorted(near.runs, key=lambda r: r.started_at)] == [
        f"run00{i}" for i in range(4, 7)]
    assert near.edge == h.report_reads.run("run004")["started_at"]  # the 2nd newest that may serve
    by_id = {m["id"]: m for rid in ("run004", "run005", "run006") for m in h.report_reads.metrics(rid)}
    assert sorted(near.rows.ids.tolist()) == sorted(by_id)  # run006 excluded, but read
    assert set(near.rows.keys.tolist()) == {1} and set(near.rows.units) == {"s"}
    newest = next(i for i, m in by_id.items() if m["run_id"] == "run005")
    assert list(near.samples) == [newest] and list(near.samples[newest]) == [5.0, 6.0]
    assert {r.run_id for r in near.runs if r.hardware} == {"run004", "run005"}
    assert near.transients == {} and near.standins == []
    far = h.baseline_reads.baseline_far("s", "gpu-a", "run007", near.edge, keys, ["k", "other"],
                         [newest], limit=2)
    rows = sorted(zip(far.rows.ids.tolist(), far.rows.keys.tolist(),
                      far.rows.medians.tolist(), strict=True))
    firsts = [m["id"] for rid in ("run002", "run003") for m in h.report_reads.metrics(rid)]
    assert [r[0] for r in rows] == firsts  # the newest 2 before the edge
    assert rows[0][1:] == (1, 2.5) and rows[1][1] == 1 and np.isnan(rows[1][2])
    assert list(far.samples[newest]) == [5.0, 6.0] and list(far.samples[firsts[0]]) == [2.0, 3.0]
    assert len(far.hardware) == 2 and all(far.hardware.values())
    assert sorted(r.run_id for r in far.runs) == ["run002", "run003"]  # the far rows' runs
    assert h.baseline_reads.baseline_far("s", "gpu-a", "run007", "", keys, ["k"], [], limit=2).rows.ids.size == 0


@pytest.mark.parametrize(("sqlite_says", "fix"), [
    ("database or disk is full", "free space on its filesystem"),
    ("attempt to write a readonly database", "make it writable, or give another history"),
    ("disk I/O error", "check its filesystem"),
])
def test_a_write_that_the_disk_refuses_names_the_file_and_the_fix(tmp_path, sqlite_says, fix):
    # A full disk or a history on a read-only mount said only SQLite's words.
    with open_history(tmp_path / "h.db") as h:
        exc = h.backend._fail(sqlite3.OperationalError(sqlite_says))
    message = str(exc)
    assert message.startswith(f"{tmp_path / 'h.db'}: {sqlite_says}") and fix in message
    assert "\n" not in message
