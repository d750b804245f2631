"""The writes after a verdict and around runs: acceptances (re-baselines) and the repo
file entries a run carried, bisections, notification claims, and the import maps a run
recorded. Each is one short write transaction of the history's backend.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from typing import Any

from gates.store.claimant import claimant_gone, this_claimant
from gates.store.provenance import utc_now
from gates.store.records import NOTIFY_CLAIM_STALE_S, PENDING, HistoryError

__all__ = ["AfterWrites"]


class AfterWrites:
    """``History.after_writes``: acceptances, bisections, notifications and import maps,
    on the history's connection and in its backend's transactions."""

    def __init__(self, store: Any) -> None:  # the History it is part of (no import: a cycle)
        self._h = store

    def add_acceptance(self, pattern: str, *, reason: str, who: str | None = None,
                       from_commit: str | None = None, suite: str | None = None,
                       test: str | None = None, source: str = "command",
                       entry_id: str | None = None) -> dict[str, Any]:
        """Log an acceptance (re-baseline) of the keys matching ``pattern``; returns its row.

        ``from_commit`` (a sha or a prefix of >= 7 characters): the runs of that
        commit and every later run are the new baseline. ``entry_id``: a repo
        file's entry, in force in the runs that carry it (`carry_acceptances`); an
        entry already logged is returned unchanged (idempotent).
        """
        if not reason or not reason.strip():
            raise HistoryError("an acceptance needs a reason; say why the new level is right")
        if from_commit is None and entry_id is None:
            raise HistoryError("an acceptance needs from_commit (--from COMMIT) or a repo "
                               "file entry")
        if from_commit is not None and len(from_commit) < 7:
            raise HistoryError(f"commit {from_commit!r} is too short; give at least 7 "
                               "characters")
        row = {"pattern": pattern, "suite": suite, "test": test, "from_commit": from_commit,
               "entry_id": entry_id, "source": source, "who": who, "reason": reason,
               "at": utc_now()}

        def write() -> dict[str, Any]:
            if entry_id is not None:
                found = self._h._rows("SELECT * FROM acceptances WHERE entry_id = ?", (entry_id,))
                if found:
                    return found[0]
            new_id = self._h.conn.execute(
                f"INSERT INTO acceptances ({', '.join(row)}) VALUES ({', '.join('?' * len(row))}) "
                "RETURNING id", list(row.values())).fetchone()[0]
            return {"id": new_id, **row}

        return self._h.backend._write(write)

    def carry_acceptances(self, run_id: str, entries: Iterable[Mapping[str, Any]]) -> list[int]:
        """Log the repo file entries a run's checkout carried (new ones as acceptances)
        and link them to the run; returns their acceptance ids. Each entry is a mapping
        of `add_acceptance`'s arguments with ``entry_id`` and ``pattern`` set."""
        ids = [self.add_acceptance(**dict(e))["id"] for e in entries]

        def write() -> list[int]:
            self._h.conn.executemany(
                "INSERT INTO run_acceptances (run_id, acceptance_id) VALUES (?, ?) "
                "ON CONFLICT DO NOTHING",
                [(run_id, i) for i in ids])
            return ids

        return self._h.backend._write(write) if ids else []

    def save_bisect(self, row: Mapping[str, Any]) -> int:
        """Store a bisection's outcome and evidence (``evidence`` JSON-encoded); its id."""
        out = {c: row.get(c) for c in ("suite", "key", "good", "bad", "outcome", "culprit",
                                        "executions")}
        out["evidence"] = json.dumps(row.get("evidence") or {}, sort_keys=True, default=str)
        out["at"] = utc_now()

        def write() -> int:
            return int(self._h.conn.execute(
                f"INSERT INTO bisects ({', '.join(out)}) VALUES ({', '.join('?' * len(out))}) "
                "RETURNING id", list(out.values())).fetchone()[0])

        return self._h.backend._write(write)

    def claim_notification(self, channel: str, dedupe: str, run_id: str | None = None,
                           *, stale_s: float | None = None) -> bool:
        """Claim telling ``channel`` about ``dedupe`` (a regressing change); False when it
        was told already, or another process claimed it less than ``stale_s`` ago.

        A claim is a row under ``CHANNEL:pending``; only `mark_notified` (after a 2xx)
        writes the ``CHANNEL`` row that means sent. A sender killed mid-POST leaves its
        claim: the claim's ``run_id`` column names its process (`gates.store.claimant`:
        run, pid, host, start time), and a later sender takes the claim over as soon as
        that process is gone, or once the claim is ``stale_s`` old where it cannot tell
        (another host): at least once, never silently lost."""
        pending = channel + PENDING
        stale_s = NOTIFY_CLAIM_STALE_S if stale_s is None else stale_s
        cutoff = (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=stale_s)).isoformat(
            timespec="microseconds")

        def write() -> bool:
            if self._h.conn.execute("SELECT 1 FROM notifications WHERE channel = ? AND dedupe = ?",
                                 (channel, dedupe)).fetchone():
                return False
            row = self._h.conn.execute("SELECT at, run_id FROM notifications WHERE channel = ? "
                                    "AND dedupe = ?", (pending, dedupe)).fetchone()
            if row is not None:
                if str(row[0]) > cutoff and not claimant_gone(row[1]):
                    return False  # another sender is at it now
                self._h.conn.execute("DELETE FROM notifications WHERE channel = ? AND dedupe = ?",
                                  (pending, dedupe))
            self._h.conn.execute("INSERT INTO notifications (channel, dedupe, run_id, at) "
                              "VALUES (?, ?, ?, ?)",
                              (pending, dedupe, this_claimant(run_id), utc_now()))
            return True

        return self._h.backend._write(write)

    def mark_notified(self, channel: str, dedupe: str, run_id: str | None = None) -> None:
        """The delivery of a claimed notification was answered 2xx: remember it as sent."""

        def write() -> None:
            self._h.conn.execute("DELETE FROM notifications WHERE channel = ? AND dedupe = ?",
                              (channel + PENDING, dedupe))
            self._h.conn.execute("INSERT INTO notifications (channel, dedupe, run_id, at) "
                              "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                              (channel, dedupe, run_id, utc_now()))

        self._h.backend._write(write)

    def release_notification(self, channel: str, dedupe: str) -> None:
        """Forget a claim whose delivery failed, so the next run tries again."""
        self._h.backend._write(lambda: self._h.conn.execute(
            "DELETE FROM notifications WHERE channel = ? AND dedupe = ?",
            (channel + PENDING, dedupe)))

    def record_import_maps(self, suite: str, run_id: str | None, commit: str | None,
                           maps: Mapping[str, Iterable[str]], at: str | None = None) -> int:
        """Keep, per (suite, test file), the project files this run loaded; a map
        recorded earlier than the stored one does not replace it. Rows written."""
        when = at or utc_now()
        rows = [(suite, path, commit, run_id, when, json.dumps(sorted(set(files))))
                for path, files in sorted(maps.items())]
        if not rows:
            return 0
        self._drop_future_maps()
        self._h.backend._write(lambda: self._h.conn.executemany(
            "INSERT INTO import_maps (suite, path, commit_sha, run_id, recorded_at, files) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (suite, path) DO UPDATE SET "
            "commit_sha = excluded.commit_sha, run_id = excluded.run_id, "
            "recorded_at = excluded.recorded_at, files = excluded.files "
            "WHERE excluded.recorded_at >= import_maps.recorded_at", rows))
        return len(rows)

    def _drop_future_maps(self) -> None:
        """A row dated past now (a runner's wrong clock, a forged file) would outrank every
        later run's map and never age out: a run that records maps removes such rows first."""
        limit = (dt.datetime.now(dt.UTC) + dt.timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%S")
        self._h.backend._write(lambda: self._h.conn.execute("DELETE FROM import_maps WHERE recorded_at > ?", (limit,)))
