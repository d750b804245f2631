"""Baseline snapshots: a shard that gates against a snapshot gets the verdicts (and the
planner the durations) the whole history gives, and uploads only its own run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fleet_history import ENTRY, FP, KEYS, SUITE, record

from gates.gate import evaluate_run
from gates.store.history import HistoryError
from gates.store.merge import merge_histories
from gates.store.open import open_history
from gates.store.snapshot import make_snapshot, seed_shard, strip_shard


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("snap") / "history.db"
    with open_history(path) as h:
        ids = []
        for i in range(100):
            keys = [*KEYS, "gone/latency"] if i < 10 else KEYS  # a key only old runs have
            ids.append(record(h, i, keys=keys))
        for i in range(100, 105):
            record(h, i, fp="h100")
        h.run_writes.set_trust([ids[90]], trusted=False, reason="broken runner")
        # A confirm rerun that found run 95's k1 a transient: it stands in as baseline.
        rerun = record(h, 95, confirm_of=ids[95], run_id="confirm95", seed=1)
        h.run_writes.save_verdicts(rerun, [{"key": "k1/latency", "verdict": "pass", "attempt": 2,
                                 "detail": {"transient": True}}])
        h.after_writes.add_acceptance("k3*", reason="faster allocator", from_commit=f"{97:07d}")
        for rid in ids[98:]:
            h.after_writes.carry_acceptances(rid, [ENTRY])
    return path


def _gate_new(path: Path) -> tuple[list[dict], dict]:
    with open_history(path) as h:
        rid = record(h, 200, keys=[*KEYS, "gone/latency"], shift=1.08, seed=3)
        rows = [v.row(1, None) for v in evaluate_run(h, rid, save=True,
                                                     acceptances=[ENTRY]).verdicts]
        return rows, h.planning_reads.file_durations(SUITE, FP)


def test_gating_against_a_snapshot_gives_the_full_historys_verdicts(history, tmp_path):
    full = tmp_path / "full.db"
    shutil.copy(history, full)
    want, want_durations = _gate_new(full)
    snap = tmp_path / "snap.db"
    report = make_snapshot(history, snap, [SUITE], FP)
    assert report.runs < report.of  # old runs no key or file still reads are left out
    shard = tmp_path / "shard.db"
    seed_shard(snap, shard)
    got, got_durations = _gate_new(shard)
    assert got == want and got_durations == want_durations
    assert {v["verdict"] for v in got} >= {"regression", "pass"}
    assert any(v["key"] == "gone/latency" and v["detail"]["n_baseline"] == 10 for v in got)
    # The shard uploads only its own run; merged back, it is the run the full one gated.
    strip_shard(shard)
    with open_history(shard) as h:
        assert h.merge_reads.run_ids() == [f"run0200{FP}"]
    merged = tmp_path / "merged.db"
    shutil.copy(history, merged)
    assert merge_histories([shard], merged).added == [f"run0200{FP}"]
    with open_history(merged) as m:
        saved = m.report_reads.verdicts(f"run0200{FP}")
        assert [(v["key"], v["verdict"], v["p_value"]) for v in saved] == \
            [(v["key"], v["verdict"], v["p_value"]) for v in want]


def test_a_killed_shard_still_carrying_the_snapshot_merges_only_its_run(history, tmp_path):
    snap = tmp_path / "snap.db"
    make_snapshot(history, snap, [SUITE], FP)
    shard = tmp_path / "shard.db"
    seed_shard(snap, shard)
    with open_history(shard) as h:
        record(h, 300)
    merged = tmp_path / "merged.db"
    shutil.copy(history, merged)
    report = merge_histories([shard], merged)
    assert report.added == [f"run0300{FP}"] and report.unchanged == []


def test_the_snapshot_is_only_read_and_a_used_shard_file_is_refused(history, tmp_path):
    snap = tmp_path / "snap.db"
    make_snapshot(history, snap, [SUITE], FP)
    before = snap.read_bytes()
    shard = tmp_path / "shard.db"
    seed_shard(snap, shard)
    assert "kept" in seed_shard(snap, shard)
    assert snap.read_bytes() == before
    with pytest.raises(HistoryError, match="not a baseline snapshot"):
        seed_shard(history, tmp_path / "other.db")
    with pytest.raises(HistoryError, match="new file"):
        make_snapshot(history, snap, [SUITE])
    with pytest.raises(HistoryError, match="not SQLite|not an SQLite"):
        (tmp_path / "notes.db").write_text("hello")
        make_snapshot(tmp_path / "notes.db", tmp_path / "s2.db", [SUITE])


def test_a_bisection_run_on_a_snapshot_merges_as_its_evidence_alone(history, tmp_path,
                                                                    store_location):
    # A bisect job works on a snapshot of main (its tests' runs go to a scratch file of
    # their own, suite "bisect", deleted at the end); the bisection row is all it adds.
    main = store_location
    merge_histories([history], main)
    snap = tmp_path / "bisect.db"
    copied = make_snapshot(main, snap, [SUITE], FP).runs
    row = {"suite": SUITE, "key": "k1/latency", "good": f"{90:07d}", "bad": f"{99:07d}",
           "outcome": "culprit", "culprit": f"{95:07d}", "executions": 27,
           "evidence": {"candidates": [{"commit": f"{95:07d}", "class": "bad"}]}}
    with open_history(snap) as b:
        b.after_writes.save_bisect(row)
    with open_history(main) as h:
        runs = h.merge_reads.run_ids()
    report = merge_histories([snap], main)
    assert report.added == [] and report.copies == copied and report.bisects == 1
    assert "1 new bisection" in str(report)
    assert merge_histories([snap], main).bisects == 0  # the same bisection: once
    with open_history(main) as h:
        [got] = h.report_reads.bisects("k1/latency")
        assert got["culprit"] == row["culprit"] and got["evidence"] == row["evidence"]
        assert h.merge_reads.run_ids() == runs  # no run of the bisection's file is main's
    # A file whose bisection row is broken is refused whole, as a broken run row is.
    with open_history(snap) as b:
        b.in_transaction(lambda: b.conn.execute("UPDATE bisects SET evidence = 'x{'"))
    with pytest.raises(HistoryError, match="bisection 1 has no valid evidence"):
        merge_histories([snap], main)


def test_a_snapshot_keeps_the_runs_that_measured_a_file_behind_runs_that_skipped_it(tmp_path):
    # The durations leave out runs where every test of a file skipped; the snapshot's
    # selection must too, or 15 newer skip-only runs crowd out the runs the planner reads.
    from test_history import prov

    from gates.store.history import RunRecord, TestResult

    full = tmp_path / "history.db"
    with open_history(full) as h:
        for i in range(1, 21):
            outcome, seconds = ("passed", 60.0) if i <= 5 else ("skipped", 0.01)
            h.run_writes.record_run(RunRecord(prov(i), [TestResult("f.py::t", "f.py", outcome, seconds,
                                                         skip_reason="no gpu" if i > 5 else None)]))
        want = h.planning_reads.file_durations("s", "gpu-a")
    assert want == {"f.py": [60.0] * 5}
    snap, shard = tmp_path / "snap.db", tmp_path / "shard.db"
    make_snapshot(full, snap, ["s"], "gpu-a")
    seed_shard(snap, shard)
    with open_history(shard) as h:
        assert h.planning_reads.file_durations("s", "gpu-a") == want


def test_runs_their_gate_never_judged_crowd_no_baseline_out_of_the_snapshot(tmp_path):
    # A gate never compares against a run recorded with its gate on that its gate never
    # judged (no gated_at); the snapshot's selection must leave them out too, or newer
    # never-judged runs take the rows_per_key places of the baselines the gate reads.
    full = tmp_path / "history.db"
    with open_history(full) as h:
        judged = [record(h, i) for i in range(10)]
        for i in range(10, 16):
            record(h, i, gate_mode="enforce")
    snap, shard = tmp_path / "snap.db", tmp_path / "shard.db"
    # per_file=1: the planner's durations bring the newest run only.
    make_snapshot(full, snap, [SUITE], FP, rows_per_key=5, per_file=1)
    seed_shard(snap, shard)
    with open_history(shard) as h:
        assert set(judged[-5:]) <= set(h.merge_reads.run_ids())
        rid = record(h, 200, shift=1.08, seed=3)
        got = {v.key: v.n_baseline for v in evaluate_run(h, rid, save=False).verdicts}
    assert got == {k: 5 for k in KEYS}


def test_a_snapshot_keeps_the_runs_that_measured_a_file_behind_runs_whose_seconds_are_odd(
        tmp_path):
    # file_durations leaves out a run whose durations are not seconds (a text, NULL, NaN,
    # out of range: a hand-edited row); the snapshot's selection counted them, so 15 newer
    # such runs crowded out the runs the planner reads and the shard planned from nothing.
    import sqlite3

    from test_history import prov

    from gates.store.history import RunRecord, TestResult

    full = tmp_path / "history.db"
    with open_history(full) as h:
        for i in range(1, 21):
            h.run_writes.record_run(RunRecord(prov(i), [TestResult("f.py::t", "f.py", "passed", 60.0)]))
    with sqlite3.connect(full) as conn:
        for i in range(6, 21):
            conn.execute("UPDATE test_rows SET duration = ? WHERE run_num = (SELECT num FROM "
                         "runs WHERE run_id = ?)", (("abc", None, -1.0)[i % 3], f"run{i:03d}"))
    with open_history(full) as h:
        want = h.planning_reads.file_durations("s", "gpu-a")
    assert want == {"f.py": [60.0] * 5}
    snap, shard = tmp_path / "snap.db", tmp_path / "shard.db"
    make_snapshot(full, snap, ["s"], "gpu-a")
    seed_shard(snap, shard)
    with open_history(shard) as h:
        assert h.planning_reads.file_durations("s", "gpu-a") == want
