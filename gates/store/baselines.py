"""A metric's baseline runs, read from the history (I/O; ``gates.gate`` judges them).

Baselines: complete, trusted runs of the same suite, metric key and hardware
fingerprint, started before the judged run, excluding confirm reruns (one value
per CI run) and the run being confirmed; where a confirm found a run's first
attempt a transient, its rerun stands in. ``bulk_baselines`` reads every key of
a run in one statement (two where a key is recorded in some runs only) and
assembles numpy arrays from it; ``baseline_runs`` reads one key through
``History.metric_series`` and is kept as the reference (and for change-point
localisation).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gates.model import stats
from gates.store.baseline_reads import BaselineReads
from gates.store.provenance import host_key
from gates.store.rows import BaselineNear, BaselineRows, BaselineRun, FailedChain

__all__ = ["SERIES_LIMIT", "baseline_runs", "bulk_baselines", "failed_runs", "hosts_of",
           "newest_starts", "transients", "unheld_chains"]

SERIES_LIMIT = 80  # newest baseline rows fetched per metric (window 40 + 10 + confirm reruns)


def baseline_runs(reads: BaselineReads, suite: str, key: str, fingerprint: str | None,
                  run: Mapping[str, Any], exclude: set[str]) -> list[Mapping[str, Any]]:
    rows = reads.metric_series(suite, key, fingerprint, limit=SERIES_LIMIT,
                                 trusted_only=True, exclude_run_id=run["run_id"])
    started = run.get("started_at") or ""
    keep: dict[str, Mapping[str, Any]] = {}
    for r in rows:  # newest first
        if r["run_id"] in exclude or r.get("confirm_of"):
            continue
        if started and (r.get("started_at") or "") > started:
            continue  # re-gating an old run: only what came before it
        if r["run_id"] in keep:
            # Several tests recording one key in a run: pool their samples.
            prev = keep[r["run_id"]]
            keep[r["run_id"]] = {**prev, "samples": list(prev["samples"]) + list(r["samples"])}
        else:
            keep[r["run_id"]] = r
    subs = reads.transient_reruns(suite, {key})
    for rid in [rid for rid in keep if (rid, key) in subs]:
        # The confirm found this run's first attempt a transient: its rerun stands in.
        rows_c = [r for r in reads.metrics(subs[(rid, key)]) if r["key"] == key
                  and r.get("suite") == suite
                  and (fingerprint is None or r.get("fingerprint") == fingerprint)]
        if rows_c:
            pooled = [x for r in rows_c for x in (r.get("samples") or [])]
            keep[rid] = {**keep[rid], "samples": pooled, "median": rows_c[0]["median"],
                         "standin": True}
    return list(reversed(list(keep.values())))  # oldest first


def failed_runs(reads: BaselineReads, suite: str, keys: set[str]
                ) -> dict[str, list[FailedChain]]:
    """{key: the confirm chains of ``suite`` whose last word on it is a failure}, oldest
    first attempt first (``BaselineReads.failed_chains``). A failed run and its confirms
    serve no baseline of that key until an acceptance answers the failure
    (``gate_inputs.failed_drop``): the next run of the same code is judged
    against the level before the change, and fails again."""
    out: dict[str, list[FailedChain]] = {}
    if keys:
        for c in reads.failed_chains(suite, sorted(keys)):
            out.setdefault(c.key, []).append(c)
    return out


def newest_starts(reads: BaselineReads, ids: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """{key: when its newest baseline run started} (``ids``: each key's runs, oldest first)."""
    newest = {key: rids[-1] for key, rids in ids.items() if rids}
    if not newest:
        return {}
    starts = reads.run_starts(sorted(set(newest.values())))
    return {key: starts.get(rid) or "" for key, rid in newest.items()}


def transients(reads: BaselineReads, suite: str,
               keys: set[str]) -> dict[tuple[str, str], str]:
    """{(run id, key): its confirm run's id} where the confirm found the first attempt a
    transient (``Verdict.transient``); the newest confirm wins."""
    return reads.transient_reruns(suite, keys)


def unheld_chains(reads: BaselineReads, suite: str, key: str,
                  first_ids: Sequence[str], *, depth: int = 16) -> list[tuple[str, list[str]]]:
    """The confirm reruns of ``key`` that went on past one rerun and held nothing.

    For each run in ``first_ids`` (first attempts, oldest first), (its id, the
    complete reruns of its confirm chain (``confirm_of`` back to it) that judged ``key``,
    oldest first), where two or more did (a sequential confirm) and none said
    ``regression``, ``threshold-fail``, ``missing`` or ``error`` or asked for
    corroboration (``decisions.corroborate``): evidence the
    next sequential confirm of ``key`` may carry (``stats.confirm_reruns``).
    """
    if not first_ids:
        return []
    root = {rid: rid for rid in first_ids}
    order: dict[str, list[str]] = {rid: [] for rid in first_ids}
    frontier = list(first_ids)
    for _ in range(depth):  # one query per chain level; a loop cannot revisit a run
        if not frontier:
            break
        links = reads.confirm_links(suite, frontier)
        frontier = []
        for rid, parent in links:
            if rid in root:
                continue
            root[rid] = root[parent]
            order[root[rid]].append(rid)
            frontier.append(rid)
    reruns = [rid for rid in root if rid not in order]
    if not reruns:
        return []
    said: dict[str, str] = {}
    for rid, verdict, detail in reads.rerun_key_verdicts(key, reruns):
        # A rerun that asked the next to corroborate it (decisions.corroborate) was
        # beyond every baseline run: not a sequential confirm's sample.
        said[rid] = "corroborate" if '"corroborate": true' in (detail or "") else verdict
    out = []
    for first in first_ids:
        chain = [rid for rid in order[first] if rid in said]
        if len(chain) >= 2 and not any(said[rid] in ("regression", "threshold-fail", "missing",
                                                        "error", "corroborate") for rid in chain):
            out.append((first, chain))
    return out


def bulk_baselines(reads: BaselineReads, run: Mapping[str, Any], keys: set[str], exclude: set[str],
                   need: int, ids_out: dict[str, list[str]] | None = None,
                   standins_out: set[str] | None = None,
                   drop: Mapping[str, frozenset[str]] | None = None,
                   hosts_out: dict[str, str | None] | None = None,
                   units_out: dict[str, set[str] | None] | None = None,
                   units_need: int | None = None,
                   located_out: dict[str, list[float]] | None = None,
                   commits_out: dict[str, str | None] | None = None) -> dict[str, Any]:
    """Baseline runs of every key in ``keys`` at once, oldest first, for ``stats.summarize``.

    Each value is a ``stats.Summarized`` when every run has one row of the key
    (the usual case): the stored medians, and the samples of the newest
    ``stats.WITHIN_RUNS`` runs only. Otherwise (several rows of a key pooled in a
    run) it is a list of each run's 1-D sample array.

    The same series ``baseline_runs`` builds key by key (newest ``SERIES_LIMIT``
    metric rows of complete trusted runs of the suite and fingerprint, then the
    same filters and pooling), cut to the newest ``need`` runs, which is all the
    statistics read (``stats.summarize``). Reads: one statement
    (``History.baseline_near``: the runs, every row of the newest ``need`` runs that
    may serve, the newest runs' samples, the transients' reruns), and a second
    (``History.baseline_far``) only where a key lacks runs there (a key recorded in
    some runs only, a dropped run) or samples were left out (rows pooled in a run).
    ``drop``: per key, run ids left out besides ``exclude`` (an acceptance's
    runs before its new level, ``gates.record.accept.cutoffs``).
    ``ids_out``, when given, receives each key's run ids in the same order;
    ``standins_out`` the keys whose newest baseline run is a rerun standing in for
    a transient first attempt (``stats.judge_summaries(standin_last=True)``);
    ``hosts_out`` the machine of each of those runs (as ``hosts_of``); ``units_out``
    each key's units in those runs (None where the read may not hold all its rows
    there: ``unit_check.unit_conflicts`` then reads them), over its newest ``units_need``
    runs when given; ``located_out`` each key's run summaries in ``ids_out``'s order
    (what change-point localisation reads) and ``commits_out`` those runs' commits.
    """
    if not keys:
        return {}
    suite, fp, names = run["suite"], run.get("fingerprint"), sorted(keys)
    near = reads.baseline_near(suite, fp, run["run_id"], run.get("started_at") or "",
                                 sorted(exclude), names, need=need, recent=stats.WITHIN_RUNS)
    runs = _Runs.of(near.runs, run, exclude)
    rows, samples = near.rows, dict(near.samples)
    hardware = {r.num: r.hardware for r in near.runs}
    commit = {r.num: r.commit for r in near.runs}
    medians: dict[int, float | None] = {}
    done, short = _newest_rows(runs, rows, names, need, medians, drop)
    short = short if near.edge else np.zeros(0, dtype=np.intp)  # every run was read
    _stand_in(near, done, medians)
    missing = _wanted(done, medians) - samples.keys()
    capped: set[int] = set()
    if short.size or missing:
        # A short key's series reaches past the runs read: its older rows come with
        # their samples, and its rows read so far bring theirs.
        missing |= set(rows.ids[np.isin(rows.keys, short)].tolist()) - samples.keys()
        far = reads.baseline_far(suite, fp, run["run_id"], near.edge, names,
                                   [names[k] for k in short.tolist()], sorted(missing),
                                   limit=SERIES_LIMIT)
        rows = _concat(rows, far.rows)
        runs = _Runs.of([*near.runs, *far.runs], run, exclude)  # the far rows' runs too
        samples.update(far.samples)
        hardware.update(far.hardware)
        commit.update(far.commits)
        capped = set(np.flatnonzero(np.bincount(far.rows.keys, minlength=len(names))
                                    >= SERIES_LIMIT).tolist())
        medians = {}
        done, _ = _newest_rows(runs, rows, names, need, medians, drop)
        _stand_in(near, done, medians)
        rest = sorted(_wanted(done, medians) - samples.keys())
        if rest:  # not expected (the reads above bring every row's samples it needs)
            samples.update(reads.baseline_far(suite, fp, run["run_id"], near.edge, names,
                                                [], rest, limit=SERIES_LIMIT).samples)
    subs = near.transients
    if standins_out is not None:
        standins_out.update(key for key, kept in done.items()
                            if kept.rids and (kept.rids[0], key) in subs)
    if ids_out is not None:
        for key, kept in done.items():
            ids_out[key] = kept.rids[::-1]  # oldest first
    serving = {rid for kept in done.values() for rid in kept.rids}
    if hosts_out is not None:
        hosts_out.update({rid: host_key(hardware.get(runs.num_of[runs.pos[rid]]))
                          for rid in serving})
    if commits_out is not None:
        commits_out.update({rid: commit.get(runs.num_of[runs.pos[rid]]) for rid in serving})
    if units_out is not None:
        units_out.update(_units(runs, rows, names, done if units_need is None else
                                {k: _head(kept, units_need) for k, kept in done.items()},
                                capped))
    out = _summarised(done, medians, {m: a for m, a in samples.items() if a is not None})
    if located_out is not None:
        for key, base in out.items():
            located_out[key] = (base.summaries.tolist() if isinstance(base, stats.Summarized)
                                else [stats.run_summary(a) for a in base])
    return out


def _head(kept: _Single | _Pooled, n: int) -> _Single | _Pooled:
    """A key's newest ``n`` baseline runs."""
    if isinstance(kept, _Single):
        return _Single(kept.rids[:n], kept.mids[:n], kept.medians[:n])
    return _Pooled(kept.rids[:n], kept.mids[:n])


@dataclass
class _Single:
    """A key's baseline runs, newest first, each with one metric row (the usual case)."""

    rids: list[str]
    mids: np.ndarray  # each run's metric row id
    medians: np.ndarray  # their stored medians (NaN: none stored)


@dataclass
class _Pooled:
    """A key's baseline runs, newest first, each with its metric row ids (several rows of
    the key in a run, or a rerun's rows standing in); medians in a shared map."""

    rids: list[str]
    mids: list[list[int]]


@dataclass
class _Runs:
    """The candidate runs as arrays, in the order read: which may serve, their start ranks."""

    rid_of: np.ndarray  # run id (object)
    num_of: np.ndarray  # runs.num
    rank: np.ndarray  # start time's rank, oldest 0
    skipped: np.ndarray  # a confirm rerun, excluded, or started after the judged run
    pos: dict[str, int]  # run id -> position
    pos_of_num: np.ndarray  # runs.num -> position

    @classmethod
    def of(cls, runs: Sequence[BaselineRun], run: Mapping[str, Any], exclude: set[str]) -> _Runs:
        started = run.get("started_at") or ""
        starts = [r.started_at or "" for r in runs]
        rank = {st: i for i, st in enumerate(sorted(set(starts)))}
        nums = np.array([r.num for r in runs], dtype=np.int64)
        pos_of_num = np.full(int(nums.max(initial=0)) + 1, -1, dtype=np.intp)
        pos_of_num[nums] = np.arange(len(runs))
        return cls(np.array([r.run_id for r in runs], dtype=object), nums,
                   np.array([rank[st] for st in starts], dtype=np.int64),
                   np.array([bool(r.confirm_of) or r.run_id in exclude
                             or bool(started and st > started)
                             for r, st in zip(runs, starts, strict=True)], dtype=bool),
                   {r.run_id: i for i, r in enumerate(runs)}, pos_of_num)


def _concat(a: BaselineRows, b: BaselineRows) -> BaselineRows:
    return BaselineRows(*(np.concatenate([x, y]) for x, y in zip(a[:4], b[:4], strict=True)),
                        a.units + b.units)


def _newest_rows(runs: _Runs, rows: BaselineRows, names: list[str], need: int,
                 medians: dict[int, float | None],
                 drop: Mapping[str, frozenset[str]] | None = None
                 ) -> tuple[dict[str, _Single | _Pooled], np.ndarray]:
    """Each key's newest ``need`` baseline runs from ``rows``, and the keys (positions in
    ``names``) whose series may reach past them; fills ``medians`` for `_Pooled` keys.

    A key's series: its newest ``SERIES_LIMIT`` rows (start time, then row id, newest
    first), less skipped runs, pooled per run. ``rows`` hold every row of whole start
    times from the newest on, so a key with ``SERIES_LIMIT`` rows or ``need`` runs
    there has what reading everything would give; any other may lack older rows.
    """
    n_runs = len(runs.rid_of)
    ids, rpos, kpos, meds = rows.ids, runs.pos_of_num[rows.run_nums], rows.keys, rows.medians
    allowed = _allowed(runs.skipped, rpos, kpos, names, runs.rid_of, drop)
    n_rows = np.bincount(kpos, minlength=len(names))
    per_run = np.bincount(kpos[allowed] * n_runs + rpos[allowed],
                          minlength=len(names) * n_runs).reshape(len(names), n_runs)
    short = np.flatnonzero((n_rows < SERIES_LIMIT) & ((per_run > 0).sum(axis=1) < need))
    order = np.lexsort((-ids, -runs.rank[rpos], kpos))  # by key, then newest first
    bounds = np.searchsorted(kpos[order], np.arange(len(names) + 1))
    pooled_any = np.bincount(kpos * n_runs + rpos).max(initial=0) > 1
    done: dict[str, _Single | _Pooled] = {}
    for k, key in enumerate(names):
        series = order[bounds[k]:bounds[k + 1]][:SERIES_LIMIT]
        series = series[allowed[series]]
        if pooled_any and np.unique(rpos[series]).size < series.size:
            kept: dict[str, list[int]] = {}
            for rid, mid, med in zip(runs.rid_of[rpos[series]].tolist(), ids[series].tolist(),
                                     meds[series].tolist(), strict=True):
                kept.setdefault(rid, []).append(mid)  # several rows of a key in one run
                medians[mid] = None if med != med else med  # NaN: none stored
            first = list(kept.items())[:need]
            done[key] = _Pooled([rid for rid, _ in first], [mids for _, mids in first])
            continue
        series = series[:need]
        done[key] = _Single(runs.rid_of[rpos[series]].tolist(), ids[series], meds[series])
    return done, short


def _allowed(skipped: np.ndarray, rpos: np.ndarray, kpos: np.ndarray, names: list[str],
             rid_of: np.ndarray, drop: Mapping[str, frozenset[str]] | None) -> np.ndarray:
    """Per row: its run may serve (not a confirm, excluded, later, or dropped for its key)."""
    allowed = ~skipped[rpos]
    for k, key in enumerate(names):
        gone = (drop or {}).get(key)
        if gone:
            dropped = np.array([rid in gone for rid in rid_of.tolist()], dtype=bool)
            allowed &= ~((kpos == k) & dropped[rpos])
    return allowed


def _pooled(kept: _Single | _Pooled, medians: dict[int, float | None]) -> _Pooled:
    if isinstance(kept, _Pooled):
        return kept
    mids = kept.mids.tolist()
    medians.update(zip(mids, [None if m != m else m for m in kept.medians.tolist()],
                       strict=True))
    return _Pooled(kept.rids, [[m] for m in mids])


def _stand_in(near: BaselineNear, done: dict[str, _Single | _Pooled],
              medians: dict[int, float | None]) -> None:
    """Runs whose first attempt the confirm found a transient: the rerun's rows instead."""
    subs = near.transients
    if not subs:
        return
    by_c: dict[tuple[str, str], list[int]] = {}
    for mid, rid, key, med in sorted(near.standins):
        by_c.setdefault((rid, key), []).append(mid)
        medians[mid] = med
    for key, kept in done.items():
        if not any((rid, key) in subs for rid in kept.rids):
            continue
        pooled = _pooled(kept, medians)
        done[key] = _Pooled(pooled.rids, [
            by_c.get((subs[(rid, key)], key), mids) if (rid, key) in subs else mids
            for rid, mids in zip(pooled.rids, pooled.mids, strict=True)])


def _units(runs: _Runs, rows: BaselineRows, names: list[str],
           done: Mapping[str, _Single | _Pooled], capped: set[int]) -> dict[str, set[str] | None]:
    """Each key's units over its rows in its baseline runs (every row of the key there:
    the reads hold all rows of a run, except past a capped far read's oldest row)."""
    kept = np.zeros((len(names), len(runs.rid_of)), dtype=bool)
    lens = [len(done[key].rids) for key in names]
    kept[np.repeat(np.arange(len(names)), lens),
         np.fromiter((runs.pos[rid] for key in names for rid in done[key].rids), np.intp,
                     sum(lens))] = True
    rpos = runs.pos_of_num[rows.run_nums]
    mine = kept[rows.keys, rpos]
    out: dict[str, set[str] | None] = {key: set() for key in names}
    if len(set(rows.units)) == 1:  # one unit throughout: each key's, where it has rows
        out.update({names[k]: {rows.units[0]} for k in np.unique(rows.keys[mine]).tolist()})
    else:
        codes: dict[str, int] = {}
        code = np.array([codes.setdefault(u, len(codes)) for u in rows.units], dtype=np.intp)
        unit_of = list(codes)
        for pair in np.unique(rows.keys[mine] * len(codes) + code[mine]).tolist():
            out[names[pair // len(codes)]].add(unit_of[pair % len(codes)])  # type: ignore[union-attr]
    for k in capped:
        of_k = np.flatnonzero(rows.keys == k)
        oldest = of_k[np.lexsort((rows.ids[of_k], runs.rank[rpos[of_k]]))[0]]
        if kept[k, rpos[oldest]]:
            out[names[k]] = None  # that run may have rows past the read
    return out


def _wanted(done: dict[str, _Single | _Pooled], medians: dict[int, float | None]) -> set[int]:
    """The rows whose samples `_summarised` reads (makes keys read as pooled `_Pooled`)."""
    # A run with one row of a key is summarised by the stored median (the median of
    # its samples, metrics.median), so only the newest WITHIN_RUNS runs' samples are
    # read, for the within-run spread; pooled rows need all their samples.
    for key, kept in done.items():
        if isinstance(kept, _Single) and np.isnan(kept.medians).any():
            done[key] = _pooled(kept, medians)  # a row without a median: read as pooled
    want = {mid for kept in done.values() if isinstance(kept, _Single)
            for mid in kept.mids[:stats.WITHIN_RUNS].tolist()}
    for kept in done.values():
        if isinstance(kept, _Pooled):
            want.update(mid for mids in (kept.mids[:stats.WITHIN_RUNS] if _stored(kept, medians)
                                         else kept.mids) for mid in mids)
    return want


def _stored(kept: _Pooled, medians: Mapping[int, float | None]) -> bool:
    """Every run has one row with a stored median: summarised like a `_Single`."""
    return all(len(mids) == 1 and medians[mids[0]] is not None for mids in kept.mids)


def _summarised(done: dict[str, _Single | _Pooled], medians: dict[int, float | None],
                samples: Mapping[int, np.ndarray]) -> dict[str, Any]:
    """Each key's runs, oldest first, as ``stats.Summarized`` or a list of sample arrays
    (``done`` as `_wanted` left it: a key with a row without a median read as pooled)."""
    out: dict[str, Any] = {}
    for key, kept in done.items():
        if not kept.rids:
            out[key] = []
        elif isinstance(kept, _Single):
            out[key] = _recent_summary(kept.medians[::-1],
                                       kept.mids[:stats.WITHIN_RUNS][::-1].tolist(),
                                       kept.medians[:stats.WITHIN_RUNS][::-1].tolist(),
                                       samples)
        elif _stored(kept, medians):
            firsts = [mids[0] for mids in reversed(kept.mids)]  # oldest first
            recent = firsts[-stats.WITHIN_RUNS:]
            out[key] = _recent_summary(np.array([medians[m] for m in firsts], dtype=float),
                                       recent, [medians[m] for m in recent], samples)
        else:
            out[key] = _series(kept, medians, samples)
    return out


def _recent_summary(summaries: np.ndarray, recent: list[int], recent_medians: list[Any],
                    samples: Mapping[int, np.ndarray]) -> stats.Summarized:
    """Stored medians (oldest first) and the samples of the newest runs' rows ``recent``."""
    # A row without samples: its median stands in (as in baseline_runs).
    arrays = [samples[m] if m in samples else np.array([med], dtype=float)
              for m, med in zip(recent, recent_medians, strict=True)]
    return stats.Summarized(np.array(summaries, dtype=float),
                            np.stack(arrays) if len({x.size for x in arrays}) == 1 else arrays)


def _series(kept: _Pooled, medians: Mapping[int, float | None],
            samples: Mapping[int, np.ndarray]) -> list[np.ndarray]:
    """Each run's samples, oldest first (several rows of a run pooled in row order)."""
    out: list[np.ndarray] = []
    for mids in reversed(kept.mids):
        parts = [samples[m] for m in mids if m in samples]
        if parts:
            out.append(parts[0] if len(parts) == 1 else np.concatenate(parts))
        else:  # a row without samples: its median stands in (None reads as NaN, as there)
            out.append(np.array([medians[mids[0]]], dtype=float))
    return out


def hosts_of(reads: BaselineReads, run_ids: Sequence[str]) -> dict[str, str | None]:
    """Machine of each run (``provenance.host_key``: its GPUs' uuids; None if unrecorded)."""
    return {rid: host_key(hw) for rid, hw in reads.run_hardware(run_ids).items()}
