"""The writes of a run's record: its start, its tests and metrics as they finish, its end
(complete, interrupted, crashed, not judged), its trust, the gate's verdicts, and a run
exported from another history (`insert_bundle`, merging shards). Each is one short write
transaction of the history's backend; the SQL that fills the tables is here.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gates.store.backend import mask_secrets
from gates.store.metrics import Metric
from gates.store.provenance import Provenance, untrusted_reason, utc_now
from gates.store.records import (
    _DETAIL_JSON,
    _INTERRUPTED,
    _VERDICT_KEYS,
    GATE_ERROR,
    GATE_UNFINISHED,
    OUTCOMES,
    UNFINISHED,
    HistoryError,
    RunRecord,
    TestResult,
)
from gates.store.schema import VERDICT_COLUMNS, pack_samples

__all__ = ["RunWrites", "insert_carried"]


class RunWrites:
    """``History.run_writes``: the writes of runs, tests, metrics, trust and verdicts, on
    the history's connection and in its backend's transactions."""

    def __init__(self, store: Any) -> None:  # the History it is part of (no import: a cycle)
        self._h = store

    def _suite_of(self, run_id: str) -> str | None:
        """The suite of the stored run ``run_id``; None where there is none."""
        row = self._h.conn.execute("SELECT suite FROM runs WHERE run_id = ?",
                                   (run_id,)).fetchone()
        return None if row is None else row[0]

    def start_run(self, provenance: Provenance) -> int:
        """Insert the run's provenance as ``incomplete`` (kept if the run id exists).

        Returns the attempt number this session writes its tests under (1, or one
        more than the run's last attempt when a rerun reuses the id).
        """
        row = _run_row(provenance, status="incomplete", exit_status=None)

        def insert() -> int:
            existing = self._suite_of(provenance.run_id)
            if existing is None:
                _insert(self._h.conn, "runs", [row])
            elif existing != provenance.suite:
                raise HistoryError(f"{self._h.path}: run id {provenance.run_id} already belongs "
                                   f"to suite {existing!r}; pass a fresh --gates-run-id")
            return self._next_attempt(provenance.run_id)

        return self._h.backend._write(insert)

    def _next_attempt(self, run_id: str) -> int:
        prior = self._h.conn.execute(
            "SELECT max(attempt) FROM (SELECT attempt FROM tests WHERE run_id = ? "
            "UNION ALL SELECT attempt FROM metrics WHERE run_id = ?) AS a",
            (run_id, run_id)).fetchone()[0]
        return (prior or 0) + 1

    def record_tests(self, run_id: str, attempt: int, tests: Sequence[TestResult],
                     metrics: Sequence[tuple[str, Metric]] = ()) -> None:
        """Write (or replace) some tests' rows and metrics of a started run, in one
        short transaction; the run's status is left alone.

        The plugin calls this as each test starts (an ``error`` row saying it did not
        finish) and finishes (its outcome and metrics), so a crash loses nothing that
        finished and the row of the test that was running names it.
        """
        _check_outcomes(self._h.path, tests)

        def write() -> None:
            run = self._h._rows("SELECT suite, fingerprint, started_at FROM runs "
                             "WHERE run_id = ?", (run_id,))
            if not run:
                raise HistoryError(f"{self._h.path}: no run {run_id}; start the run first")
            _put_tests(self._h.conn, run_id, attempt, run[0], tests, metrics)

        self._h.backend._write(write)

    def close_unfinished(self, run_id: str, status: str, exit_status: int | None,
                         note: str) -> dict[str, Any] | None:
        """Mark a run that its process never finished (`status` crashed or interrupted).

        Only a run still ``incomplete`` changes (but for the exit status of a run the
        plugin already recorded ``interrupted``, when `status` is that too); `note` is appended to the error of
        each test that did not finish. Returns {"unfinished": [nodeid, ...],
        "finished": n, "metrics": n} of the run, or None when the run had finished
        (or does not exist) and nothing changed.
        """
        if status not in ("crashed", "interrupted"):
            raise HistoryError(f"close_unfinished: status {status!r}; use crashed or interrupted")

        def write() -> dict[str, Any] | None:
            row = self._h.conn.execute("SELECT status FROM runs WHERE run_id = ?",
                                    (run_id,)).fetchone()
            if row is not None and row[0] == status == "interrupted" and exit_status is not None:
                # The plugin recorded the interruption with pytest's status (2); the
                # runner's 128 + N is what the session exited with.
                self._h.conn.execute("UPDATE runs SET exit_status = ? WHERE run_id = ?",
                                  (exit_status, run_id))
            if row is None or row[0] != "incomplete":
                return None
            self._h.conn.execute("UPDATE runs SET status = ?, exit_status = ?, finished_at = ? "
                              "WHERE run_id = ?", (status, exit_status, utc_now(), run_id))
            unfinished = [r[0] for r in self._h.conn.execute(
                "SELECT nodeid FROM tests WHERE run_id = ? AND error LIKE ? ORDER BY id",
                (run_id, UNFINISHED + "%"))]
            self._h.conn.execute("UPDATE test_rows SET error = error || ? WHERE run_num = "
                              "(SELECT num FROM runs WHERE run_id = ?) AND error LIKE ?",
                              ("; " + note, run_id, UNFINISHED + "%"))
            finished = self._h.conn.execute("SELECT count(*) FROM tests WHERE run_id = ?",
                                         (run_id,)).fetchone()[0] - len(unfinished)
            n_metrics = self._h.conn.execute("SELECT count(*) FROM metrics WHERE run_id = ?",
                                          (run_id,)).fetchone()[0]
            return {"unfinished": unfinished, "finished": finished, "metrics": n_metrics}

        return self._h.backend._write(write)

    def mark_not_judged(self, run_id: str, status: str, note: str, *,
                        if_no_verdicts: bool = False) -> bool:
        """Mark a complete run whose gate did not judge it: ``gate-unfinished`` (killed,
        crashed, or past its time limit) or ``gate-error`` (it refused its input), with
        ``note`` (why; credentials masked) in ``gate_note``. Every report reads it as
        not passed, as the session was. ``if_no_verdicts``: only while the run is not
        judged (no verdict saved, no ``gated_at``) and was not recorded with its gate off
        (a gate run by hand on bad input never fails a judged or ungated run). True
        when the run changed; False when it does not exist or is not ``complete`` (a run
        that never finished keeps its own status)."""
        if status not in (GATE_UNFINISHED, GATE_ERROR):
            raise HistoryError(f"mark_not_judged: status {status!r}; use {GATE_UNFINISHED} "
                               f"or {GATE_ERROR}")
        # A run recorded with its gate off is never the gate's to fail (a gate run by hand).
        guard = (" AND gated_at IS NULL AND coalesce(gate_mode, '') != 'off' AND NOT EXISTS "
                 "(SELECT 1 FROM verdict_rows v WHERE v.run_num = runs.num)"
                 if if_no_verdicts else "")

        def write() -> bool:
            cur = self._h.conn.execute("UPDATE runs SET status = ?, gate_note = ? WHERE run_id = ? "
                                    f"AND status = 'complete'{guard}",
                                    (status, mask_secrets(note)[:2000], run_id))
            return bool(cur.rowcount)

        return bool(self._h.backend._write(write))

    def record_run(self, record: RunRecord, attempt: int | None = None) -> int:
        """Write a run's tests, metrics, samples and plan in one transaction; mark it complete.

        A pytest exit status of 2 (interrupted: Ctrl-C, collection errors), 3
        (internal error) or 4 (usage error) marks it ``interrupted`` instead: kept,
        never a baseline.

        A run id that already has results (a rerun of tripped tests under the same
        id) gets the next attempt number, unless `attempt` names the one this
        session has been writing test by test (`record_tests`); rows of the same
        test are then replaced. Returns the attempt number written.
        """
        prov = record.provenance
        _check_outcomes(self._h.path, record.tests)

        def write() -> int:
            existing = self._suite_of(prov.run_id)
            if existing is not None and existing != prov.suite:
                raise HistoryError(f"{self._h.path}: run id {prov.run_id} already belongs to "
                                   f"suite {existing!r}; pass a fresh --gates-run-id")
            finished = prov.finished_at or utc_now()
            status = "interrupted" if record.exit_status in _INTERRUPTED else "complete"
            if existing is None:
                row = _run_row(prov, status=status, exit_status=record.exit_status)
                row["finished_at"] = finished
                _insert(self._h.conn, "runs", [row])
                run = row
            else:
                # A new attempt under the run's id is not judged yet: no gate mark stands.
                self._h.conn.execute(
                    "UPDATE runs SET status = ?, finished_at = ?, exit_status = ?, "
                    "gated_at = NULL, gate_note = NULL WHERE run_id = ?",
                    (status, finished, record.exit_status, prov.run_id))
                run = self._h._rows("SELECT * FROM runs WHERE run_id = ?", (prov.run_id,))[0]
            this = attempt if attempt is not None else self._next_attempt(prov.run_id)
            _put_tests(self._h.conn, prov.run_id, this, run, record.tests, record.metrics)
            if record.plan is not None:
                files, gates = _plan_rows(prov.run_id, record.plan)
                _insert_plan_files(self._h.conn, files)
                if not self._h.conn.execute("SELECT 1 FROM plan_gates WHERE run_id = ? LIMIT 1",
                                         (prov.run_id,)).fetchone():
                    _insert(self._h.conn, "plan_gates", gates)
            return this

        return self._h.backend._write(write)

    def set_trust(self, run_ids: Iterable[str] | None = None, commit: str | None = None,
                  trusted: bool = False, *, reason: str) -> list[str]:
        """Mark runs untrusted (or trusted again) by run id and/or commit, with a reason.

        `commit` matches a full sha or a prefix of at least 7 characters. Untrusted
        runs stay in history but `metric_series(trusted_only=True)` and
        `file_durations` skip them. Returns the run ids changed; raises
        `HistoryError` when nothing matches.
        """
        ids = [run_ids] if isinstance(run_ids, str) else list(run_ids or [])
        if not ids and not commit:
            raise HistoryError("set_trust needs run ids or a commit; pass run_ids=[...] or "
                               "commit='abc1234'")
        if not reason or not reason.strip():
            raise HistoryError("set_trust needs a reason; say why the runs are (un)trusted")
        if commit is not None and len(commit) < 7:
            raise HistoryError(f"commit {commit!r} is too short; give at least 7 characters")
        now = utc_now()

        def update() -> list[str]:
            clauses, params = [], []
            if ids:
                clauses.append(f"run_id IN ({','.join('?' * len(ids))})")
                params += ids
            if commit:
                clauses.append("commit_sha LIKE ? ESCAPE '\\'")
                params.append(commit.replace("\\", "\\\\").replace("%", "\\%")
                              .replace("_", "\\_") + "%")
            matched = [r[0] for r in self._h.conn.execute(
                f"SELECT run_id FROM runs WHERE {' OR '.join(clauses)} ORDER BY started_at",
                params)]
            missing = sorted(set(ids) - set(matched))
            if missing or not matched:
                what = f"run id(s) {', '.join(missing)}" if missing else f"commit {commit}"
                raise HistoryError(f"{self._h.path}: no run matches {what}; list runs with "
                                   "sqlite-utils rows history.db runs")
            self._h.conn.executemany(
                "UPDATE runs SET trusted = ?, trust_reason = ?, trust_changed_at = ? "
                "WHERE run_id = ?", [(int(trusted), reason, now, r) for r in matched])
            self._h.conn.executemany(
                "INSERT INTO trust_log (run_id, trusted, reason, at) VALUES (?, ?, ?, ?)",
                [(r, int(trusted), reason, now) for r in matched])
            return matched

        return self._h.backend._write(update)

    def save_verdicts(self, run_id: str, rows: Iterable[Mapping[str, Any]]) -> int:
        """Store the gate's verdicts for a run, replacing earlier ones of the same attempt.

        Each row is a mapping with these keys (missing ones are NULL):

        - ``key`` (required): metric key; ``nodeid``: test that recorded it.
        - ``verdict`` (required): e.g. pass, regression, improvement,
          insufficient-history, threshold-fail (the gates engine owns the vocabulary).
        - ``baseline`` / ``new``: the compared central values (e.g. medians), in the
          metric's unit.
        - ``rel_change``: (new - baseline) / |baseline|, signed, not direction-adjusted.
        - ``ci_low`` / ``ci_high``: confidence interval of rel_change.
        - ``statistic`` / ``p_value``: the test statistic and its p-value;
          ``q_value``: the FDR-adjusted p-value across the run's metrics.
        - ``floor``: the practical-effect floor (relative) the change had to exceed.
        - ``mode``: enforce | warn | off.
        - ``detail``: any JSON-able extra (method name, window size ...); other
          unknown keys are folded into it.
        - ``attempt``: 1 for the first gate, 2 after a confirm-on-trip rerun.
        - ``stage``: the confirm protocol's stage (``gates.model.decisions.Stage``).
        - ``ci_conf``: the two-sided confidence of ``ci_low``/``ci_high`` (a column, not
          detail: a float there made every detail text unique).
        """
        prepared = []
        now = utc_now()  # one save, one time (interned once in `texts`)
        for row in rows:
            detail = row.get("detail")
            extra = {k: v for k, v in row.items() if k not in _VERDICT_KEYS}
            if extra:
                base = detail if isinstance(detail, Mapping) else (
                    {} if detail is None else {"detail": detail})
                detail = {**base, **extra}
            if not row.get("key") or not row.get("verdict"):
                raise HistoryError(f"verdict row without key or verdict: {dict(row)!r}")
            out = {c: row.get(c) for c in VERDICT_COLUMNS}
            out["detail"] = None if detail is None else _DETAIL_JSON(detail)
            out["attempt"] = int(row.get("attempt") or 1)
            out["run_id"] = run_id
            out["created_at"] = now
            prepared.append(out)

        def write() -> int:
            if self._suite_of(run_id) is None:
                raise HistoryError(f"{self._h.path}: no run {run_id}; record the run before "
                                   "saving its verdicts")
            for attempt in sorted({r["attempt"] for r in prepared}):
                self._h.conn.execute("DELETE FROM verdict_rows WHERE run_num = (SELECT num FROM "
                                  "runs WHERE run_id = ?) AND attempt = ?", (run_id, attempt))
            _insert_verdicts(self._h.conn, prepared)
            # The gate's "finished" mark, in the verdicts' transaction: a run recorded with
            # its gate on reads as failed until this commits (`verdicts.never_judged`).
            self._h.conn.execute("UPDATE runs SET gated_at = ? WHERE run_id = ?", (now, run_id))
            return len(prepared)

        return self._h.backend._write(write)

    def insert_bundle(self, bundle: Mapping[str, Any]) -> None:
        """Write a run exported by `export_run` (of another history) as it is; call it
        inside `in_transaction` (merging shards: `gates.store.merge`)."""
        _insert(self._h.conn, "runs", [_drop(bundle["run"], "num")])
        _insert_tests(self._h.conn, list(bundle["tests"]))
        _insert_metrics(self._h.conn, [dict(m) for m in bundle["metrics"]])
        _insert_verdicts(self._h.conn, list(bundle["verdicts"]))
        _insert_plan_files(self._h.conn, list(bundle["plan_files"]))
        for table in ("plan_gates", "trust_log"):
            _insert(self._h.conn, table, list(bundle[table]))
        insert_carried(self._h.conn, bundle["run"]["run_id"], bundle.get("acceptances") or ())
        maps = [m for m in bundle.get("import_maps") or () if isinstance(m, Mapping)]
        if maps:
            limit = (dt.datetime.now(dt.UTC) + dt.timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%S")
            self._h.conn.execute("DELETE FROM import_maps WHERE recorded_at > ?", (limit,))
            self._h.conn.executemany(
                "INSERT INTO import_maps (suite, path, commit_sha, run_id, recorded_at, files) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (suite, path) DO UPDATE SET "
                "commit_sha = excluded.commit_sha, run_id = excluded.run_id, "
                "recorded_at = excluded.recorded_at, files = excluded.files "
                "WHERE excluded.recorded_at >= import_maps.recorded_at",
                [(m.get("suite"), m.get("path"), m.get("commit_sha"), m.get("run_id"),
                  m.get("recorded_at"), m.get("files")) for m in maps])


# ------------------------------------------------------------------- helpers


def _run_row(prov: Provenance, *, status: str, exit_status: int | None) -> dict[str, Any]:
    untrusted = untrusted_reason(prov.hardware)
    return {
        "run_id": prov.run_id, "suite": prov.suite,
        "shard_index": prov.shard_index, "shard_count": prov.shard_count,
        "status": status, "exit_status": exit_status, "confirm_of": prov.confirm_of,
        "commit_sha": prov.commit, "branch": prov.branch, "ci_url": prov.ci_url,
        "started_at": prov.started_at, "finished_at": prov.finished_at,
        "host": prov.host, "python": prov.python, "fingerprint": prov.fingerprint,
        "hardware": json.dumps(prov.hardware, sort_keys=True, default=str),
        "trusted": int(untrusted is None), "trust_reason": untrusted, "trust_changed_at": None,
        "gate_mode": prov.gate_mode,
        "planned_shards": (json.dumps(prov.planned_shards)
                           if prov.planned_shards is not None else None),
    }


def _drop(row: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in keys}


def _dedupe_tests(tests: Iterable[TestResult]) -> list[TestResult]:
    # pytest can report one nodeid twice (e.g. a parametrize id collision); keep the last.
    return list({t.nodeid: t for t in tests}.values())


def _insert(conn: sqlite3.Connection, table: str, rows: list[dict[str, Any]], *,
            ignore: bool = False) -> None:
    """Insert ``rows``; ``ignore``: a row whose key is there already is left out."""
    if not rows:
        return
    columns = list(rows[0])
    sql = (f"INSERT INTO {table} ({', '.join(_q(c) for c in columns)}) "
           f"VALUES ({', '.join('?' * len(columns))})" + (" ON CONFLICT DO NOTHING" if ignore else ""))
    conn.executemany(sql, [tuple(r.get(c) for c in columns) for r in rows])


def insert_carried(conn: sqlite3.Connection, run_id: str,
                   acceptances: Iterable[Mapping[str, Any]]) -> None:
    """Link a merged run to the acceptance entries it carried, adding the entries the
    target lacks (matched by ``entry_id``). Inside the caller's transaction."""
    for a in acceptances:
        if not a.get("entry_id"):
            continue
        row = conn.execute("SELECT id FROM acceptances WHERE entry_id = ?",
                           (a["entry_id"],)).fetchone()
        if row is None:
            cols = [c for c in a if c != "id"]
            row = conn.execute(
                f"INSERT INTO acceptances ({', '.join(cols)}) VALUES "
                f"({', '.join('?' * len(cols))}) RETURNING id", [a[c] for c in cols]).fetchone()
        conn.execute("INSERT INTO run_acceptances (run_id, acceptance_id) "
                     "VALUES (?, ?) ON CONFLICT DO NOTHING", (run_id, row[0]))


def _check_outcomes(path: Path, tests: Iterable[TestResult]) -> None:
    for test in tests:
        if test.outcome not in OUTCOMES:
            raise HistoryError(f"{path}: outcome {test.outcome!r} of {test.nodeid} "
                               f"is not one of {', '.join(OUTCOMES)}")


def _put_tests(conn: sqlite3.Connection, run_id: str, attempt: int, run: Mapping[str, Any],
               tests: Sequence[TestResult], metrics: Sequence[tuple[str, Metric]]) -> None:
    """Replace these tests' rows and metrics (one attempt of one run); we hold the lock."""
    tests = _dedupe_tests(tests)
    nodeids = sorted({t.nodeid for t in tests} | {nodeid for nodeid, _ in metrics})
    num = _run_nums(conn, [run_id])[run_id]
    ids = sorted(_text_ids(conn, nodeids).values())
    for chunk in range(0, len(ids), 400):
        part = ids[chunk:chunk + 400]
        marks = ",".join("?" * len(part))
        where = f"run_num = ? AND attempt = ? AND nodeid_id IN ({marks})"
        conn.execute(f"DELETE FROM metric_rows WHERE {where}", [num, attempt, *part])
        conn.execute(f"DELETE FROM test_rows WHERE {where}", [num, attempt, *part])
    _insert_tests(conn, [
        {"run_id": run_id, "attempt": attempt, "nodeid": t.nodeid, "path": t.path,
         "outcome": t.outcome, "duration": t.duration, "skip_reason": t.skip_reason,
         "error": t.error}
        for t in tests])
    _insert_metrics(conn, [
        {"run_id": run_id, "attempt": attempt, "nodeid": nodeid,
         "key": m.key, "unit": m.unit, "better": m.better, "n": m.n,
         "min_value": m.min_value, "max_value": m.max_value,
         "count": m.count, "median": m.median, "suite": run["suite"],
         "fingerprint": run["fingerprint"], "started_at": run["started_at"],
         "samples": list(m.samples)}
        for nodeid, m in metrics])


def _text_ids(conn: sqlite3.Connection, values: Iterable[str | None]) -> dict[str, int]:
    """{text: its ``texts.id``} for the non-None ``values``, adding the new ones."""
    wanted = sorted({v for v in values if v is not None})
    if not wanted:
        return {}
    conn.executemany("INSERT INTO texts (text) VALUES (?) ON CONFLICT DO NOTHING",
                     [(v,) for v in wanted])
    out: dict[str, int] = {}
    for c in range(0, len(wanted), 500):
        part = wanted[c:c + 500]
        out.update(conn.execute(f"SELECT text, id FROM texts WHERE text IN "
                                f"({','.join('?' * len(part))})", part))
    return out


def _run_nums(conn: sqlite3.Connection, run_ids: Iterable[str]) -> dict[str, int]:
    """{run id: ``runs.num``}; a run id not in ``runs`` is an error (no orphan rows)."""
    wanted = sorted(set(run_ids))
    out: dict[str, int] = {}
    for c in range(0, len(wanted), 500):
        part = wanted[c:c + 500]
        out.update(conn.execute(f"SELECT run_id, num FROM runs WHERE run_id IN "
                                f"({','.join('?' * len(part))})", part))
    missing = [r for r in wanted if r not in out]
    if missing:
        raise sqlite3.IntegrityError(f"rows of run {missing[0]}, which is not in runs")
    return out


def _insert_tests(conn: sqlite3.Connection, tests: list[Mapping[str, Any]]) -> None:
    """Insert test rows given as the ``tests`` view's columns (``id`` ignored)."""
    if not tests:
        return
    nums = _run_nums(conn, [t["run_id"] for t in tests])
    texts = _text_ids(conn, [v for t in tests for v in (t["nodeid"], t.get("path"))])
    conn.executemany(
        "INSERT INTO test_rows (run_num, attempt, nodeid_id, path_id, outcome, duration, "
        "skip_reason, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [(nums[t["run_id"]], t["attempt"], texts[t["nodeid"]],
          texts.get(t["path"]) if t.get("path") is not None else None, t["outcome"],
          t.get("duration"), t.get("skip_reason"), t.get("error")) for t in tests])


def _insert_verdicts(conn: sqlite3.Connection, rows: list[Mapping[str, Any]]) -> None:
    """Insert verdict rows given as the ``verdicts`` view's columns (``id`` ignored)."""
    if not rows:
        return
    nums = _run_nums(conn, [r["run_id"] for r in rows])
    texts = _text_ids(conn, [v for r in rows for v in (
        r["key"], r.get("nodeid"), r["verdict"], r.get("mode"), r.get("detail"),
        r.get("created_at"), r.get("stage"))])

    def tid(value: str | None) -> int | None:
        return None if value is None else texts[value]

    conn.executemany(
        "INSERT INTO verdict_rows (run_num, attempt, key_id, nodeid_id, verdict_id, baseline, "
        "new, rel_change, ci_low, ci_high, statistic, p_value, q_value, floor, mode_id, "
        "detail_id, created_id, stage_id, ci_conf) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(nums[r["run_id"]], r["attempt"], texts[r["key"]], tid(r.get("nodeid")),
          tid(r["verdict"]), r.get("baseline"), r.get("new"), r.get("rel_change"),
          r.get("ci_low"), r.get("ci_high"), r.get("statistic"), r.get("p_value"),
          r.get("q_value"), r.get("floor"), tid(r.get("mode")), tid(r.get("detail")),
          tid(r.get("created_at")), tid(r.get("stage")), r.get("ci_conf"))
         for r in rows])


def _insert_plan_files(conn: sqlite3.Connection, rows: list[Mapping[str, Any]]) -> None:
    """Insert plan rows given as the ``plan_files`` view's columns; a (run, path) that is
    there already is left as it was (the plan a run id first recorded)."""
    if not rows:
        return
    nums = _run_nums(conn, [r["run_id"] for r in rows])
    texts = _text_ids(conn, [v for r in rows for v in (r["path"], r.get("marker"),
                                                        r.get("labels"))])

    def tid(value: str | None) -> int | None:
        return None if value is None else texts[value]

    conn.executemany(
        "INSERT INTO plan_file_rows (run_num, path_id, line, est_time, expected, marker_id, "
        "labels_id) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        [(nums[r["run_id"]], texts[r["path"]], r.get("line"), r.get("est_time"),
          r.get("expected"), tid(r.get("marker")), tid(r.get("labels"))) for r in rows])


def _insert_metrics(conn: sqlite3.Connection, metrics: list[dict[str, Any]]) -> None:
    """Insert metric rows given as the ``metrics`` view's columns plus ``samples`` (``id``,
    ``suite``, ``fingerprint``, ``started_at`` ignored: the run holds those)."""
    # Ids are assigned here: safe because we hold the write lock (BEGIN IMMEDIATE),
    # and it saves one round trip per metric for lastrowid.
    if not metrics:
        return
    nums = _run_nums(conn, [m["run_id"] for m in metrics])
    texts = _text_ids(conn, [v for m in metrics for v in (m["nodeid"], m["key"])])
    first = (conn.execute("SELECT max(id) FROM metric_rows").fetchone()[0] or 0) + 1
    conn.executemany(
        "INSERT INTO metric_rows (id, run_num, attempt, nodeid_id, key_id, unit, better, n, "
        "min_value, max_value, count, median, samples) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(first + offset, nums[m["run_id"]], m["attempt"], texts[m["nodeid"]], texts[m["key"]],
          m["unit"], m["better"], m.get("n"), m.get("min_value"), m.get("max_value"),
          m["count"], m.get("median"), pack_samples(m["samples"]) if m["samples"] else None)
         for offset, m in enumerate(metrics)])


def _plan_rows(run_id: str, plan: Mapping[str, Any]) -> tuple[list[dict], list[dict]]:
    files = [
        {"run_id": run_id, "path": f.get("path"), "line": f.get("line"),
         "est_time": f.get("est_time"), "expected": f.get("expected"),
         "marker": f.get("marker"), "labels": json.dumps(f.get("labels") or [])}
        for f in plan.get("files") or [] if isinstance(f, Mapping) and f.get("path")
    ]
    gates = [
        {"run_id": run_id, "path": g.get("path"), "line": g.get("line"),
         "metric_key": g.get("metric_key"),
         "options": json.dumps(g.get("options") or {}, sort_keys=True)}
        for g in plan.get("gates") or [] if isinstance(g, Mapping)
    ]
    return files, gates


def _q(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'
