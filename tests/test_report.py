"""gates.report.build and gates.report.query: the report model built from a real history."""

from __future__ import annotations

import datetime as dt
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from report_history import (
    BW,
    FP,
    LAT,
    SUITE,
    commit,
    make_history,
    regression_verdicts,
    write_run,
)

from gates.gate import FAILING as GATE_FAILING
from gates.gate import VERDICTS, evaluate_run
from gates.model.stats import pettitt
from gates.report.build import (
    FAILING,
    ReportInput,
    build_report,
    classify,
    find_change,
    report_to_json,
)
from gates.report.query import (
    ReportInputError,
    load_report_input,
    parse_since,
    select_runs,
)
from gates.store.open import open_history


def report_of(path: Path, **select):
    with open_history(path, create=False, readonly=True) as h:
        runs, scope = select_runs(h, **select)
        since = select.get("since")
        return build_report(load_report_input(h, runs, scope=scope, since=since))


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> tuple[Path, list[str]]:
    path = tmp_path_factory.mktemp("template") / "history.db"
    return path, make_history(path)


@pytest.fixture
def hist(template, tmp_path: Path) -> tuple[Path, list[str]]:
    # One history per module, copied per test (some tests write to it).
    path = tmp_path / "history.db"
    shutil.copy(template[0], path)
    return path, template[1]


def test_latest_run_lists_the_regression_first_with_its_statistics(hist):
    path, ids = hist
    report = report_of(path)
    assert [r.run_id for r in report.runs] == [ids[-1]]
    run = report.runs[0]
    assert run.counts == {"passed": 2, "skipped": 1}
    assert run.est_s == 60 and run.wall_s == 65
    assert run.hardware.startswith("1x NVIDIA H200 (sm 9.0")
    first, second = report.verdicts
    assert (first.key, first.cls, second.key, second.cls) == (LAT, "fail", BW, "pass")
    assert (first.baseline, first.new, first.rel_change) == (1.0, 1.3, 0.3)
    assert (first.ci_low, first.ci_high, first.q_value, first.floor) == (0.22, 0.38, 2e-6, 0.05)
    assert first.unit == "s" and first.method == "robust-t"
    assert report.exit_code == 1 and report.summary == {"fail": 1, "pass": 1}


def test_change_point_names_the_commit_range_of_the_jump(hist):
    path, _ = hist
    row = report_of(path).verdicts[0]
    assert row.trend is not None and len(row.trend.points) == 16
    change = row.change
    assert change is not None and change.index == 10
    assert (change.last_before, change.first_after) == (commit(9), commit(10))
    assert change.commit_range == f"{commit(9)[:10]}..{commit(10)[:10]}"
    assert change.rel == pytest.approx(0.3, abs=0.02)
    # A passing metric gets a trend but no change-point search.
    assert report_of(path).verdicts[1].change is None


def _pettitt_by_definition(x):
    # U_t = sum_{i<=t} sum_{j>t} sgn(x_j - x_i), written out: the reference.
    T = len(x)
    u = [sum(np.sign(x[j] - x[i]) for i in range(t + 1) for j in range(t + 1, T))
         for t in range(T - 1)]
    t = int(np.argmax(np.abs(u)))
    p = min(1.0, 2.0 * math.exp(-6.0 * u[t] ** 2 / (T**3 + T**2)))
    return t + 1, p, float(np.median(x[:t + 1])), float(np.median(x[t + 1:]))


def test_find_change_is_the_gates_pettitt_and_matches_its_definition():
    import gates.model.changepoint
    import gates.model.robust

    assert pettitt is gates.model.changepoint.pettitt is gates.model.robust.pettitt  # one implementation
    rng = np.random.default_rng(7)
    for trial in range(20):
        x = rng.normal(size=30) + (np.arange(30) >= 12 + trial % 5) * (trial % 3)
        assert (pettitt(x).index, pettitt(x).p) == pytest.approx(_pettitt_by_definition(x)[:2])
        ref = pettitt(x)
        mine = find_change(list(x), [f"c{i}" for i in range(30)], max_p=1.1)
        assert mine is not None and ref is not None
        assert (mine.index, mine.p) == (ref.index, pytest.approx(ref.p))
        assert (mine.last_before, mine.first_after) == (f"c{ref.index - 1}", f"c{ref.index}")
        assert (mine.before, mine.after) == (pytest.approx(ref.before), pytest.approx(ref.after))
    assert find_change([1.0] * 10) is None and find_change([1.0, 2.0, 3.0]) is None


def test_confirm_run_verdict_replaces_the_first_one(hist):
    path, ids = hist
    with open_history(path) as h:
        cid = write_run(h, 16, latency=1.0, confirm_of=ids[-1], run_id="confirm" + "0" * 20)
        h.run_writes.save_verdicts(cid, [dict(v, verdict="pass") for v in regression_verdicts(cid)][:1])
    report = report_of(path)
    assert [r.run_id for r in report.runs] == [ids[-1]]  # the confirm run is not "latest"
    assert report.runs[0].confirm_runs == [cid]
    lat = next(v for v in report.verdicts if v.key == LAT)
    assert (lat.verdict, lat.confirmed_by) == ("pass", cid)
    assert report.exit_code == 0


def test_classes_follow_the_gates_vocabulary():
    assert set(FAILING) == set(GATE_FAILING)  # what fails a report is what fails a gate
    for verdict in GATE_FAILING:
        assert (classify(verdict, "enforce"), classify(verdict, None)) == ("fail", "fail")
        assert (classify(verdict, "warn"), classify(verdict, "off")) == ("warn", "warn")
    assert classify("error", "enforce") == "warn"  # could not judge: a look, not a fail
    assert classify("improvement", "enforce") == "improved"
    assert classify("insufficient-history", "enforce") == "info"
    assert classify("not-judged", None) == "info"
    assert classify("pass", "enforce") == "pass"
    assert classify("suspect", "enforce") == "info"  # its rerun's verdict replaces it
    assert classify("unguarded", "enforce") == "info"  # the noise model cannot judge it
    assert set(VERDICTS) <= {"pass", "improvement", "insufficient-history", "error", "suspect",
                             "unguarded", *GATE_FAILING}  # a new verdict needs a class here


def test_report_of_runs_the_real_gate_judged(tmp_path):
    # The newest run alone jumps: the trend cannot prove a split, the gate's own
    # localisation names the commit; a confirm rerun that recovers clears it.
    path = tmp_path / "h.db"
    ids = make_history(path, runs=16, regress_at=15, verdicts=False)
    with open_history(path) as h:
        assert evaluate_run(h, ids[-1]).tripped_nodeids
    report = report_of(path)
    lat = report.verdicts[0]
    assert (lat.key, lat.verdict, lat.cls, report.exit_code) == (LAT, "regression", "fail", 1)
    assert lat.rel_change == pytest.approx(0.3, abs=0.03) and lat.q_value < 0.01
    assert lat.change is not None and lat.change.commit_range == \
        f"{commit(14)[:10]}..{commit(15)[:10]}"
    with open_history(path) as h:
        cid = write_run(h, 16, latency=1.0, confirm_of=ids[-1], run_id="confirm" + "0" * 20)
        evaluate_run(h, cid, confirm_of=ids[-1])
        assert [v["attempt"] for v in h.report_reads.verdicts(cid)] == [2]
    report = report_of(path)
    lat = next(v for v in report.verdicts if v.key == LAT)
    assert (lat.verdict, lat.confirmed_by, report.exit_code) == ("pass", cid, 0)


def test_warn_mode_regression_does_not_fail(tmp_path):
    path = tmp_path / "h.db"
    ids = make_history(path, runs=6, verdicts=False)
    with open_history(path) as h:
        h.run_writes.save_verdicts(ids[-1], regression_verdicts(ids[-1], mode="warn"))
    report = report_of(path)
    assert report.verdicts[0].cls == "warn" and report.exit_code == 0


def test_metrics_without_verdicts_are_listed_as_not_judged(tmp_path):
    path = tmp_path / "h.db"
    make_history(path, runs=3, verdicts=False)
    report = report_of(path)
    assert {v.key: v.verdict for v in report.verdicts} == {LAT: "not-judged", BW: "not-judged"}
    assert report.exit_code == 0
    new = {v.key: v.new for v in report.verdicts}
    assert new[LAT] == pytest.approx(1.0, rel=0.05) and new[BW] == pytest.approx(500, rel=0.05)


def test_range_keeps_every_failure_and_the_newest_pass(hist):
    path, ids = hist
    report = report_of(path, since="2026-10-01")
    assert report.scope == "range" and len(report.runs) == 16
    assert report.runs[0].run_id == ids[-1]  # newest first
    # 16 runs x 2 metrics: the one failure, the newest row of each metric.
    assert len(report.verdicts) == 2 and report.omitted == 30
    assert report.verdicts[0].cls == "fail" and report.exit_code == 1
    with open_history(path, readonly=True) as h:
        runs, scope = select_runs(h, since="2026-10-01")
        full = build_report(load_report_input(h, runs, scope=scope), all_rows=True)
    assert len(full.verdicts) == 32 and full.omitted == 0


def _range_input(values, commits, verdict_run, rel, change_point=None):
    # One metric over a range of runs; run `verdict_run` carries the verdict.
    ids = [f"run{i:02d}" for i in range(len(values))]
    runs = [{"run_id": rid, "suite": "s", "fingerprint": "fp", "status": "complete",
             "commit_sha": c, "started_at": f"2026-11-01T{i:02d}:00:00+00:00", "hardware": {}}
            for i, (rid, c) in enumerate(zip(ids, commits, strict=True))]
    verdict = "regression" if rel > 0 else "pass"
    verdicts = [{"run_id": ids[verdict_run], "key": "lat", "nodeid": "t.py::t",
                 "verdict": verdict, "mode": "enforce", "rel_change": rel, "attempt": 1,
                 "detail": {"change_point": change_point} if change_point else {}}]
    series = {("s", "fp", "lat"): {"run_id": ids, "commit": list(commits),
                                   "started_at": [r["started_at"] for r in runs],
                                   "trusted": [True] * len(ids), "value": list(values)}}
    return ReportInput(runs=list(reversed(runs)), verdicts=verdicts, series=series,
                       scope="range")


def test_range_change_is_where_the_regression_began_not_a_later_step():
    # Latency 1.0 on commits a-b, +5% from commit c; the verdict is on c's sixth run.
    # The range runs on: a step back down between two runs of commit d is the biggest
    # split of the whole trend. "Changed in" is b..c, where this regression began.
    values = [1.0, 1.001, 0.999, 1.0, 1.002, 0.998, 1.0, 1.001, 1.05, 1.051, 1.049, 1.05]
    values += [1.05, 1.051] + [1.05, 1.051] + [0.95, 0.951, 0.949, 0.95, 0.95, 0.951, 0.949]
    commits = ["a"] * 4 + ["b"] * 4 + ["c"] * 6 + ["d"] * 9
    whole = find_change(values, commits)
    assert whole is not None and (whole.last_before, whole.first_after) == ("d", "d")
    report = build_report(_range_input(values, commits, 13, 0.05))
    row = next(v for v in report.verdicts if v.cls == "fail")
    assert row.change is not None
    assert (row.change.last_before, row.change.first_after) == ("b", "c")
    assert row.change.rel == pytest.approx(0.05, abs=0.005)
    # On c's first run the trend proves nothing yet: the gate's localisation (the
    # judged run itself, runs_ago 0) names b..c, not the later step either.
    cp = {"run_id": "first-attempt-id", "runs_ago": 0, "p": 1.0, "before": None,
          "after": 1.05}
    row = build_report(_range_input(values, commits, 8, 0.05, cp)).verdicts[0]
    assert row.change is not None
    assert (row.change.last_before, row.change.first_after) == ("b", "c")


def test_range_change_is_never_a_split_inside_one_commit():
    # A step the trend proves, but between two runs of commit b: it begins at b's first run.
    values = [1.0, 1.001, 0.999, 1.0, 1.002, 1.0, 1.05, 1.051, 1.049, 1.05, 1.05, 1.051]
    commits = ["a"] * 4 + ["b"] * 8
    report = build_report(_range_input(values, commits, 11, 0.05))
    change = report.verdicts[0].change
    assert change is not None and (change.last_before, change.first_after) == ("a", "b")
    assert change.index == 4
    # The gate's own localisation (the judged run itself) snaps to its commit's first run
    # too, and reads no run after the verdict's.
    flat = [1.0, 1.001, 0.999, 1.0, 1.0, 1.0, 1.0, 1.05, 0.9, 0.9]
    cp = {"run_id": "first-attempt-id", "runs_ago": 0, "p": None, "before": None,
          "after": None}
    report = build_report(_range_input(flat, ["a"] * 6 + ["b"] * 4, 7, 0.05, cp))
    change = report.verdicts[0].change
    assert change is not None and (change.last_before, change.first_after) == ("a", "b")
    assert change.after == pytest.approx(1.025)  # median of b up to the verdict: 1.0, 1.05


def test_untrusted_runs_show_in_the_trend_marked(hist):
    path, ids = hist
    with open_history(path) as h:
        h.run_writes.set_trust([ids[3]], reason="broken runner")
    points = report_of(path).verdicts[0].trend.points
    assert [p.trusted for p in points].count(False) == 1
    assert not next(p for p in points if p.run_id == ids[3]).trusted


def test_select_latest_includes_the_other_shards_of_the_same_commit(tmp_path):
    path = tmp_path / "h.db"
    with open_history(path) as h:
        write_run(h, 1, latency=1.0, shard=(1, 2), run_id="a" * 32)
        write_run(h, 1, latency=1.0, shard=(2, 2), run_id="b" * 32,
                  when="2026-11-01T01:30:00.000000+00:00")
        write_run(h, 0, latency=1.0, shard=(1, 2), run_id="c" * 32)  # older commit
        runs, scope = select_runs(h)
        assert scope == "run" and [r["run_id"] for r in runs] == ["a" * 32, "b" * 32]
        runs, _ = select_runs(h, run="cccccc")
        assert [r["run_id"] for r in runs] == ["c" * 32]


@pytest.mark.parametrize(("select", "message"), [
    ({"run": "nope12"}, "no run nope12"),
    ({"run": "abc"}, "at least 6 characters"),
    ({"run": "run000"}, "matches 10 runs"),
    ({"suite": "other"}, "no run of suite 'other'; suites here: stage-x"),
    ({"since": "2027-01-01T00:00:00+00:00"}, "widen --since"),
    ({"run": "run0015", "suite": "other"}, "belongs to suite 'stage-x'"),
])
def test_selection_errors_say_what_exists(hist, select, message):
    path, _ = hist
    with open_history(path, readonly=True) as h, pytest.raises(ReportInputError, match=message):
        select_runs(h, **select)


def test_parse_since():
    now = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
    assert parse_since("30d", now).startswith("2026-10-31T12:00:00")
    assert parse_since("12h", now).startswith("2026-11-30T00:00:00")
    assert parse_since("2w", now).startswith("2026-11-16T12")
    assert parse_since("2026-11-01", now).startswith("2026-11-01T00:00:00")
    with pytest.raises(ReportInputError, match="use a span like 30d"):
        parse_since("last week", now)
    # A span further back than year 1 selects every run instead of crashing.
    assert parse_since("99999999d", now).startswith("0001-01-01T00:00:00")
    assert parse_since("99999999999999999999w", now).startswith("0001-01-01")


def test_json_is_strict_json_with_trends_once(hist):
    path, _ = hist
    report = report_of(path)
    report.verdicts[1].statistic = math.nan
    data = json.loads(json.dumps(report_to_json(report), allow_nan=False))
    assert data["exit_code"] == 1 and data["verdicts"][0]["key"] == LAT
    assert data["verdicts"][1]["statistic"] is None
    tid = data["verdicts"][0]["trend"]
    trend = data["trends"][tid]
    assert tid == f"{SUITE}|{FP}|{LAT}" and len(trend["value"]) == len(trend["run"]) == 16
    assert [data["trend_runs"][i]["commit"] for i in trend["run"]] == [
        commit(i) for i in range(16)]
    assert data["trends"][f"{SUITE}|{FP}|{BW}"]["run"] == trend["run"]  # runs listed once
    assert len(data["trend_runs"]) == 16
    assert data["verdicts"][0]["change"]["commit_range"].startswith(commit(9)[:10])
    assert data["runs"][0]["est_delta"] == pytest.approx(65 / 60 - 1)
