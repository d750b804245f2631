"""The store's reads for the gate's baselines (`gates.baselines` assembles them).

Bulk reads: a 1,000-metric run against 200-run histories is judged from a
handful of queries, so each method reads many runs or metric rows at once and
returns plain NamedTuples (no per-row dicts).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence

import numpy as np

from gates.schema import unpack_samples
from gates.store.rows import BaselineRun, ConfirmLink, KeyVerdict, MedianColumns, MetricMedian

__all__ = ["BaselineReads"]

_CHUNK = 500  # bound parameters per IN (...) list: under SQLite's limit on old builds


def _chunks(items: Sequence[str]) -> Iterable[Sequence[str]]:
    for c in range(0, len(items), _CHUNK):
        yield items[c:c + _CHUNK]


def _decode(blob: object) -> np.ndarray:
    if isinstance(blob, bytes) and len(blob) % 8 == 0:
        return np.frombuffer(blob, dtype="<f8").astype(float)
    return np.asarray(unpack_samples(blob), dtype=float)  # a forged value: as it reads


def _columns(rows: Sequence[tuple[int, int, int, float | None]]
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    # One float conversion of the whole list (None reads as NaN); row ids stay exact
    # as floats up to 2**53.
    table = np.array(rows, dtype=float).reshape(-1, 4)
    ints = table[:, :3].astype(np.int64).T
    return ints[0], ints[1], ints[2], table[:, 3].copy()


def _marks(part: Sequence[object]) -> str:
    return ",".join("?" * len(part))


class BaselineReads:
    """Baseline reads of `gates.history.History` (mixed into it; uses its connection)."""

    conn: sqlite3.Connection
    dialect: str

    def baseline_candidates(self, suite: str, fingerprint: str | None,
                            exclude_run_id: str) -> list[BaselineRun]:
        """Complete, trusted runs of ``suite`` on ``fingerprint`` (None: any), newest first,
        other than ``exclude_run_id``."""
        clauses = ["suite = ?", "status = 'complete'", "trusted = 1", "run_id != ?"]
        params: list[object] = [suite, exclude_run_id]
        if fingerprint is not None:
            clauses.append("fingerprint = ?")
            params.append(fingerprint)
        return [BaselineRun._make(r) for r in self.conn.execute(
            "SELECT run_id, started_at, confirm_of FROM runs "
            f"WHERE {' AND '.join(clauses)} ORDER BY started_at DESC", params)]

    def metric_medians(self, run_ids: Sequence[str], suite: str,
                       fingerprint: str | None) -> list[MetricMedian]:
        """(id, run_id, key, median) of the metric rows of ``run_ids`` on ``suite`` and
        ``fingerprint`` (None: any), every attempt, in no particular order."""
        # Unary + keeps SQLite on the run_id index (the suite index would scan every run).
        where = "+suite = ?" + (" AND +fingerprint = ?" if fingerprint is not None else "")
        extra: list[object] = [suite] + ([fingerprint] if fingerprint is not None else [])
        out: list[MetricMedian] = []
        for part in _chunks(list(run_ids)):
            out.extend(self.conn.execute(
                f"SELECT id, run_id, key, median FROM metrics WHERE run_id IN ({_marks(part)}) "
                f"AND {where}", [*part, *extra]).fetchall())
        return out

    def median_columns(self, run_ids: Sequence[str], keys: Sequence[str]) -> MedianColumns:
        """The metric rows of ``run_ids`` recording one of ``keys`` (every attempt), as
        columns: a gate's ~50,000 baseline rows read as integers and floats, with no
        per-row text or tuple kept."""
        conn = self.conn
        pos_of_num: dict[int, int] = {}
        where = {rid: i for i, rid in enumerate(run_ids)}
        for part in _chunks(list(run_ids)):
            for num, rid in conn.execute(
                    f"SELECT num, run_id FROM runs WHERE run_id IN ({_marks(part)})", part):
                pos_of_num[num] = where[rid]
        pos_of_text = {key: i for i, key in enumerate(keys)}
        pos_of_kid: dict[int, int] = {}
        for part in _chunks(list(keys)):
            for kid, text in conn.execute(
                    f"SELECT id, text FROM texts WHERE text IN ({_marks(part)})", part):
                pos_of_kid[kid] = pos_of_text[text]
        rows: list[tuple[int, int, int, float | None]] = []
        nums = sorted(pos_of_num)
        for c in range(0, len(nums), _CHUNK):
            part = nums[c:c + _CHUNK]
            rows.extend(conn.execute(f"SELECT id, run_num, key_id, median FROM metric_rows "
                                     f"WHERE run_num IN ({_marks(part)})", part))
        if not rows or not pos_of_kid:
            empty = np.zeros(0, dtype=np.intp)
            return MedianColumns(empty.astype(np.int64), empty, empty, np.zeros(0))
        ids, run_num, kid, medians = _columns(rows)
        kpos = np.full(max(int(kid.max()), max(pos_of_kid)) + 1, -1, dtype=np.intp)
        kpos[list(pos_of_kid)] = list(pos_of_kid.values())
        rpos = np.full(int(run_num.max()) + 1, -1, dtype=np.intp)
        rpos[list(pos_of_num)] = list(pos_of_num.values())
        keep = kpos[kid] >= 0
        return MedianColumns(ids[keep], rpos[run_num[keep]], kpos[kid[keep]], medians[keep])

    def samples_by_metric(self, want: Sequence[int]) -> dict[int, np.ndarray]:
        """{metric row id: its samples in recording order} for the sorted ids ``want``.

        One primary-key range query per stretch of nearby ids (a run's metric ids are
        contiguous, consecutive runs' usually adjacent); rows outside ``want`` in a
        range are dropped.
        """
        if not want:
            return {}
        wanted = set(want)
        out: dict[int, np.ndarray] = {}
        if self.dialect == "postgresql":
            # One round trip: an array parameter has no length limit there.
            for mid, blob in self.conn.execute(
                    "SELECT id, samples FROM metric_rows WHERE id = ANY(?::bigint[]) "
                    "AND samples IS NOT NULL", (list(want),)):
                out[mid] = _decode(blob)
            return out
        blobs: dict[int, bytes] = {}
        lo = 0
        for hi in range(1, len(want) + 1):
            if hi == len(want) or want[hi] - want[hi - 1] > 256:
                for mid, blob in self.conn.execute(
                        "SELECT id, samples FROM metric_rows WHERE id BETWEEN ? AND ? "
                        "AND samples IS NOT NULL", (want[lo], want[hi - 1])):
                    if mid not in wanted:
                        continue
                    if isinstance(blob, bytes) and len(blob) % 8 == 0:
                        blobs[mid] = blob
                    else:
                        out[mid] = _decode(blob)
                lo = hi
        if blobs:
            # One decode for all blobs, then each row a view of its stretch.
            flat = np.frombuffer(b"".join(blobs.values()), dtype="<f8").astype(float)
            ends = np.cumsum([len(b) // 8 for b in blobs.values()]).tolist()
            out.update(zip(blobs, [flat[a:b] for a, b in zip([0, *ends], ends, strict=False)],
                           strict=True))
        return out

    def transient_reruns(self, suite: str, keys: set[str]) -> dict[tuple[str, str], str]:
        """{(run id, key): its confirm run's id} where the confirm found the first attempt
        a transient (``detail.transient``); the newest confirm wins."""
        out: dict[tuple[str, str], str] = {}
        for first, key, rid, detail in self.conn.execute(
                "SELECT r.confirm_of, v.key, v.run_id, v.detail FROM verdicts v "
                "JOIN runs r ON r.run_id = v.run_id WHERE r.suite = ? "
                "AND r.confirm_of IS NOT NULL AND r.status = 'complete' "
                "AND v.detail LIKE '%\"transient\": true%' ORDER BY r.started_at, v.id", (suite,)):
            if key not in keys:
                continue
            try:
                if json.loads(detail).get("transient") is True:
                    out[(first, key)] = rid
            except (ValueError, AttributeError):
                continue  # an unreadable detail marks nothing
        return out

    def confirm_links(self, suite: str, parents: Sequence[str]) -> list[ConfirmLink]:
        """Complete confirm reruns of ``parents`` on ``suite``, oldest first."""
        out: list[ConfirmLink] = []
        for part in _chunks(list(parents)):
            out.extend(map(ConfirmLink._make, self.conn.execute(
                f"SELECT run_id, confirm_of FROM runs WHERE confirm_of IN ({_marks(part)}) "
                "AND suite = ? AND status = 'complete' ORDER BY started_at, run_id",
                [*part, suite])))
        return out

    def rerun_key_verdicts(self, key: str, run_ids: Sequence[str]) -> list[KeyVerdict]:
        """The saved verdicts on ``key`` of ``run_ids`` (every attempt)."""
        out: list[KeyVerdict] = []
        for part in _chunks(list(run_ids)):
            out.extend(map(KeyVerdict._make, self.conn.execute(
                f"SELECT run_id, verdict, detail FROM verdicts WHERE key = ? AND run_id IN "
                f"({_marks(part)})", [key, *part])))
        return out

    def units_of_keys(self, run_ids: Sequence[str], suite: str) -> dict[str, set[str]]:
        """{key: the units it is recorded in} over ``run_ids`` on ``suite``: which units a
        baseline of those runs would pool."""
        out: dict[str, set[str]] = {}
        for part in _chunks(sorted(set(run_ids))):
            for key, unit in self.conn.execute(
                    f"SELECT key, unit FROM metrics WHERE run_id IN ({_marks(part)}) "
                    "AND +suite = ? GROUP BY key, unit", [*part, suite]):
                out.setdefault(key, set()).add(unit)
        return out

    def unit_counts(self, run_ids: Sequence[str], suite: str,
                    key: str) -> dict[str, tuple[int, str]]:
        """{unit: (how many of ``run_ids`` recorded ``key`` in it, the newest such run id)}
        on ``suite``. Through the (suite, key) series index: one key's rows, not every
        row of the runs."""
        out: dict[str, tuple[int, str]] = {}
        for part in _chunks(sorted(set(run_ids))):
            for unit, n, newest in self.conn.execute(
                    "SELECT unit, count(DISTINCT run_id), max(started_at || ' ' || run_id) "
                    f"FROM metrics WHERE suite = ? AND key = ? AND +run_id IN ({_marks(part)}) "
                    "GROUP BY unit", [suite, key, *part]):
                seen = out.get(unit, (0, ""))
                out[unit] = (seen[0] + n, max(seen[1], newest))
        return {u: (n, newest.rsplit(" ", 1)[-1]) for u, (n, newest) in out.items()}

    def run_hardware(self, run_ids: Sequence[str]) -> dict[str, str | None]:
        """{run id: its ``hardware`` column as stored (JSON text)}."""
        out: dict[str, str | None] = {}
        for part in _chunks(sorted(set(run_ids))):
            out.update(self.conn.execute(
                f"SELECT run_id, hardware FROM runs WHERE run_id IN ({_marks(part)})", part))
        return out
