"""The store's reads for planning and recording: a key's recorded unit, the files' past
durations (shards are planned with them), a run's plan, and the import maps test selection
adds to the static import graph. Each owns its SQL, on the history's connection.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from gates.store.schema import CLEAN_DURATION, DURATION_TALLIES

__all__ = ["PlanningReads"]


class PlanningReads:
    """``History.planning_reads``: units, file durations (and the fingerprint they are
    read for), plans and import maps."""

    def __init__(self, store: Any) -> None:  # the History it is part of (no import: a cycle)
        self._h = store

    def unit_of(self, suite: str, key: str) -> tuple[str, str] | None:
        """(unit, run_id) of the newest recorded value of `key` on `suite`, or None."""
        row = self._h.conn.execute(
            "SELECT m.unit, r.run_id FROM texts k JOIN metric_rows m ON m.key_id = k.id "
            "JOIN runs r ON r.num = m.run_num WHERE k.text = ? AND r.suite = ? "
            "ORDER BY r.started_at DESC LIMIT 1", (key, suite)).fetchone()
        return None if row is None else (row[0], row[1])

    def units_of(self, suite: str, keys: Iterable[str]) -> dict[str, tuple[str, str]]:
        """{key: (unit, run id)} of the ``keys`` recorded on ``suite``: the unit of the
        key's last written row (one key has one unit per suite), one index seek per key
        (a merge checks every key of every new run; its cost must not grow with the
        history)."""
        out: dict[str, tuple[str, str]] = {}
        wanted = sorted(set(keys))
        ids: dict[str, int] = {}
        for c in range(0, len(wanted), 500):
            part = wanted[c:c + 500]
            ids.update(self._h.conn.execute(f"SELECT text, id FROM texts WHERE text IN "
                                         f"({','.join('?' * len(part))})", part))
        for key, key_id in ids.items():
            row = self._h.conn.execute(
                "SELECT m.unit, r.run_id FROM metric_rows m JOIN runs r ON r.num = m.run_num "
                "WHERE m.key_id = ? AND r.suite = ? ORDER BY m.run_num DESC LIMIT 1",
                (key_id, suite)).fetchone()
            if row is not None:
                out[key] = (row[0], row[1])
        return out

    def latest_trusted_fingerprint(self, suite: str) -> str | None:
        """The hardware fingerprint of the suite's newest complete, trusted run."""
        rows = self._h._rows(
            "SELECT fingerprint FROM runs WHERE suite = ? AND status = 'complete' "
            "AND trusted = 1 ORDER BY started_at DESC, run_id LIMIT 1", (suite,))
        return rows[0]["fingerprint"] if rows else None

    def file_durations(self, suite: str, fingerprint: str,
                       limit: int = 15) -> dict[str, list[float]]:
        """{path: [seconds, ...] newest first} of each file's total test time.

        Over complete, trusted runs of `suite` on `fingerprint`, first attempts only,
        counting a run for a file only when none of that file's tests failed or
        errored (a crash cut short is not a duration), at least one was not
        skipped (a file that ran nothing measured nothing: its seconds are setup
        only), and every duration is a number of seconds (0 to 1e9; a text, NULL, NaN or
        infinite one, which only a hand-edited row holds, summed as 0 on SQLite and
        planned shards and est_time from nothing). At most `limit` per file.
        """
        rows = self._h.conn.execute(
            f"""
            WITH per AS (
                SELECT t.path, max(r.started_at) AS started_at, t.run_id,
                       sum(t.duration) AS seconds, {DURATION_TALLIES}
                FROM runs r JOIN tests t ON t.run_id = r.run_id AND t.attempt = 1
                WHERE r.suite = ? AND r.fingerprint = ? AND r.status = 'complete'
                      AND r.trusted = 1 AND t.path IS NOT NULL
                GROUP BY t.run_id, t.path
            ), ranked AS (
                SELECT path, seconds, row_number() OVER (
                    PARTITION BY path ORDER BY started_at DESC, run_id) AS rn
                FROM per WHERE {CLEAN_DURATION}
            )
            SELECT path, seconds FROM ranked WHERE rn <= ? ORDER BY path, rn
            """, (suite, fingerprint, limit)).fetchall()
        out: dict[str, list[float]] = {}
        for path, seconds in rows:
            out.setdefault(path, []).append(seconds)
        return out

    def plan_files(self, run_id: str) -> list[dict[str, Any]]:
        """The files the runner planned for the run (labels decoded), by path."""
        rows = self._h._rows("SELECT * FROM plan_files WHERE run_id = ? ORDER BY path", (run_id,))
        for row in rows:
            row["labels"] = json.loads(row["labels"]) if row["labels"] else []
        return rows

    def plan_gates(self, run_id: str) -> list[dict[str, Any]]:
        """The gates declared in the run's plan (options decoded), in plan order."""
        rows = self._h._rows("SELECT * FROM plan_gates WHERE run_id = ? ORDER BY id", (run_id,))
        for row in rows:
            row["options"] = json.loads(row["options"]) if row["options"] else {}
        return rows

    def import_maps(self, suite: str | None = None, *, raw: bool = False) -> list[dict[str, Any]]:
        """Stored import maps (``files`` decoded, or as stored with ``raw``), of one suite or all."""
        sql, params = "SELECT suite, path, commit_sha, run_id, recorded_at, files FROM import_maps", []
        if suite is not None:
            sql += " WHERE suite = ?"
            params.append(suite)
        rows = self._h._rows(sql + " ORDER BY suite, path", params)
        if raw:
            return rows
        for r in rows:
            try:
                files = json.loads(r["files"])
            except (TypeError, ValueError):
                files = None
            r["files"] = [f for f in files if isinstance(f, str)] if isinstance(files, list) else None
        return rows
