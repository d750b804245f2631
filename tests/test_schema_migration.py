"""An old history (schema m002, written by gates before the compact layout) migrates in
place to m003 with every row the gate and reports read unchanged.

``tests/data/history-m002.db`` was written by main at 28db6f2 (schema m002): eight
gated runs of six metrics x five samples (``benchmarks/fleet_runs.py`` with six
metrics), one a confirm rerun, one untrusted, a command and a file acceptance, a
bisection, a notification, and a crashed run with an unfinished test.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from gates.gate import evaluate_run
from gates.store.history import HistoryError
from gates.store.open import open_for_reading, open_history
from gates.store.schema import SCHEMA_VERSION

OLD = Path(__file__).parent / "data" / "history-m002.db"
_KEEP = ("runs", "plan_files", "plan_gates", "trust_log", "acceptances", "run_acceptances",
         "bisects", "notifications")


def _rows(conn: sqlite3.Connection, sql: str) -> list[tuple]:
    return conn.execute(sql).fetchall()


def _order(table: str) -> str:
    # plan_files is a view from m008 on (no rowid): its key orders it on both sides.
    return "run_id, path" if table == "plan_files" else "rowid"


def _old_content(path: Path) -> dict[str, list]:
    conn = sqlite3.connect(path)
    out = {t: _rows(conn, f"SELECT * FROM {t} ORDER BY {_order(t)}") for t in _KEEP}
    for view in ("metrics", "tests", "verdicts"):
        out[view] = _rows(conn, f"SELECT * FROM {view} ORDER BY id")
    samples: dict[int, list[float]] = {}
    for mid, value in _rows(conn, "SELECT metric_id, value FROM samples ORDER BY metric_id, seq"):
        samples.setdefault(mid, []).append(value)
    out["samples"] = sorted(samples.items())
    conn.close()
    return out


@pytest.fixture
def old(tmp_path: Path) -> Path:
    path = tmp_path / "history.db"
    shutil.copy(OLD, path)
    return path


def test_an_m002_history_migrates_in_place_with_nothing_lost(old):
    before = _old_content(old)
    assert len(before["metrics"]) == 48 and len(before["verdicts"]) == 42
    with open_history(old) as h:
        assert h.backend.schema_version == SCHEMA_VERSION == 13
        runs = _rows(h.conn, "SELECT * FROM runs ORDER BY rowid")
        # m009's gate_note, m010's gate_mode and gated_at, m011's planned_shards: NULL,
        # so they read as before
        assert {r[-4:] for r in runs} == {(None, None, None, None)}
        assert [r[:-5] for r in runs] == before["runs"]  # - num and those
        for table in _KEEP[1:]:
            assert _rows(h.conn, f"SELECT * FROM {table} ORDER BY {_order(table)}") == before[table]
        for view in ("metrics", "tests", "verdicts"):
            got = _rows(h.conn, f"SELECT * FROM {view} ORDER BY id")
            if view == "verdicts":  # m005 adds the stage, derived from the attempt
                assert {r[-2] for r in got} <= {"first", "rerun", "reruns", "corroborate"}
                assert all((r[-2] == "first") == (r[2] == 1) for r in got)
                # m007: the interval's confidence copied out of the detail (m002 had none)
                assert [r[-1] for r in got] == [
                    (json.loads(r[16]) or {}).get("ci_conf") if r[16] else None for r in got]
                got = [r[:-2] for r in got]
            assert got == before[view], view
        samples = sorted((m["id"], m["samples"]) for rid in h.merge_reads.run_ids()
                         for m in h.report_reads.metrics(rid))
        assert samples == before["samples"]
        assert h.merge_reads.orphan_rows() == []
        h.check()


def test_a_migrated_history_takes_new_runs_and_gates_them(old):
    import sys  # noqa: PLC0415

    sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
    from fleet_runs import make_run, write_run  # noqa: PLC0415

    with open_history(old) as h:
        last_id = h.conn.execute("SELECT max(id) FROM metric_rows").fetchone()[0]
        keys = set(h.report_reads.metric_keys())
        rid = write_run(h, make_run(20, seed=7), gate=False)
        result = evaluate_run(h, rid)
        # The old runs are baselines: seven complete, one untrusted; the command
        # acceptance keeps only gemm's runs from the fifth on.
        old_keys = [v for v in result.verdicts if v.key in keys]
        other = [v for v in old_keys if not v.key.startswith("gemm/")]
        assert other and all(v.n_baseline == 6 and v.verdict == "pass" for v in other)
        assert len(old_keys) == 6 and len(result.verdicts) == 73
        assert min(m["id"] for m in h.report_reads.metrics(rid)) == last_id + 1
        assert h.report_reads.run(rid)["num"] == len(h.merge_reads.run_ids())


def test_a_history_with_rows_of_no_run_is_refused_and_left_untouched(old):
    with sqlite3.connect(old) as conn:
        conn.execute("INSERT INTO tests (run_id, attempt, nodeid, outcome) "
                     "VALUES ('ghost', 1, 'x', 'passed')")
    conn.close()
    before = old.read_bytes()
    with pytest.raises(HistoryError, match="belong to no run.*unchanged"):
        open_history(old)
    assert old.read_bytes() == before


# ------------------------------------------------------------------ m008

# Written by main at 65c8e17 (schema m007): history-m002.db opened (migrated) by that code,
# then three gated runs of benchmarks/fleet_runs.py (make_run(20..22, seed=7)), VACUUMed.
M007 = Path(__file__).parent / "data" / "history-m007.db"
REPO_HISTORY = Path(__file__).parents[1] / "history.db"
_VIEWS_M008 = {"plan_files": "run_id, path", "verdicts": "id", "metrics": "id", "tests": "id"}


def _views(conn: sqlite3.Connection) -> dict[str, list[tuple]]:
    return {v: _rows(conn, f"SELECT * FROM {v} ORDER BY {order}")
            for v, order in _VIEWS_M008.items()}


def test_an_m007_history_reads_the_same_after_m008(tmp_path):
    # Every row a report, rerun, bisect or accept reads through the views is the same
    # after the plan and verdict texts move to ids.
    path = tmp_path / "history.db"
    shutil.copy(M007, path)
    conn = sqlite3.connect(path)
    assert "m008_compact_plans_verdicts" not in {
        r[0] for r in _rows(conn, "SELECT name FROM _sqlite_migrations")}
    before = _views(conn)
    conn.close()
    assert before["plan_files"] and before["verdicts"]
    with open_history(path) as h:
        assert h.backend.schema_version == SCHEMA_VERSION == 13
        assert _views(h.conn) == before
        assert h.merge_reads.orphan_rows() == [] and h.check() is None
    # A read-only open of the old file reads the same through a migrated copy, and
    # leaves the file byte for byte as it was.
    original = tmp_path / "untouched.db"
    shutil.copy(M007, original)
    raw = original.read_bytes()
    with open_for_reading(original) as h:
        assert _views(h.conn) == before
    assert original.read_bytes() == raw


def test_m008_keeps_plan_and_verdict_words_once(tmp_path):
    # The repeated words live in texts: plan rows name run and path by integer ids
    # (WITHOUT ROWID, no second copy of the key as an index), verdicts their words.
    with open_history(tmp_path / "h.db") as h:
        kinds = dict(_rows(h.conn, "SELECT name, type FROM sqlite_master "
                                   "WHERE name IN ('plan_files', 'plan_file_rows')"))
        columns = {r[1] for r in _rows(h.conn, "PRAGMA table_info(verdict_rows)")}
        plan_sql = h.conn.execute("SELECT sql FROM sqlite_master "
                                  "WHERE name = 'plan_file_rows'").fetchone()[0]
    assert kinds == {"plan_files": "view", "plan_file_rows": "table"}
    assert "WITHOUT ROWID" in plan_sql
    assert {"verdict_id", "mode_id", "stage_id"} <= columns
    assert not {"verdict", "mode", "stage"} & columns


def test_the_repository_history_is_at_this_schema_and_reads():
    # Committed migrated, so reports and planners read it without a migrated copy.
    with open_for_reading(REPO_HISTORY) as h:
        assert h.backend.schema_version == SCHEMA_VERSION and not hasattr(h, "folder")
        assert h.planning_reads.plan_files(h.merge_reads.run_ids()[-1]) and h.report_reads.verdicts(h.merge_reads.run_ids()[-1])


def test_the_repository_history_has_this_codes_views(tmp_path):
    # Its views read as a new file's do (a view changed in code is changed in it too).
    def views(path: Path) -> dict[str, str]:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return dict(_rows(conn, "SELECT name, sql FROM sqlite_master WHERE type = 'view'"))
        finally:
            conn.close()

    with open_history(tmp_path / "new.db"):
        pass
    assert views(REPO_HISTORY) == views(tmp_path / "new.db")


def test_m008_refuses_a_plan_row_of_no_run_and_leaves_the_file(tmp_path):
    path = tmp_path / "history.db"
    shutil.copy(M007, path)
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO plan_files (run_id, path) VALUES ('ghost', 'a.py')")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(HistoryError, match="plan_files row.*no run.*unchanged"):
        open_history(path)
    assert path.read_bytes() == before
