"""The gate's reads: everything one judgement reads, each with its SQL.

`gates.store.gate_inputs.read_gate_inputs` reads a run's `GateInputs` through this
reader alone (`History.baseline_reads`; plus the one write that logs the acceptance
entries the run carried): the run, its metric rows, stored declarations and
verdicts, the acceptances and the runs they keep, the confirm chain, and the
baselines (`gates.store.baselines` assembles them). It holds the history's
connection, not the history: a judgement's read is one visit to the store.

Bulk reads: a 1,000-metric run against 200-run histories reads its baselines in
one statement (`BaselineReads.baseline_near`), two where a key is not recorded in
every run (`BaselineReads.baseline_far`), on SQLite and PostgreSQL alike; rows come
back as numpy columns and NamedTuples (no per-row dicts). Lists of any length are
one JSON parameter (`BaselineReads._json_list`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from gates.store.dialect import Dialect
from gates.store.rows import (
    BaselineFar,
    BaselineNear,
    BaselineRows,
    BaselineRun,
    ConfirmLink,
    FailedChain,
    KeyVerdict,
    decode_run,
)
from gates.store.schema import JUDGED, like_prefix, unpack_samples, with_samples

if TYPE_CHECKING:
    import numpy as np

# numpy is imported by the functions that decode samples (a gate's baseline reads), not
# here: every command opening a history imports this module, and a report of stored
# verdicts needs no numpy (~0.1-0.2 s to load; tests/test_startup.py).

__all__ = ["BaselineReads"]

_JUDGED, _JUDGED_R = JUDGED.format(r=""), JUDGED.format(r="r.")  # never-judged runs: no baseline
# A chain whose last word on a key is one of these carries a failure: its runs serve no
# baseline of the key until an acceptance answers it (`gates.store.baselines.failed_runs`).
FAILED_VERDICTS = ("regression", "threshold-fail")
_CHUNK = 500  # bound parameters per IN (...) list: under SQLite's limit on old builds
_FEW_KEYS = 64  # up to this many keys, the near read filters rows by key in SQL


def _chunks(items: Sequence[str]) -> Iterable[Sequence[str]]:
    for c in range(0, len(items), _CHUNK):
        yield items[c:c + _CHUNK]


def _decode(blob: object) -> np.ndarray:
    import numpy as np  # noqa: PLC0415 - see the module note

    if isinstance(blob, bytes) and len(blob) % 8 == 0:
        return np.frombuffer(blob, dtype="<f8").astype(float)
    return np.asarray(unpack_samples(blob), dtype=float)  # a forged value: as it reads


def _samples(pairs: Sequence[tuple[int, object]]) -> dict[int, np.ndarray | None]:
    """{row id: its samples} (None: the row has none) from (id, blob) pairs."""
    import numpy as np  # noqa: PLC0415 - see the module note

    out: dict[int, np.ndarray | None] = {}
    blobs: dict[int, bytes] = {}
    for mid, blob in pairs:
        if isinstance(blob, bytes) and len(blob) % 8 == 0:
            blobs[mid] = blob
        else:
            out[mid] = None if blob is None else _decode(blob)
    if blobs:
        # One decode for all blobs, then each row a view of its stretch.
        flat = np.frombuffer(b"".join(blobs.values()), dtype="<f8").astype(float)
        ends = np.cumsum([len(b) // 8 for b in blobs.values()]).tolist()
        out.update(zip(blobs, [flat[a:b] for a, b in zip([0, *ends], ends, strict=False)],
                       strict=True))
    return out


def _baseline_rows(rows: Sequence[tuple], pos: dict[int, int]) -> BaselineRows:
    """Columns of ``(kind, id, run num, key id, median, unit, samples)`` rows; ``pos``:
    each key id's position in the keys asked for (rows of other keys are dropped)."""
    import numpy as np  # noqa: PLC0415 - see the module note

    n = len(rows)
    ids, nums, kids = (np.fromiter(map(itemgetter(i), rows), np.int64, n) for i in (1, 2, 3))
    kpos = np.full(max(int(kids.max(initial=0)), *pos, 0) + 1, -1, dtype=np.intp)
    kpos[list(pos)] = list(pos.values())
    kpos = kpos[kids]
    keep = kpos >= 0  # rows of keys not asked for (read unfiltered: `_key_filter`)
    medians = np.array(list(map(itemgetter(4), rows)), dtype=float)  # None reads as NaN
    units = list(map(itemgetter(5), rows))
    if not keep.all():
        units = [u for u, k in zip(units, keep.tolist(), strict=True) if k]
    return BaselineRows(ids[keep], nums[keep], kpos[keep], medians[keep], units)


def _fetched(rows: Sequence[tuple], keys: Mapping[int, str],
             newest: Sequence[int]) -> list[tuple[int, object]]:
    """(id, samples) of the near rows whose samples came along, of the keys asked for:
    the rows of the ``newest`` runs (runs.num) and rows without a median."""
    import numpy as np  # noqa: PLC0415 - see the module note

    n = len(rows)
    nums = np.fromiter(map(itemgetter(2), rows), np.int64, n)
    no_median = np.array(list(map(itemgetter(4), rows)), dtype=float)
    sent = np.flatnonzero(np.isin(nums, newest) | np.isnan(no_median)).tolist()
    return [(r[1], r[6]) for r in map(rows.__getitem__, sent) if r[3] in keys]


def _key_filter(keys: Sequence[str], no_index: str) -> str:
    """The near rows' key condition: a few keys through the list; many (a whole run's)
    unfiltered, left to numpy (`_baseline_rows`): a probe per row costs more than the
    rows of other keys, where a run records all but a few of the suite's keys."""
    return f" WHERE {no_index}m.key_id IN (SELECT id FROM want)" if len(keys) <= _FEW_KEYS else ""


def _open_of(detail: object) -> str | None:
    """A verdict detail's ``open_of`` (a still-red run's open regression), if any."""
    if not isinstance(detail, str) or '"open_of"' not in detail:
        return None
    try:
        got = json.loads(detail).get("open_of")
    except (ValueError, AttributeError):
        return None
    return str(got) if got else None


def _transients(rows: Iterable[tuple[str, str, str, str]]) -> dict[tuple[str, str], str]:
    """{(first attempt, key): rerun} from (first, key, rerun, detail) rows, oldest confirm
    first: where the detail says ``transient``, the newest confirm wins."""
    out: dict[tuple[str, str], str] = {}
    for first, key, rid, detail in rows:
        try:
            if json.loads(detail).get("transient") is True:
                out[(first, key)] = rid
        except (ValueError, AttributeError):
            continue  # an unreadable detail marks nothing
    return out


def _marks(part: Sequence[object]) -> str:
    return ",".join("?" * len(part))


class BaselineReads:
    """The gate's reads over a `gates.store.history.History`'s connection (one of its
    parts): a judgement's inputs (see the module note)."""

    def __init__(self, store: Any) -> None:  # the History it is part of (no import: a cycle)
        self.conn: sqlite3.Connection = store.conn
        self.dialect: str = store.dialect
        self.sql: Dialect = store.sql
        self.path = store.path
        self._fail = store.backend._fail  # a database error: HistoryError naming the fix
        self._db_errors = store.backend._db_errors

    def _rows(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[dict]:
        try:
            cursor = self.conn.execute(sql, params)
        except self._db_errors as exc:
            raise self._fail(exc) from exc
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    # -------------------------------------------------- the run and its chain

    def run(self, run_id: str) -> dict[str, Any] | None:
        """The `runs` row of ``run_id`` with ``hardware`` decoded, or None."""
        rows = self._rows("SELECT * FROM runs WHERE run_id = ?", (run_id,))
        return decode_run(rows[0]) if rows else None

    def metrics(self, run_id: str) -> list[dict[str, Any]]:
        """The run's metric rows, each with its ``samples`` list, by attempt, nodeid, key."""
        return with_samples(self.conn, self._rows(
            "SELECT * FROM metrics WHERE run_id = ? ORDER BY attempt, nodeid, key", (run_id,)))

    def plan_gates(self, run_id: str) -> list[dict[str, Any]]:
        """The gates declared in the run's plan (options decoded), in plan order."""
        rows = self._rows("SELECT * FROM plan_gates WHERE run_id = ? ORDER BY id", (run_id,))
        for row in rows:
            row["options"] = json.loads(row["options"]) if row["options"] else {}
        return rows

    def verdicts(self, run_id: str) -> list[dict[str, Any]]:
        """A confirm chain run's verdict rows (``detail`` decoded), by attempt, insertion."""
        rows = self._rows("SELECT * FROM verdicts WHERE run_id = ? ORDER BY attempt, id",
                          (run_id,))
        for row in rows:
            row["detail"] = json.loads(row["detail"]) if row["detail"] else None
        return rows

    # ------------------------------------------------------------ acceptances

    def acceptances(self, suite: str) -> list[dict[str, Any]]:
        """Acceptances that may apply to ``suite``, oldest first."""
        return self._rows("SELECT * FROM acceptances WHERE suite IS NULL OR suite = ? "
                          "ORDER BY id", (suite,))

    def acceptance_runs(self, acceptance_id: int) -> dict[str, str]:
        """{run id: started_at} of the runs that carried the repo file entry."""
        return dict(self.conn.execute(
            "SELECT a.run_id, r.started_at FROM run_acceptances a JOIN runs r "
            "ON r.run_id = a.run_id WHERE a.acceptance_id = ?", (acceptance_id,)).fetchall())

    def commit_start(self, commit: str) -> str | None:
        """The earliest start time of a run of ``commit`` (sha or prefix), or None."""
        return self.conn.execute(
            "SELECT min(started_at) FROM runs WHERE commit_sha LIKE ? ESCAPE '\\'",
            (like_prefix(commit),)).fetchone()[0]

    def suite_runs_before(self, suite: str, fingerprint: str | None,
                          started_at: str) -> set[str]:
        """Run ids of ``suite`` (on ``fingerprint`` unless None) started before ``started_at``."""
        sql = "SELECT run_id FROM runs WHERE suite = ? AND started_at < ?"
        params: list[Any] = [suite, started_at]
        if fingerprint is not None:
            sql += " AND fingerprint = ?"
            params.append(fingerprint)
        return {r[0] for r in self.conn.execute(sql, params)}

    def suite_run_ids(self, suite: str, fingerprint: str | None) -> set[str]:
        """Every run id of ``suite`` (on ``fingerprint`` unless None)."""
        sql = "SELECT run_id FROM runs WHERE suite = ?"
        params: list[Any] = [suite]
        if fingerprint is not None:
            sql += " AND fingerprint = ?"
            params.append(fingerprint)
        return {r[0] for r in self.conn.execute(sql, params)}

    # -------------------------------------------------------------- baselines

    def metric_series(self, suite: str, key: str, fingerprint: str | None, limit: int = 50,
                      trusted_only: bool = True,
                      exclude_run_id: str | None = None) -> list[dict[str, Any]]:
        """The last `limit` values of one metric on one suite and hardware, NEWEST FIRST
        (the key-by-key reference read, ``baselines.baseline_runs``).

        Only complete runs, never one whose gate never judged it (`schema.JUDGED`); with
        `trusted_only`, only trusted ones (baselines).
        `fingerprint=None` matches any hardware; `exclude_run_id` leaves out the
        run being judged. Each row: id (metric row id), run_id, attempt, commit,
        branch, started_at, nodeid, unit, better, n, min_value, max_value, count,
        median, trusted, fingerprint, confirm_of (run id this run re-checked, when
        it is a confirm-on-trip rerun), samples (list of floats in recording order).
        """
        clauses = ["m.suite = ?", "m.key = ?", "r.status = 'complete'", _JUDGED_R]
        params: list[Any] = [suite, key]
        if fingerprint is not None:
            clauses.append("m.fingerprint = ?")
            params.append(fingerprint)
        if trusted_only:
            clauses.append("r.trusted = 1")
        if exclude_run_id is not None:
            clauses.append("m.run_id != ?")
            params.append(exclude_run_id)
        rows = self._rows(
            "SELECT m.id, m.run_id, m.attempt, r.commit_sha AS \"commit\", r.branch, "
            "m.started_at, m.nodeid, m.unit, m.better, m.n, m.min_value, m.max_value, "
            "m.count, m.median, r.trusted, m.fingerprint, r.confirm_of "
            "FROM metrics m JOIN runs r ON r.run_id = m.run_id "
            f"WHERE {' AND '.join(clauses)} ORDER BY m.started_at DESC, m.id DESC LIMIT ?",
            [*params, limit])
        return with_samples(self.conn, rows)

    def baseline_near(self, suite: str, fingerprint: str | None, run_id: str, started_at: str,
                      exclude: Sequence[str], keys: Sequence[str], *, need: int,
                      recent: int) -> BaselineNear:
        """A judged run's baselines for every key of ``keys``, in one statement.

        Candidates: complete, trusted runs of ``suite`` on ``fingerprint`` (None: any)
        other than ``run_id``. One may serve when it is no confirm rerun, not in
        ``exclude`` and started no later than ``started_at`` ('': any time). Read: the
        candidates started at or after the ``need``-th newest that may serve
        (``edge``, found by walking the (suite, fingerprint, started_at) index from the
        newest: the read is bounded by the window, not by the history's length), and
        every row of the keys in them: each key's whole series where it is recorded
        in every run. Samples come with the rows of the ``recent`` (>= 1) newest runs
        that may serve (and rows without a median). Also: those runs' hardware and
        commits, and the transients' reruns of the keys (`transient_reruns`) with
        their rows.
        """
        fp = " AND fingerprint = :fp" if fingerprint is not None else ""
        cand = (f"suite = :suite AND status = 'complete' AND trusted = 1 AND {_JUDGED} "
                f"AND run_id != :run_id{fp}")
        ok = (f"confirm_of IS NULL AND (:started = '' OR started_at <= :started) "
              f"AND run_id NOT IN ({self._json_list('exclude')})")
        rows = self.conn.execute(f"""
            WITH want AS (SELECT id, text FROM texts WHERE text IN ({self._json_list("keys")})),
            edge AS (
                SELECT coalesce((SELECT started_at FROM runs WHERE {cand} AND {ok}
                                 ORDER BY started_at DESC LIMIT 1 OFFSET :skip), '') AS at),
            newest AS (
                SELECT coalesce((SELECT started_at FROM runs WHERE {cand} AND {ok}
                                 ORDER BY started_at DESC LIMIT 1 OFFSET :rskip), '') AS at),
            base AS (
                SELECT num, run_id, started_at, confirm_of, hardware, commit_sha,
                       CASE WHEN {ok} THEN 1 ELSE 0 END AS ok
                FROM runs WHERE {cand} AND started_at >= (SELECT at FROM edge)),
            cand AS (
                SELECT num, run_id, started_at, confirm_of, hardware, commit_sha, ok,
                       CASE WHEN ok = 1 AND started_at >= (SELECT at FROM newest)
                            THEN 1 ELSE 0 END AS recent
                FROM base),
            near AS (SELECT num, recent FROM cand),
            trans AS (
                SELECT r.num, r.run_id, r.confirm_of, r.started_at, v.id, v.key_id,
                       d.text AS detail
                FROM runs r JOIN verdict_rows v ON v.run_num = r.num
                JOIN texts d ON d.id = v.detail_id
                WHERE r.suite = :suite AND r.confirm_of IS NOT NULL AND r.status = 'complete'
                AND {_JUDGED_R} AND d.text LIKE '%"transient": true%' AND v.key_id IN (SELECT id FROM want))
            SELECT 'r', num, ok, recent, CAST(NULL AS double precision), run_id,
                   CAST(NULL AS bytea) FROM cand
            UNION ALL SELECT 'a', num, NULL, NULL, NULL, started_at, NULL FROM cand
            UNION ALL SELECT 'c', num, NULL, NULL, NULL, confirm_of, NULL FROM cand
            WHERE confirm_of IS NOT NULL
            UNION ALL SELECT 'h', num, NULL, NULL, NULL, hardware, NULL FROM cand
            WHERE ok = 1 AND started_at >= (SELECT at FROM edge) AND hardware IS NOT NULL
            UNION ALL SELECT 'g', num, NULL, NULL, NULL, commit_sha, NULL FROM cand
            WHERE ok = 1 AND started_at >= (SELECT at FROM edge) AND commit_sha IS NOT NULL
            UNION ALL SELECT 'e', NULL, NULL, NULL, NULL, at, NULL FROM edge
            UNION ALL SELECT 'k', id, NULL, NULL, NULL, text, NULL FROM want
            UNION ALL SELECT 'm', m.id, m.run_num, m.key_id, m.median, m.unit,
                   CASE WHEN n.recent = 1 OR m.median IS NULL THEN m.samples END
            FROM near n JOIN metric_rows m ON m.run_num = n.num{_key_filter(keys, self.sql.no_index)}
            UNION ALL SELECT 't', id, key_id, NULL, NULL, detail, NULL FROM trans
            UNION ALL SELECT 'f', id, NULL, NULL, NULL, confirm_of, NULL FROM trans
            UNION ALL SELECT 'u', id, NULL, NULL, NULL, run_id, NULL FROM trans
            UNION ALL SELECT 'w', id, NULL, NULL, NULL, started_at, NULL FROM trans
            UNION ALL SELECT 's', m.id, m.key_id, NULL, m.median, r.run_id, m.samples
            FROM (SELECT DISTINCT num FROM trans) t CROSS JOIN runs r CROSS JOIN metric_rows m
            WHERE r.num = t.num AND m.run_num = t.num AND r.suite = :suite{fp.replace(" f", " r.f")}
            AND {self.sql.no_index}m.key_id IN (SELECT id FROM want)""",
            {"keys": json.dumps(list(keys)), "exclude": json.dumps(list(exclude)),
             "started": started_at, "suite": suite, "run_id": run_id, "fp": fingerprint,
             "skip": max(need - 1, 0), "rskip": max(recent - 1, 0)}).fetchall()
        # Seven columns whatever the row (each value costs; most rows are metric rows):
        # a run's text columns come as rows of their own kinds, keyed by runs.num.
        by_kind: dict[str, list[tuple]] = {kind: [] for kind in "rachgekmtfuws"}
        for row in rows:
            by_kind[row[0]].append(row)
        of = {kind: {r[1]: r[5] for r in by_kind[kind]} for kind in "achgfuw"}
        text_of = {row[1]: row[5] for row in by_kind["k"]}
        where = {key: i for i, key in enumerate(keys)}
        newest = [r[1] for r in by_kind["r"] if r[3]]
        trans = sorted(by_kind["t"], key=lambda r: (of["w"][r[1]], r[1]))  # oldest first
        return BaselineNear(
            runs=[BaselineRun(r[1], r[5], of["a"][r[1]], of["c"].get(r[1]), of["h"].get(r[1]),
                              of["g"].get(r[1])) for r in by_kind["r"]],
            edge=by_kind["e"][0][5] if by_kind["e"] else "",
            rows=_baseline_rows(by_kind["m"], {kid: where[t] for kid, t in text_of.items()}),
            samples=_samples(_fetched(by_kind["m"], text_of, newest)
                             + [(r[1], r[6]) for r in by_kind["s"]]),
            transients=_transients((of["f"][r[1]], text_of[r[2]], of["u"][r[1]], r[5])
                                   for r in trans),
            standins=[(r[1], r[5], text_of[r[2]], r[4]) for r in by_kind["s"]])

    def baseline_far(self, suite: str, fingerprint: str | None, run_id: str, edge: str,
                     keys: Sequence[str], short: Sequence[str], sample_ids: Sequence[int], *,
                     limit: int) -> BaselineFar:
        """What `baseline_near` left out, in one statement: the newest ``limit`` rows
        (start time, then row id, newest first) of each key of ``short`` in the candidate
        runs started before ``edge``, with their samples and their runs; and
        the samples of the rows ``sample_ids``. Row keys are positions in ``keys``."""
        fp = " AND fingerprint = :fp" if fingerprint is not None else ""
        rows = self.conn.execute(f"""
            WITH short AS (SELECT id, text FROM texts WHERE text IN ({self._json_list("short")})),
            cand AS (
                SELECT num, started_at FROM runs WHERE suite = :suite AND status = 'complete'
                AND trusted = 1 AND {_JUDGED} AND run_id != :run_id{fp} AND started_at < :edge),
            far AS (
                SELECT m.id, m.run_num, m.key_id, m.median, m.unit, m.samples,
                       row_number() OVER (PARTITION BY m.key_id
                                          ORDER BY c.started_at DESC, m.id DESC) AS rn
                FROM cand c JOIN metric_rows m ON m.run_num = c.num
                WHERE m.key_id IN (SELECT id FROM short))
            SELECT 'm', id, run_num, key_id, median, unit, samples FROM far WHERE rn <= :limit
            UNION ALL SELECT 'k', id, NULL, NULL, NULL, text, NULL FROM short
            UNION ALL SELECT 'x', id, NULL, NULL, NULL, NULL, samples FROM metric_rows
            WHERE id IN ({self._json_list("ids", numbers=True)})
            UNION ALL SELECT 'h', num, NULL, NULL, NULL, hardware, NULL FROM runs
            WHERE num IN (SELECT run_num FROM far WHERE rn <= :limit)
            UNION ALL SELECT 'g', num, NULL, NULL, NULL, commit_sha, NULL FROM runs
            WHERE num IN (SELECT run_num FROM far WHERE rn <= :limit)
            UNION ALL SELECT 'r', num, NULL, NULL, NULL, run_id, NULL FROM runs
            WHERE num IN (SELECT run_num FROM far WHERE rn <= :limit)
            UNION ALL SELECT 'a', num, NULL, NULL, NULL, started_at, NULL FROM runs
            WHERE num IN (SELECT run_num FROM far WHERE rn <= :limit)
            UNION ALL SELECT 'c', num, NULL, NULL, NULL, confirm_of, NULL FROM runs
            WHERE num IN (SELECT run_num FROM far WHERE rn <= :limit) AND confirm_of IS NOT NULL""",
            {"short": json.dumps(list(short)), "suite": suite, "run_id": run_id,
             "fp": fingerprint, "edge": edge, "limit": limit,
             "ids": json.dumps([int(i) for i in sample_ids])}).fetchall()
        by_kind: dict[str, list[tuple]] = {kind: [] for kind in "mkxhgrac"}
        for row in rows:
            by_kind[row[0]].append(row)
        where = {key: i for i, key in enumerate(keys)}
        of = {kind: {r[1]: r[5] for r in by_kind[kind]} for kind in "achg"}
        return BaselineFar(
            runs=[BaselineRun(r[1], r[5], of["a"][r[1]], of["c"].get(r[1]), of["h"].get(r[1]),
                              of["g"].get(r[1])) for r in by_kind["r"]],
            rows=_baseline_rows(by_kind["m"], {r[1]: where[r[5]] for r in by_kind["k"]}),
            samples=_samples([(r[1], r[6]) for r in by_kind["m"] + by_kind["x"]]),
            hardware={r[1]: r[5] for r in by_kind["h"]},
            commits={r[1]: r[5] for r in by_kind["g"]})

    def _json_list(self, name: str, *, numbers: bool = False) -> str:
        """A subquery over the values of the JSON array parameter ``:name``: one bound
        value however long the list (SQLite's limit on parameters never applies)."""
        return self.sql.json_list(name, numbers=numbers)

    def transient_reruns(self, suite: str, keys: set[str]) -> dict[tuple[str, str], str]:
        """{(run id, key): its confirm run's id} where the confirm found the first attempt
        a transient (``detail.transient``); the newest confirm wins."""
        return _transients(row for row in self.conn.execute(
            "SELECT r.confirm_of, v.key, v.run_id, v.detail FROM verdicts v "
            "JOIN runs r ON r.run_id = v.run_id WHERE r.suite = ? "
            f"AND r.confirm_of IS NOT NULL AND r.status = 'complete' AND {_JUDGED_R} "
            "AND v.detail LIKE '%\"transient\": true%' ORDER BY r.started_at, v.id", (suite,))
            if row[1] in keys)

    def failed_chains(self, suite: str, keys: Sequence[str], *,
                      depth: int = 16) -> list[FailedChain]:
        """The confirm chains of ``suite`` whose last word on a key of ``keys`` is a failure
        (``FAILED_VERDICTS``): a first attempt that failed with no rerun, or whose reruns
        held it. Oldest first attempt first. A chain's last word on a key is its row of
        the latest attempt that judged the key (a rerun that held is final: later attempts
        do not judge that key again)."""
        keys = sorted(set(keys))
        hit: set[str] = set()  # runs with a failing row on a key asked for
        marks = _marks(FAILED_VERDICTS)
        for part in _chunks(keys):
            # From the failed rows of the keys (index verdict_rows_failed), not the runs.
            hit.update(rid for (rid,) in self.conn.execute(
                "SELECT DISTINCT r.run_id FROM verdict_rows v CROSS JOIN runs r "
                f"WHERE v.verdict_id IN (SELECT id FROM texts WHERE text IN ({marks})) "
                f"AND v.key_id IN (SELECT id FROM texts WHERE text IN ({_marks(part)})) "
                "AND r.num = v.run_num AND r.suite = ? AND r.status = 'complete'",
                [*FAILED_VERDICTS, *part, suite]))
        if not hit:
            return []
        parent = self._parents(hit, depth)
        root: dict[str, str] = {}
        for rid in parent:
            cur, n = rid, 0
            while parent.get(cur) and n <= depth:
                cur, n = parent[cur], n + 1  # type: ignore[assignment]
            root[rid] = cur
        roots = sorted({root[rid] for rid in hit})
        members = {r: r for r in roots}
        frontier = list(roots)
        for _ in range(depth):  # the chains' reruns, one level a query
            links = self.confirm_links(suite, frontier)
            frontier = [c for c, p in links if c not in members]
            members.update({c: members[p] for c, p in links if c not in members})
            if not frontier:
                break
        rows: dict[tuple[str, str], list[tuple]] = {}
        ids = sorted(members)
        for part in _chunks(ids):
            for kpart in _chunks(keys):
                for rid, key, verdict, attempt, vid, new, base, at, detail in self.conn.execute(
                        "SELECT run_id, key, verdict, attempt, id, new, baseline, created_at, "
                        f"detail FROM verdicts WHERE run_id IN ({_marks(part)}) "
                        f"AND key IN ({_marks(kpart)})", [*part, *kpart]):
                    rows.setdefault((members[rid], key), []).append(
                        (attempt or 1, vid, verdict, new, base, at or "", _open_of(detail)))
        started: dict[str, str] = {}
        for part in _chunks(roots):
            started.update(self.conn.execute(
                f"SELECT run_id, started_at FROM runs WHERE run_id IN ({_marks(part)})", part))
        out = []
        for (first, key), got in rows.items():
            got.sort(key=itemgetter(0, 1))
            _, _, verdict, _, base, at, open_of = got[-1]
            if verdict in FAILED_VERDICTS:
                vals = tuple(float(r[3]) for r in got if r[3] is not None)
                out.append(FailedChain(first, key, started.get(first) or "", at, verdict,
                                       None if base is None else float(base), vals, open_of))
        out.sort(key=lambda c: (c.started_at, c.root, c.key))
        return out

    def run_starts(self, run_ids: Sequence[str]) -> dict[str, str]:
        """{run id: its started_at}."""
        out: dict[str, str] = {}
        for part in _chunks(sorted(set(run_ids))):
            out.update(self.conn.execute(
                f"SELECT run_id, started_at FROM runs WHERE run_id IN ({_marks(part)})", part))
        return out

    def _parents(self, runs: set[str], depth: int) -> dict[str, str | None]:
        """{run id: the run it re-checks (None: a first attempt)} for ``runs`` and every
        run up their confirm_of chains."""
        parent: dict[str, str | None] = {}
        todo = sorted(runs)
        for _ in range(depth + 1):
            if not todo:
                break
            for part in _chunks(todo):
                parent.update(self.conn.execute(
                    f"SELECT run_id, confirm_of FROM runs WHERE run_id IN ({_marks(part)})",
                    part))
            todo = sorted({p for p in parent.values() if p and p not in parent})
        return parent

    def confirm_links(self, suite: str, parents: Sequence[str]) -> list[ConfirmLink]:
        """Complete confirm reruns of ``parents`` on ``suite``, oldest first."""
        out: list[ConfirmLink] = []
        for part in _chunks(list(parents)):
            out.extend(map(ConfirmLink._make, self.conn.execute(
                f"SELECT run_id, confirm_of FROM runs WHERE confirm_of IN ({_marks(part)}) "
                f"AND suite = ? AND status = 'complete' AND {_JUDGED} ORDER BY started_at, run_id",
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

    def units_of_keys(self, run_ids: Sequence[str], suite: str,
                      keys: Sequence[str]) -> dict[str, set[str]]:
        """{key: the units it is recorded in} over ``run_ids`` on ``suite``, for ``keys``:
        which units a baseline of those runs would pool. Through the (suite, key) series
        index: those keys' rows only, not every row of the runs."""
        out: dict[str, set[str]] = {}
        keys = sorted(set(keys))
        for part in _chunks(sorted(set(run_ids))):
            for key, unit in self.conn.execute(
                    f"SELECT key, unit FROM metrics WHERE suite = ? AND key IN ({_marks(keys)}) "
                    f"AND {self.sql.no_index}run_id IN ({_marks(part)}) GROUP BY key, unit",
                    [suite, *keys, *part]):
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
                    f"FROM metrics WHERE suite = ? AND key = ? AND {self.sql.no_index}run_id IN ({_marks(part)}) "
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
