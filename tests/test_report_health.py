"""gates.report.health: CI health sections from history rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from report_history import FILE_A, FILE_B, FILE_C, SUITE, make_history

from gates.report.health import analyse, quantile, shard_gain
from gates.report.query import load_health_input, load_registrations
from gates.store.open import open_history


def runs(n: int, *, commits=None, shards=1) -> list[dict]:
    return [{"run_id": f"r{i}", "started_at": f"2026-11-{i + 1:02d}", "status": "complete",
             "commit_sha": (commits or [f"c{j}" for j in range(n)])[i], "confirm_of": None,
             "shard_count": shards} for i in range(n)]


def test_quantile_matches_numpy():
    values = [3.0, 1.0, 7.5, 2.0, 9.0, 4.0]
    for q in (0.0, 0.5, 0.9, 1.0):
        assert quantile(values, q) == pytest.approx(np.quantile(values, q))


def test_stale_est_time_both_ways_with_a_suggestion():
    data = {"suite": "s", "runs": runs(3), "tests": [],
            "plan_files": [{"run_id": "r2", "path": "slow.py", "line": 3, "est_time": 10},
                           {"run_id": "r2", "path": "fast.py", "line": 4, "est_time": 300},
                           {"run_id": "r2", "path": "fine.py", "line": 5, "est_time": 60},
                           {"run_id": "r2", "path": "young.py", "line": 6, "est_time": 5}],
            "durations": {"slow.py": [60.0, 62.0, 58.0, 61.0], "fast.py": [20.0, 22.0, 21.0],
                          "fine.py": [61.0, 66.0, 59.0], "young.py": [100.0, 100.0]}}
    stale = {s.path: s for s in analyse(data).stale}
    assert set(stale) == {"slow.py", "fast.py"}  # young.py: too few measurements
    # est-time --check's suggestion: the p90 (61.7 s) rounded up to 5 s.
    assert stale["slow.py"].suggested == 65 and stale["slow.py"].line == 3
    assert stale["fast.py"].suggested == 25 and stale["fast.py"].ratio < 0.5


def test_registrations_win_over_old_plans_for_est_time():
    data = {"suite": "s", "runs": runs(1), "tests": [],
            "plan_files": [{"run_id": "r0", "path": "a.py", "line": 3, "est_time": 10}],
            "durations": {"a.py": [60.0] * 3},
            "registrations": [{"path": "a.py", "line": 3, "est_time": 60}]}
    assert analyse(data).stale == []


def t(run, nodeid, outcome, attempt=1, path=None, **kw):
    return {"run_id": run, "attempt": attempt, "nodeid": nodeid,
            "path": path or nodeid.split("::")[0], "outcome": outcome, "duration": 1.0, **kw}


def test_flaky_on_same_commit_and_alternating_but_not_a_real_regression():
    rs = runs(8, commits=["c0", "c0", "c1", "c2", "c3", "c4", "c5", "c6"])
    tests = [t("r0", "a.py::same", "failed"), t("r1", "a.py::same", "passed")]
    tests += [t(f"r{i}", "a.py::alt", "passed" if i % 2 else "failed") for i in range(2, 8)]
    tests += [t(f"r{i}", "a.py::broke", "passed" if i < 4 else "failed") for i in range(8)]
    tests += [t(f"r{i}", "a.py::skips", "skipped") for i in range(8)]
    flaky = {f.nodeid: f for f in analyse({"suite": "s", "runs": rs, "tests": tests}).flaky}
    assert set(flaky) == {"a.py::same", "a.py::alt"}
    assert flaky["a.py::same"].commits == ["c0"] and "passed and failed on c0" in \
        flaky["a.py::same"].why
    assert flaky["a.py::alt"].flips == 5 and "alternated 5 times" in flaky["a.py::alt"].why


def test_a_confirm_rerun_that_passes_marks_the_test_flaky():
    rs = runs(1) + [{"run_id": "conf", "started_at": "2026-11-01T01", "status": "complete",
                     "commit_sha": "c0", "confirm_of": "r0", "shard_count": 1}]
    tests = [t("r0", "a.py::x", "failed"), t("conf", "a.py::x", "passed")]
    assert [f.nodeid for f in analyse({"suite": "s", "runs": rs, "tests": tests}).flaky] == \
        ["a.py::x"]


def test_always_skipped_only_where_registered_and_often_enough():
    rs = runs(3)
    tests = [t(f"r{i}", "a.py::gpu_only", "skipped", skip_reason="needs sm100")
             for i in range(3)]
    tests += [t(f"r{i}", "old.py::x", "skipped") for i in range(3)]  # no longer registered
    tests += [t(f"r{i}", "a.py::ok", "skipped" if i else "passed") for i in range(3)]
    regs = [{"path": "a.py", "line": 1, "est_time": 5}]
    report = analyse({"suite": "s", "runs": rs, "tests": tests, "registrations": regs})
    assert [(s.nodeid, s.runs, s.reason) for s in report.always_skipped] == \
        [("a.py::gpu_only", 3, "needs sm100")]
    assert analyse({"suite": "s", "runs": rs[:2], "tests": tests[:2],
                    "registrations": regs}).always_skipped == []


def test_never_ran_registered_and_planned_but_silent():
    rs = runs(2)
    regs = [{"path": "a.py", "line": 1, "est_time": 5}, {"path": "ghost.py", "line": 7,
                                                          "est_time": 5},
            {"path": "off.py", "line": 2, "est_time": 5, "disabled": "flaky upstream"}]
    plan = [{"run_id": r["run_id"], "path": p, "line": 1, "est_time": 5}
            for r in rs for p in ("a.py", "quiet.py")]
    tests = [t("r0", "a.py::x", "passed"), t("r1", "a.py::x", "passed")]
    never = analyse({"suite": "s", "runs": rs, "tests": tests, "plan_files": plan,
                     "registrations": regs, "ever_ran": {"a.py"}}).never_ran
    assert [(n.path, n.line) for n in never] == [("ghost.py", 7), ("quiet.py", 1)]
    assert "planned in 2 complete run(s)" in never[1].why


def test_shard_gain_from_fresh_estimates():
    # est_time says a=b=c=d; measured a is 100 s, the rest 10 s. Planned by est_time
    # on 2 shards, a shares a shard with another file (110 s); fresh: a alone (100 s).
    est = {p: (50.0, 1) for p in ("a", "b", "c", "d")}
    durations = {"a": [100.0] * 3, "b": [10.0] * 3, "c": [10.0] * 3, "d": [10.0] * 3}
    gain = shard_gain(est, durations, 2)
    assert gain is not None
    assert (gain.makespan_est, gain.makespan_fresh, gain.drop_s) == (110.0, 100.0, 10.0)
    assert gain.drop_pct == pytest.approx(100 * 10 / 110)
    assert shard_gain(est, {}, 2) is None


def test_health_from_a_real_history(tmp_path: Path):
    path = tmp_path / "h.db"
    make_history(path, runs=9)
    with open_history(path, readonly=True) as h:
        report = analyse(load_health_input(h, SUITE, window=20))
    assert report.runs == 9
    # FILE_B's 30 s literal is 29 s off its 1 s: under est-time --check's 30 s floor.
    assert [s.path for s in report.stale] == [FILE_A]
    assert [f.nodeid for f in report.flaky] == [f"{FILE_B}::test_sometimes"]
    assert [s.nodeid for s in report.always_skipped] == [f"{FILE_A}::test_needs_fp4"]
    assert [n.path for n in report.never_ran] == [FILE_C]
    assert report.slowest[0].path == FILE_A
    assert report.to_json()["stale"][0]["ratio"] > 1


def test_registrations_come_from_static_collection():
    root = Path(__file__).resolve().parents[1]
    regs = load_registrations(root, "cpu")
    assert regs and all(r["suite"] == "cpu" and r["est_time"] > 0 for r in regs)
    assert load_registrations(root, "no-such-suite") is None
    assert load_registrations(root / "tests", "cpu") is None  # no catalog there


def test_a_stored_skip_reason_with_a_credential_is_shown_masked():
    # Rows stored before the history masked them on write still held the token; the
    # health table (md, html, PR comment) showed it.
    tests = [t(f"r{i}", "a.py::x", "skipped", skip_reason="403 for token=ghp_abc123")
             for i in range(3)]
    report = analyse({"suite": "s", "runs": runs(3), "tests": tests,
                      "registrations": [{"path": "a.py", "line": 1, "est_time": 5}]})
    assert [s.reason for s in report.always_skipped] == ["403 for token=***"]
