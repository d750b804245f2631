"""A metric's baseline runs, read from the history (I/O; ``gates.gate`` judges them).

Baselines: complete, trusted runs of the same suite, metric key and hardware
fingerprint, started before the judged run, excluding confirm reruns (one value
per CI run) and the run being confirmed; where a confirm found a run's first
attempt a transient, its rerun stands in. ``bulk_baselines`` reads every key of
a run in a few queries; ``baseline_runs`` reads one key through
``History.metric_series`` and is kept as the reference (and for change-point
localisation).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gates import stats
from gates.history import History
from gates.provenance import host_key

__all__ = ["SERIES_LIMIT", "baseline_runs", "bulk_baselines", "hosts_of", "transients",
           "unheld_chains"]

SERIES_LIMIT = 80  # newest baseline rows fetched per metric (window 40 + 10 + confirm reruns)


def baseline_runs(history: History, suite: str, key: str, fingerprint: str | None,
                  run: Mapping[str, Any], exclude: set[str]) -> list[Mapping[str, Any]]:
    rows = history.metric_series(suite, key, fingerprint, limit=SERIES_LIMIT,
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
    subs = history.transient_reruns(suite, {key})
    for rid in [rid for rid in keep if (rid, key) in subs]:
        # The confirm found this run's first attempt a transient: its rerun stands in.
        rows_c = [r for r in history.metrics(subs[(rid, key)]) if r["key"] == key
                  and r.get("suite") == suite
                  and (fingerprint is None or r.get("fingerprint") == fingerprint)]
        if rows_c:
            pooled = [x for r in rows_c for x in (r.get("samples") or [])]
            keep[rid] = {**keep[rid], "samples": pooled, "median": rows_c[0]["median"],
                         "standin": True}
    return list(reversed(list(keep.values())))  # oldest first


def transients(history: History, suite: str,
               keys: set[str]) -> dict[tuple[str, str], str]:
    """{(run id, key): its confirm run's id} where the confirm found the first attempt a
    transient (``Verdict.transient``); the newest confirm wins."""
    return history.transient_reruns(suite, keys)


def unheld_chains(history: History, suite: str, key: str,
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
        links = history.confirm_links(suite, frontier)
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
    for rid, verdict, detail in history.rerun_key_verdicts(key, reruns):
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


def bulk_baselines(history: History, run: Mapping[str, Any], keys: set[str], exclude: set[str],
                   need: int, ids_out: dict[str, list[str]] | None = None,
                   standins_out: set[str] | None = None,
                   drop: Mapping[str, frozenset[str]] | None = None) -> dict[str, Any]:
    """Baseline runs of every key in ``keys`` at once, oldest first, for ``stats.summarize``.

    Each value is a ``stats.Summarized`` when every run has one row of the key
    (the usual case): the stored medians, and the samples of the newest
    ``stats.WITHIN_RUNS`` runs only. Otherwise (several rows of a key pooled in a
    run) it is a list of each run's 1-D sample array.

    The same series ``baseline_runs`` builds key by key (newest ``SERIES_LIMIT``
    metric rows of complete trusted runs of the suite and fingerprint, then the
    same filters and pooling), cut to the newest ``need`` runs, which is all the
    statistics read (``stats.summarize``). Reads: the suite's runs (one query),
    the metric rows of the newest runs in batches (only while some key still
    lacks runs; ``History.median_columns``, grouped with numpy), and the samples of
    the rows read (``History.samples_by_metric``).
    ``drop``: per key, run ids left out besides ``exclude`` (an acceptance's
    runs before its new level, ``gates.accept.cutoffs``).
    ``ids_out``, when given, receives each key's run ids in the same order;
    ``standins_out`` the keys whose newest baseline run is a rerun standing in for
    a transient first attempt (``stats.judge_summaries(standin_last=True)``).
    """
    if not keys:
        return {}
    suite, fp = run["suite"], run.get("fingerprint")
    medians: dict[int, float | None] = {}  # stored median of each row of a _Pooled key
    done = _newest_rows(history, run, keys, exclude, need, medians, drop)
    subs = history.transient_reruns(suite, set(done))
    if subs:
        _stand_in(history, suite, fp, done, subs, medians)
    if standins_out is not None:
        standins_out.update(key for key, kept in done.items()
                            if kept.rids and (kept.rids[0], key) in subs)
    if ids_out is not None:
        for key, kept in done.items():
            ids_out[key] = kept.rids[::-1]  # oldest first
    return _summarised(history, done, medians)


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


def _newest_rows(history: History, run: Mapping[str, Any], keys: set[str], exclude: set[str],
                 need: int, medians: dict[int, float | None],
                 drop: Mapping[str, frozenset[str]] | None = None
                 ) -> dict[str, _Single | _Pooled]:
    """Each key's newest ``need`` baseline runs, reading runs in batches only while some
    key still lacks runs; fills ``medians`` for the rows of `_Pooled` keys.

    A key's series: its newest ``SERIES_LIMIT`` rows (start time, then row id, newest
    first), less skipped runs, pooled per run. Batches hold whole start times, so rows
    read later are older than every row read before: stopping once each key has its
    series or ``need`` runs gives what reading everything would.
    """
    suite, fp = run["suite"], run.get("fingerprint")
    runs = history.baseline_candidates(suite, fp, run["run_id"])
    started = run.get("started_at") or ""
    starts = [st or "" for _rid, st, _cof in runs]
    rank = {st: i for i, st in enumerate(sorted(set(starts)))}
    run_rank = np.array([rank[st] for st in starts], dtype=np.int64)
    skipped = np.array([bool(cof) or rid in exclude or bool(started and st > started)
                        for (rid, _st, cof), st in zip(runs, starts, strict=True)], dtype=bool)
    rid_of = np.array([r[0] for r in runs], dtype=object)
    names = sorted(keys)
    parts = []
    i = 0
    batch_n = max(need, 16)
    while i < len(runs):
        j = min(len(runs), i + batch_n)
        while j < len(runs) and runs[j][1] == runs[j - 1][1]:
            j += 1  # a batch holds every run of its oldest start time
        cols = history.median_columns([r[0] for r in runs[i:j]], names)
        parts.append(cols._replace(runs=cols.runs + i))
        i = j
        ids, rpos, kpos, meds = (np.concatenate(c) for c in zip(*parts, strict=True))
        allowed = _allowed(skipped, rpos, kpos, names, rid_of, drop)
        n_rows = np.bincount(kpos, minlength=len(names))
        per_run = np.bincount(kpos[allowed] * len(runs) + rpos[allowed],
                              minlength=len(names) * len(runs)).reshape(len(names), len(runs))
        if ((n_rows >= SERIES_LIMIT) | ((per_run > 0).sum(axis=1) >= need)).all():
            break
    if not parts:
        return {key: _Single([], np.zeros(0, dtype=np.int64), np.zeros(0)) for key in names}
    order = np.lexsort((-ids, -run_rank[rpos], kpos))  # by key, then newest first
    bounds = np.searchsorted(kpos[order], np.arange(len(names) + 1))
    pooled_any = np.bincount(kpos * len(runs) + rpos).max(initial=0) > 1
    done: dict[str, _Single | _Pooled] = {}
    for k, key in enumerate(names):
        series = order[bounds[k]:bounds[k + 1]][:SERIES_LIMIT]
        series = series[allowed[series]]
        if pooled_any and np.unique(rpos[series]).size < series.size:
            kept: dict[str, list[int]] = {}
            for rid, mid, med in zip(rid_of[rpos[series]].tolist(), ids[series].tolist(),
                                     meds[series].tolist(), strict=True):
                kept.setdefault(rid, []).append(mid)  # several rows of a key in one run
                medians[mid] = None if med != med else med  # NaN: none stored
            first = list(kept.items())[:need]
            done[key] = _Pooled([rid for rid, _ in first], [mids for _, mids in first])
            continue
        series = series[:need]
        done[key] = _Single(rid_of[rpos[series]].tolist(), ids[series], meds[series])
    return done


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


def _stand_in(history: History, suite: str, fp: str | None,
              done: dict[str, _Single | _Pooled], subs: dict[tuple[str, str], str],
              medians: dict[int, float | None]) -> None:
    """Runs whose first attempt the confirm found a transient: the rerun's rows instead."""
    by_c: dict[tuple[str, str], list[int]] = {}
    for mid, rid, key, med in sorted(history.metric_medians(sorted(set(subs.values())),
                                                            suite, fp)):
        by_c.setdefault((rid, key), []).append(mid)
        medians[mid] = med
    for key, kept in done.items():
        if not any((rid, key) in subs for rid in kept.rids):
            continue
        pooled = _pooled(kept, medians)
        done[key] = _Pooled(pooled.rids, [
            by_c.get((subs[(rid, key)], key), mids) if (rid, key) in subs else mids
            for rid, mids in zip(pooled.rids, pooled.mids, strict=True)])


def _summarised(history: History, done: dict[str, _Single | _Pooled],
                medians: dict[int, float | None]) -> dict[str, Any]:
    """Each key's runs, oldest first, as ``stats.Summarized`` or a list of sample arrays."""
    # A run with one row of a key is summarised by the stored median (the median of
    # its samples, metrics.median), so only the newest WITHIN_RUNS runs' samples are
    # read, for the within-run spread; pooled rows need all their samples.
    for key, kept in done.items():
        if isinstance(kept, _Single) and np.isnan(kept.medians).any():
            done[key] = _pooled(kept, medians)  # a row without a median: read as pooled
    single = {key: kept for key, kept in done.items() if isinstance(kept, _Single)}
    pooled = {key: _pooled(kept, medians) for key, kept in done.items()
              if isinstance(kept, _Pooled)}
    stored = {key for key, kept in pooled.items()
              if all(len(mids) == 1 and medians[mids[0]] is not None for mids in kept.mids)}
    want = {mid for kept in single.values() for mid in kept.mids[:stats.WITHIN_RUNS].tolist()}
    want.update(mid for key, kept in pooled.items()
                for mids in (kept.mids[:stats.WITHIN_RUNS] if key in stored else kept.mids)
                for mid in mids)
    samples = history.samples_by_metric(sorted(want))
    out: dict[str, Any] = {}
    for key, kept in done.items():
        if not kept.rids:
            out[key] = []
        elif isinstance(kept, _Single):
            out[key] = _recent_summary(kept.medians[::-1],
                                       kept.mids[:stats.WITHIN_RUNS][::-1].tolist(),
                                       kept.medians[:stats.WITHIN_RUNS][::-1].tolist(),
                                       samples)
        elif key in stored:
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


def hosts_of(history: History, run_ids: Sequence[str]) -> dict[str, str | None]:
    """Machine of each run (``provenance.host_key``: its GPUs' uuids; None if unrecorded)."""
    return {rid: host_key(hw) for rid, hw in history.run_hardware(run_ids).items()}
