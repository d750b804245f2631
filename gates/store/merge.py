"""Merging shard history files into one: content digests of runs and `merge_histories`.

Kept out of the store (`gates.store.history`): only `gate-report merge` needs
it. It builds on `History`, so the dependency runs one way (merge -> history).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ci_register.planning.record_check import row_problem
from gates.store.backend import display_location, history_location
from gates.store.fleet_sql import BISECT_COLUMNS
from gates.store.history import History, HistoryError
from gates.store.merge_check import ShardRejected, check_bundle
from gates.store.open import open_for_reading, open_history

__all__ = ["MergeConflict", "MergeReport", "check_history", "merge_histories", "run_digest"]


class MergeConflict(HistoryError):
    """A run id exists in two histories with different content; nothing was merged."""


@dataclass
class MergeReport:
    """What `merge_histories` did: run ids added, and run ids already present unchanged."""

    into: Path | str  # a file, or a PostgreSQL URL (shown without its password)
    added: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    per_shard: dict[str, int] = field(default_factory=dict)  # shard path -> runs added
    copies: int = 0  # snapshot runs a shard still carried (gates.store.snapshot): skipped
    bisects: int = 0  # bisections (their outcome and evidence) new to the target

    def __str__(self) -> str:
        skipped = f"; {self.copies} baseline snapshot run(s) skipped" if self.copies else ""
        bisects = f"; {self.bisects} new bisection(s)" if self.bisects else ""
        return (f"merged {len(self.added)} new run(s) into {display_location(self.into)}; "
                f"{len(self.unchanged)} already present{skipped}{bisects}")


# Trust is a judgement made after the fact, and verdicts are derived: neither
# makes two copies of a run "different content".
# The gate's mark (gated_at) is the verdicts' time, derived the same way.
_VOLATILE_RUN_COLUMNS = ("trusted", "trust_reason", "trust_changed_at", "gated_at")


def run_digest(bundle: Mapping[str, Any]) -> str:
    """Content hash of an exported run, ignoring trust, verdicts and row ids."""
    content = {
        "run": {k: v for k, v in bundle["run"].items() if k not in _VOLATILE_RUN_COLUMNS},
        "tests": bundle["tests"],
        "metrics": bundle["metrics"],
        "plan_files": bundle["plan_files"],
        "plan_gates": bundle["plan_gates"],
    }
    blob = json.dumps(content, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def _check_units(history: History, pending: Mapping[str, tuple[str, dict[str, Any], str]]) -> None:
    """One key, one unit per suite: across the shards and with the target (the gate would
    pool 0.5 "s" and 500 "ms" into one series)."""
    seen: dict[tuple[str, str], tuple[str, str]] = {}  # (suite, key) -> (unit, where)
    keys: dict[str, set[str]] = {}
    for _shard, bundle, _ in pending.values():
        keys.setdefault(bundle["run"]["suite"], set()).update(m["key"] for m in bundle["metrics"])
    stored = {(suite, key): found for suite, ks in keys.items()
              for key, found in history.planning_reads.units_of(suite, ks).items()}  # one query a suite
    for run_id, (shard_name, bundle, _) in pending.items():
        suite = bundle["run"]["suite"]
        for m in bundle["metrics"]:
            where = f"{shard_name} (run {run_id})"
            known = seen.get((suite, m["key"]))
            if known is None:
                found = stored.get((suite, m["key"]))
                if found is not None:
                    known = seen[(suite, m["key"])] = (found[0], f"{history.path} (run {found[1]})")
                else:
                    seen[(suite, m["key"])] = (m["unit"], where)
                    continue
            if known[0] != m["unit"]:
                raise HistoryError(
                    f"{shard_name}: run {run_id}: metric {m['key']!r} of suite {suite!r} is in "
                    f"{m['unit']!r} but {known[1]} has it in {known[0]!r}; one key has one "
                    "unit (record the new unit under a new key); the shard was not merged")


def merge_histories(shards: Sequence[str | os.PathLike[str]],
                    into: str | os.PathLike[str]) -> MergeReport:
    """Fold shard history files into `into` (created if missing), idempotently.

    A run already in `into` with the same content is left alone (so merging a
    file twice changes nothing); a run id present with different content, in
    `into` or in two shards, raises `MergeConflict` and nothing is written.
    Trust flags and verdicts are not content: for a run already present, the
    target's are kept. Shards are only read. All new runs land in one transaction.
    Every row of a shard is checked first (`gates.store.merge_check`): a shard with a
    hostile or broken row (a text median, a run dated in the future, a unit that
    is not a unit, rows of no run) is refused whole with `HistoryError`.
    A shard's bisections (``bisects``: a ``gate-report bisect`` run against it) are
    added once each; they add no run (a bisection's test runs stay in its scratch file).
    """
    target = history_location(into)
    report = MergeReport(into=target)
    pending: dict[str, tuple[str, dict[str, Any], str]] = {}  # run_id -> (shard, bundle, digest)
    bisects: list[tuple[Any, ...]] = []
    with open_history(target) as history:
        for shard in shards:
            shard_path = Path(shard)
            if isinstance(target, Path) and shard_path.exists() and target.exists() \
                    and shard_path.samefile(target):
                raise HistoryError(f"{shard_path}: is the merge target itself; pass shard "
                                   "files other than --into")
            # A shard written before this code's last migration (an artifact from
            # before an upgrade) is read through a migrated copy, never written.
            with open_for_reading(shard_path) as source:
                orphans = source.merge_reads.orphan_rows()
                if orphans:
                    raise HistoryError(f"{shard_path}: {orphans[0]}; the shard was not merged "
                                       "(regenerate it, or drop it from the merge)")
                # Runs copied from a main history into a snapshot are that history's
                # (gates.store.snapshot): never re-checked, never added again.
                report.copies += len(source.fleet_sql.snapshot_run_ids())
                for run_id in source.fleet_sql.own_run_ids():
                    bundle = source.merge_reads.export_run(run_id)
                    try:
                        check_bundle(bundle, str(shard_path))
                    except ShardRejected as exc:
                        raise HistoryError(str(exc)) from None
                    digest = run_digest(bundle)
                    if run_id in pending:
                        other_shard, _, other_digest = pending[run_id]
                        if other_digest != digest:
                            raise MergeConflict(
                                f"{shard_path}: run {run_id} differs from the same run in "
                                f"{other_shard}; merge the shards separately or drop one")
                        continue
                    pending[run_id] = (str(shard_path), bundle, digest)
                bisects += _checked_bisects(source.fleet_sql.bisect_rows(), shard_path)
            report.per_shard.setdefault(str(shard_path), 0)

        def write() -> None:
            # Reset: a retry after "database is locked" runs this again.
            _check_units(history, pending)
            report.added.clear()
            report.unchanged.clear()
            report.per_shard.update(dict.fromkeys(report.per_shard, 0))
            for run_id, (shard_name, bundle, digest) in pending.items():
                if history.merge_reads.has_run(run_id):
                    if run_digest(history.merge_reads.export_run(run_id)) != digest:
                        raise MergeConflict(
                            f"{shard_name}: run {run_id} exists in {history.path} with different "
                            "content; refusing to overwrite (inspect both, then merge the "
                            "shard into a fresh file)")
                    report.unchanged.append(run_id)
                    continue
                history.run_writes.insert_bundle(bundle)
                report.added.append(run_id)
                report.per_shard[shard_name] += 1
            report.bisects = history.fleet_sql.add_bisects(bisects)

        history.in_transaction(write)
    return report


def _checked_bisects(rows: list[tuple[Any, ...]], shard: Path) -> list[tuple[Any, ...]]:
    """A shard's bisections, refused whole (`HistoryError`) where one lacks its key,
    commits, outcome or time, or holds evidence that is not JSON."""
    for i, row in enumerate(rows, 1):
        got = dict(zip(BISECT_COLUMNS, row, strict=True))
        bad = [c for c in ("key", "good", "bad", "outcome", "at") if not isinstance(got[c], str)]
        try:
            json.loads(got["evidence"] or "{}")
        except (TypeError, ValueError):
            bad.append("evidence")
        if bad:
            raise HistoryError(f"{shard}: bisection {i} has no valid {', '.join(bad)}; the shard "
                               "was not merged (regenerate it, or drop it from the merge)")
    return rows


def check_history(path: str | os.PathLike[str]) -> list[str]:
    """One line per problem a merge would refuse, over every run of a history file:
    what a hand edit or an older merge left that reports and gates cannot read."""
    problems = []
    target = history_location(path)
    with (open_for_reading(target) if isinstance(target, Path)
          else open_history(target, create=False, readonly=True)) as history:
        problems += [f"{history.path}: {p}" for p in history.merge_reads.orphan_rows()]
        now = dt.datetime.now(dt.UTC)
        for row in history.planning_reads.import_maps(raw=True):
            if why := row_problem(row, now):
                problems.append(f"{history.path}: import map {str(row.get('path'))[:80]!r} of suite "
                                f"{str(row.get('suite'))[:40]!r} (run {str(row.get('run_id'))[:40]!r}): {why}; "
                                "selection does not use it")
        for run_id in history.merge_reads.run_ids():
            try:
                check_bundle(history.merge_reads.export_run(run_id), str(history.path))
            except ShardRejected as exc:
                problems.append(str(exc).replace("; the shard was not merged (regenerate it, "
                                                 "or drop it from the merge)", ""))
    return problems
