"""Everything one judgement reads, in one visit to the store: ``read_gate_inputs``.

``gates.gate.evaluate_run`` is read, judge, save: this module's one read returns a
frozen `GateInputs` (the run, its metric rows and stored declarations, the
acceptances in force, the confirm chain's runs, verdicts and metric rows, each
metric's baseline bounded to the windows the statistics read, the machines of
those runs, the units they were recorded in, the reruns a sequential confirm may
carry, and the runs change-point localisation looks at); judging it reads nothing
more, and the verdicts are saved in one write (``RunWrites.save_verdicts``).

Baselines (``gates.store.baselines``): complete, trusted, judged runs of the suite
and fingerprint before the judged run, less the confirm chain and an acceptance's
earlier runs, each key's newest ``need`` runs (``need``: the judged window and the
localised window, whichever is longer). ``bulk=False`` reads them key by key
(``baselines.baseline_runs``), the reference the bulk read is checked against.

The one write in the read: the repo file's acceptance entries the run's checkout
carried are logged with the run (``AfterWrites.carry_acceptances``) before they are
read back, as they decide its baselines (only when the verdicts are to be saved).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from gates.model import stats
from gates.store.acceptances import Cut, applies_to
from gates.store.baselines import (
    baseline_runs,
    bulk_baselines,
    failed_runs,
    hosts_of,
    newest_starts,
    unheld_chains,
)
from gates.store.rows import FailedChain

if TYPE_CHECKING:
    from gates.store.baseline_reads import BaselineReads
    from gates.store.history import History

__all__ = ["CHAIN_DEPTH", "LOCATE_RUNS", "BaselineUnreadable", "ChainRead",
           "GateInputs", "failed_drop", "latest_rows", "read_chain_rows", "read_gate_inputs",
           "samples_of", "summaries_of", "unit_facts"]

LOCATE_RUNS = 60  # baseline runs change-point localisation looks at (gates.gate._locate)
CHAIN_DEPTH = 16  # confirm_of links followed before a chain is read as a loop



def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


class BaselineUnreadable(sqlite3.DatabaseError):
    """The bulk baseline read failed (a damaged file): the gate's input error."""


@dataclass(frozen=True)
class ChainRead:
    """A confirm attempt's chain as stored: ``confirm_of`` back to the first attempt."""

    runs: tuple[Mapping[str, Any], ...]  # the previous attempt first, the first attempt last
    broken: tuple[str, str] | None  # ("missing" | "loop", run id) where the walk stopped
    verdicts: Mapping[str, tuple[Mapping[str, Any], ...]]  # run id -> its verdict rows

    def last_rows(self, run_id: str) -> list[Mapping[str, Any]]:
        """``run_id``'s verdict rows of its last gated attempt."""
        rows = self.verdicts[run_id]
        last = max((r["attempt"] for r in rows), default=0)
        return [r for r in rows if r["attempt"] == last]


@dataclass(frozen=True)
class GateInputs:
    """What one judgement of a run reads: plain data, read once (``read_gate_inputs``)."""

    where: str  # the history's location, for messages
    run_id: str
    run: Mapping[str, Any] | None  # None: no such run
    confirm_of: str | None = None
    metrics: tuple[Mapping[str, Any], ...] = ()  # the run's metric rows (every attempt)
    plan_gates: tuple[Mapping[str, Any], ...] | None = None  # stored declarations
    cuts: Mapping[str, Cut] = field(default_factory=_empty)  # key -> the acceptance it is judged under
    chain: ChainRead | None = None
    run_metrics: Mapping[str, tuple[Mapping[str, Any], ...]] = field(default_factory=_empty)  # chain and carried
    # reruns' metric rows, by run id
    baselines: Mapping[str, Any] = field(default_factory=_empty)  # key -> Summarized, or each run's samples
    base_ids: Mapping[str, tuple[str, ...]] = field(default_factory=_empty)  # key -> its baseline runs, oldest first
    standins: frozenset[str] = frozenset()  # keys whose newest baseline run is a stand-in
    hosts: Mapping[str, str | None] = field(default_factory=_empty)  # baseline run id -> its machine
    units_seen: Mapping[str, frozenset[str] | None] = field(default_factory=_empty)  # key -> units in its baseline
    unit_counts: Mapping[str, Mapping[str, tuple[int, str]]] = field(default_factory=_empty)  # key -> unit -> (runs,
    # newest run), where its units may disagree
    unheld: Mapping[str, tuple[tuple[str, tuple[str, ...]], ...]] = field(default_factory=_empty)  # key -> unheld
    # sequential confirms of its newest baseline runs (``baselines.unheld_chains``)
    located: Mapping[str, tuple[tuple[str, str | None, float], ...]] = field(default_factory=_empty)  # key ->
    # (run id, commit, value) of its newest LOCATE_RUNS baseline runs, oldest first
    errors: Mapping[str, Exception] = field(default_factory=_empty)  # key -> why its baseline could not be read
    # (the key-by-key reference read only)
    unreadable: str | None = None  # the bulk baseline read failed (a damaged file): why
    # key -> its failed chains no acceptance answered, oldest first: their runs serve no
    # baseline of it (``failed_drop``); the newest may be open (``gates.gate._stay_red``)
    failed: Mapping[str, tuple[FailedChain, ...]] = field(default_factory=_empty)
    # key -> when its newest baseline run started (keys with failed chains only)
    newest_start: Mapping[str, str] = field(default_factory=_empty)


def latest_rows(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Metric rows by key, last pytest attempt only (a test retried in-run counts once)."""
    by: dict[tuple[str, str], Mapping[str, Any]] = {}
    for r in rows:
        k = (r["key"], r["nodeid"])
        if k not in by or (r.get("attempt") or 1) >= (by[k].get("attempt") or 1):
            by[k] = r
    out: dict[str, list[Mapping[str, Any]]] = {}
    for (key, _), r in sorted(by.items()):
        out.setdefault(key, []).append(r)
    return out


def samples_of(rows: Sequence[Mapping[str, Any]]) -> list[float]:
    """A metric's samples in one run, over its rows (a row without samples: its median)."""
    return [float(x) for r in rows for x in (r.get("samples") or [r["median"]])]


def summaries_of(metric_rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Each metric's run summary in a run of these metric rows (its newest rows)."""
    out: dict[str, float] = {}
    for key, rows in latest_rows(metric_rows).items():
        vals = samples_of(rows)
        if vals:
            out[key] = stats.run_summary(vals)
    return out


def failed_drop(failed: Mapping[str, Sequence[FailedChain]],
                cuts: Mapping[str, Cut]) -> dict[str, tuple[FailedChain, ...]]:
    """{key: its failed chains that stay out of its baseline}: a red stays red.

    A run whose chain's last word on a key is a failure (``failed``: per key, from
    ``baselines.failed_runs``) and its confirms serve no baseline of that key until an
    acceptance answers the failure: where the key's acceptance (``cuts``) covers the
    run (it is inside it, not in its ``drop``) and was recorded after the failure was
    saved, the level it failed at is the accepted one and the run serves again. A
    failure saved after the acceptance is a new one and stays out.
    """
    out: dict[str, tuple[FailedChain, ...]] = {}
    for key, chains in failed.items():
        cut = cuts.get(key)
        since = str(cut.acceptance.get("at") or "") if cut is not None else ""
        gone = tuple(c for c in chains
                     if cut is None or c.root in cut.drop or str(c.at) > since)
        if gone:
            out[key] = gone
    return out


def _drops(cuts: Mapping[str, Cut], failed: Mapping[str, Sequence[FailedChain]]
           ) -> dict[str, frozenset[str]]:
    """Per key, the runs left out of its baseline: before its acceptance, and failed."""
    out = {k: c.drop for k, c in cuts.items()}
    for k, chains in failed.items():
        out[k] = out.get(k, frozenset()) | {c.root for c in chains}
    return out


def read_gate_inputs(history: History, run_id: str, *, confirm_of: str | None = None,
                     with_plan: bool = False, judge: bool = True,
                     acceptances: Sequence[Mapping[str, Any]] = (), carry: bool = False,
                     bulk: bool = True, params: stats.GateParams = stats.DEFAULTS,
                     ) -> GateInputs:
    """The run ``run_id`` and everything its judgement reads (see the module note).

    ``with_plan``: the caller holds the run's plan (its declarations are not read).
    ``judge=False``: the run only (gates off). ``acceptances``: the repo file's entries
    the run's checkout carries, logged with it when ``carry``. A run that is not
    complete, or whose chain is broken, comes back with what was read up to there.
    """
    reads = history.baseline_reads  # every read below through it: one reader, its SQL
    where = str(reads.path)
    run = reads.run(run_id)
    if run is None or run.get("status") != "complete" or not judge:
        return GateInputs(where, run_id, run)
    confirm_of = confirm_of or run.get("confirm_of")
    metrics = tuple(reads.metrics(run_id))
    recorded = latest_rows(metrics)
    plan_gates = None if with_plan else tuple(reads.plan_gates(run_id))
    cuts = _cutoffs(reads, run, {k: rows[0]["nodeid"] for k, rows in recorded.items()},
                    _carried(history, run, acceptances) if carry and acceptances else [])
    base = dict(where=where, run_id=run_id, run=run, confirm_of=confirm_of, metrics=metrics,
                plan_gates=plan_gates, cuts=MappingProxyType(cuts))
    exclude = {run_id}
    chain = None
    run_metrics: dict[str, tuple[Mapping[str, Any], ...]] = {}
    if confirm_of:
        chain = read_chain_rows(reads, confirm_of)
        if chain.broken:
            return GateInputs(**base, chain=chain)
        exclude.update(r["run_id"] for r in chain.runs)
        run_metrics.update((r["run_id"], tuple(reads.metrics(r["run_id"])))
                           for r in chain.runs)
    units = {k: {r["unit"] for r in rows} for k, rows in recorded.items()}
    failed = failed_drop(failed_runs(reads, run["suite"], set(recorded)), cuts)
    try:
        read = (_bulk if bulk else _key_by_key)(reads, run, units, exclude,
                                                _drops(cuts, failed), params)
    except BaselineUnreadable as e:
        return GateInputs(**base, chain=chain, unreadable=str(e))
    newest = (newest_starts(reads, {k: read["base_ids"].get(k, ()) for k in failed})
              if failed else {})
    base.update(failed=MappingProxyType(failed), newest_start=MappingProxyType(newest))
    unheld: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {}
    if chain is not None and len(chain.runs) >= 2:  # a sequential confirm: RERUNS stage
        w = max(params.windows, default=1)
        for key in units:
            found = unheld_chains(reads, run["suite"], key,
                                  list(read["base_ids"].get(key, ()))[-w:])
            unheld[key] = tuple((first, tuple(runs)) for first, runs in found)
            for _, runs in found:
                for rid in runs:
                    if rid not in run_metrics:
                        run_metrics[rid] = tuple(reads.metrics(rid))
    return GateInputs(**base, chain=chain, run_metrics=MappingProxyType(run_metrics),
                      unheld=MappingProxyType(unheld), **read)


def _carried(history: History, run: Mapping[str, Any],
             acceptances: Sequence[Mapping[str, Any]]) -> list[int]:
    # A file entry's "who" is the first commit that carried it (the reviewed PR's).
    at = (run.get("commit_sha") or run["run_id"])[:10]
    entries = [{**e, "who": e.get("who") or f"first run at {at}"} for e in acceptances]
    return history.after_writes.carry_acceptances(run["run_id"], entries)


def _cutoffs(reads: BaselineReads, run: Mapping[str, Any], nodeids: Mapping[str, str | None],
             carried: Iterable[int]) -> dict[str, Cut]:
    """{key: Cut} for the keys of ``run`` under an acceptance (``nodeids``: key -> the
    test that recorded it). ``carried``: acceptance ids the run's checkout carried.

    A command acceptance (``from_commit``) is in force from the first run of that
    commit; a file entry without ``from`` in the runs that carried it. Where
    several are in force for a key, the newest start wins (the latest level).
    """
    accs = reads.acceptances(run["suite"])
    if not accs:
        return {}
    carried = set(carried)
    started = run.get("started_at") or ""
    fp = run.get("fingerprint")
    live: list[tuple[str, Mapping[str, Any], frozenset[str]]] = []
    for a in accs:
        if a.get("from_commit"):
            start = reads.commit_start(a["from_commit"])
            if start is None or start > started:
                continue  # that commit has not run yet: not in force for this run
            drop = frozenset(reads.suite_runs_before(run["suite"], fp, start))
        elif a["id"] in carried:
            inside = reads.acceptance_runs(a["id"])
            start = min(inside.values(), default=started)
            drop = frozenset(reads.suite_run_ids(run["suite"], fp) - set(inside))
        else:
            continue
        live.append((start, a, drop))
    live.sort(key=lambda t: (t[0], t[1]["id"]))
    out: dict[str, Cut] = {}
    for key, nodeid in nodeids.items():
        for _start, a, drop in reversed(live):
            if applies_to(a, key, run["suite"], nodeid):
                out[key] = Cut(a, drop)
                break
    return out


def read_chain_rows(reads: BaselineReads, confirm_of: str) -> ChainRead:
    """``confirm_of``'s run and the attempts it re-checks, with their verdict rows."""
    runs: list[Mapping[str, Any]] = []
    broken = None
    rid: str | None = confirm_of
    while rid:
        r = reads.run(rid)
        if r is None:
            broken = ("missing", rid)
            break
        if any(c["run_id"] == rid for c in runs) or len(runs) > CHAIN_DEPTH:
            broken = ("loop", rid)
            break
        runs.append(r)
        rid = r.get("confirm_of")
    verdicts = {} if broken else {r["run_id"]: tuple(reads.verdicts(r["run_id"]))
                                  for r in runs}
    return ChainRead(tuple(runs), broken, MappingProxyType(verdicts))


def _need(params: stats.GateParams) -> int:
    """The baseline runs the statistics read (``stats.summarize_many``)."""
    return params.window + max(params.windows, default=1)


def _bulk(reads: BaselineReads, run: Mapping[str, Any], units: Mapping[str, set[str]],
          exclude: set[str], drops: Mapping[str, frozenset[str]], params: stats.GateParams,
          ) -> dict[str, Any]:
    """Every key's baseline in one or two statements (``baselines.bulk_baselines``)."""
    need = _need(params)
    ids: dict[str, list[str]] = {}
    standins: set[str] = set()
    hosts: dict[str, str | None] = {}
    seen: dict[str, set[str] | None] = {}
    located: dict[str, list[float]] = {}
    commits: dict[str, str | None] = {}
    try:
        pre = bulk_baselines(reads, run, set(units), exclude, max(need, LOCATE_RUNS),
                             ids_out=ids, standins_out=standins,
                             drop=drops, hosts_out=hosts,
                             units_out=seen, units_need=need, located_out=located,
                             commits_out=commits)
        judged_ids = {k: v[-need:] for k, v in ids.items()}
        counts = unit_facts(reads, run["suite"], units, judged_ids, seen)
    except sqlite3.DatabaseError as e:
        raise BaselineUnreadable(str(e)) from None
    return dict(
        baselines=MappingProxyType(pre),
        base_ids=MappingProxyType({k: tuple(v) for k, v in ids.items()}),
        standins=frozenset(standins), hosts=MappingProxyType(hosts),
        units_seen=MappingProxyType({k: None if u is None else frozenset(u)
                                     for k, u in seen.items()}),
        unit_counts=MappingProxyType(counts),
        located=MappingProxyType({
            k: tuple((rid, commits.get(rid), x)
                     for rid, x in zip(ids[k][-LOCATE_RUNS:], vals[-LOCATE_RUNS:], strict=True))
            for k, vals in located.items() if k in ids}))


def _key_by_key(reads: BaselineReads, run: Mapping[str, Any], units: Mapping[str, set[str]],
                exclude: set[str], drops: Mapping[str, frozenset[str]],
                params: stats.GateParams) -> dict[str, Any]:
    """The reference read: each key's series through ``History.metric_series``."""
    need = _need(params)
    pre: dict[str, Any] = {}
    ids: dict[str, tuple[str, ...]] = {}
    standins: set[str] = set()
    hosts: dict[str, str | None] = {}
    seen: dict[str, frozenset[str] | None] = {}
    counts: dict[str, Mapping[str, tuple[int, str]]] = {}
    located: dict[str, tuple[tuple[str, str | None, float], ...]] = {}
    errors: dict[str, Exception] = {}
    for key in sorted(units):
        drop = exclude | drops.get(key, frozenset())
        try:
            base = baseline_runs(reads, run["suite"], key, run.get("fingerprint"), run, drop)
            pre[key] = [r.get("samples") or [r["median"]] for r in base]
            ids[key] = tuple(r["run_id"] for r in base)
            if base and base[-1].get("standin"):
                standins.add(key)
            hosts.update(hosts_of(reads, list(ids[key])))
            located[key] = tuple(
                (r["run_id"], r.get("commit"),
                 stats.run_summary(r["samples"]) if r.get("samples") else r["median"])
                for r in base[-LOCATE_RUNS:])
            key_ids = {key: list(ids[key][-need:])}
            wide = reads.units_of_keys(key_ids[key], run["suite"], [key])
            seen[key] = frozenset(wide.get(key, set()))
            counts.update(unit_facts(reads, run["suite"], {key: units[key]}, key_ids,
                                     {key: seen[key]}))
        except Exception as e:  # noqa: BLE001 - that metric's error verdict, not the run's
            errors[key] = e
    return dict(baselines=MappingProxyType(pre), base_ids=MappingProxyType(ids),
                standins=frozenset(standins), hosts=MappingProxyType(hosts),
                units_seen=MappingProxyType(seen), unit_counts=MappingProxyType(counts),
                located=MappingProxyType(located), errors=MappingProxyType(errors))


def unit_facts(reads: BaselineReads, suite: str, run_units: Mapping[str, Iterable[str]],
               base_ids: Mapping[str, Sequence[str]],
               seen: Mapping[str, Iterable[str] | None] | None = None,
               ) -> dict[str, Mapping[str, tuple[int, str]]]:
    """{key: {unit: (baseline runs in it, the newest)}} for each key of ``run_units``
    whose units may disagree with its baseline runs ``base_ids[key]``
    (``gates.record.unit_check``): several units in this run, or another unit (or
    units not all read: None) in ``seen``, the units the baseline read found. Without
    ``seen``, one grouped read over every baseline run at once."""
    wide = (seen if seen is not None else
            reads.units_of_keys([r for ids in base_ids.values() for r in ids], suite,
                                  list(run_units)))
    out: dict[str, Mapping[str, tuple[int, str]]] = {}
    for key, units in run_units.items():
        mine = set(units)
        known = wide.get(key, set())
        if len(mine) == 1 and known is not None and set(known) <= mine:
            continue
        ids = base_ids.get(key) or ()
        out[key] = MappingProxyType(reads.unit_counts(ids, suite, key) if ids else {})
    return out
