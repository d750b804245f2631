"""One metric's attempt in the confirm protocol, judged from what the gate read.

A confirm attempt (a rerun of tripped tests, ``confirm_of`` its previous attempt)
knows its chain: ``chain_of`` takes the earlier attempts' verdict rows and metric
rows (read with the gate's inputs, ``gates.store.gate_inputs``) and gives each
metric the stage it is judged at now (``decisions.next_stage`` of its previous
stage and verdict).
``judge_at_stage`` judges one metric at its stage (``decisions.Stage``) and writes
what decided into the verdict's message (worded by ``gates.report.stage_messages``).
The protocol itself: ``docs/gates/design.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gates.model import stats
from gates.model.decisions import TRANSIENT_LEVEL, Stage, next_stage, stage_of
from gates.model.verdicts import FAILING, Verdict
from gates.record.declarations import Gate
from gates.report.stage_messages import corroborate_message, rerun_message, reruns_message
from gates.store.gate_inputs import ChainRead, latest_rows, read_chain_rows
from gates.store.history import History

__all__ = ["Chain", "ChainError", "Inputs", "chain_of", "read_chain", "judge_at_stage",
           "samples_of", "summaries_of"]


class ChainError(ValueError):
    """A confirm chain the history cannot give (an unknown run, a loop)."""


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


@dataclass
class Chain:
    """What a confirm attempt knows of the attempts before it."""

    attempt: int  # this attempt's number (the first attempt is 1)
    runs: list[str]  # every earlier attempt, the first attempt last (left out of baselines)
    stages: dict[str, Stage] = field(default_factory=dict)  # key -> its stage now
    from_suspect: set[str] = field(default_factory=set)  # keys a suspect first attempt sent
    held: list[tuple[Mapping[str, Any], int]] = field(default_factory=list)  # failures
    # earlier reruns held, each with its attempt number (shown again, not saved again)
    previous: dict[str, float] = field(default_factory=dict)  # previous attempt's summaries
    reruns: list[dict[str, float]] = field(default_factory=list)  # earlier reruns', oldest first
    root: dict[str, float] = field(default_factory=dict)  # the first attempt's (later reruns)
    empty: bool = False  # the previous attempt saved no verdicts: judge every metric

    def stage(self, key: str) -> Stage:
        """``key``'s stage at this attempt (a chain without verdicts: by its length)."""
        return self.stages.get(key) or (Stage.RERUNS if self.reruns else Stage.RERUN)

    def order(self, keys: Sequence[str]) -> list[str]:
        """The keys this attempt judges: those sent on to it (every key, where the
        previous attempt saved no verdicts)."""
        if self.empty:
            return list(keys)
        return [k for k in keys if k in self.stages] + sorted(set(self.stages) - set(keys))


def _last_rows(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """A run's verdict rows of its last gated attempt."""
    last = max((r["attempt"] for r in rows), default=0)
    return [r for r in rows if r["attempt"] == last]


def read_chain(history: History, confirm_of: str) -> Chain:
    """The chain a confirm attempt of ``confirm_of`` belongs to, read from ``history``
    (the gate reads it with its other inputs: ``gates.store.gate_inputs``)."""
    read = read_chain_rows(history.baseline_reads, confirm_of)
    return chain_of(read, {r["run_id"]: tuple(history.metrics(r["run_id"]))
                           for r in read.runs}, confirm_of, str(history.path))


def chain_of(read: ChainRead | None, run_metrics: Mapping[str, Sequence[Mapping[str, Any]]],
             confirm_of: str, where: str) -> Chain:
    """The chain a confirm attempt of ``confirm_of`` belongs to, and each metric's stage,
    from its runs' verdict rows (``read``) and metric rows (``run_metrics``, by run id).

    The metrics judged are those whose previous verdict ``next_stage`` sends on;
    failures an earlier rerun held are final (``held``: shown again, not saved).
    """
    if read is None or read.broken:
        kind, rid = read.broken if read is not None and read.broken else ("missing", confirm_of)
        if kind == "missing":
            raise ChainError(f"--confirm-of {rid}: no such run in {where}")
        raise ChainError(f"run {confirm_of}: its confirm_of chain loops at {rid}; "
                         "check the runs' confirm_of column")
    runs = read.runs  # the previous attempt back to the first
    prev_rows = list(read.verdicts[confirm_of])
    last = _last_rows(prev_rows)
    # The attempt before the previous one: a row saved without a stage reads its stage
    # from it (``stage_of``).
    before = ({r["key"]: r for r in _last_rows(read.verdicts[runs[1]["run_id"]])}
              if len(runs) > 2 else {})
    attempt = max((r["attempt"] for r in prev_rows), default=0)
    chain = Chain(attempt=attempt + 1 if attempt else 2, runs=[r["run_id"] for r in runs],
                  empty=not prev_rows)
    for r in last:
        d = r.get("detail") or {}
        stage = next_stage(stage_of(r, before.get(r["key"])), r["verdict"],
                           enforced=r.get("mode") == "enforce",
                           corroborate=bool(d.get("corroborate")))
        if stage is not None:
            chain.stages[r["key"]] = stage
            if stage is Stage.RERUN and r["verdict"] == "suspect":
                chain.from_suspect.add(r["key"])
    earlier = [r["run_id"] for r in reversed(runs[:-1])]  # the reruns so far, oldest first
    for rid in earlier:
        chain.held += [(r, r["attempt"]) for r in _last_rows(read.verdicts[rid])
                       if r["verdict"] in FAILING and r.get("mode") == "enforce"]
    chain.previous = summaries_of(run_metrics[confirm_of])
    if earlier:
        chain.reruns = [chain.previous if rid == confirm_of else summaries_of(run_metrics[rid])
                        for rid in earlier]
        chain.root = summaries_of(run_metrics[runs[-1]["run_id"]])
    return chain


@dataclass
class Inputs:
    """One metric's run summaries and settings, as every stage's test reads them."""

    summaries: np.ndarray  # the baseline's run summaries, oldest first
    value: float  # this attempt's summary
    extra: float  # extra variance (fewer samples than usual)
    sign: int
    params: stats.GateParams
    gate: Gate
    hosts: list[str | None] | None
    host: str | None
    standin_last: bool

    def kw(self) -> dict[str, Any]:
        return dict(sign=self.sign, params=self.params, n_trials=self.gate.n,
                    min_change=self.gate.min_change, extra_var=self.extra, hosts=self.hosts,
                    host=self.host, standin_last=self.standin_last)


def _at_rerun(x: Inputs, v: Verdict, chain: Chain, key: str, another: bool) -> stats.Judgement:
    first = chain.previous.get(key)
    j, v.verdict = stats.confirm(x.summaries, x.value, first=first,
                                 suspect=key in chain.from_suspect, another=another, **x.kw())
    if v.verdict == "suspect" and j.extras.corroborate:
        v.corroborate = True
    transient = j.extras.p_split <= TRANSIENT_LEVEL and v.verdict != "regression"
    if transient:
        v.transient = True
    v.message = rerun_message(j, v.verdict, x.value, first, level=x.params.level,
                              another=another, transient=transient) or v.message
    return j


def _at_corroborate(x: Inputs, v: Verdict, chain: Chain, key: str) -> stats.Judgement:
    first, root = chain.previous.get(key), chain.root.get(key)
    j, v.verdict = stats.corroborate(x.summaries, x.value, first=root, previous=first, **x.kw())
    if j.status == "ok":
        v.message = corroborate_message(j, first, root)
    return j


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


def _at_reruns(x: Inputs, v: Verdict, chain: Chain, key: str, another: bool,
               unheld: Sequence[tuple[str, Sequence[str]]],
               run_metrics: Mapping[str, Sequence[Mapping[str, Any]]]) -> stats.Judgement:
    earlier = [e.get(key) for e in chain.reruns]
    if any(e is None for e in earlier):
        raise ValueError("an earlier confirm rerun recorded no such metric")
    reruns = [*earlier, x.value]
    root = chain.root.get(key)
    carried, roots = _unheld_reruns(unheld, run_metrics, key)
    j, v.verdict = stats.confirm_reruns(x.summaries, reruns, final=not another,
                                        carried=carried, first=root, **x.kw())
    v.message = reruns_message(j, earlier, len(carried), roots, root)
    return j


def judge_at_stage(stage: Stage, x: Inputs, v: Verdict, key: str, *, chain: Chain | None,
                   another: bool, unheld: Sequence[tuple[str, Sequence[str]]] = (),
                   run_metrics: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
                   ) -> stats.Judgement:
    """Judge one metric at ``stage``; the verdict of a rerun stage is set on ``v``
    (a first attempt's waits for the run's BH step)."""
    if stage is Stage.FIRST or chain is None:
        v.verdict = ""  # decided after BH
        return stats.judge_summaries(x.summaries, x.value, **x.kw())
    if stage is Stage.CORROBORATE:
        return _at_corroborate(x, v, chain, key)
    if stage is Stage.RERUNS:
        return _at_reruns(x, v, chain, key, another, unheld, run_metrics or {})
    return _at_rerun(x, v, chain, key, another)
