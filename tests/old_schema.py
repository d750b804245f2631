"""Turn a current history file back into an older layout, to test a migration on rows
the current code wrote (the layouts are `gates.store.schema`'s migrations)."""

from __future__ import annotations

import sqlite3

from gates.store.schema import VERDICTS_VIEW_M007

_PLAN_FILES_M001 = (
    'CREATE TABLE "plan_files" ("run_id" TEXT REFERENCES "runs"("run_id"), "path" TEXT, '
    '"line" INTEGER, "est_time" REAL, "expected" REAL, "marker" TEXT, "labels" TEXT, '
    'PRIMARY KEY ("run_id", "path"))')
_VERDICT_ROWS_M007 = (
    "CREATE TABLE verdict_rows (id INTEGER PRIMARY KEY, "
    "run_num INTEGER NOT NULL REFERENCES runs(num), attempt INTEGER NOT NULL, "
    "key_id INTEGER NOT NULL REFERENCES texts(id), nodeid_id INTEGER REFERENCES texts(id), "
    "verdict TEXT NOT NULL, baseline REAL, new REAL, rel_change REAL, ci_low REAL, "
    "ci_high REAL, statistic REAL, p_value REAL, q_value REAL, floor REAL, mode TEXT, "
    "detail_id INTEGER REFERENCES texts(id), created_id INTEGER REFERENCES texts(id), "
    "stage TEXT, ci_conf REAL)")


def to_m007(conn: sqlite3.Connection) -> None:
    """The m007 layout (before m008): plan_files a table keyed by run id and path, a
    verdict's verdict, mode and stage as words. The caller commits."""
    conn.execute("CREATE TABLE plan_files_m007 AS SELECT * FROM plan_files")
    conn.execute("DROP VIEW plan_files")
    conn.execute("DROP TABLE plan_file_rows")
    conn.execute(_PLAN_FILES_M001)
    conn.execute("INSERT INTO plan_files SELECT * FROM plan_files_m007")
    conn.execute("DROP TABLE plan_files_m007")
    conn.execute("DROP VIEW verdicts")
    conn.execute("ALTER TABLE verdict_rows RENAME TO verdict_rows_m008")
    conn.execute(_VERDICT_ROWS_M007)
    conn.execute(
        "INSERT INTO verdict_rows SELECT v.id, v.run_num, v.attempt, v.key_id, v.nodeid_id, "
        "vt.text, v.baseline, v.new, v.rel_change, v.ci_low, v.ci_high, v.statistic, "
        "v.p_value, v.q_value, v.floor, mo.text, v.detail_id, v.created_id, st.text, v.ci_conf "
        "FROM verdict_rows_m008 v JOIN texts vt ON vt.id = v.verdict_id "
        "LEFT JOIN texts mo ON mo.id = v.mode_id LEFT JOIN texts st ON st.id = v.stage_id")
    conn.execute("DROP TABLE verdict_rows_m008")
    conn.execute("CREATE INDEX verdict_rows_run ON verdict_rows (run_num, attempt)")
    conn.execute(f"CREATE VIEW verdicts AS {VERDICTS_VIEW_M007}")
    for column in ("gate_note", "gate_mode", "gated_at", "planned_shards"):
        conn.execute(f"ALTER TABLE runs DROP COLUMN {column}")
    conn.execute("DELETE FROM _sqlite_migrations WHERE name IN "
                 "('m008_compact_plans_verdicts', 'm009_gate_note', 'm010_gate_mode', "
                 "'m011_planned_shards')")
