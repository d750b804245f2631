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

from gates.model import stats
from gates.model.decisions import TRANSIENT_LEVEL, Stage, next_stage, stage_of
from gates.model.verdicts import FAILING, Verdict
from gates.report.stage_messages import (
    corroborate_message,
    quantile_message,
    rerun_message,
    reruns_message,
)
from gates.store.gate_inputs import ChainRead, read_chain_rows, summaries_of
from gates.store.history import History

__all__ = ["Chain", "ChainError", "chain_of", "read_chain", "judge_at_stage"]


class ChainError(ValueError):
    """A confirm chain the history cannot give (an unknown run, a loop)."""


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


def read_chain(history: History, confirm_of: str) -> Chain:
    """The chain a confirm attempt of ``confirm_of`` belongs to, read from ``history``
    (the gate reads it with its other inputs: ``gates.store.gate_inputs``)."""
    read = read_chain_rows(history.baseline_reads, confirm_of)
    return chain_of(read, {r["run_id"]: tuple(history.baseline_reads.metrics(r["run_id"]))
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
    last = read.last_rows(confirm_of)
    # The attempt before the previous one: a row saved without a stage reads its stage
    # from it (``stage_of``).
    before = ({r["key"]: r for r in read.last_rows(runs[1]["run_id"])}
              if len(runs) > 2 else {})
    attempt = last[0]["attempt"] if last else 0  # the previous attempt's number
    chain = Chain(attempt=attempt + 1 if attempt else 2, runs=[r["run_id"] for r in runs],
                  empty=not last)
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
        chain.held += [(r, r["attempt"]) for r in read.last_rows(rid)
                       if r["verdict"] in FAILING and r.get("mode") == "enforce"]
    chain.previous = summaries_of(run_metrics[confirm_of])
    if earlier:
        chain.reruns = [chain.previous if rid == confirm_of else summaries_of(run_metrics[rid])
                        for rid in earlier]
        chain.root = summaries_of(run_metrics[runs[-1]["run_id"]])
    return chain


def _settings(x: stats.Case) -> dict[str, Any]:
    """A case's settings as every stage's test takes them (all but its runs and value)."""
    return {k: v for k, v in x._asdict().items() if k not in ("history", "value", "mean_of")}


def _at_rerun(x: stats.Case, v: Verdict, chain: Chain, key: str, another: bool) -> stats.Judgement:
    first = chain.previous.get(key)
    j, v.verdict = stats.confirm(x.history, x.value, first=first,
                                 suspect=key in chain.from_suspect, another=another, **_settings(x))
    v.corroborate = bool(v.verdict == "suspect" and j.extras.corroborate)
    v.transient = bool(j.extras.p_split <= TRANSIENT_LEVEL and v.verdict != "regression")
    v.message = (quantile_message(j, v.verdict, x.params) if j.extras.q_reruns else
                 rerun_message(j, v.verdict, x.value, first, level=x.params.level,
                               another=another, transient=v.transient)) or v.message
    return j


def _at_corroborate(x: stats.Case, v: Verdict, chain: Chain, key: str) -> stats.Judgement:
    first, root = chain.previous.get(key), chain.root.get(key)
    j, v.verdict = stats.corroborate(x.history, x.value, first=root, previous=first, **_settings(x))
    if j.status == "ok":
        v.message = corroborate_message(j, first, root)
    return j


def _at_reruns(x: stats.Case, v: Verdict, chain: Chain, key: str, another: bool,
               carried: tuple[Sequence[float], Sequence[str]]) -> stats.Judgement:
    earlier = [e.get(key) for e in chain.reruns]
    if any(e is None for e in earlier):
        raise ValueError("an earlier confirm rerun recorded no such metric")
    reruns = [*earlier, x.value]
    root = chain.root.get(key)
    carried, roots = carried
    j, v.verdict = stats.confirm_reruns(x.history, reruns, final=not another,
                                        carried=carried, first=root, **_settings(x))
    v.message = (quantile_message(j, v.verdict, x.params) if j.extras.q_reruns else
                 reruns_message(j, earlier, len(carried), roots, root))
    return j


def judge_at_stage(stage: Stage, x: stats.Case, v: Verdict, key: str, *, chain: Chain | None,
                   another: bool, carried: tuple[Sequence[float], Sequence[str]] = ((), ()),
                   ) -> stats.Judgement:
    """Judge one metric at ``stage``; the verdict of a rerun stage is set on ``v``
    (a first attempt's waits for the run's BH step). ``carried`` (stage RERUNS): the
    metric's reruns in the unheld sequential confirms of its newest baseline runs,
    oldest first, and those confirms' first attempts (``confirm_reruns(carried=)``)."""
    if stage is Stage.FIRST or chain is None:
        v.verdict = ""  # decided after BH
        return stats.judge_many([x])[0]
    if stage is Stage.CORROBORATE:
        return _at_corroborate(x, v, chain, key)
    if stage is Stage.RERUNS:
        return _at_reruns(x, v, chain, key, another, carried)
    return _at_rerun(x, v, chain, key, another)
