"""The history file's schema: its sqlite-utils migrations and the code's schema version.

Kept apart from the store (`gates.history`) so the table definitions read in one
place; a new migration goes here and its name into `KNOWN_MIGRATIONS`. The
tables and their columns are described in `gates.history`'s docstring.
"""

from __future__ import annotations

from sqlite_utils import Database, Migrations

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "VERDICT_COLUMNS"]

MIGRATIONS = Migrations("gates-history")


@MIGRATIONS(name="m001_initial")
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


@MIGRATIONS(name="m002_after_verdict")
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


@MIGRATIONS(name="m003_verdict_stage")
def _m003_verdict_stage(db: Database) -> None:
    # The confirm protocol's stage of each verdict (``gates.decisions.Stage``) in its own
    # column. Older rows get the stage their attempt and the row before them imply: the
    # first attempt, the first rerun, and later reruns (a rerun after one whose detail asked
    # for corroboration corroborated it).
    db["verdicts"].add_column("stage", str)
    db.execute("UPDATE verdicts SET stage = CASE WHEN attempt <= 1 THEN 'first' "
               "WHEN attempt = 2 THEN 'rerun' ELSE 'reruns' END")
    db.execute(
        "UPDATE verdicts SET stage = 'corroborate' WHERE attempt >= 3 AND EXISTS ("
        "SELECT 1 FROM runs r JOIN verdicts p ON p.run_id = r.confirm_of AND p.key = verdicts.key "
        "WHERE r.run_id = verdicts.run_id AND p.detail LIKE '%\"corroborate\": true%')")


# The code's schema version: how many migrations it knows. A file whose
# `_sqlite_migrations` names one we do not know was written by newer code.
KNOWN_MIGRATIONS = ("m001_initial", "m002_after_verdict", "m003_verdict_stage")
SCHEMA_VERSION = len(KNOWN_MIGRATIONS)

# The `verdicts` columns a caller's row fills (see `History.save_verdicts`); the
# other keys of a row are folded into `detail`.
VERDICT_COLUMNS = (
    "key", "nodeid", "verdict", "baseline", "new", "rel_change", "ci_low", "ci_high",
    "statistic", "p_value", "q_value", "floor", "mode", "detail", "attempt", "stage",
)
