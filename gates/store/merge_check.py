"""What `gate-report merge` accepts from a shard: every row checked before anything is copied.

A shard is a file from another machine. One text or NULL median, a run dated next
month, a unit carrying a workflow command, or a metric whose rows do not belong to
its run would, once merged, crash or mislead every later report and gate. A shard
with any such row is refused whole, with one line naming the shard, the run and
the field. Pure: takes exported bundles (`MergeReads.export_run`), does no I/O.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import numbers
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ci_register.planning.record_check import EXECUTED, row_problem
from gates.store.metrics import (
    BETTER,
    MAX_MAGNITUDE,
    MAX_SAMPLES,
    MIN_MAGNITUDE,
    MetricError,
    check_key,
    check_unit,
    median,
)
from gates.store.rows import planned_shards

__all__ = ["FUTURE_SLACK", "ShardRejected", "check_bundle"]

FUTURE_SLACK = dt.timedelta(hours=1)  # clock skew between runners, no more
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_SUITE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,127}")
_STATUSES = ("incomplete", "complete", "interrupted", "crashed", "gate-unfinished",
             "gate-error")
_OUTCOMES = ("passed", "failed", "skipped", "error", "xfailed", "xpassed")
_TEXT_CAP = 100_000


class ShardRejected(ValueError):
    """A shard row breaks the history's rules; nothing of the shard is merged."""


def _fail(source: str, run_id: object, what: str) -> ShardRejected:
    return ShardRejected(f"{source}: run {str(run_id)[:40]!r}: {what}; the shard was not merged "
                         "(regenerate it, or drop it from the merge)")


def _real(value: object, *, nullable: bool = False) -> bool:
    if value is None:
        return nullable
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    return math.isfinite(float(value))


def _int(value: object, low: int = 0, *, nullable: bool = False) -> bool:
    if value is None:
        return nullable
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _text(value: object, *, nullable: bool = True) -> bool:
    if value is None:
        return nullable
    return isinstance(value, str) and len(value) <= _TEXT_CAP


def _when(value: object) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        stamp = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.UTC)


def _check_run(run: Mapping[str, Any], fail, now: dt.datetime) -> None:
    if not isinstance(run.get("run_id"), str) or not _RUN_ID.fullmatch(run["run_id"]):
        raise fail("run_id is not letters, digits and . _ - (at most 128)")
    if not isinstance(run.get("suite"), str) or not _SUITE.fullmatch(run["suite"]):
        raise fail(f"suite {run.get('suite')!r} is not a suite name")
    if run.get("status") not in _STATUSES:
        raise fail(f"status {run.get('status')!r} is not one of {', '.join(_STATUSES)}")
    started = _when(run.get("started_at"))
    if started is None:
        raise fail(f"started_at {run.get('started_at')!r} is not an ISO time")
    if started > now + FUTURE_SLACK:
        raise fail(f"started_at {run['started_at']} is in the future (now {now:%Y-%m-%dT%H:%M}Z); "
                   "fix the runner's clock")
    if run.get("finished_at") is not None and _when(run["finished_at"]) is None:
        raise fail(f"finished_at {run.get('finished_at')!r} is not an ISO time")
    if run.get("trusted") not in (0, 1):
        raise fail(f"trusted {run.get('trusted')!r} is not 0 or 1")
    if not (_int(run.get("shard_index"), 1, nullable=True)
            and _int(run.get("shard_count"), 1, nullable=True)):
        raise fail("shard_index / shard_count are not positive integers")
    if run.get("gate_mode") not in (None, "enforce", "warn", "off"):
        raise fail(f"gate_mode {run.get('gate_mode')!r} is not enforce, warn or off")
    if run.get("gated_at") is not None and _when(run["gated_at"]) is None:
        raise fail(f"gated_at {run.get('gated_at')!r} is not an ISO time")
    if run.get("planned_shards") is not None and planned_shards(run["planned_shards"]) is None:
        raise fail(f"planned_shards {str(run.get('planned_shards'))[:80]!r} is not a JSON "
                   "list of shard numbers")
    if not _int(run.get("exit_status"), -255, nullable=True):
        raise fail(f"exit_status {run.get('exit_status')!r} is not an integer")
    if not isinstance(run.get("fingerprint"), str) or not run["fingerprint"]:
        raise fail("fingerprint is empty")
    for name in ("commit_sha", "branch", "ci_url", "host", "python", "hardware",
                 "trust_reason", "trust_changed_at", "confirm_of", "finished_at", "gate_note"):
        if not _text(run.get(name)):
            raise fail(f"{name} is not text")
    if run.get("hardware") and not _decodes(run["hardware"]):
        raise fail("hardware is not JSON, or is nested past the decoder's depth")


def _decodes(text: str) -> bool:
    """Whether a JSON column's text reads back (RecursionError: nested past json's depth)."""
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _check_metric(m: Mapping[str, Any], run: Mapping[str, Any], fail) -> None:
    key = m.get("key")
    try:
        check_key(key)
        check_unit(m.get("unit"), str(key))
    except MetricError as exc:
        raise fail(str(exc)) from None
    where = f"metric {key!r}"
    if m.get("better") not in BETTER:
        raise fail(f"{where}: better {m.get('better')!r} is not higher or lower")
    for copy, col in (("suite", "suite"), ("fingerprint", "fingerprint"),
                      ("started_at", "started_at")):
        if m.get(copy) != run.get(col):
            raise fail(f"{where}: its {copy} {m.get(copy)!r} is not its run's {run.get(col)!r}")
    samples = m.get("samples")
    if not isinstance(samples, Sequence) or not samples or len(samples) > MAX_SAMPLES:
        raise fail(f"{where}: has no samples")
    for value in samples:
        if not _real(value) or (value and not MIN_MAGNITUDE <= abs(value) <= MAX_MAGNITUDE):
            raise fail(f"{where}: sample {value!r} is not a finite number within "
                       f"{MIN_MAGNITUDE:g} to {MAX_MAGNITUDE:g}")
    if m.get("count") != len(samples):
        raise fail(f"{where}: count {m.get('count')!r} but {len(samples)} sample(s)")
    mid = median(samples)
    value = m.get("median")
    if not _real(value) or not math.isclose(value, mid, rel_tol=1e-9, abs_tol=1e-300):
        raise fail(f"{where}: median {value!r} is not the median of its samples ({mid!r})")
    if not _int(m.get("n"), 1, nullable=True):
        raise fail(f"{where}: n {m.get('n')!r} is not a positive integer")
    if m.get("n") is not None and not all(0.0 <= s <= 1.0 for s in samples):
        raise fail(f"{where}: has n but samples outside [0, 1]")
    low, high = m.get("min_value"), m.get("max_value")
    if not (_real(low, nullable=True) and _real(high, nullable=True)):
        raise fail(f"{where}: min_value / max_value are not finite numbers")
    if not _int(m.get("attempt"), 1) or not _text(m.get("nodeid"), nullable=False):
        raise fail(f"{where}: attempt or nodeid missing")


def check_bundle(bundle: Mapping[str, Any], source: str,
                 now: dt.datetime | None = None) -> None:
    """Raise `ShardRejected` unless every row of an exported run may enter a history."""
    now = now or dt.datetime.now(dt.UTC)
    run = bundle.get("run") or {}
    run_id = run.get("run_id")

    def fail(what: str) -> ShardRejected:
        return _fail(source, run_id, what)

    _check_run(run, fail, now)
    seen: set[tuple[Any, Any]] = set()
    for t in bundle.get("tests", ()):
        if t.get("outcome") not in _OUTCOMES:
            raise fail(f"test outcome {t.get('outcome')!r} is not one of {', '.join(_OUTCOMES)}")
        if not _text(t.get("nodeid"), nullable=False) or not _int(t.get("attempt"), 1):
            raise fail("a test has no nodeid or attempt")
        if not _real(t.get("duration"), nullable=True) or (t.get("duration") or 0) < 0:
            raise fail(f"test {t.get('nodeid')!r}: duration {t.get('duration')!r} is not a "
                       "finite number of seconds")
        for name in ("path", "skip_reason", "error"):
            if not _text(t.get(name)):
                raise fail(f"test {t.get('nodeid')!r}: {name} is not text")
        seen.add((t.get("attempt"), t.get("nodeid")))
    for m in bundle.get("metrics", ()):
        _check_metric(m, run, fail)
    for f in bundle.get("plan_files", ()):
        if not _text(f.get("path"), nullable=False) or not _real(f.get("expected"), nullable=True) \
                or not _real(f.get("est_time"), nullable=True):
            raise fail(f"plan file {f.get('path')!r}: path, est_time or expected is not valid")
    for g in bundle.get("plan_gates", ()):
        try:
            check_key(g.get("metric_key"))
        except MetricError as exc:
            raise fail(f"plan gate: {exc}") from None
    for v in bundle.get("verdicts", ()):
        try:
            check_key(v.get("key"))
        except MetricError as exc:
            raise fail(f"verdict: {exc}") from None
        if not isinstance(v.get("verdict"), str) or not re.fullmatch(r"[a-z-]{1,40}", v["verdict"]):
            raise fail(f"verdict {v.get('verdict')!r} is not a verdict name")
        for name in ("baseline", "new", "rel_change", "ci_low", "ci_high", "statistic",
                     "p_value", "q_value", "floor"):
            value = v.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Real)):
                raise fail(f"verdict {v.get('key')!r}: {name} {value!r} is not a number")
        if v.get("mode") not in (None, "enforce", "warn", "off"):
            raise fail(f"verdict {v.get('key')!r}: mode {v.get('mode')!r}")
    for entry in bundle.get("trust_log", ()):
        if entry.get("trusted") not in (0, 1) or not _text(entry.get("reason")):
            raise fail("trust_log entry is not (0/1, text)")
    for acc in bundle.get("acceptances", ()):
        _check_acceptance(acc, fail)
    for m in bundle.get("import_maps", ()) or ():
        if not isinstance(m, Mapping):
            raise fail("an import map is not a row")
        if why := row_problem(m, now):
            raise fail(f"import map {str(m.get('path'))[:80]!r} of suite {str(m.get('suite'))[:40]!r}: {why}")
        if m.get("path") == EXECUTED and (run.get("shard_count") or 1) > 1 and not _incomplete(m.get("files")):
            raise fail(f"an executed-functions record from shard {run.get('shard_index')}/{run.get('shard_count')}: "
                       "a record counts only for a run of the whole suite")


def _incomplete(files: object) -> bool:
    try:
        got = json.loads(files) if isinstance(files, str) else files
    except ValueError:
        return False
    return isinstance(got, list) and len(got) == 1 and str(got[0]).startswith("<incomplete")


# The columns of an acceptance entry a run carries (gates.store.schema m002): the merge inserts
# exactly these, so an unknown name is refused rather than spliced into SQL.
_ACCEPTANCE_COLUMNS = frozenset({"pattern", "suite", "test", "from_commit", "entry_id",
                                 "source", "who", "reason", "at"})


def _check_acceptance(acc: Mapping[str, Any], fail) -> None:
    if not isinstance(acc, Mapping):
        raise fail("an acceptance entry is not a row")
    extra = sorted(str(c)[:40] for c in acc if c not in _ACCEPTANCE_COLUMNS and c != "id")
    if extra:
        raise fail(f"acceptance entry has unknown column(s) {', '.join(map(repr, extra))}")
    entry = acc.get("entry_id")
    if not _text(entry, nullable=False) or not entry or len(entry) > 128:
        raise fail(f"acceptance entry_id {str(entry)[:40]!r} is not an entry id")
    where = f"acceptance {entry[:40]!r}"
    for name in ("pattern", "source", "reason"):
        if not _text(acc.get(name), nullable=False) or not acc[name]:
            raise fail(f"{where}: {name} is empty or not text")
    for name in ("suite", "test", "from_commit", "who"):
        if not _text(acc.get(name)):
            raise fail(f"{where}: {name} is not text")
    if _when(acc.get("at")) is None:
        raise fail(f"{where}: at {acc.get('at')!r} is not an ISO time")
