"""Verdicts for a run from its history: the gate a suite session ends with.

Library first (``evaluate_run``), command line as a thin skin (``main``)::

    python -m gates.gate --history PATH --run-id ID [--plan PLAN.json]
        [--mode enforce|warn|off] [--confirm-of RUN_ID] [--tripped-out FILE]

Exit codes: 0 passed (or warn/off mode); 1 an enforced ``regression``,
``threshold-fail`` or ``missing``; 2 bad input (unknown run, unreadable plan
or history, an ``error`` verdict in enforce mode).

Confirm on trip (what ``ci_register.runner`` does):

1. ``evaluate_run(h, A)`` -> ``result.tripped_nodeids`` (written to
   ``--tripped-out`` as a JSON list): the tests behind enforced failures (exit 1)
   and behind ``suspect`` verdicts (the new run alone passed the screen,
   ``stats.is_suspect``, but not the level: exit 0 unless something failed);
2. the runner reruns only those tests as run B with ``confirm_of = A``;
3. ``evaluate_run(h, B, confirm_of=A)`` judges only the metrics A tripped or
   suspected, with A left out of the baseline, at ``confirm_level`` (and, when
   a multi-run window decided, the two attempts' mean must lean the bad way;
   a suspect holds only when that mean reaches ``suspect_pair_level``); the
   regression holds only if it holds in B. B's verdicts are saved under B with
   ``attempt = 2`` (A keeps its ``attempt = 1`` rows), so both attempts are
   recorded. The default number of confirm attempts is
   ``DEFAULTS.confirm_attempts`` = 4 (the runner's ``--confirm``, passed on as
   ``--attempts-left``): where B's rerun is borderline (``stats.confirm`` with
   ``another``) B says ``suspect`` and lists only those tests; the runner
   reruns them as C (``confirm_of = B``), judged with ``stats.confirm_reruns``
   on the mean of B and C (A left out of the baseline too); while that mean is
   borderline and attempts are left, C says ``suspect`` again and D follows
   (``confirm_of = C``: the chain back to A names every earlier rerun); with
   ``--confirm 0`` a suspect stays a suspect and never fails the session.
   From C on, the reruns of the metric's unheld sequential confirms at the
   last 10 baseline runs (``baselines.unheld_chains``) join that mean. On a
   heavy-tailed baseline, a rerun B that holds but lies beyond every baseline
   run says ``suspect`` too (as on one with a small positive lag-1 bound,
   ``decisions._outlier_check``; saved with ``detail.corroborate``), and C alone
   decides, by its rank among the baseline runs (``stats.corroborate``). Where
   C (or a later rerun) would hold only at a borderline p, A, read from the end
   of the chain, must also be one draw of the reruns' regime (``stats.split_p``):
   else the chain passes, saved with ``detail.chain_transient``.

Baselines (``gates.baselines``): complete, trusted runs of the same suite, metric
key and hardware fingerprint before the judged run, read for every metric of a run
in a few bulk queries (``bulk_baselines``) and judged in memory; ``bulk=False``
reads them key by key (``baseline_runs``), the reference. Where a confirm found a
run's first attempt a transient, its rerun stands in for that run, and the run after
it is judged knowing so (``stats.judge_summaries(standin_last=True)``).
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from gates import accept, stats
from gates.baselines import baseline_runs, bulk_baselines, hosts_of, unheld_chains
from gates.declarations import DeclarationError, Gate, gate_for, parse_plan_gates
from gates.history import History
from gates.provenance import host_key
from gates.store.backend import is_database_url
from gates.unit_check import UnitMismatch, unit_conflicts
from gates.verdicts import FAILING, VERDICTS, fails

__all__ = [
    "VERDICTS",
    "FAILING",
    "GateInputError",
    "Verdict",
    "GateResult",
    "evaluate_run",
    "verdict_table",
    "main",
]

RERUN = (*FAILING, "suspect")  # enforced verdicts whose tests the confirm attempt reruns


class GateInputError(Exception):
    """Bad input to the gate (unknown run, unreadable plan): exit 2, one line."""


@dataclass
class Verdict:
    key: str
    verdict: str
    nodeid: str | None = None
    unit: str | None = None
    better: str | None = None
    baseline: float | None = None
    new: float | None = None
    rel_change: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    ci_conf: float | None = None  # the interval's confidence (the level that decided)
    statistic: float | None = None  # signed z (> 0: worse)
    p_value: float | None = None
    q_value: float | None = None
    floor: float | None = None
    mode: str = "enforce"
    method: str = ""
    n_baseline: int = 0
    change_point: dict[str, Any] | None = None
    message: str = ""
    declared_at: str | None = None
    transient: bool = False  # confirm: the first attempt was a glitch; baselines take the rerun
    corroborate: bool = False  # confirm: a rerun beyond every baseline run; the next decides
    chain_transient: bool = False  # a chain's borderline hold undone: its first attempt a glitch

    @property
    def enforced_failure(self) -> bool:
        return fails(self.verdict, self.mode)

    @property
    def needs_rerun(self) -> bool:
        return self.mode == "enforce" and self.verdict in RERUN

    def row(self, attempt: int, confirm_of: str | None) -> dict[str, Any]:
        """A row for ``History.save_verdicts``."""
        detail = {"method": self.method, "n_baseline": self.n_baseline, "unit": self.unit,
                  "better": self.better}
        for k in ("change_point", "message", "declared_at"):
            v = getattr(self, k)
            if v:
                detail[k] = v
        if confirm_of:
            detail["confirm_of"] = confirm_of
        if self.transient:
            detail["transient"] = True
        if self.corroborate:
            detail["corroborate"] = True
        if self.chain_transient:
            detail["chain_transient"] = True
        if self.ci_conf is not None:
            detail["ci_conf"] = self.ci_conf
        return {"key": self.key, "nodeid": self.nodeid, "verdict": self.verdict,
                "baseline": self.baseline, "new": self.new, "rel_change": self.rel_change,
                "ci_low": self.ci_low, "ci_high": self.ci_high, "statistic": self.statistic,
                "p_value": self.p_value, "q_value": self.q_value, "floor": self.floor,
                "mode": self.mode, "attempt": attempt, "detail": detail}


@dataclass
class GateResult:
    run_id: str
    suite: str
    mode: str
    attempt: int = 1
    confirm_of: str | None = None
    verdicts: list[Verdict] = field(default_factory=list)
    note: str = ""

    @property
    def failed(self) -> bool:
        return any(v.enforced_failure for v in self.verdicts)

    @property
    def errors(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.verdict == "error"]

    @property
    def tripped_nodeids(self) -> list[str]:
        """Tests to rerun for a confirm attempt: behind enforced failures and suspects
        (after a confirm attempt, behind its borderline verdicts only: what it held is
        final)."""
        out = {v.nodeid for v in self.verdicts if v.needs_rerun and v.nodeid
               and (not self.confirm_of or v.verdict == "suspect")}
        return sorted(out)

    @property
    def exit_code(self) -> int:
        if self.mode == "enforce" and self.errors:
            return 2
        return 1 if self.failed else 0

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for v in self.verdicts:
            out[v.verdict] = out.get(v.verdict, 0) + 1
        return out


# ------------------------------------------------------------------ evaluation


def _num(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _latest_rows(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
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


def _threshold(gate: Gate, value: float) -> str | None:
    if gate.min_value is not None and value < gate.min_value:
        return f"{value:.6g} < min_value {gate.min_value:.6g}"
    if gate.max_value is not None and value > gate.max_value:
        return f"{value:.6g} > max_value {gate.max_value:.6g}"
    return None


def _locate(series: Sequence[Mapping[str, Any]], new_value: float, run_id: str,
            commit: str | None) -> dict[str, Any] | None:
    vals = [stats.run_summary(r["samples"]) if r.get("samples") else r["median"]
            for r in series[-60:]] + [new_value]
    ids = [(r["run_id"], r.get("commit")) for r in series[-60:]] + [(run_id, commit)]
    cp = stats.pettitt(np.asarray(vals, dtype=float))
    if cp is None or cp.p > 0.05:
        # No significant split inside the history: the judged run itself is the change.
        return {"run_id": run_id, "commit": commit, "p": None if cp is None else round(cp.p, 6),
                "before": None, "after": new_value, "runs_ago": 0}
    rid, com = ids[cp.index]
    return {"run_id": rid, "commit": com, "p": round(cp.p, 6), "before": cp.before,
            "after": cp.after, "runs_ago": len(vals) - 1 - cp.index}


def evaluate_run(
    history: History,
    run_id: str,
    *,
    plan: Mapping[str, Any] | None = None,
    mode: str = "enforce",
    confirm_of: str | None = None,
    params: stats.GateParams = stats.DEFAULTS,
    save: bool = True,
    bulk: bool = True,
    attempts_left: int = 0,
    acceptances: Sequence[Mapping[str, Any]] = (),
) -> GateResult:
    """Judge every gated metric of ``run_id`` against its history; save the verdicts.

    ``plan``: the runner's plan JSON (its ``gates`` list); without it, the
    gates stored with the run (``History.plan_gates``) are used.
    ``confirm_of``: the run this one re-checks (confirm on trip); only the
    metrics that run tripped are judged, and it is left out of the baseline.
    ``attempts_left``: confirm reruns the runner may still take after this
    run. A first attempt with 2 or more left uses the sequential confirm's
    level (``stats.level_for``); a rerun with 1 or more left may ask for
    another (verdict ``suspect``, ``stats.confirm(another=True)``,
    ``stats.confirm_reruns(final=False)``); a later rerun (``confirm_of`` is
    itself a confirm run) judges the metrics its previous attempt found
    borderline with ``stats.confirm_reruns`` on the mean of every rerun of the
    chain (and of the metric's unheld sequential confirms at the last 10
    baseline runs), the first attempt and earlier reruns left out of the baseline, and
    carries the failures earlier reruns held forward (shown and counted, not
    saved again).
    ``acceptances``: the repo file's entries this run's checkout carries
    (``gates.accept.read_accept_file``), logged with the run; a key under an
    acceptance is judged only against runs inside it (``gates.accept``).
    ``bulk``: read every baseline in a few queries (``bulk_baselines``);
    ``False`` issues one ``History.metric_series`` query per metric (the
    reference path; same verdicts, about 3 ms per metric slower).
    """
    if mode not in ("enforce", "warn", "off"):
        raise GateInputError(f"--mode {mode!r}; use enforce, warn or off")
    run = history.run(run_id)
    if run is None:
        raise GateInputError(f"no run {run_id!r} in {history.path}; check --run-id")
    if run.get("status") != "complete":
        raise GateInputError(f"run {run_id} is {run.get('status')!r}, not complete; "
                             "only a recorded run can be gated")
    confirm_of = confirm_of or run.get("confirm_of")
    suite, _fp = run["suite"], run.get("fingerprint")
    result = GateResult(run_id, suite, mode, confirm_of=confirm_of)
    if mode == "off":
        result.note = "gates off"
        return result
    try:
        decls = (plan.get("gates") if plan is not None
                 else [{"path": g.get("path"), "line": g.get("line"),
                        "metric_key": g.get("metric_key"), "options": g.get("options")}
                       for g in history.plan_gates(run_id)])
        declared = parse_plan_gates(decls)
    except DeclarationError as e:
        raise GateInputError(str(e)) from None
    recorded = _latest_rows(history.metrics(run_id))
    exclude = {run_id}
    # A file entry's "who" is the first commit that carried it (the reviewed PR's).
    at = (run.get("commit_sha") or run_id)[:10]
    entries = [{**e, "who": e.get("who") or f"first run at {at}"} for e in acceptances]
    carried = history.carry_acceptances(run_id, entries) if save and entries else []
    cuts = accept.cutoffs(history, run, {k: rows[0]["nodeid"] for k, rows in recorded.items()},
                          carried)
    keys = sorted(set(recorded) | {k for k, g in declared.items() if g.mode != "off"})
    suspects: set[str] = set()
    corroborating: set[str] = set()  # keys whose previous rerun asked the next to corroborate
    earlier: list[str] = []  # the confirm reruns before this one, oldest first
    carried: list[Verdict] = []
    if confirm_of:
        chain = _attempt_chain(history, confirm_of)  # the previous attempt back to the first
        first = history.verdicts(confirm_of)
        exclude.update(r["run_id"] for r in chain)  # the first attempt was selected for being high
        earlier = [r["run_id"] for r in reversed(chain[:-1])]
        last_attempt = max((r["attempt"] for r in first), default=0)
        result.attempt = last_attempt + 1 if last_attempt else 2
        rerun = [r for r in first if r["attempt"] == last_attempt and r["verdict"] in RERUN
                 and r.get("mode") == "enforce"]
        if earlier:
            # Failures an earlier rerun held are final (shown again, not saved again);
            # only the previous rerun's borderline ones rerun.
            for rid in earlier:  # the last is confirm_of, whose verdicts are read already
                rows = first if rid == confirm_of else history.verdicts(rid)
                att = max((r["attempt"] for r in rows), default=0)
                carried += [_carried(r, att) for r in rows
                            if r["attempt"] == att and r["verdict"] in FAILING
                            and r.get("mode") == "enforce"]
            rerun = [r for r in rerun if r["verdict"] == "suspect"]
        tripped = {r["key"] for r in rerun}
        suspects = {r["key"] for r in rerun if r["verdict"] == "suspect"}
        corroborating = {r["key"] for r in rerun if (r.get("detail") or {}).get("corroborate")}
        if first:
            keys = [k for k in keys if k in tripped]
            keys += sorted(tripped - set(keys))
    judged: list[tuple[Verdict, stats.Judgement | None, Gate]] = []
    bases: dict[str, list[Mapping[str, Any]]] = {}
    # The previous attempt's summary of each metric (the first attempt, for a first
    # rerun) and, for later reruns, every earlier rerun's (their mean decides).
    first_summary = _summaries_of(history, confirm_of) if confirm_of else {}
    earlier_summaries = [first_summary if rid == confirm_of else _summaries_of(history, rid)
                         for rid in earlier]
    # The first attempt's own summaries, for later reruns: a chain that holds only at a
    # borderline p must find it one draw of its reruns' regime (stats.split_p).
    root_summary = _summaries_of(history, chain[-1]["run_id"]) if earlier else {}
    # The machine of this run and of each baseline run (``gates.machines``: where runs
    # name theirs, machine offsets are part of the noise model).
    this_host = host_key(run.get("hardware"))
    base_ids: dict[str, list[str]] = {}
    standins: set[str] = set()  # keys whose newest baseline run stands in for a transient
    try:
        pre = (bulk_baselines(history, run, {k for k in keys if recorded.get(k)}, exclude,
                               params.window + max(params.windows, default=1),
                               ids_out=base_ids,
                               standins_out=standins,
                               drop={k: c.drop for k, c in cuts.items()})
               if bulk else None)
        hosts = (hosts_of(history, [r for ids in base_ids.values() for r in ids])
                 if pre is not None else {})
        # Keys whose units disagree across this run and its baseline (gates.unit_check).
        mixed = (unit_conflicts(history, suite, {k: {r["unit"] for r in recorded[k]}
                                                 for k in recorded}, base_ids)
                 if pre is not None else {})
    except sqlite3.DatabaseError as e:
        raise GateInputError(f"{history.path}: cannot read baselines ({e}); check the "
                             "file with `History.check`") from None
    for key in keys:
        rows = recorded.get(key)
        try:
            gate = gate_for(key, rows[0] if rows else None, declared.get(key), mode)
        except DeclarationError as e:
            raise GateInputError(str(e)) from None
        if gate.mode == "off":
            continue
        v = Verdict(key=key, verdict="pass", mode=gate.mode, unit=gate.unit,
                    better=gate.better, declared_at=gate.declared_at)
        if not rows:
            v.verdict = "missing"
            # Rerun the declaring file: its tests should have recorded the metric.
            where = declared[key].declared_at if key in declared else None
            v.nodeid = where.rsplit(":", 1)[0] if where else None
            v.message = "declared gate, but the run recorded no such metric"
            judged.append((v, None, gate))
            continue
        v.nodeid = rows[0]["nodeid"]
        try:
            j, base = _judge_one(history, run, key, rows, gate, params,
                                 exclude | cuts[key].drop if key in cuts else exclude, v,
                                 first_summary.get(key) if confirm_of else None,
                                 None if pre is None else pre.get(key, []),
                                 this_host, hosts, base_ids.get(key),
                                 key in suspects and not earlier,
                                 another=attempts_left >= 1,
                                 earlier=[e.get(key) for e in earlier_summaries],
                                 corroborating=key in corroborating,
                                 standin_last=key in standins,
                                 root=root_summary.get(key))
            if pre is None:  # the reference path read this key's series itself
                need = params.window + max(params.windows, default=1)  # what stats read
                mixed = unit_conflicts(history, suite, {key: {r["unit"] for r in rows}},
                                       {key: [r["run_id"] for r in (base or [])[-need:]]})
            if key in mixed:
                raise UnitMismatch(mixed[key])
            if base is not None:
                bases[key] = base
        except Exception as e:  # noqa: BLE001 - one bad metric must not hide the others
            v.verdict = "error"
            v.message = f"{type(e).__name__}: {e}"
            j = None
        judged.append((v, j, gate))
    # Benjamini-Hochberg across the run's judged metrics (first attempts only: a
    # confirm attempt re-tests hypotheses already selected).
    ok = [(v, j) for v, j, _ in judged if j is not None and j.status == "ok"]
    q_better: dict[str, float] = {}
    if ok:
        q = (stats.bh_qvalues([j.p_worse for _, j in ok]) if not confirm_of
             else np.array([j.p_worse for _, j in ok]))
        qb = stats.bh_qvalues([j.p_better for _, j in ok])
        for (v, _), qi, qbi in zip(ok, q, qb, strict=True):
            v.q_value = float(qi)
            q_better[v.key] = float(qbi)
    for v, j, gate in judged:
        if v.verdict in ("missing", "error"):
            continue
        if j is not None and j.status == "ok":
            if confirm_of:
                verdict = v.verdict  # stats.confirm decided (confirm_level, pooled check)
            else:
                q = v.q_value if v.q_value is not None else j.p_worse
                # Two or more confirm reruns left (enforced gates only: warn mode reruns
                # nothing): the sequential confirm's level. Improvements are never rerun,
                # so one attempt must carry the evidence a regression's trip and confirm
                # carry together: level x confirm_level.
                level = (stats.level_for(j, gate.level, params)
                         if attempts_left >= 2 and gate.mode == "enforce" else gate.level)
                verdict = stats.decide(j, q, level=level, q_better=q_better.get(v.key),
                                       better_level=gate.level * params.confirm_level)
                if (verdict == "pass" and gate.mode == "enforce"
                        and stats.is_suspect(j, q, params=params, level=level)):
                    # Short of the level, but the new run alone passed the screen:
                    # the confirm rerun decides; never a failure by itself.
                    verdict = "suspect"
                    v.message = (f"{v.message}; " if v.message else "") + (
                                 f"new run alone p {j.extras.p_run_worse:.2g}: screened at "
                                 f"{params.screen_level:g}, a confirm rerun decides")
            v.verdict = verdict
            _show_interval(v, j, _decided_level(j, v, gate, params, level if not confirm_of
                                                else None, q_better.get(v.key)))
            if verdict == "improvement":  # its own p, not the bad direction's
                v.p_value, v.q_value = _num(j.p_better), q_better.get(v.key)
            if verdict in ("regression", "improvement"):
                base = bases.get(v.key)
                if base is None:  # bulk path: the full series only for the few that tripped
                    try:
                        base = baseline_runs(history, suite, v.key, run.get("fingerprint"),
                                              run, exclude | cuts[v.key].drop
                                              if v.key in cuts else exclude)
                    except Exception:  # noqa: BLE001 - localisation never decides a verdict
                        base = None
                v.change_point = _locate_safe(base, run, v)
        elif j is not None:
            v.verdict = j.status  # insufficient-history
            if v.key in cuts:
                v.message = cuts[v.key].message(j.n_baseline, params.min_history)
        why = _threshold(gate, v.new) if v.new is not None else None
        if why:
            v.verdict = "threshold-fail"
            v.message = why
    result.verdicts = [v for v, _, _ in judged]
    if not result.verdicts and not carried:
        result.note = "no gated metrics in this run"
    if save:
        history.save_verdicts(run_id, [v.row(result.attempt, confirm_of)
                                       for v in result.verdicts])
    result.verdicts += carried
    return result


def _decided_level(j: stats.Judgement, v: Verdict, gate: Gate, params: stats.GateParams,
                   level: float | None, q_better: float | None) -> float:
    """The level, on the metric's own p scale, its verdict was decided at.

    First attempts (``level`` given): the side of the change's level (``level``
    for a rise in the bad direction, ``gate.level x confirm_level`` for an
    improvement) times p / q of that side (BH: q <= level is p <= level p / q).
    Confirm attempts: the reruns' level where they decided outright, else the
    confirm level (the level the rerun's own test is held to)."""
    if level is None:
        lv = j.extras.rerun_level
        return lv if lv is not None else params.confirm_level
    worse = j.z >= 0
    side = level if worse else gate.level * params.confirm_level
    p, q = (j.p_worse, v.q_value) if worse else (j.p_better, q_better)
    return side * (p / q) if q and p <= q else side


def _show_interval(v: Verdict, j: stats.Judgement, level: float) -> None:
    """The deciding test's interval at the level that decided (``Decider``)."""
    d = j.decider
    if d is None:
        return
    ci = d.interval(level)
    v.ci_low, v.ci_high = (_num(ci[0]), _num(ci[1])) if ci is not None else (None, None)
    v.ci_conf = d.confidence(level)


def _attempt_chain(history: History, run_id: str) -> list[dict[str, Any]]:
    """``run_id``'s run and the attempts it re-checks, back to the first attempt."""
    chain: list[dict[str, Any]] = []
    rid: str | None = run_id
    while rid:
        r = history.run(rid)
        if r is None:
            raise GateInputError(f"--confirm-of {rid}: no such run in {history.path}")
        if any(c["run_id"] == rid for c in chain) or len(chain) > 16:
            raise GateInputError(f"run {run_id}: its confirm_of chain loops at {rid}; "
                                 "check the runs' confirm_of column")
        chain.append(r)
        rid = r.get("confirm_of")
    return chain


def _chain_note(j: stats.Judgement, root: float | None, n: int) -> str:
    """The message's clause for a hold the first attempt's split test turned into a pass."""
    if not j.extras.chain_transient:
        return ""
    return (f"; but the first attempt {_num(root):.6g} is a transient against the mean of "
            f"its {n} reruns (p {j.extras.p_split:.2g}) and they are not clear on their own: "
            "pass")


def _summaries_of(history: History, run_id: str) -> dict[str, float]:
    """Each metric's run summary in ``run_id`` (its newest rows)."""
    out: dict[str, float] = {}
    for key, rows in _latest_rows(history.metrics(run_id)).items():
        vals = _samples(rows)
        if vals:
            out[key] = stats.run_summary(vals)
    return out


def _unheld_reruns(history: History, suite: str, key: str, ids: Sequence[str],
                   w: int) -> tuple[list[float], list[str]]:
    """``key``'s values in the unheld sequential confirms of the last ``w`` baseline
    runs (``baselines.unheld_chains``), oldest first, and those runs' ids."""
    vals: list[float] = []
    roots: list[str] = []
    for first, chain in unheld_chains(history, suite, key, list(ids)[-w:]):
        got = [_summaries_of(history, rid).get(key) for rid in chain]
        if all(x is not None for x in got):
            vals += [float(x) for x in got]
            roots.append(first)
    return vals, roots


def _samples(rows: Sequence[Mapping[str, Any]]) -> list[float]:
    """A metric's samples in one run, over its rows (a row without samples: its median)."""
    return [float(x) for r in rows for x in (r.get("samples") or [r["median"]])]


def _carried(row: Mapping[str, Any], attempt: int) -> Verdict:
    """A failure the previous confirm attempt held: final, shown again at the next one."""
    d = row.get("detail") or {}
    v = Verdict(key=row["key"], verdict=row["verdict"], nodeid=row.get("nodeid"),
                unit=d.get("unit"), better=d.get("better"), mode=row.get("mode") or "enforce",
                method=d.get("method") or "", n_baseline=int(d.get("n_baseline") or 0),
                declared_at=d.get("declared_at"), ci_conf=d.get("ci_conf"))
    for k in ("baseline", "new", "rel_change", "ci_low", "ci_high", "statistic", "p_value",
              "q_value", "floor"):
        setattr(v, k, row.get(k))
    v.message = f"held at confirm attempt {attempt}" + (
        f"; {d['message']}" if d.get("message") else "")
    return v


@lru_cache(maxsize=64)
def _params_for(params: stats.GateParams, level: float, min_change: float) -> stats.GateParams:
    return replace(params, level=level, min_change=min_change)


def _judge_one(history: History, run: Mapping[str, Any], key: str,
               rows: Sequence[Mapping[str, Any]], gate: Gate, params: stats.GateParams,
               exclude: set[str], v: Verdict, first: float | None = None,
               pre: Any = None, this_host: str | None = None,
               hosts: Mapping[str, str | None] | None = None, ids: Sequence[str] | None = None,
               suspect: bool = False, *, another: bool = False,
               earlier: Sequence[float | None] = (), corroborating: bool = False,
               standin_last: bool = False, root: float | None = None,
               ) -> tuple[stats.Judgement, list[Mapping[str, Any]] | None]:
    samples = _samples(rows)
    if not samples or not all(math.isfinite(x) for x in samples):
        raise ValueError("the run recorded no finite samples")
    if gate.better not in ("higher", "lower"):
        raise ValueError("no direction: record better= or declare it")
    base: list[Mapping[str, Any]] | None = None
    if pre is not None:
        hist: Any = pre
    else:
        base = baseline_runs(history, run["suite"], key, run.get("fingerprint"), run, exclude)
        hist = [r.get("samples") or [r["median"]] for r in base]
        ids = [r["run_id"] for r in base]
        standin_last = bool(base and base[-1].get("standin"))
        hosts = hosts_of(history, ids)
    p = _params_for(params, gate.level, gate.min_change)
    sign = 1 if gate.better == "lower" else -1
    summaries, value, extra = stats.summarize(hist, samples, p)
    run_hosts = None
    if hosts is not None and ids is not None and len(ids) >= summaries.size:
        run_hosts = [hosts.get(r) for r in ids[len(ids) - summaries.size:]]
    if first is None:
        j = stats.judge_summaries(summaries, value, sign=sign, params=p, n_trials=gate.n,
                                  extra_var=extra, min_change=gate.min_change,
                                  hosts=run_hosts, host=this_host, standin_last=standin_last)
        v.verdict = ""  # decided after BH
    elif corroborating:
        # The previous rerun lay beyond every baseline run (heavy-tailed, or 0 < rho_lo <=
        # QUANTILE_RHO): this one decides.
        j, v.verdict = stats.corroborate(summaries, value, sign=sign, params=p, n_trials=gate.n,
                                         min_change=gate.min_change, extra_var=extra,
                                         hosts=run_hosts, host=this_host,
                                         standin_last=standin_last, first=root,
                                         previous=first)
        if j.status == "ok":
            v.message = (f"previous rerun {_num(first):.6g} beyond every baseline run; this "
                         f"rerun ranks p {j.extras.rank_worse:.2g} among them: held at "
                         f"<= {p.corroborate_rank:g}" + _chain_note(j, root, 2))
    elif earlier:
        # Earlier reruns of a borderline metric: ``earlier`` (the previous one is ``first``).
        if any(x is None for x in earlier):
            raise ValueError("an earlier confirm rerun recorded no such metric")
        reruns = [*earlier, value]
        carried, roots = _unheld_reruns(history, run["suite"], key, ids or (),
                                        max(p.windows, default=1))
        j, v.verdict = stats.confirm_reruns(summaries, reruns, sign=sign, final=not another,
                                            params=p, n_trials=gate.n,
                                            min_change=gate.min_change, extra_var=extra,
                                            hosts=run_hosts, host=this_host, carried=carried,
                                            standin_last=standin_last, first=root)
        prev = ", ".join(f"{_num(x):.6g}" for x in earlier)
        n_all = len(reruns) + j.extras.carried
        if j.extras.carried:
            prev += (f"; {len(carried)} carried from the unheld confirms of "
                     + ", ".join(roots))
        level = j.extras.rerun_level  # set where these reruns decided outright
        v.message = (f"mean of {n_all} reruns (earlier: {prev}) against means of "
                     f"{n_all} baseline runs: "
                     + (f"held at p <= {level:g}" if level is not None else
                        f"held at p <= {p.rerun_mean_hold_level:g}, pass above "
                        f"{p.rerun_mean_stop_level:g}, else another rerun")
                     + _chain_note(j, root, len(reruns)))
    else:
        j, v.verdict = stats.confirm(summaries, value, sign=sign, first=first, params=p,
                                     n_trials=gate.n, min_change=gate.min_change,
                                     extra_var=extra, hosts=run_hosts, host=this_host,
                                     suspect=suspect, another=another,
                                     standin_last=standin_last)
        if v.verdict == "suspect" and j.extras.corroborate:
            v.corroborate = True
            kind = ("a heavy-tailed" if j.extras.heavy
                    else "a slightly autocorrelated")
            v.message = (f"rerun {_num(value):.6g} beyond every run of {kind} baseline: "
                         f"held only if the next rerun ranks among the worst "
                         f"{p.corroborate_rank:g} of them")
        elif v.verdict == "suspect":
            v.message = (f"rerun alone p {j.extras.p_run_worse:.2g}"
                         + (": beyond every baseline run, where that p rests on the fitted "
                            "tail; another rerun decides" if j.extras.beyond else
                            ": borderline, another rerun decides"))
        p_split = j.extras.p_split
        if p_split <= p.transient_level and v.verdict != "regression":
            v.transient = True
            v.message = (f"first attempt {_num(first):.6g} a transient against this rerun "
                         f"(p {p_split:.2g}): later baselines take this rerun's value")
    # A chain's borderline hold the first attempt's split test undid (stats.split_p).
    v.chain_transient = bool(j.extras.chain_transient)
    v.new = _num(j.value)
    v.baseline = _num(j.baseline)
    v.rel_change = _num(j.rel_change)
    if j.ci is not None:
        v.ci_low, v.ci_high = _num(j.ci[0]), _num(j.ci[1])
    v.statistic = _num(j.z) if j.status == "ok" else None
    v.p_value = _num(j.p_worse) if j.status == "ok" else None
    v.floor = _num(j.floor)
    v.method = (j.statistic if j.status == "ok" else j.status if j.reason
                else f"needs {params.min_history} runs")
    v.n_baseline = j.n_baseline
    if j.extras.new_host:
        v.message = _new_host_message(j)
    if j.reason:
        v.message = j.reason
    return j, base


def _new_host_message(j: stats.Judgement) -> str:
    """What a first run on a machine the baseline has not seen was allowed."""
    if not j.extras.host_var_known:
        return ("first run on this machine; the baseline has runs of one machine only, so "
                "machine-to-machine spread is unknown and not allowed for")
    tau = math.sqrt(j.extras.host_var)
    if tau <= 0:
        return "first run on this machine; the baseline's machines show no spread between them"
    if j.baseline:
        return f"first run on this machine: between-machine spread {100 * tau / abs(j.baseline):.2g}% allowed for"
    return f"first run on this machine: between-machine spread {tau:.3g} allowed for"


def _locate_safe(base: Sequence[Mapping[str, Any]] | None, run: Mapping[str, Any],
                 v: Verdict) -> dict[str, Any] | None:
    if not base or v.new is None:
        return None
    try:
        return _locate(base, v.new, run["run_id"], run.get("commit_sha"))
    except Exception:  # noqa: BLE001 - localisation is a report nicety, never a verdict
        return None


# ------------------------------------------------------------------ output


def _fmt(x: float | None, pct: bool = False) -> str:
    if x is None:
        return "-"
    return f"{100 * x:+.2f}%" if pct else f"{x:.4g}"


def verdict_table(result: GateResult) -> str:
    """The verdict table printed at the end of a suite session."""
    from tabulate import tabulate

    from gates.render_text import fmt_change

    rows = []
    order = {v: i for i, v in enumerate(("regression", "threshold-fail", "missing", "error",
                                         "suspect", "insufficient-history", "improvement",
                                         "pass"))}
    for v in sorted(result.verdicts, key=lambda v: (order.get(v.verdict, 9), v.key)):
        change = fmt_change(v)  # type: ignore[arg-type]  # a Verdict has VerdictRow's fields
        pq = "-" if v.p_value is None else f"{v.p_value:.2g}"
        if v.q_value is not None:
            pq += f" / {v.q_value:.2g}"
        where = ""
        if v.change_point:
            where = f"{v.change_point['runs_ago']} run(s) ago"
            if v.change_point.get("commit"):
                where += f" @{str(v.change_point['commit'])[:10]}"
        rows.append([v.key, v.verdict + ("" if v.mode == "enforce" else f" ({v.mode})"),
                     _fmt(v.baseline), _fmt(v.new), change, pq,
                     "-" if v.floor is None else f"{100 * v.floor:.2f}%",
                     v.method or "-", v.n_baseline, where or v.message])
    head = (f"gate: run {result.run_id} suite {result.suite} mode {result.mode}"
            + (f", confirm attempt {result.attempt} of run {result.confirm_of}"
               if result.confirm_of else ""))
    table = tabulate(rows, headers=["metric", "verdict", "baseline", "new", "change [interval] level",
                                    "p / q", "floor", "method", "runs", "where / why"],
                     tablefmt="simple") if rows else "(no gated metrics)"
    counts = ", ".join(f"{n} {k}" for k, n in sorted(result.counts().items()))
    return f"{head}\n{table}\n{counts or result.note}"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gates.gate",
                                 description="Judge a run's metrics against their history.")
    ap.add_argument("--history", required=True, help="history SQLite file")
    ap.add_argument("--run-id", required=True)
    ap.add_argument("--plan", help="plan JSON (its 'gates' list holds register_ci_gate calls)")
    ap.add_argument("--mode", default="enforce", choices=("enforce", "warn", "off"))
    ap.add_argument("--confirm-of", default=None, help="the run this run re-checks")
    ap.add_argument("--attempts-left", type=int, default=0,
                    help="confirm reruns the runner may still take after this run (0: none)")
    ap.add_argument("--tripped-out", default=None,
                    help="write the nodeids of tests behind enforced failures (JSON list)")
    ap.add_argument("--json", action="store_true", help="print verdicts as JSON, not a table")
    try:
        a = ap.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    from gates.history import HistoryError, open_history

    try:
        plan = None
        if a.plan:
            try:
                plan = json.loads(Path(a.plan).read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                raise GateInputError(f"--plan {a.plan}: cannot read the plan JSON ({e})") from None
            if not isinstance(plan, dict) or not isinstance(plan.get("gates", []), list):
                raise GateInputError(f"--plan {a.plan}: not a plan (an object with a 'gates' list)")
        if not is_database_url(a.history) and not Path(a.history).exists():
            raise GateInputError(f"--history {a.history}: no such file; run a suite first")
        with open_history(a.history, create=False) as h:
            if a.attempts_left < 0:
                raise GateInputError(f"--attempts-left {a.attempts_left}: must be >= 0")
            try:
                entries = (accept.read_accept_file(Path(plan["root"]))
                           if plan and plan.get("root") else [])
            except accept.AcceptFileError as e:
                raise GateInputError(str(e)) from None
            res = evaluate_run(h, a.run_id, plan=plan, mode=a.mode, confirm_of=a.confirm_of,
                               attempts_left=a.attempts_left, acceptances=entries)
    except (GateInputError, HistoryError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (TypeError, ValueError, ArithmeticError) as e:  # a row no writer of ours makes
        print(f"error: {a.history}: holds a row the gate cannot read ({type(e).__name__}: "
              f"{e}); `gate-report check --history {a.history}` names the runs", file=sys.stderr)
        return 2
    if a.tripped_out:
        Path(a.tripped_out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.tripped_out).write_text(json.dumps(res.tripped_nodeids), encoding="utf-8")
    if a.json:
        print(json.dumps([asdict(v) for v in res.verdicts], indent=1, default=str))
    else:
        print(verdict_table(res))
    for v in res.errors:
        print(f"error: {v.key}: {v.message}", file=sys.stderr)
    return res.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
