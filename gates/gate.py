"""Verdicts for a run from its history: the gate a suite session ends with.

Library first (``evaluate_run``), command line as a thin skin (``main``)::

    python -m gates.gate --history PATH --run-id ID [--plan PLAN.json]
        [--mode enforce|warn|off] [--confirm-of RUN_ID] [--tripped-out FILE]

Exit codes: 0 passed (or warn/off mode); 1 an enforced ``regression``,
``threshold-fail`` or ``missing``; 2 bad input (unknown run, unreadable plan
or history, an ``error`` verdict in enforce mode).

Confirm on trip (what ``ci_register.running.runner`` does): every verdict has a stage
(``decisions.Stage``: first, rerun, corroborate, reruns; saved in
``verdicts.stage``) and ``decisions.next_stage`` says whether another attempt
follows. ``evaluate_run(h, A)`` lists in ``result.tripped_nodeids`` (written to
``--tripped-out``) the tests of metrics with a next stage; the runner reruns
only those as run B with ``confirm_of = A`` while attempts are left (its
``--confirm``, passed on as ``--attempts-left``), and ``evaluate_run(h, B)``
judges each such metric at its stage (``gates.attempts``), with every earlier
attempt of the chain left out of the baseline. B's verdicts are saved under B
with ``attempt = 2``; failures an earlier rerun held are final (shown again,
not saved again). With ``--confirm 0`` a suspect stays a suspect and never
fails the session. The protocol: ``docs/gates/design.md``.

Baselines (``gates.store.baselines``): complete, trusted runs of the same suite, metric
key and hardware fingerprint before the judged run, read for every metric of a run
in one or two statements (``bulk_baselines``) and judged in memory; ``bulk=False``
reads them key by key (``baseline_runs``), the reference. Where a confirm found a
run's first attempt a transient, its rerun stands in for that run, and the run after
it is judged knowing so (``stats.judge_summaries(standin_last=True)``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ci_register.registered.paths import MAX_PLAN_BYTES, read_json
from gates.attempts import Chain, ChainError, chain_of, judge_at_stage
from gates.model import stats
from gates.model.decisions import OpenRegression, Stage, next_stage, still_red
from gates.model.judge import Decider
from gates.model.verdicts import FAILING, VERDICTS, Verdict, gate_exit, interval_contradicts
from gates.record import accept
from gates.record.declarations import DeclarationError, Gate, gate_for, parse_plan_gates
from gates.record.unit_check import UnitMismatch, conflicts
from gates.store.acceptances import Cut
from gates.store.backend import display_location, is_database_url
from gates.store.gate_inputs import (
    GateInputs,
    latest_rows,
    read_gate_inputs,
    samples_of,
    summaries_of,
)
from gates.store.history import History
from gates.store.provenance import host_key

__all__ = [
    "VERDICTS",
    "FAILING",
    "GateInputError",
    "Verdict",
    "GateResult",
    "evaluate_run",
    "judge",
    "verdict_table",
    "main",
]

class GateInputError(Exception):
    """Bad input to the gate (unknown run, unreadable plan): exit 2, one line."""


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
        out = {v.nodeid for v in self.verdicts if _goes_on(v) and v.nodeid}
        return sorted(out)

    @property
    def exit_code(self) -> int:
        """``verdicts.gate_exit`` of what this attempt judged and the failures earlier
        reruns held: the rule every report surface applies to the stored chain."""
        return gate_exit([{"verdict": v.verdict, "mode": v.mode} for v in self.verdicts])

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for v in self.verdicts:
            out[v.verdict] = out.get(v.verdict, 0) + 1
        return out


# ------------------------------------------------------------------ evaluation


def _goes_on(v: Verdict) -> bool:
    """A further attempt would judge this metric (``decisions.next_stage``)."""
    if not v.stage or v.open_of:  # a failure an earlier attempt held, shown again;
        return False  # a run still at an open regression's level
    return next_stage(Stage(v.stage), v.verdict, enforced=v.mode == "enforce",
                      corroborate=v.corroborate) is not None


def _num(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _threshold(gate: Gate, value: float) -> str | None:
    if gate.min_value is not None and value < gate.min_value:
        return f"{value:.6g} < min_value {gate.min_value:.6g}"
    if gate.max_value is not None and value > gate.max_value:
        return f"{value:.6g} > max_value {gate.max_value:.6g}"
    return None


def _locate(series: Sequence[tuple[str, str | None, float]], new_value: float, run_id: str,
            commit: str | None) -> dict[str, Any] | None:
    """Where a tripped metric changed: a Pettitt split over its newest baseline runs
    (``series``: (run id, commit, run summary), oldest first) and the new run."""
    vals = [x for _, _, x in series[-60:]] + [new_value]
    ids = [(rid, com) for rid, com, _ in series[-60:]] + [(run_id, commit)]
    cp = stats.pettitt(np.asarray(vals, dtype=float))
    if cp is None or cp.p > 0.05:
        # No significant split inside the history: the judged run itself is the change.
        return {"run_id": run_id, "commit": commit, "p": None if cp is None else round(cp.p, 6),
                "before": None, "after": new_value, "runs_ago": 0}
    rid, com = ids[cp.index]
    return {"run_id": rid, "commit": com, "p": round(cp.p, 6), "before": cp.before,
            "after": cp.after, "runs_ago": len(vals) - 1 - cp.index}


@dataclass
class _Run:
    """What every metric of the judged run shares: its inputs, chain and settings."""

    inputs: GateInputs
    run: Mapping[str, Any]
    params: stats.GateParams
    mode: str
    cuts: Mapping[str, Cut]
    chain: Chain | None = None
    attempts_left: int = 0
    this_host: str | None = None
    mixed: dict[str, Any] = field(default_factory=dict)  # keys whose units disagree


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

    Read, judge, save: one read of everything the judgement needs
    (``gates.store.gate_inputs.read_gate_inputs``), `judge` over it (reads nothing),
    one write of its verdicts (``RunWrites.save_verdicts``; not with ``save=False``).

    ``plan``: the runner's plan JSON (its ``gates`` list); without it, the
    gates stored with the run (``PlanningReads.plan_gates``) are used.
    ``confirm_of``: the run this one re-checks (confirm on trip); only the
    metrics its previous attempt sent on (``decisions.next_stage``) are judged,
    each at its stage, with every earlier attempt of the chain left out of the
    baseline; failures earlier reruns held are shown again (not saved again).
    ``attempts_left``: confirm reruns the runner may still take after this
    run: a first attempt with 2 or more left uses the sequential confirm's
    level (``stats.level_for``); a rerun with 1 or more left may ask for
    another (verdict ``suspect``).
    ``acceptances``: the repo file's entries this run's checkout carries
    (``gates.record.accept.read_accept_file``), logged with the run; a key under an
    acceptance is judged only against runs inside it (``gates.record.accept``).
    ``bulk``: read every baseline in one or two statements (``bulk_baselines``);
    ``False`` issues one ``History.metric_series`` query per metric (the
    reference path; same verdicts, about 3 ms per metric slower).
    """
    if mode not in ("enforce", "warn", "off"):
        raise GateInputError(f"--mode {mode!r}; use enforce, warn or off")
    inputs = read_gate_inputs(history, run_id, confirm_of=confirm_of,
                              with_plan=plan is not None, judge=mode != "off",
                              acceptances=acceptances, carry=save, bulk=bulk, params=params)
    result, rows = judge(inputs, plan=plan, mode=mode, params=params,
                         attempts_left=attempts_left)
    if save and rows is not None:
        history.run_writes.save_verdicts(run_id, rows)
    return result


def judge(inputs: GateInputs, *, plan: Mapping[str, Any] | None = None,
          mode: str = "enforce", params: stats.GateParams = stats.DEFAULTS,
          attempts_left: int = 0) -> tuple[GateResult, list[dict[str, Any]] | None]:
    """The run's verdicts from its inputs, and the verdict rows to save (None: nothing
    judged, gates off). Reads nothing: everything it needs is in ``inputs``."""
    run = _complete_run(inputs)
    confirm_of = inputs.confirm_of
    result = GateResult(run["run_id"], run["suite"], mode, confirm_of=confirm_of)
    if mode == "off":
        result.note = "gates off"
        return result, None
    declared = _declared(inputs, plan)
    recorded = latest_rows(inputs.metrics)
    ctx = _Run(inputs, run, params, mode, inputs.cuts, attempts_left=attempts_left,
               this_host=host_key(run.get("hardware")))
    keys = sorted(set(recorded) | {k for k, g in declared.items() if g.mode != "off"})
    held: list[Verdict] = []
    if confirm_of:
        try:
            ctx.chain = chain_of(inputs.chain, inputs.run_metrics, confirm_of, inputs.where)
        except ChainError as e:
            raise GateInputError(str(e)) from None
        result.attempt = ctx.chain.attempt
        held = [_carried(r, a) for r, a in ctx.chain.held]
        keys = ctx.chain.order(keys)
    if inputs.unreadable is not None:
        raise GateInputError(f"{inputs.where}: cannot read baselines ({inputs.unreadable}); "
                             "check the file with `History.check`")
    units = {k: {r["unit"] for r in recorded[k]} for k in keys if recorded.get(k)}
    ctx.mixed = conflicts(units, inputs.units_seen, inputs.unit_counts)
    judged = _judge_keys(ctx, keys, recorded, declared)
    _decide(ctx, judged)
    _stay_red(judged, _open_regressions(inputs, judged))
    _negative_controls(judged)
    result.verdicts = [v for v, _, _ in judged]
    if not result.verdicts and not held:
        result.note = "no gated metrics in this run"
    rows = [v.row(result.attempt, confirm_of) for v in result.verdicts]
    result.verdicts += held
    return result, rows


def _open_regressions(inputs: GateInputs, judged: Sequence[Judged]
                      ) -> dict[str, OpenRegression]:
    """Each judged key whose newest judged run before this one failed with a regression
    no acceptance answered (``inputs.failed``): no baseline run of the key started after
    that failure's first attempt (a run that passed since, one judged before the failure
    was stored, or a run an acceptance brought back, closed it)."""
    run = inputs.run or {}
    started = run.get("started_at") or ""
    chain = {r["run_id"] for r in inputs.chain.runs} if inputs.chain else set()
    out: dict[str, OpenRegression] = {}
    for v, _, _ in judged:
        live = [c for c in inputs.failed.get(v.key, ()) if c.verdict == "regression"
                and c.root not in chain and c.root != inputs.run_id
                and not (started and c.started_at > started)]
        if not live or v.better not in ("lower", "higher"):
            continue
        c = max(live, key=lambda c: (c.started_at, c.root))
        if inputs.newest_start.get(v.key, "") > c.started_at:
            continue  # a run after it passed: the regression closed
        # A still-red run kept an earlier regression: that one's levels stand.
        by_root = {x.root: x for x in inputs.failed.get(v.key, ())}
        for _ in range(len(by_root)):
            if c.open_of not in by_root:
                break
            c = by_root[c.open_of]
        if not c.values or c.baseline is None:
            continue
        # The level the chain held at: its attempts' mean (its least bad attempt can lie
        # on the good side of the centre where the reruns' mean held)
        out[v.key] = OpenRegression(c.root, float(c.baseline), float(np.mean(c.values)))
    return out


def _stay_red(judged: Sequence[Judged], opens: Mapping[str, OpenRegression]) -> None:
    """A red stays red: a metric whose newest judged run failed (and nobody accepted it)
    fails again until the change is accepted (``decisions.still_red``), final without a
    confirm rerun: the held chain is the evidence of the change."""
    for v, _, _ in judged:
        o = opens.get(v.key)
        if (o is None or v.new is None or v.verdict in ("missing", "error", "threshold-fail")
                or not still_red(o, v.new, 1 if v.better == "lower" else -1)):
            continue
        v.verdict, v.open_of = "regression", o.root
        # What decided is the level this run is at, not a test of this run: no p or
        # interval of one (the held chain's are on its rows).
        v.method, v.p_value, v.q_value, v.statistic = "still-red", None, None, None
        v.ci_low = v.ci_high = v.ci_conf = v.level = None
        # Its change is the run's own against the baseline it shows (a test's change,
        # a window's or a least bad run's, did not decide it).
        v.rel_change = (None if v.baseline is None or not v.baseline
                        else (v.new - v.baseline) / abs(v.baseline))
        # The change began at the open regression's first attempt, not at this run.
        v.change_point = {"run_id": o.root, "commit": None, "p": None, "before": o.centre,
                          "after": None, "runs_ago": None}
        v.message = (f"the regression held at run {o.root} ({o.held:.6g} against "
                     f"{o.centre:.6g} before) is open: red until accepted "
                     "(gate-report accept)")


def _complete_run(inputs: GateInputs) -> Mapping[str, Any]:
    run = inputs.run
    if run is None:
        raise GateInputError(f"no run {inputs.run_id!r} in {inputs.where}; check --run-id")
    if run.get("status") != "complete":
        raise GateInputError(f"run {run['run_id']} is {run.get('status')!r}, not complete; "
                             "only a recorded run can be gated")
    return run


def _declared(inputs: GateInputs, plan: Mapping[str, Any] | None) -> dict[str, Gate]:
    """The run's declared gates, from its plan or, without one, the stored ones."""
    try:
        decls = (plan.get("gates") if plan is not None
                 else [{"path": g.get("path"), "line": g.get("line"),
                        "metric_key": g.get("metric_key"), "options": g.get("options")}
                       for g in inputs.plan_gates or ()])
        return parse_plan_gates(decls)
    except DeclarationError as e:
        raise GateInputError(str(e)) from None


Judged = tuple[Verdict, stats.Judgement | None, Gate]


@dataclass
class _First:
    """A first attempt's inputs, summarized and judged with the run's others
    (``_judge_keys``)."""

    v: Verdict
    gate: Gate
    raw: _Raw
    unit_error: Exception | None  # its unit check's (reported after the judgement)


def _judge_keys(ctx: _Run, keys: Sequence[str], recorded: Mapping[str, list],
                declared: Mapping[str, Gate]) -> list[Judged]:
    """Every metric's judgement at its stage, in ``keys`` order. First attempts are
    judged together (``stats.judge_many``); their verdicts wait for ``_decide``."""
    out: list[Judged] = []
    first: list[tuple[int, _First]] = []
    for key in keys:
        t = _judge_key(ctx, key, recorded.get(key), declared)
        if isinstance(t, _First):
            first.append((len(out), t))
            out.append((t.v, None, t.gate))
        elif t is not None:
            out.append(t)
    xs = _batch(lambda raws: _inputs(ctx, raws), [f.raw for _, f in first])
    ok = [x for x in xs if not isinstance(x, Exception)]
    js = iter(_batch(stats.judge_many, ok))
    for (i, f), x in zip(first, xs, strict=True):
        j = x if isinstance(x, Exception) else next(js)
        v, e = f.v, j if isinstance(j, Exception) else f.unit_error
        if not isinstance(j, Exception):
            v.verdict = ""  # decided after BH
            _fill(ctx, v, j)
        if e is not None:
            v.verdict, v.message, j = "error", f"{type(e).__name__}: {e}", None
        out[i] = (v, j, f.gate)
    return out


def _batch(f: Any, items: list) -> list:
    """``f`` of all ``items`` at once; where that raises, of each alone, an item's
    exception in its place (one bad metric must not hide the others)."""
    try:
        return f(items)
    except Exception:  # noqa: BLE001
        out: list = []
        for x in items:
            try:
                out.append(f([x])[0])
            except Exception as e:  # noqa: BLE001 - reported as this metric's error verdict
                out.append(e)
        return out


def _judge_key(ctx: _Run, key: str, rows: list[Mapping[str, Any]] | None,
               declared: Mapping[str, Gate],
               ) -> Judged | _First | None:
    """One metric's verdict at its stage; a first attempt's inputs, to be judged with the
    run's others (and its unit check's error, if any)."""
    try:
        gate = gate_for(key, rows[0] if rows else None, declared.get(key), ctx.mode)
    except DeclarationError as e:
        raise GateInputError(str(e)) from None
    if gate.mode == "off":
        return None
    stage = ctx.chain.stage(key) if ctx.chain else Stage.FIRST
    v = Verdict(key=key, verdict="pass", mode=gate.mode, unit=gate.unit, better=gate.better,
                declared_at=gate.declared_at, stage=stage.value)
    if not rows:
        v.verdict = "missing"
        # Rerun the declaring file: its tests should have recorded the metric.
        where = declared[key].declared_at if key in declared else None
        v.nodeid = where.rsplit(":", 1)[0] if where else None
        v.message = "declared gate, but the run recorded no such metric"
        return v, None, gate
    v.nodeid = rows[0]["nodeid"]
    try:
        raw = _read_inputs(ctx, key, rows, gate)
        if stage is Stage.FIRST or ctx.chain is None:
            try:
                _check_units(ctx, key)
            except Exception as e:  # noqa: BLE001 - after the judgement, as for a rerun
                return _First(v, gate, raw, e)
            return _First(v, gate, raw, None)
        x = _inputs(ctx, [raw])[0]
        carried = (_unheld_reruns(ctx.inputs.unheld.get(key, ()), ctx.inputs.run_metrics, key)
                   if stage is Stage.RERUNS else ((), ()))
        j = judge_at_stage(stage, x, v, key, chain=ctx.chain, another=ctx.attempts_left >= 1,
                           carried=carried)
        _fill(ctx, v, j)
        _check_units(ctx, key)
    except Exception as e:  # noqa: BLE001 - one bad metric must not hide the others
        v.verdict, v.message, j = "error", f"{type(e).__name__}: {e}", None
    return v, j, gate


def _unheld_reruns(unheld: Sequence[tuple[str, Sequence[str]]],
                   run_metrics: Mapping[str, Sequence[Mapping[str, Any]]],
                   key: str) -> tuple[list[float], list[str]]:
    """``key``'s values in the unheld sequential confirms of its newest baseline runs
    (``baselines.unheld_chains``, read with the gate's inputs), oldest first, and
    those runs' ids."""
    vals: list[float] = []
    roots: list[str] = []
    for first, runs in unheld:
        got = [summaries_of(run_metrics[rid]).get(key) for rid in runs]
        if all(x is not None for x in got):
            vals += [float(x) for x in got]
            roots.append(first)
    return vals, roots


def _check_units(ctx: _Run, key: str) -> None:
    """A key whose unit differs from its baseline's cannot be judged (``UnitMismatch``)."""
    if key in ctx.mixed:
        raise UnitMismatch(ctx.mixed[key])


def _decide(ctx: _Run, judged: list[tuple[Verdict, stats.Judgement | None, Gate]]) -> None:
    """Verdicts after Benjamini-Hochberg across the run's judged metrics (first attempts;
    a confirm attempt re-tests hypotheses already selected), thresholds last."""
    ok = [(v, j) for v, j, _ in judged if j is not None and j.status == "ok"]
    q_better: dict[str, float] = {}
    if ok:
        q = (stats.bh_qvalues([j.p_worse for _, j in ok]) if ctx.chain is None
             else np.array([j.p_worse for _, j in ok]))
        # Improvements are never rerun: one run alone is no evidence of one (a regression
        # needs its rerun); the windows' and quantile test's p (``decisions.decide``).
        qb = stats.bh_qvalues([j.extras.p_better_sustained for _, j in ok])
        for (v, _), qi, qbi in zip(ok, q, qb, strict=True):
            v.q_value = float(qi)
            q_better[v.key] = float(qbi)
    for v, j, gate in judged:
        if v.verdict in ("missing", "error"):
            continue
        if j is not None and j.status == "ok":
            level = (_decide_first(ctx, v, j, gate, q_better.get(v.key)) if ctx.chain is None
                     else None)
            _show_interval(v, j, _decided_level(j, v, gate, ctx.params, level,
                                                q_better.get(v.key)))
            if ctx.chain is not None:
                _confirm_statement(v, j)
            elif v.verdict in ("regression", "improvement"):
                v.level = (level if v.verdict == "regression"
                           else gate.level * ctx.params.confirm_level)
            if interval_contradicts(v.verdict, v.better, v.ci_low, v.ci_high):
                _not_the_decider(v, j)
            if v.verdict in ("regression", "improvement"):
                v.change_point = _locate_safe(ctx.inputs.located.get(v.key), ctx.run, v)
        elif j is not None:
            v.verdict = j.status  # insufficient-history
            if v.key in ctx.cuts:
                v.message = ctx.cuts[v.key].message(j.n_baseline, ctx.params.min_history)
        why = _threshold(gate, v.new) if v.new is not None else None
        if why:
            v.verdict = "threshold-fail"
            v.message = why
            # The declared bound decided: no test's p, change or interval stands for it.
            v.method, v.p_value, v.q_value, v.statistic, v.level = "bound", None, None, None, None
            v.ci_low = v.ci_high = v.ci_conf = None
            v.rel_change = (None if v.baseline is None or not v.baseline
                            else (v.new - v.baseline) / abs(v.baseline))


# What flags a negative control: the gate failed it on its bound or on its history.
_FLAGGED = ("threshold-fail", "regression")


def _negative_controls(judged: list[tuple[Verdict, stats.Judgement | None, Gate]]) -> None:
    """Turn the verdicts of ``expect="fail"`` gates around. Flagged as it must be: shown as
    a warning, never failing, never rerun. Anything else (passed, no history to judge it
    by, an improvement): the gate let a deliberately broken input through, so the session
    fails (``threshold-fail`` at the gate's own mode, its message saying why). A control
    that was not recorded stays ``missing`` and an unreadable one ``error``: both fail."""
    for v, _, gate in judged:
        if gate.expect != "fail" or v.verdict in ("missing", "error"):
            continue
        if v.verdict in _FLAGGED:
            v.mode = "warn" if v.mode == "enforce" else v.mode
            v.message = f"negative control flagged, as it must be: {v.message}"
        else:
            v.message = (f"negative control NOT flagged: the gate read it {v.verdict!r} "
                         f"({v.message or 'no bound crossed'}); a deliberately broken input "
                         "must fail this gate (register_ci_gate(expect='fail'))")
            v.verdict = "threshold-fail"


def _decide_first(ctx: _Run, v: Verdict, j: stats.Judgement, gate: Gate,
                  q_better: float | None) -> float:
    """A first attempt's verdict. With two or more confirm reruns left (enforced gates
    only: warn mode reruns nothing), the sequential confirm's level. Improvements are
    never rerun, so one attempt carries what a regression's trip and confirm carry
    together: level x confirm_level. Returns the level the verdict was held to."""
    params = ctx.params
    q = v.q_value if v.q_value is not None else j.p_worse
    level = (stats.level_for(j, gate.level, params)
             if ctx.attempts_left >= 2 and gate.mode == "enforce" else gate.level)
    v.verdict = stats.decide(j, q, level=level, q_better=q_better,
                             better_level=gate.level * params.confirm_level)
    if (v.verdict == "pass" and gate.mode == "enforce"
            and stats.is_suspect(j, q, params=params, level=level)):
        # Short of the level, but the new run alone passed the screen: the confirm
        # rerun decides; never a failure by itself.
        v.verdict = "suspect"
        v.message = (f"{v.message}; " if v.message else "") + (
                     f"new run alone p {j.extras.p_run_worse:.2g}: screened at "
                     f"{params.screen_level:g}, a confirm rerun decides")
    if v.verdict == "improvement":  # its own p, not the bad direction's
        v.p_value, v.q_value = _num(j.extras.p_better_sustained), q_better
    return level


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
    p, q = (j.p_worse, v.q_value) if worse else (j.extras.p_better_sustained, q_better)
    return side * (p / q) if q and p <= q else side


def _show_interval(v: Verdict, j: stats.Judgement, level: float,
                   decider: Decider | None = None) -> None:
    """The deciding test's interval at the level that decided (``Decider``: ``decider``,
    else the judgement's headline's). A one-sided one (a quantile test's) keeps its
    infinite end as None."""
    d = decider or j.decider
    if d is None:
        return
    ci = d.interval(level)
    v.ci_low, v.ci_high = (_num(ci[0]), _num(ci[1])) if ci is not None else (None, None)
    v.ci_conf = d.confidence(level)


def _confirm_statement(v: Verdict, j: stats.Judgement) -> None:
    """A confirm stage's regression states the test that held it (``JudgeExtras.decided``):
    its name (after the stage), its p and the level it was held to, its change, and its
    interval where the headline's is that test's; no BH q (a confirm re-tests one
    hypothesis already selected), and no statistic of another test."""
    d = j.extras.decided
    if v.verdict != "regression" or d is None:
        return
    if d.test != j.statistic.rpartition("/")[2]:
        v.statistic = None
    v.method = f"{v.stage}/{d.test}"
    v.p_value, v.q_value, v.level = _num(d.p), None, d.level
    v.rel_change = _num(d.change)
    if d.interval_level is None:
        v.ci_low = v.ci_high = v.ci_conf = None
    else:
        _show_interval(v, j, d.interval_level, d.decider)


def _not_the_decider(v: Verdict, j: stats.Judgement) -> None:
    """A verdict a rank or quantile rule (or a rule over the chain's reruns) decided,
    whose t-interval spans 0 at the level that decided: that interval is not the
    deciding test's statement, so none is shown; the message says what decided."""
    quantile = "quantile" in (v.method or "")
    rule = ("the quantile test" if quantile else
            "the confirm rule over the reruns" if v.stage not in ("", Stage.FIRST.value)
            else "the rank bound")
    v.ci_low = v.ci_high = v.ci_conf = None
    # (its p is the row's own: the message names no other)
    v.message = (f"{v.message}; " if v.message else "") + (
        f"decided by {rule}; the t-interval of the change spans 0 at that level, "
        "so none is shown")


def _carried(row: Mapping[str, Any], attempt: int) -> Verdict:
    """A failure an earlier confirm attempt held: final, shown again at the next one."""
    d = row.get("detail") or {}
    v = Verdict(key=row["key"], verdict=row["verdict"], nodeid=row.get("nodeid"),
                unit=d.get("unit"), better=d.get("better"), mode=row.get("mode") or "enforce",
                method=d.get("method") or "", n_baseline=int(d.get("n_baseline") or 0),
                declared_at=d.get("declared_at"), stage=row.get("stage") or "",
                ci_conf=row.get("ci_conf") if row.get("ci_conf") is not None else d.get("ci_conf"),
                level=d.get("level"))
    for k in ("baseline", "new", "rel_change", "ci_low", "ci_high", "statistic", "p_value",
              "q_value", "floor"):
        setattr(v, k, row.get(k))
    v.message = f"held at confirm attempt {attempt}" + (
        f"; {d['message']}" if d.get("message") else "")
    return v


@lru_cache(maxsize=64)
def _params_for(params: stats.GateParams, level: float, min_change: float) -> stats.GateParams:
    return replace(params, level=level, min_change=min_change)


class _Raw(NamedTuple):
    """A metric's baseline (bulk, or read key by key) and samples, not yet summarized."""

    hist: Any
    samples: list[float]
    ids: list[str] | None
    hosts: Mapping[str, str | None]
    standin_last: bool
    params: stats.GateParams
    gate: Gate


def _read_inputs(ctx: _Run, key: str, rows: Sequence[Mapping[str, Any]], gate: Gate) -> _Raw:
    """The key's baseline, as read, and this run's samples."""
    samples = samples_of(rows)
    if not samples or not all(math.isfinite(x) for x in samples):
        raise ValueError("the run recorded no finite samples")
    if gate.better not in ("higher", "lower"):
        raise ValueError("no direction: record better= or declare it")
    x = ctx.inputs
    if key in x.errors:
        raise x.errors[key]  # the reference path's read of this key failed
    ids = x.base_ids.get(key)
    return _Raw(x.baselines.get(key, []), samples, None if ids is None else list(ids), x.hosts,
                key in x.standins, _params_for(ctx.params, gate.level, gate.min_change), gate)


def _inputs(ctx: _Run, raws: list[_Raw]) -> list[stats.Case]:
    """The metrics' cases to judge: their baseline summaries and this run's, summarized
    together."""
    out = []
    seen: dict[tuple, list[str | None]] = {}  # metrics of the same baseline runs share them
    for r, (summaries, value, extra) in zip(
            raws, stats.summarize_many([(r.hist, r.samples) for r in raws], ctx.params),
            strict=True):
        run_hosts = None
        if r.ids is not None and len(r.ids) >= summaries.size:
            ids = (id(r.hosts), *r.ids[len(r.ids) - summaries.size:])
            run_hosts = seen.get(ids)
            if run_hosts is None:
                run_hosts = seen[ids] = [r.hosts.get(i) for i in ids[1:]]
        out.append(stats.Case(summaries, value, 1 if r.gate.better == "lower" else -1,
                              r.params, r.gate.n, extra, r.gate.min_change, run_hosts,
                              ctx.this_host, standin_last=r.standin_last))
    return out


def _fill(ctx: _Run, v: Verdict, j: stats.Judgement) -> None:
    """The verdict's figures from its judgement."""
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
                else f"needs {ctx.params.min_history} runs")
    v.n_baseline = j.n_baseline
    if j.extras.new_host:
        v.message = _new_host_message(j)
    if j.reason:
        v.message = j.reason


def _new_host_message(j: stats.Judgement) -> str:
    """What a first run on a machine the baseline has not seen was allowed."""
    if j.extras.machine_bound:
        return (f"first run on this machine, whose spread the baseline (one machine) cannot "
                f"tell: judged on its change beyond {100 * j.extras.machine_bound:g}%, the "
                "largest spread between machines seen")
    if not j.extras.host_var_known:
        return ("first run on this machine; the baseline has runs of one machine only, so "
                "machine-to-machine spread is unknown and not allowed for")
    tau = math.sqrt(j.extras.host_var)
    if tau <= 0:
        return "first run on this machine; the baseline's machines show no spread between them"
    if j.baseline:
        return f"first run on this machine: between-machine spread {100 * tau / abs(j.baseline):.2g}% allowed for"
    return f"first run on this machine: between-machine spread {tau:.3g} allowed for"


def _locate_safe(base: Sequence[tuple[str, str | None, float]] | None,
                 run: Mapping[str, Any],
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

    from gates.report.render_text import change_parts, fmt_pq

    rows = []
    order = {v: i for i, v in enumerate(("regression", "threshold-fail", "missing", "error",
                                         "suspect", "insufficient-history", "improvement",
                                         "pass"))}
    for v in sorted(result.verdicts, key=lambda v: (order.get(v.verdict, 9), v.key)):
        # The report's statement of the row (a Verdict has VerdictRow's fields)
        change, statement = change_parts(v)  # type: ignore[arg-type]
        pq = fmt_pq(v)  # type: ignore[arg-type]
        where = ""
        if v.change_point:
            where = f"{v.change_point['runs_ago']} run(s) ago"
            if v.change_point.get("commit"):
                where += f" @{str(v.change_point['commit'])[:10]}"
        rows.append([v.key, v.verdict + ("" if v.mode == "enforce" else f" ({v.mode})"),
                     _fmt(v.baseline), _fmt(v.new), change, statement or v.method or "-", pq,
                     "-" if v.floor is None else f"{100 * v.floor:.2f}%",
                     v.n_baseline, where or v.message])
    head = (f"gate: run {result.run_id} suite {result.suite} mode {result.mode}"
            + (f", confirm attempt {result.attempt} of run {result.confirm_of}"
               if result.confirm_of else ""))
    table = tabulate(rows, headers=["metric", "verdict", "baseline", "new", "change",
                                    "decided by: change [interval] level", "p / q <= level",
                                    "floor", "runs", "where / why"],
                     tablefmt="simple") if rows else "(no gated metrics)"
    counts = ", ".join(f"{n} {k}" for k, n in sorted(result.counts().items()))
    return f"{head}\n{table}\n{counts or result.note}"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gates.gate",
                                 description="Judge a run's metrics against their history.")
    # A database URL comes in GATES_HISTORY, never on a command line (ci_register.planning.history_value.history_argv).
    ap.add_argument("--history", default=os.environ.get("GATES_HISTORY") or None,
                    required=not os.environ.get("GATES_HISTORY"), metavar="PATH",
                    help="history file or database URL (default $GATES_HISTORY)")
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
    from gates.store.history import HistoryError
    from gates.store.open import open_history

    try:
        plan = None
        if a.plan:
            try:
                # A regular file, bounded: /dev/zero read until memory ran out, a FIFO hung.
                plan = read_json(a.plan, MAX_PLAN_BYTES)
            except (OSError, ValueError) as e:
                raise GateInputError(f"--plan {a.plan}: cannot read the plan JSON ({e}); pass the "
                                     "plan.json `python -m ci_register run` wrote") from None
            if not isinstance(plan, dict) or not isinstance(plan.get("gates", []), list):
                raise GateInputError(f"--plan {a.plan}: not a plan (an object with a 'gates' list)")
            if not isinstance(plan.get("root") or "", str):
                raise GateInputError(f"--plan {a.plan}: its 'root' is not a path string; pass "
                                     "the plan.json `python -m ci_register run` wrote")
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
            model = _new_model_line(h, a.run_id) if a.confirm_of is None else ""
    except (GateInputError, HistoryError) as e:
        print(f"error: {e}", file=sys.stderr)
        _mark_gate_error(a.history, a.run_id, str(e))
        return 2
    # A row no writer of ours makes (RecursionError: JSON nested past the decoder's depth).
    except (TypeError, ValueError, ArithmeticError, RecursionError) as e:
        where = display_location(a.history)  # a database URL's password stays out of logs
        line = (f"{where}: holds a row the gate cannot read ({type(e).__name__}: {e}); "
                f"`gate-report check --history {where}` names the runs")
        print(f"error: {line}", file=sys.stderr)
        _mark_gate_error(a.history, a.run_id, line)
        return 2
    if a.tripped_out:
        Path(a.tripped_out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.tripped_out).write_text(json.dumps(res.tripped_nodeids), encoding="utf-8")
    if a.json:
        print(json.dumps([asdict(v) for v in res.verdicts], indent=1, default=str))
    else:
        print(verdict_table(res))
    if model:  # the report's headline says it too (gates.report.build.new_model)
        print(f"note: {model}")
    for v in res.errors:
        print(f"error: {v.key}: {v.message}", file=sys.stderr)
    return res.exit_code


def _new_model_line(h: History, run_id: str) -> str:
    """What the console says of a run on a machine model new to its suite, as every
    report's headline does: its fingerprint, its runs so far, the runs set aside."""
    from gates.report.build import new_model

    run = h.report_reads.run(run_id)
    if not run or not run.get("suite"):
        return ""
    return new_model(run, h.report_reads.model_runs(str(run["suite"]),
                                                    str(run.get("started_at") or "")))


def _mark_gate_error(history: str, run_id: str, why: str) -> None:
    """A run this gate refused to judge (exit 2) is marked ``gate-error`` with ``why``, so
    every report reads it as failed, as its session is, never as "no gate failed" for
    want of verdicts. Where the history cannot be opened or written, nothing is marked
    here: the runner tries again (`gates.record.finish`) and says so."""
    from gates.store.history import GATE_ERROR
    from gates.store.open import open_history

    if not is_database_url(history) and not Path(history).exists():
        return
    try:
        with open_history(history, create=False) as h:
            marked = h.run_writes.mark_not_judged(run_id, GATE_ERROR, f"the gate refused its input: {why}",
                                       if_no_verdicts=True)
    except Exception:  # noqa: BLE001 - on an error path: the exit 2 and its line stand,
        return  # never a traceback; the runner marks the run or says it could not
    if marked:
        print(f"error: run {run_id} is marked {GATE_ERROR}: it was not judged, and every "
              "report reads it as failed", file=sys.stderr)


if __name__ == "__main__":
    # The verdict table holds text a pull request wrote (an acceptance's reason, a test's
    # name): secrets masked, invisibles shown, no line a workflow command.
    from ci_register.running.redact import guarded_output

    with guarded_output():
        code = main()
    raise SystemExit(code)
