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
    lacks runs), and the samples of the rows read (``_samples_of``).
    ``drop``: per key, run ids left out besides ``exclude`` (an acceptance's
    runs before its new level, ``gates.accept.cutoffs``).
    ``ids_out``, when given, receives each key's run ids in the same order;
    ``standins_out`` the keys whose newest baseline run is a rerun standing in for
    a transient first attempt (``stats.judge_summaries(standin_last=True)``).
    """
    if not keys:
        return {}
    suite, fp = run["suite"], run.get("fingerprint")
    medians: dict[int, float | None] = {}
    done = _newest_rows(history, run, keys, exclude, need, medians, drop)
    subs = history.transient_reruns(suite, set(done))
    if subs:
        _stand_in(history, suite, fp, done, subs, medians)
    if standins_out is not None:
        standins_out.update(key for key, kept_runs in done.items()
                            if kept_runs and (kept_runs[0][0], key) in subs)
    if ids_out is not None:
        for key, kept_runs in done.items():
            ids_out[key] = [rid for rid, _ in reversed(kept_runs)]  # oldest first
    return _summarised(history, done, medians)


_Kept = list[tuple[str, list[int]]]  # (run id, its metric row ids of the key), newest first


def _newest_rows(history: History, run: Mapping[str, Any], keys: set[str], exclude: set[str],
                 need: int, medians: dict[int, float | None],
                 drop: Mapping[str, frozenset[str]] | None = None) -> dict[str, _Kept]:
    """Each key's newest ``need`` baseline runs, reading runs in batches only while some
    key still lacks runs; fills ``medians`` {metric row id: stored median}."""
    suite, fp = run["suite"], run.get("fingerprint")
    runs = history.baseline_candidates(suite, fp, run["run_id"])
    started = run.get("started_at") or ""
    info = {rid: (st or "", bool(cof) or rid in exclude or bool(started and (st or "") > started))
            for rid, st, cof in runs}
    run_started = {rid: v[0] for rid, v in info.items()}
    skipped = {rid for rid, v in info.items() if v[1]}  # confirms, excluded, later runs
    rows: dict[str, list[tuple[str, int, str]]] = {k: [] for k in keys}
    done: dict[str, _Kept] = {}
    pending = set(keys)
    i = 0
    batch_n = max(need, 16)
    while pending and i < len(runs):
        j = min(len(runs), i + batch_n)
        while j < len(runs) and runs[j][1] == runs[j - 1][1]:
            j += 1  # a batch holds every run of its oldest start time
        ids = [r[0] for r in runs[i:j]]
        i = j
        for mid, rid, key, med in history.metric_medians(ids, suite, fp):
            if key in pending:
                rows[key].append((run_started[rid], mid, rid))
                medians[mid] = med
        for key in list(pending):
            series = sorted(rows[key], reverse=True)[:SERIES_LIMIT]  # newest first
            kept: dict[str, list[int]] = {}
            gone = (drop or {}).get(key)
            skip = skipped | gone if gone else skipped
            for _st, mid, rid in series:
                if rid not in skip:
                    pooled = kept.get(rid)
                    if pooled is None:
                        kept[rid] = [mid]
                    else:
                        pooled.append(mid)  # several rows of a key in one run: pooled
            if len(series) >= SERIES_LIMIT or len(kept) >= need or i >= len(runs):
                done[key] = list(kept.items())[:need]
                pending.discard(key)
    for key in pending:
        done[key] = []
    return done


def _stand_in(history: History, suite: str, fp: str | None, done: dict[str, _Kept],
              subs: dict[tuple[str, str], str], medians: dict[int, float | None]) -> None:
    """Runs whose first attempt the confirm found a transient: the rerun's rows instead."""
    by_c: dict[tuple[str, str], list[int]] = {}
    for mid, rid, key, med in sorted(history.metric_medians(sorted(set(subs.values())),
                                                            suite, fp)):
        by_c.setdefault((rid, key), []).append(mid)
        medians[mid] = med
    for key, kept_runs in done.items():
        done[key] = [(rid, by_c.get((subs[(rid, key)], key), mids)
                      if (rid, key) in subs else mids) for rid, mids in kept_runs]


def _summarised(history: History, done: dict[str, _Kept],
                medians: dict[int, float | None]) -> dict[str, Any]:
    """Each key's runs, oldest first, as ``stats.Summarized`` or a list of sample arrays."""
    # A run with one row of a key is summarised by the stored median (the median of
    # its samples, metrics.median), so only the newest WITHIN_RUNS runs' samples are
    # read, for the within-run spread; pooled rows need all their samples.
    unstored = {mid for mid, med in medians.items() if med is None}
    stored = {key for key, kept_runs in done.items()
              if all(len(mids) == 1 for _, mids in kept_runs)
              and not (unstored and any(mids[0] in unstored for _, mids in kept_runs))}
    want = sorted({mid for key, kept_runs in done.items()
                   for _, mids in (kept_runs[:stats.WITHIN_RUNS] if key in stored else kept_runs)
                   for mid in mids})
    samples = history.samples_by_metric(want)
    out: dict[str, Any] = {}
    for key, kept_runs in done.items():
        if not kept_runs:
            out[key] = []
            continue
        kept_runs.reverse()  # oldest first
        if key in stored:
            # A row without samples: its median stands in (as in baseline_runs).
            recent = [samples[mids[0]] if mids[0] in samples
                      else np.array([medians[mids[0]]], dtype=float)
                      for _, mids in kept_runs[-stats.WITHIN_RUNS:]]
            out[key] = stats.Summarized(
                np.array([medians[mids[0]] for _, mids in kept_runs], dtype=float),
                np.stack(recent) if len({x.size for x in recent}) == 1 else recent)
            continue
        series_runs: list[Any] = []
        for _rid, mids in kept_runs:
            parts = [samples[m] for m in mids if m in samples]
            if parts:
                series_runs.append(parts[0] if len(parts) == 1 else np.concatenate(parts))
            else:  # a row without samples: its median stands in (None reads as NaN, as there)
                series_runs.append(np.array([medians[mids[0]]], dtype=float))
        out[key] = series_runs
    return out


def hosts_of(history: History, run_ids: Sequence[str]) -> dict[str, str | None]:
    """Machine of each run (``provenance.host_key``: its GPUs' uuids; None if unrecorded)."""
    return {rid: host_key(hw) for rid, hw in history.run_hardware(run_ids).items()}
