"""The history file's schema: its sqlite-utils migrations and the code's schema version.

Kept apart from the store (`gates.store.history`) so the table definitions read in one
place; a new migration goes here and its name into `KNOWN_MIGRATIONS`. The
tables and their columns are described in `gates.store.history`'s docstring.
"""

from __future__ import annotations

import itertools
import json
import struct
from collections.abc import Callable, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gates.store.sqlite_lib import Database, Migrations

__all__ = ["BY_NUM", "BY_RUN_ID", "CLEAN_DURATION", "DURATION_TALLIES", "IMPORT_MAPS_TABLE",
           "JUDGED", "MIGRATION_SET", "PLAN_FILES_VIEW",
           "SCHEMA_VERSION", "TEXT_REFS", "VERDICT_COLUMNS", "VERDICTS_VIEW", "MigrationRefused",
           "migrations", "pack_samples", "unpack_samples"]

# The migrations, in order, as sqlite-utils records them (set ``gates-history`` in
# ``_sqlite_migrations``). sqlite-utils itself is imported only when a file needs
# migrating (`migrations`): loading it costs ~0.1 s, and an up-to-date file is opened
# and read with the standard library alone (a one-run report; `tests/test_startup.py`).
MIGRATION_SET = "gates-history"
_STEPS: list[tuple[str, Callable[[Database], None]]] = []


def _migration(name: str) -> Callable[[Callable[[Database], None]], Callable[[Database], None]]:
    def register(fn: Callable[[Database], None]) -> Callable[[Database], None]:
        _STEPS.append((name, fn))
        return fn
    return register


@cache
def migrations() -> Migrations:
    """sqlite-utils' migration set of every step (built once, on the first migration)."""
    from gates.store.sqlite_lib import Migrations  # noqa: PLC0415 - only to migrate

    out = Migrations(MIGRATION_SET)
    for name, fn in _STEPS:
        out(name=name)(fn)
    return out


class MigrationRefused(Exception):
    """A file a migration cannot carry over whole; it is left as it was."""


def pack_samples(values: Sequence[float]) -> bytes:
    """``metric_rows.samples``: the values as little-endian float64, in order."""
    return struct.pack(f"<{len(values)}d", *values)


def unpack_samples(blob: object) -> list[object]:
    """The values of a ``metric_rows.samples`` blob ([] for NULL). A value that is not
    such a blob comes back as one element, so the row checks (`gates.store.merge_check`) name it."""
    if blob is None:
        return []
    if isinstance(blob, bytes) and len(blob) % 8 == 0:
        return list(struct.unpack(f"<{len(blob) // 8}d", blob))
    return [blob]


@_migration("m001_initial")
def _m001_initial(db: Database) -> None:
    db["runs"].create(
        {
            "run_id": str, "suite": str, "shard_index": int, "shard_count": int,
            "status": str, "exit_status": int, "confirm_of": str,
            "commit_sha": str, "branch": str, "ci_url": str,
            "started_at": str, "finished_at": str, "host": str, "python": str,
            "fingerprint": str, "hardware": str,
            "trusted": int, "trust_reason": str, "trust_changed_at": str,
        },
        pk="run_id",
        not_null={"suite", "status", "started_at", "fingerprint", "trusted"},
        defaults={"status": "incomplete", "trusted": 1, "shard_index": 1, "shard_count": 1},
    )
    db["runs"].create_index(["suite", "fingerprint", "started_at"], index_name="runs_series")
    db["runs"].create_index(["commit_sha"], index_name="runs_commit")
    db["tests"].create(
        {
            "id": int, "run_id": str, "attempt": int, "nodeid": str, "path": str,
            "outcome": str, "duration": float, "skip_reason": str, "error": str,
        },
        pk="id",
        not_null={"run_id", "attempt", "nodeid", "outcome"},
        foreign_keys=[("run_id", "runs", "run_id")],
    )
    db["tests"].create_index(["run_id", "attempt", "nodeid"], unique=True,
                             index_name="tests_run_node")
    db["tests"].create_index(["run_id", "path"], index_name="tests_run_path")
    db["metrics"].create(
        {
            "id": int, "run_id": str, "attempt": int, "nodeid": str, "key": str,
            "unit": str, "better": str, "n": int, "min_value": float, "max_value": float,
            "count": int, "median": float,
            "suite": str, "fingerprint": str, "started_at": str,
        },
        pk="id",
        not_null={"run_id", "attempt", "nodeid", "key", "unit", "better", "count"},
        foreign_keys=[("run_id", "runs", "run_id")],
    )
    db["metrics"].create_index(["run_id", "attempt", "nodeid", "key"], unique=True,
                               index_name="metrics_run_node_key")
    db["metrics"].create_index(["suite", "key", "fingerprint", "started_at"],
                               index_name="metrics_series")
    # WITHOUT ROWID: the (metric_id, seq) key is the table, no second copy as an index.
    db.execute(
        "CREATE TABLE samples (metric_id INTEGER NOT NULL REFERENCES metrics(id), "
        "seq INTEGER NOT NULL, value REAL NOT NULL, PRIMARY KEY (metric_id, seq)) WITHOUT ROWID"
    )
    db["plan_files"].create(
        {"run_id": str, "path": str, "line": int, "est_time": float, "expected": float,
         "marker": str, "labels": str},
        pk=("run_id", "path"),
        foreign_keys=[("run_id", "runs", "run_id")],
    )
    db["plan_gates"].create(
        {"id": int, "run_id": str, "path": str, "line": int, "metric_key": str, "options": str},
        pk="id",
        foreign_keys=[("run_id", "runs", "run_id")],
    )
    db["plan_gates"].create_index(["run_id"], index_name="plan_gates_run")
    db["verdicts"].create(
        {
            "id": int, "run_id": str, "attempt": int, "key": str, "nodeid": str,
            "verdict": str, "baseline": float, "new": float, "rel_change": float,
            "ci_low": float, "ci_high": float, "statistic": float, "p_value": float,
            "q_value": float, "floor": float, "mode": str, "detail": str, "created_at": str,
        },
        pk="id",
        not_null={"run_id", "attempt", "key", "verdict"},
        foreign_keys=[("run_id", "runs", "run_id")],
    )
    db["verdicts"].create_index(["run_id", "attempt"], index_name="verdicts_run")
    db["trust_log"].create(
        {"id": int, "run_id": str, "trusted": int, "reason": str, "at": str},
        pk="id",
        foreign_keys=[("run_id", "runs", "run_id")],
    )
    db["trust_log"].create_index(["run_id"], index_name="trust_log_run")


@_migration("m002_after_verdict")
def _m002_after_verdict(db: Database) -> None:
    # Acceptances (re-baselines): from ``from_commit`` on (command) or in the runs that
    # carried the repo file's entry (``entry_id``), a key is judged only against such runs.
    db["acceptances"].create(
        {"id": int, "pattern": str, "suite": str, "test": str, "from_commit": str,
         "entry_id": str, "source": str, "who": str, "reason": str, "at": str},
        pk="id",
        not_null={"pattern", "source", "reason", "at"},
    )
    db["acceptances"].create_index(["entry_id"], unique=True, index_name="acceptances_entry")
    db["run_acceptances"].create(
        {"run_id": str, "acceptance_id": int},
        pk=("run_id", "acceptance_id"),
        foreign_keys=[("run_id", "runs", "run_id"), ("acceptance_id", "acceptances", "id")],
    )
    db["run_acceptances"].create_index(["acceptance_id"], index_name="run_acceptances_acc")
    # Bisections: one row per bisection, its evidence (per-candidate values, p) as JSON.
    db["bisects"].create(
        {"id": int, "suite": str, "key": str, "good": str, "bad": str, "outcome": str,
         "culprit": str, "executions": int, "evidence": str, "at": str},
        pk="id",
        not_null={"key", "good", "bad", "outcome", "at"},
    )
    # Notifications sent (webhook per regressing change): the dedupe key is unique.
    db["notifications"].create(
        {"id": int, "channel": str, "dedupe": str, "run_id": str, "at": str},
        pk="id",
        not_null={"channel", "dedupe", "at"},
    )
    db["notifications"].create_index(["channel", "dedupe"], unique=True,
                                     index_name="notifications_dedupe")


# m003: the per-metric tables (tests, metrics, verdicts) move to compact tables
# that refer to their run by ``runs.num`` (an integer) and to repeated text (metric
# keys, nodeids, paths, verdict details, save times) by ``texts.id``; views under the
# old names give back the old columns, so reads and `datasette` see what they saw.
# A 73-metric run with its verdicts dropped from 87.4 kB to 20.6 kB
# (benchmarks/bench_fleet.py size; 21.6 kB with m005's and m007's columns, 19.7 kB from m008).
_VIEWS = {
    "metrics": (
        "SELECT m.id, r.run_id, m.attempt, n.text AS nodeid, k.text AS key, m.unit, "
        "m.better, m.n, m.min_value, m.max_value, m.count, m.median, r.suite, "
        "r.fingerprint, r.started_at FROM metric_rows m JOIN runs r ON r.num = m.run_num "
        "LEFT JOIN texts n ON n.id = m.nodeid_id LEFT JOIN texts k ON k.id = m.key_id"),
    "tests": (
        "SELECT t.id, r.run_id, t.attempt, n.text AS nodeid, p.text AS path, t.outcome, "
        "t.duration, t.skip_reason, t.error FROM test_rows t JOIN runs r ON r.num = t.run_num "
        "LEFT JOIN texts n ON n.id = t.nodeid_id LEFT JOIN texts p ON p.id = t.path_id"),
    "verdicts": (
        "SELECT v.id, r.run_id, v.attempt, k.text AS key, n.text AS nodeid, v.verdict, "
        "v.baseline, v.new, v.rel_change, v.ci_low, v.ci_high, v.statistic, v.p_value, "
        "v.q_value, v.floor, v.mode, d.text AS detail, c.text AS created_at "
        "FROM verdict_rows v JOIN runs r ON r.num = v.run_num "
        "LEFT JOIN texts k ON k.id = v.key_id LEFT JOIN texts n ON n.id = v.nodeid_id "
        "LEFT JOIN texts d ON d.id = v.detail_id LEFT JOIN texts c ON c.id = v.created_id"),
}


@_migration("m003_compact")
def _m003_compact(db: Database) -> None:
    # Runs get an integer that child rows refer to (a run id is 32 characters, repeated
    # in every row and index entry). A real column, not the rowid: VACUUM may renumber
    # rowids. New runs get max + 1 from the trigger, whatever inserts them.
    orphans = db.execute(
        "SELECT (SELECT count(*) FROM metrics WHERE run_id NOT IN (SELECT run_id FROM runs)) "
        "+ (SELECT count(*) FROM tests WHERE run_id NOT IN (SELECT run_id FROM runs)) "
        "+ (SELECT count(*) FROM verdicts WHERE run_id NOT IN (SELECT run_id FROM runs)) "
        "+ (SELECT count(*) FROM samples WHERE metric_id NOT IN (SELECT id FROM metrics))"
    ).fetchone()[0]
    if orphans:
        raise MigrationRefused(
            f"{orphans} row(s) belong to no run, and the new layout cannot keep them; "
            "`gate-report check` names them (with the gates that wrote the file), then "
            "restore the file from a backup or CI artifact")
    db.execute("ALTER TABLE runs ADD COLUMN num INTEGER")
    db.execute("UPDATE runs SET num = rowid")
    db.execute("CREATE UNIQUE INDEX runs_num ON runs(num)")
    db.execute("CREATE TRIGGER runs_num_new AFTER INSERT ON runs WHEN new.num IS NULL BEGIN "
               "UPDATE runs SET num = (SELECT coalesce(max(num), 0) + 1 FROM runs) "
               "WHERE rowid = new.rowid; END")
    # Interned text: each distinct key, nodeid, path, detail and save time once.
    db.execute("CREATE TABLE texts (id INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE)")
    db.execute("INSERT OR IGNORE INTO texts (text) SELECT nodeid FROM metrics UNION "
               "SELECT key FROM metrics UNION SELECT nodeid FROM tests UNION "
               "SELECT path FROM tests WHERE path IS NOT NULL UNION "
               "SELECT key FROM verdicts UNION SELECT nodeid FROM verdicts "
               "WHERE nodeid IS NOT NULL UNION SELECT detail FROM verdicts "
               "WHERE detail IS NOT NULL UNION SELECT created_at FROM verdicts "
               "WHERE created_at IS NOT NULL")
    db.execute(
        "CREATE TABLE metric_rows (id INTEGER PRIMARY KEY, "
        "run_num INTEGER NOT NULL REFERENCES runs(num), attempt INTEGER NOT NULL, "
        "nodeid_id INTEGER NOT NULL REFERENCES texts(id), "
        "key_id INTEGER NOT NULL REFERENCES texts(id), unit TEXT NOT NULL, "
        "better TEXT NOT NULL, n INTEGER, min_value REAL, max_value REAL, "
        "count INTEGER NOT NULL, median REAL, samples BLOB)")
    db.execute("INSERT INTO metric_rows SELECT m.id, r.num, m.attempt, n.id, k.id, m.unit, "
               "m.better, m.n, m.min_value, m.max_value, m.count, m.median, NULL FROM metrics m "
               "JOIN runs r ON r.run_id = m.run_id JOIN texts n ON n.text = m.nodeid "
               "JOIN texts k ON k.text = m.key ORDER BY m.id")
    db.execute("CREATE UNIQUE INDEX metric_rows_run ON metric_rows "
               "(run_num, attempt, nodeid_id, key_id)")
    # "This key on this suite, newest first" (units, series, key lists): by key, then run.
    db.execute("CREATE INDEX metric_rows_key ON metric_rows (key_id, run_num)")
    # A metric's samples, in recording order, as one blob of little-endian float64
    # (`pack_samples`): 40 bytes for 5 samples where a row per sample took ~90.
    rows = db.execute("SELECT metric_id, value FROM samples ORDER BY metric_id, seq")
    for metric_id, group in itertools.groupby(rows, key=lambda r: r[0]):
        db.execute("UPDATE metric_rows SET samples = ? WHERE id = ?",
                   (pack_samples([v for _, v in group]), metric_id))
    db.execute(
        "CREATE TABLE test_rows (id INTEGER PRIMARY KEY, "
        "run_num INTEGER NOT NULL REFERENCES runs(num), attempt INTEGER NOT NULL, "
        "nodeid_id INTEGER NOT NULL REFERENCES texts(id), path_id INTEGER REFERENCES texts(id), "
        "outcome TEXT NOT NULL, duration REAL, skip_reason TEXT, error TEXT)")
    db.execute("INSERT INTO test_rows SELECT t.id, r.num, t.attempt, n.id, p.id, t.outcome, "
               "t.duration, t.skip_reason, t.error FROM tests t "
               "JOIN runs r ON r.run_id = t.run_id JOIN texts n ON n.text = t.nodeid "
               "LEFT JOIN texts p ON p.text = t.path ORDER BY t.id")
    db.execute("CREATE UNIQUE INDEX test_rows_run ON test_rows (run_num, attempt, nodeid_id)")
    db.execute(
        "CREATE TABLE verdict_rows (id INTEGER PRIMARY KEY, "
        "run_num INTEGER NOT NULL REFERENCES runs(num), attempt INTEGER NOT NULL, "
        "key_id INTEGER NOT NULL REFERENCES texts(id), nodeid_id INTEGER REFERENCES texts(id), "
        "verdict TEXT NOT NULL, baseline REAL, new REAL, rel_change REAL, ci_low REAL, "
        "ci_high REAL, statistic REAL, p_value REAL, q_value REAL, floor REAL, mode TEXT, "
        "detail_id INTEGER REFERENCES texts(id), created_id INTEGER REFERENCES texts(id))")
    db.execute("INSERT INTO verdict_rows SELECT v.id, r.num, v.attempt, k.id, n.id, v.verdict, "
               "v.baseline, v.new, v.rel_change, v.ci_low, v.ci_high, v.statistic, v.p_value, "
               "v.q_value, v.floor, v.mode, d.id, c.id FROM verdicts v "
               "JOIN runs r ON r.run_id = v.run_id JOIN texts k ON k.text = v.key "
               "LEFT JOIN texts n ON n.text = v.nodeid LEFT JOIN texts d ON d.text = v.detail "
               "LEFT JOIN texts c ON c.text = v.created_at ORDER BY v.id")
    db.execute("CREATE INDEX verdict_rows_run ON verdict_rows (run_num, attempt)")
    # The old tables go (samples first: it refers to metrics), the views take their names.
    for table in ("samples", "metrics", "tests", "verdicts"):
        db.execute(f"DROP TABLE {table}")
    for name, sql in _VIEWS.items():
        db.execute(f"CREATE VIEW {name} AS {sql}")


@_migration("m004_snapshot_runs")
def _m004_snapshot_runs(db: Database) -> None:
    # A baseline snapshot (`gates.store.snapshot`) is a history holding copies of a main
    # history's runs: the ones a shard's gate and planner read. They are listed here, so
    # a shard's file drops them once the shard is done and a merge never re-checks them.
    db.execute("CREATE TABLE snapshot_runs (run_id TEXT PRIMARY KEY REFERENCES runs(run_id)) "
               "WITHOUT ROWID")


@_migration("m005_verdict_stage")
def _m005_verdict_stage(db: Database) -> None:
    # The confirm protocol's stage of each verdict (``gates.model.decisions.Stage``) in its own
    # column. Older rows get the stage their attempt and the row before them imply: the
    # first attempt, the first rerun, and later reruns (a rerun after one whose detail
    # asked for corroboration corroborated it).
    db.execute("ALTER TABLE verdict_rows ADD COLUMN stage TEXT")
    db.execute("UPDATE verdict_rows SET stage = CASE WHEN attempt <= 1 THEN 'first' "
               "WHEN attempt = 2 THEN 'rerun' ELSE 'reruns' END")
    db.execute(
        "UPDATE verdict_rows SET stage = 'corroborate' WHERE attempt >= 3 AND EXISTS ("
        "SELECT 1 FROM runs r JOIN runs pr ON pr.run_id = r.confirm_of "
        "JOIN verdict_rows p ON p.run_num = pr.num AND p.key_id = verdict_rows.key_id "
        "JOIN texts d ON d.id = p.detail_id WHERE r.num = verdict_rows.run_num "
        "AND d.text LIKE '%\"corroborate\": true%')")
    db.execute("DROP VIEW verdicts")
    db.execute(f"CREATE VIEW verdicts AS {VERDICTS_VIEW_M005}")


@_migration("m006_import_maps")
def _m006_import_maps(db: Database) -> None:
    # Per suite and test file, the project files its newest recorded run loaded (a JSON
    # list of paths): test selection adds them to the static import graph.
    db.execute(IMPORT_MAPS_TABLE)


IMPORT_MAPS_TABLE = (
    "CREATE TABLE import_maps (suite TEXT NOT NULL, path TEXT NOT NULL, commit_sha TEXT, "
    "run_id TEXT, recorded_at TEXT NOT NULL, files TEXT NOT NULL, PRIMARY KEY (suite, path))")


@_migration("m007_verdict_ci_conf")
def _m007_verdict_ci_conf(db: Database) -> None:
    # The interval's confidence gets a column of its own: inside the verdict's detail
    # JSON, a full-precision float made almost every detail text unique, so texts and
    # their unique index grew by ~14 kB a run (34.2 kB a 73-metric run against 20.6 kB;
    # benchmarks/bench_fleet.py size). Older rows' values are copied out; their detail
    # texts stay as they were (readers take the column).
    db.execute("ALTER TABLE verdict_rows ADD COLUMN ci_conf REAL")
    rows = db.execute("SELECT id, text FROM texts WHERE text LIKE '%\"ci_conf\"%'").fetchall()
    for text_id, text in rows:
        try:
            conf = json.loads(text).get("ci_conf")
        except (ValueError, AttributeError):
            continue  # not a detail object: nothing to copy
        if isinstance(conf, (int, float)) and not isinstance(conf, bool):
            db.execute("UPDATE verdict_rows SET ci_conf = ? WHERE detail_id = ?", (conf, text_id))
    db.execute("DROP VIEW verdicts")
    db.execute(f"CREATE VIEW verdicts AS {VERDICTS_VIEW_M007}")


# The verdicts view of m005: m003's and the stage column; of m007, ci_conf too (from m008 on,
# `VERDICTS_VIEW`).
VERDICTS_VIEW_M005 = _VIEWS["verdicts"].replace("c.text AS created_at ",
                                                "c.text AS created_at, v.stage ")
VERDICTS_VIEW_M007 = VERDICTS_VIEW_M005.replace("v.stage ", "v.stage, v.ci_conf ")

# m008: two more places where every row repeated text.
# - ``plan_files`` (the runner's plan, ~8 files a run) named its run by the 32-character
#   run id and its file by path, each twice (the table and its primary-key index): about
#   1.2 kB a run. ``plan_file_rows`` names the run by ``runs.num`` and the path, marker
#   and labels by ``texts.id``, keyed (run_num, path_id) WITHOUT ROWID (the key is the
#   table, no second copy as an index).
# - A verdict's ``verdict``, ``mode`` and ``stage`` ("insufficient-history", "enforce",
#   "corroborate"...) take ``texts`` ids: one or two bytes where the words took 16.
# Views under the old names give back the old columns (`PLAN_FILES_VIEW`, `VERDICTS_VIEW`).
# A 73-metric run: 21.7 -> 19.7 kB (benchmarks/bench_fleet.py size --runs 200;
# benchmarks/results/bench_fleet.md).
PLAN_FILES_VIEW = (
    "SELECT r.run_id, p.text AS path, f.line, f.est_time, f.expected, m.text AS marker, "
    "l.text AS labels FROM plan_file_rows f JOIN runs r ON r.num = f.run_num "
    "LEFT JOIN texts p ON p.id = f.path_id LEFT JOIN texts m ON m.id = f.marker_id "
    "LEFT JOIN texts l ON l.id = f.labels_id")
VERDICTS_VIEW = (
    "SELECT v.id, r.run_id, v.attempt, k.text AS key, n.text AS nodeid, vt.text AS verdict, "
    "v.baseline, v.new, v.rel_change, v.ci_low, v.ci_high, v.statistic, v.p_value, "
    "v.q_value, v.floor, mo.text AS mode, d.text AS detail, c.text AS created_at, "
    "st.text AS stage, v.ci_conf "
    "FROM verdict_rows v JOIN runs r ON r.num = v.run_num "
    "LEFT JOIN texts k ON k.id = v.key_id LEFT JOIN texts n ON n.id = v.nodeid_id "
    "LEFT JOIN texts vt ON vt.id = v.verdict_id LEFT JOIN texts mo ON mo.id = v.mode_id "
    "LEFT JOIN texts d ON d.id = v.detail_id LEFT JOIN texts c ON c.id = v.created_id "
    "LEFT JOIN texts st ON st.id = v.stage_id")
PLAN_FILE_ROWS_TABLE = (
    "CREATE TABLE plan_file_rows (run_num INTEGER NOT NULL REFERENCES runs(num), "
    "path_id INTEGER NOT NULL REFERENCES texts(id), line INTEGER, est_time REAL, "
    "expected REAL, marker_id INTEGER REFERENCES texts(id), "
    "labels_id INTEGER REFERENCES texts(id), PRIMARY KEY (run_num, path_id)) WITHOUT ROWID")
VERDICT_ROWS_M008 = (
    "CREATE TABLE verdict_rows (id INTEGER PRIMARY KEY, "
    "run_num INTEGER NOT NULL REFERENCES runs(num), attempt INTEGER NOT NULL, "
    "key_id INTEGER NOT NULL REFERENCES texts(id), nodeid_id INTEGER REFERENCES texts(id), "
    "verdict_id INTEGER NOT NULL REFERENCES texts(id), baseline REAL, new REAL, "
    "rel_change REAL, ci_low REAL, ci_high REAL, statistic REAL, p_value REAL, q_value REAL, "
    "floor REAL, mode_id INTEGER REFERENCES texts(id), "
    "detail_id INTEGER REFERENCES texts(id), created_id INTEGER REFERENCES texts(id), "
    "stage_id INTEGER REFERENCES texts(id), ci_conf REAL)")


@_migration("m008_compact_plans_verdicts")
def _m008_compact_plans_verdicts(db: Database) -> None:
    # A plan row whose run or path is missing cannot be keyed by (run_num, path_id):
    # refused, as m003 refuses orphans, so nothing is dropped on the way.
    lost = db.execute("SELECT count(*) FROM plan_files f WHERE f.path IS NULL OR NOT EXISTS "
                      "(SELECT 1 FROM runs r WHERE r.run_id = f.run_id)").fetchone()[0]
    if lost:
        raise MigrationRefused(
            f"{lost} plan_files row(s) name no run or no path, and the new layout cannot "
            "keep them; `gate-report check` names them, then restore the file from a "
            "backup or CI artifact")
    db.execute("INSERT OR IGNORE INTO texts (text) SELECT path FROM plan_files UNION "
               "SELECT marker FROM plan_files WHERE marker IS NOT NULL UNION "
               "SELECT labels FROM plan_files WHERE labels IS NOT NULL UNION "
               "SELECT verdict FROM verdict_rows UNION "
               "SELECT mode FROM verdict_rows WHERE mode IS NOT NULL UNION "
               "SELECT stage FROM verdict_rows WHERE stage IS NOT NULL")
    db.execute(PLAN_FILE_ROWS_TABLE)
    db.execute("INSERT INTO plan_file_rows SELECT r.num, p.id, f.line, f.est_time, f.expected, "
               "m.id, l.id FROM plan_files f JOIN runs r ON r.run_id = f.run_id "
               "JOIN texts p ON p.text = f.path LEFT JOIN texts m ON m.text = f.marker "
               "LEFT JOIN texts l ON l.text = f.labels")
    db.execute("DROP TABLE plan_files")
    db.execute(f"CREATE VIEW plan_files AS {PLAN_FILES_VIEW}")
    # verdict_rows is rebuilt with its ids (the rowid): the columns keep their places.
    db.execute("DROP VIEW verdicts")
    db.execute("ALTER TABLE verdict_rows RENAME TO verdict_rows_m007")
    db.execute(VERDICT_ROWS_M008)
    db.execute("INSERT INTO verdict_rows SELECT v.id, v.run_num, v.attempt, v.key_id, "
               "v.nodeid_id, vt.id, v.baseline, v.new, v.rel_change, v.ci_low, v.ci_high, "
               "v.statistic, v.p_value, v.q_value, v.floor, mo.id, v.detail_id, v.created_id, "
               "st.id, v.ci_conf FROM verdict_rows_m007 v JOIN texts vt ON vt.text = v.verdict "
               "LEFT JOIN texts mo ON mo.text = v.mode LEFT JOIN texts st ON st.text = v.stage "
               "ORDER BY v.id")
    db.execute("DROP TABLE verdict_rows_m007")
    db.execute("CREATE INDEX verdict_rows_run ON verdict_rows (run_num, attempt)")
    db.execute(f"CREATE VIEW verdicts AS {VERDICTS_VIEW}")


@_migration("m009_gate_note")
def _m009_gate_note(db: Database) -> None:
    # Why the gate did not judge a run (`RunWrites.mark_not_judged`): its bad-input line
    # (status gate-error) or how it stopped (gate-unfinished). NULL on every other run.
    db.execute("ALTER TABLE runs ADD COLUMN gate_note TEXT")


@_migration("m010_gate_mode")
def _m010_gate_mode(db: Database) -> None:
    # The session's gate mode (enforce, warn, off), written with the run as pytest starts,
    # and the time its gate saved its verdicts (`RunWrites.save_verdicts`, in the same
    # transaction). A complete run recorded with its gate on and no ``gated_at`` was never
    # judged: it reads as failed. Older rows hold NULL in both and read as they did.
    db.execute("ALTER TABLE runs ADD COLUMN gate_mode TEXT")
    db.execute("ALTER TABLE runs ADD COLUMN gated_at TEXT")


@_migration("m011_planned_shards")
def _m011_planned_shards(db: Database) -> None:
    # The shards of the run's suite that its plan gave files (a JSON list of indexes,
    # written as pytest starts): a commit's report names a planned shard that recorded
    # no run, and an empty shard (nothing to run, no run) is not one. NULL on older rows.
    db.execute("ALTER TABLE runs ADD COLUMN planned_shards TEXT")


@_migration("m012_runs_confirm")
def _m012_runs_confirm(db: Database) -> None:
    # A suite's confirm reruns through an index: the gate's read of the transients
    # (`BaselineReads.baseline_near`) then costs the reruns, not every run of the suite
    # (20,000 runs: 16 ms of a 25 ms judgement without it).
    db.execute("CREATE INDEX runs_suite_confirm ON runs (suite, confirm_of) "
               "WHERE confirm_of IS NOT NULL")


@_migration("m013_verdicts_failed")
def _m013_verdicts_failed(db: Database) -> None:
    # A suite's failed verdicts on a key through an index: the gate's read of the open
    # failures (`BaselineReads.failed_chains`) then costs the failures, not every run of
    # the suite (20,000 runs: 10 ms of an 18 ms judgement without it).
    db.execute("CREATE INDEX verdict_rows_failed ON verdict_rows (verdict_id, key_id)")


# Tables of per-run rows keyed by ``runs.num``, those keyed by run id text, and every
# reference to a ``texts`` id (what a snapshot copies, what a delete keeps).
# A run that may serve as a baseline is not one whose gate never judged it: a complete run
# recorded with its gate on (gate_mode enforce or warn) and no gated_at reads failed
# (gates.model.verdicts.never_judged), so no gate compares against it. A run without a
# recorded mode (older, or pytest by hand) serves as before. ``{r}``: the runs table's
# alias with its dot ("r.") or "". Every baseline read (bulk and reference) and the
# snapshot's selection use it.
JUDGED = ("(coalesce({r}gate_mode, '') NOT IN ('enforce', 'warn') "
          "OR coalesce({r}gated_at, '') != '')")

# A file's duration in a run (first attempt, grouped per run and file over ``t``, a test
# row) is a measurement only when none of its tests failed or errored (a crash cut short),
# one did not skip (setup only), and every duration is seconds in [0, 1e9) (a text, NULL,
# NaN or infinite one, only a hand-edited row, summed as 0 on SQLite). One rule for
# `PlanningReads.file_durations` and the snapshot's selection (`FleetSQL.gate_read_runs`).
DURATION_TALLIES = (
    "sum(CASE WHEN t.outcome IN ('failed', 'error') THEN 1 ELSE 0 END) AS bad, "
    "sum(CASE WHEN t.outcome = 'skipped' THEN 0 ELSE 1 END) AS ran, "
    "sum(CASE WHEN t.duration >= 0 AND t.duration < 1e9 THEN 0 ELSE 1 END) AS odd")
CLEAN_DURATION = "bad = 0 AND ran > 0 AND odd = 0"

BY_NUM = ("metric_rows", "test_rows", "verdict_rows", "plan_file_rows")
BY_RUN_ID = ("plan_gates", "trust_log", "run_acceptances", "snapshot_runs")
TEXT_REFS = (("metric_rows", "nodeid_id"), ("metric_rows", "key_id"),
             ("test_rows", "nodeid_id"), ("test_rows", "path_id"), ("verdict_rows", "key_id"),
             ("verdict_rows", "nodeid_id"), ("verdict_rows", "verdict_id"),
             ("verdict_rows", "mode_id"), ("verdict_rows", "detail_id"),
             ("verdict_rows", "created_id"), ("verdict_rows", "stage_id"),
             ("plan_file_rows", "path_id"), ("plan_file_rows", "marker_id"),
             ("plan_file_rows", "labels_id"))


# The code's schema version: how many migrations it knows. A file whose
# `_sqlite_migrations` names one we do not know was written by newer code.
KNOWN_MIGRATIONS = tuple(name for name, _ in _STEPS)
SCHEMA_VERSION = len(KNOWN_MIGRATIONS)

# The `verdicts` columns a caller's row fills (see `RunWrites.save_verdicts`); the
# other keys of a row are folded into `detail`.
VERDICT_COLUMNS = (
    "key", "nodeid", "verdict", "baseline", "new", "rel_change", "ci_low", "ci_high",
    "statistic", "p_value", "q_value", "floor", "mode", "detail", "attempt", "stage", "ci_conf",
)


def with_samples(conn: Any, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` of the ``metrics`` view, each given its ``samples`` list (read by id)."""
    ids = [r["id"] for r in rows]
    samples: dict[int, list[Any]] = {i: [] for i in ids}
    for chunk in range(0, len(ids), 500):
        part = ids[chunk:chunk + 500]
        for metric_id, blob in conn.execute(
                f"SELECT id, samples FROM metric_rows WHERE id IN "
                f"({','.join('?' * len(part))})", part):
            samples[metric_id] = unpack_samples(blob)
    for row in rows:
        row["samples"] = samples[row["id"]]
    return rows


def like_prefix(text: str) -> str:
    """A LIKE pattern (``ESCAPE '\\'``) matching ``text`` as a prefix, literally."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
