"""Expected durations from history: p90 of recent trusted passing runs, else est_time."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from history_seed import seed

from ci_register.planning import durations
from ci_register.registered.collect import Registration

REPO = Path(__file__).resolve().parents[1]


def reg(path: str, est: float = 100.0, suite: str = "s") -> Registration:
    return Registration(path=path, line=3, marker="register_cuda_ci", backend="cuda", suite=suite, est_time=est)


def test_figure_is_interpolated_quantile():
    assert durations.figure([10.0]) == 10.0
    assert durations.figure([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]) == pytest.approx(10.0)
    assert durations.figure([10, 20], q=0.5) == 15.0
    with pytest.raises(ValueError):
        durations.figure([])


def test_choose_needs_min_runs_and_uses_the_newest_window():
    samples = {"a": [50.0, 52.0], "b": [10.0] * 15 + [9999.0] * 5, "c": [30.0, 31.0, 500.0]}
    got = durations.choose(["a", "b", "c", "d"], samples)
    assert "a" not in got and "d" not in got  # too little history: est_time stands
    assert got["b"].seconds == 10.0 and got["b"].runs == 15  # old outliers beyond the window ignored
    assert got["c"].runs == 3 and 31.0 < got["c"].seconds < 500.0


def test_one_outlier_in_fifteen_barely_moves_the_figure():
    got = durations.choose(["a"], {"a": [60.0] * 14 + [3600.0]})
    assert got["a"].seconds == 60.0


def test_lookup_matches_suite_fingerprint_and_skips_failures(tmp_path):
    db = tmp_path / "h.db"
    seed(db, "s", "fp-a", [{"suites/x.py": 100.0, "suites/y.py": 5.0}] * 4, failed={0: "suites/y.py"})
    seed(db, "s", "fp-b", [{"suites/x.py": 999.0}] * 4, start=100)
    seed(db, "other", "fp-a", [{"suites/x.py": 777.0}] * 4, start=200)
    regs = [reg("suites/x.py"), reg("suites/y.py"), reg("suites/z.py")]
    found = durations.lookup(regs, "s", db, fingerprint="fp-a")
    assert found.warning is None and found.fingerprint == "fp-a"
    assert found.figures["suites/x.py"].seconds == 100.0
    assert found.figures["suites/y.py"].runs == 3  # the failing run is not a duration
    assert "suites/z.py" not in found.figures


def test_latest_uses_the_suites_newest_trusted_fingerprint(tmp_path):
    db = tmp_path / "h.db"
    seed(db, "s", "fp-old", [{"suites/x.py": 10.0}] * 3)
    seed(db, "s", "fp-new", [{"suites/x.py": 20.0}] * 3, start=50)
    found = durations.lookup([reg("suites/x.py")], "s", db, fingerprint=durations.LATEST)
    assert found.fingerprint == "fp-new" and found.figures["suites/x.py"].seconds == 20.0


def test_this_machine_fingerprint_can_be_overridden(tmp_path, monkeypatch):
    db = tmp_path / "h.db"
    seed(db, "s", "cpu", [{"suites/x.py": 42.0}] * 3)
    monkeypatch.setenv(durations.FINGERPRINT_ENV, "cpu")
    assert durations.measured([reg("suites/x.py")], "s", db) == {"suites/x.py": 42.0}


def test_missing_history_is_silent(tmp_path, capsys):
    assert durations.measured([reg("a")], "s", tmp_path / "none.db") == {}
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("content", [b"not a database at all", b"SQLite format 3\x00" + b"\xff" * 5000])
def test_bad_history_warns_one_line_and_falls_back(tmp_path, capsys, content):
    db = tmp_path / "h.db"
    db.write_bytes(content)
    assert durations.measured([reg("a")], "s", db, fingerprint="cpu") == {}
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"warning: {db}") and "planning with est_time" in err
    assert db.read_bytes() == content  # never modified


def test_foreign_sqlite_database_warns(tmp_path, capsys):
    db = tmp_path / "h.db"
    sqlite3.connect(db).execute("CREATE TABLE t (x)").connection.commit()
    assert durations.measured([reg("a")], "s", db, fingerprint="cpu") == {}
    assert "not a gates history" in capsys.readouterr().err


def test_locked_history_warns_quickly(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(durations, "LOCK_PROBE_S", 0.2)
    db = tmp_path / "h.db"
    seed(db, "s", "cpu", [{"a": 1.0}] * 3)
    holder = sqlite3.connect(db)
    holder.execute("PRAGMA journal_mode=DELETE")
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("INSERT INTO trust_log (run_id, trusted, reason, at) VALUES ('x', 1, 'r', 't')")
    try:
        assert durations.measured([reg("a")], "s", db, fingerprint="cpu") == {}
    finally:
        holder.rollback()
        holder.close()
    assert "locked" in capsys.readouterr().err


def test_runner_plans_with_history(tmp_path):
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "catalog.toml").write_text(
        '[suites.cpu]\nbackend = "cpu"\ndescription = "cpu"\nschedule = "per-commit"\nshard_budget_s = 600\n')
    for name in ("a", "b"):
        (tmp_path / "suites" / f"test_{name}.py").write_text(
            'register_cpu_ci(est_time=30, suite="cpu")\ndef test_x():\n    pass\n')
    seed(tmp_path / "h.db", "cpu", "cpu", [{"suites/test_a.py": 200.0}] * 3)
    r = subprocess.run([sys.executable, "-m", "ci_register", "run", "cpu", "--dry-run", "--history", "h.db"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=60,
                       env={"PYTHONPATH": str(REPO), "CI_REGISTER_FINGERPRINT": "cpu", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert "suites/test_a.py:1  est_time 30 s  expected 200 s (history)" in r.stdout
    assert "suites/test_b.py:1  est_time 30 s  expected 30 s (est_time)" in r.stdout
