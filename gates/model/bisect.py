"""Bisection of a regression to one commit, with the gate's statistics (pure; no I/O).

``bisect(commits, measure, better=...)``: ``commits`` run from the last good to
the first bad commit, oldest first; ``measure(commit)`` runs the tests behind
the metric once at that commit and returns the run's samples (the I/O edge,
``gates.bisect_git``, checks commits out in git worktrees and runs pytest).

1. Calibrate: ``calib`` runs of good and of bad, interleaved (g, b, g, b, ...)
   so a machine's slow drift touches both alike. Bad must be a regression
   against good by the gate's own rule (``stats.judge_summaries`` on the mean of
   bad's runs, ``mean_of`` = their number, then ``stats.decide`` at ``level``,
   practical floor included); else "no-isolable-change" (noise: nothing to find).
2. Halve the range: the middle candidate runs ``reps`` times, each run
   interleaved with one more run of good and of bad (the references grow). The
   mean of its runs is judged against good (worse?) and against bad (better?):
   like-bad when worse than good by the gate's rule and not apart from bad
   (``classify``), like-good the mirror image; otherwise more runs, up to
   ``max_reps``, after which the reference it is clearly apart from decides;
   apart from both: it sits between the two levels, a "gradual-drift" (no
   single commit to name); apart from neither: "not-isolable" (noise).
3. One commit left: it must be a regression against its parent on their own
   runs (``verify`` each, interleaved; more while borderline, up to twice that),
   else the range drifted ("gradual-drift");
   the culprit comes with every candidate's values and p-values as evidence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gates.model import stats

__all__ = ["OUTCOMES", "BisectResult", "bisect", "classify"]

OUTCOMES = ("culprit", "no-isolable-change", "gradual-drift", "not-isolable")
LEVEL = 0.02  # the gate's level: apart from a reference
CONSISTENT = 0.2  # ... and not apart from the other one: a class needs both


@dataclass
class BisectResult:
    outcome: str  # one of OUTCOMES
    culprit: str | None
    executions: int
    evidence: list[dict[str, Any]] = field(default_factory=list)  # per candidate
    message: str = ""

    def to_row(self, key: str, suite: str | None, good: str, bad: str) -> dict[str, Any]:
        """A row for ``AfterWrites.save_bisect``."""
        return {"suite": suite, "key": key, "good": good, "bad": bad, "outcome": self.outcome,
                "culprit": self.culprit, "executions": self.executions,
                "evidence": {"candidates": self.evidence, "message": self.message}}


def _judge(ref: Sequence[float], values: Sequence[float], sign: int,
           params: stats.GateParams) -> stats.Judgement:
    return stats.judge_summaries(np.asarray(ref, dtype=float), float(np.mean(values)),
                                 sign=sign, params=params, mean_of=len(values))


def classify(good: Sequence[float], bad: Sequence[float], values: Sequence[float], *,
             sign: int, level: float = LEVEL, consistent: float = CONSISTENT,
             params: stats.GateParams = stats.DEFAULTS) -> tuple[str, float, float]:
    """("bad" | "good" | "between" | "unsure", p worse than good, p better than bad).

    Like bad: worse than good by the gate's rule at ``level`` AND consistent with
    bad (better than bad only at p > ``consistent``); like good, the mirror image;
    between: apart from both at ``level``; else unsure (more runs decide).
    """
    jg = _judge(good, values, sign, params)
    jb = _judge(bad, values, sign, params)
    worse = stats.decide(jg, jg.p_worse, level=level) == "regression"
    better = stats.decide(jb, jb.p_worse, level=level, q_better=jb.p_better) == "improvement"
    if worse and better:
        cls = "between"
    elif worse and jb.p_better > consistent:
        cls = "bad"
    elif better and jg.p_worse > consistent:
        cls = "good"
    else:
        cls = "unsure"
    return cls, float(jg.p_worse), float(jb.p_better)


def bisect(commits: Sequence[str], measure: Callable[[str], Sequence[float]], *, better: str,
           calib: int = 10, reps: int = 3, max_reps: int = 15, level: float = LEVEL,
           consistent: float = CONSISTENT, verify: int = 8,
           params: stats.GateParams = stats.DEFAULTS) -> BisectResult:
    """Find the first bad commit of ``commits`` (good first, bad last); see the module."""
    if len(commits) < 2:
        raise ValueError("bisect needs the good and the bad commit")
    if better not in ("higher", "lower"):
        raise ValueError(f"better={better!r}; use 'higher' or 'lower'")
    if min(calib, verify) < params.min_history:
        raise ValueError(f"calib={calib}, verify={verify}: the gate judges from "
                         f"{params.min_history} runs; give at least that many")
    sign = 1 if better == "lower" else -1
    runs = 0
    values: dict[str, list[float]] = {c: [] for c in commits}

    def run(commit: str) -> None:
        nonlocal runs
        runs += 1
        values[commit].append(stats.run_summary(np.asarray(measure(commit), dtype=float)))

    def settle(a: str, b: str, n: int) -> stats.Judgement:
        """b judged against a on at least ``n`` interleaved runs of each; while borderline
        (not a regression, yet p <= ``consistent``) ``reps`` more of both, up to 2n of b."""
        while min(len(values[a]), len(values[b])) < n:
            run(a)
            run(b)
        j = _judge(values[a], values[b], sign, params)
        while (stats.decide(j, j.p_worse, level=level) != "regression"
               and j.p_worse <= consistent and len(values[b]) < 2 * n):
            for _ in range(reps):
                run(a)
                run(b)
            j = _judge(values[a], values[b], sign, params)
        return j

    good_c, bad_c = commits[0], commits[-1]
    jb = settle(good_c, bad_c, calib)  # the references' runs are reused below
    evidence: list[dict[str, Any]] = []

    def note(commit: str, cls: str, pw: float | None, pb: float | None) -> None:
        evidence.append({"commit": commit, "class": cls, "runs": len(values[commit]),
                         "mean": float(np.mean(values[commit])), "values": values[commit][:],
                         "p_worse_than_good": pw, "p_better_than_bad": pb})

    if stats.decide(jb, jb.p_worse, level=level) != "regression":
        note(good_c, "good", None, None)
        note(bad_c, "not-bad", float(jb.p_worse), None)
        return BisectResult("no-isolable-change", None, runs, evidence,
                            f"bad is not a regression against good (p {jb.p_worse:.2g} after "
                            f"{calib} runs each): no isolable change")
    note(good_c, "good", None, None)
    note(bad_c, "bad", float(jb.p_worse), None)
    lo, hi = 0, len(commits) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        c = commits[mid]
        cls = "unsure"
        pw = pb = 1.0
        while cls in ("unsure", "between") and len(values[c]) < max_reps:
            # "between" by chance is common on 3 runs: only max_reps runs call it a drift.
            for _ in range(reps):
                run(good_c)
                run(c)
                run(bad_c)
            cls, pw, pb = classify(values[good_c], values[bad_c], values[c], sign=sign,
                                   level=level, consistent=consistent, params=params)
        if cls == "unsure" and min(pw, pb) <= level:
            # Out of runs: the reference it is clearly apart from decides (the other p,
            # near the consistency bound, is one draw of a uniform under that class).
            cls = "bad" if pw < pb else "good"
        note(c, cls, pw, pb)
        if cls == "bad":
            hi = mid
        elif cls == "good":
            lo = mid
        elif cls == "between":
            return BisectResult("gradual-drift", None, runs, evidence,
                                f"{c[:12]} lies between good and bad (worse than good p "
                                f"{pw:.2g}, better than bad p {pb:.2g}): a gradual drift, "
                                "no single commit to name")
        else:
            return BisectResult("not-isolable", None, runs, evidence,
                                f"{c[:12]} is like neither good nor bad after "
                                f"{len(values[c])} runs: too noisy to isolate")
    # The step must sit between the last two: the first bad commit a regression against
    # the last good one, on their own runs (a gradual drift halves down to two
    # neighbours that are barely apart).
    a, b = commits[lo], commits[hi]
    jv = settle(a, b, verify)
    note(b, "bad" if stats.decide(jv, jv.p_worse, level=level) == "regression" else "not-apart",
         float(jv.p_worse), None)
    if evidence[-1]["class"] != "bad":
        return BisectResult("gradual-drift", None, runs, evidence,
                            f"{b[:12]} is not a regression against its parent {a[:12]} (p "
                            f"{jv.p_worse:.2g}) though the range is: a gradual drift, no "
                            "single commit to name")
    return BisectResult("culprit", commits[hi], runs, evidence,
                        f"first bad commit {commits[hi][:12]} (last good "
                        f"{commits[lo][:12]}) after {runs} test executions")
