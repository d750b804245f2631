"""Judging one run's metrics against the run-to-run spread of past runs.

``judge_many`` is the test (design: ``gates.model.stats``), in named steps: the
baseline, its serial dependence, the new run alone, the windows, the quantile
test, the headline. It judges a run's metrics together: metrics whose
baselines have the same shape (runs, machines, settings) are rows of one
array, so each step is a few numpy operations for all of them.
``judge_summaries`` is one metric's call. ``gates.model.summaries`` reduces runs of
samples to the summaries it reads. Pure numpy/scipy, no I/O.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from scipy import special

from gates.model.machines import (
    MACHINE_BOUND,
    UNGUARDED_CV,
    MachineModel,
    labels_of,
    machine_model,
)
from gates.model.robust import (
    HALF_PI,
    HUBER_VAR,
    QN_EFF,
    ar1_variance_factor,
    bootstrap_idx,
    center_scale,
    empirical_bound,
    huber_location,
    median,
    predictive_z_pvalue,
    quantile_bound,
    quantile_p,
    rho_bounds,
    rho_var,
    robust_scale,
    rolling_idx,
    subset_means,
    tail_bound,
)

__all__ = [
    "PAIR_TAIL", "QUANTILE_KS", "QUANTILE_SHARES", "QUANTILE_WEIGHT", "GateParams", "DEFAULTS",
    "Case", "Decided", "Decider", "Judgement", "JudgeExtras", "judge_many", "judge_summaries",
]


PAIR_TAIL = 2.0  # 3+ baseline runs this many scales on the bad side: a heavy tail or second mode
TAIL_SCALES = 3.0  # where the run test's exponential tail bound starts, in its scales
# The quantile test: the least bad run (bad direction) of the last K runs, for each K here
# (at most the longest window) at its share of the level, taken from the windows where it
# applies. All K runs beyond a slow mode that holds a share q of the baseline has p about
# q^K: 7 runs reach q ~ 0.4, 10 runs q ~ 0.55 (a 40-run baseline of a 30% slow mode shows
# 17+ slow runs in 6% of cases). The 7-run test decides three runs sooner, so it keeps its
# whole share and the 10-run test adds half as much (docs/gates/calibration.md).
QUANTILE_SHARES = ((7, 0.25), (10, 0.125))
QUANTILE_KS = tuple(k for k, _ in QUANTILE_SHARES)
QUANTILE_WEIGHT = sum(w for _, w in QUANTILE_SHARES)  # the family's share of the level
# (0.1 left a fast-mode shift under a slow mode short of the level: calibration.md)
QUANTILE_RHO = 0.2  # ... on baselines whose cautious lag-1 autocorrelation (rho_lo) is at most
# this (two-mode baselines read as autocorrelated by chance; docs/gates/calibration.md)


@dataclass(frozen=True)
class GateParams:
    """The gate's user-visible settings, by stage; ``level`` and ``min_change`` can be
    declared per metric. The model's other constants: ``gates.model.decisions`` and
    ``docs/gates/calibration.md``."""

    # First attempt
    level: float = 0.02  # BH false discovery level across a run's metrics
    screen_level: float = 0.05  # new run alone: a suspect (rerun, never fails alone)
    window: int = 40  # baseline runs
    windows: tuple[int, ...] = (1, 3, 10)  # evidence windows (runs, newest last)
    min_history: int = 5  # fewer trusted runs -> insufficient-history
    noise_floor: float = 0.5  # practical floor, in units of run-to-run CV
    min_change: float = 0.0  # declared relative practical floor
    # Confirm reruns
    confirm_level: float = 0.05  # level the first rerun must reach on its own
    confirm_attempts: int = 4  # reruns at most (the runner's --confirm)


DEFAULTS = GateParams()


@dataclass(slots=True)
class JudgeExtras:
    """What the judge's tests found beyond the headline (read by ``gates.model.decisions``).

    Mutable: the confirm stages add their own findings (``p_split`` onwards) to
    the judgement they return. Defaults are what a judgement that did not run
    the test reads (``insufficient-history``, ``unguarded``).
    """

    p_run_worse: float = 1.0  # the new run alone (k = 1): one-sided p, bad direction
    w_run: float = 1.0  # its Bonferroni weight among the windows
    rho_lo: float = 0.0  # cautious lower bound of the lag-1 autocorrelation (> 0: predicted one step ahead)
    rho_q: float = 0.0  # ... read about the mean: the quantile test runs where it is <= QUANTILE_RHO
    s1: float = 0.0  # run-to-run scale corrected for autocorrelation
    s1c: float = 0.0  # scale of the k = 1 prediction (conditional; of a mean of mean_of)
    mu1: float = float("nan")  # the k = 1 prediction of the new run
    n_base: int = 0  # baseline runs
    heavy: bool = False  # 3+ baseline runs beyond PAIR_TAIL scales on the bad side
    machines: int = 0  # machines the baseline names (0: runs carry no machine)
    beyond: bool = False  # the value lies beyond every baseline run (bad side)
    rank_worse: float = 1.0  # its rank p among them: (1 + #{as bad or worse}) / (n + 1)
    p_window_worse: dict[int, float] = field(default_factory=dict)  # k-run window -> its p, bad side
    quantile: bool = False  # the quantile test ran
    p_q_worse: float = 1.0  # its p, bad direction (its family's: p / QUANTILE_WEIGHT is weighted)
    q_change: float = 0.0  # ... the least bad run's relative change, bad direction (that test's)
    q_k: int = 0  # ... its window (runs)
    q_decider: Decider | None = None  # ... its interval's evidence (``Decider.ranks``)
    # The good direction's weighted p without the new run alone (the windows and the
    # quantile test): an improvement is announced on this (``decisions.decide``)
    p_better_sustained: float = 1.0
    new_host: bool = False  # the run's machine has no run in the baseline
    host_var: float = 0.0  # between-machine variance allowed for it
    host_var_known: bool = False  # ... known (the baseline names 2+ machines)
    # ... unknown, and the run judged beyond MACHINE_BOUND (the change less it tested)
    machine_bound: float = 0.0
    p_split: float = 1.0  # confirm: p that the first attempt is a transient against its reruns
    chain_transient: bool = False  # ... and that turned a hold into a pass (_chain_check)
    corroborate: bool = False  # a held rerun beyond every baseline run: the next rerun decides
    carried: int = 0  # confirm_reruns: reruns carried from earlier unheld confirms
    rerun_level: float | None = None  # ... the level the reruns were held to, where they decided
    q_reruns: int = 0  # a quantile trip's confirm: reruns its own quantile test read
    p_q_reruns: float = 1.0  # ... and that test's p (held at confirm_level after confirm_attempts)
    # A confirm stage's hold, where a test other than the headline's held it: what the
    # verdict's row states (``Decided``; set by ``gates.model.decisions``)
    decided: Decided | None = None


class Decided(NamedTuple):
    """The test that held a confirm stage's regression, as its verdict's row states it:
    its name, its p and the level that p was held to, the relative change it tested
    (None where it reads a p alone), and the level on the headline's weighted-p scale
    at which ``Judgement.decider``'s interval is this test's (None: it is not)."""

    test: str  # "quantile-7", "huber-10", "run", "rank", "mean of 2"
    p: float
    level: float
    change: float | None
    interval_level: float | None = None
    decider: Decider | None = None  # its interval's evidence (None: the headline's)


@dataclass(frozen=True, slots=True)
class Decider:
    """The deciding test's evidence, enough to show its interval at any level.

    Its p-values already carry the rank and tail bounds, so its interval is the
    t-interval of the relative change widened to agree with them: the standard
    error is at least ``|rel| / z_side``, where z_side is the t-quantile of the
    bounded p of the side the change lies on. The interval then excludes 0
    exactly where that p is below the level (test inversion under a location
    shift; Lehmann & Romano, *Testing Statistical Hypotheses*, 3rd ed., 2005,
    sec. 3.5).
    """

    rel: float  # relative change of the deciding window (as ``Judgement.rel_change``)
    se_rel: float  # its t standard error, relative to the same centre
    df: float  # t degrees of freedom
    weight: float  # its Bonferroni share of the level
    p_up: float  # its bounded one-sided p of a rise (unweighted)
    p_down: float  # ... of a fall
    # What the test's change is taken beyond (``MACHINE_BOUND`` on a machine of unknown
    # spread): its interval is of the change less this, shown shifted back by it
    offset: float = 0.0
    # A quantile test (an exact rank test, no t): the baseline runs' relative deviations
    # in the change's direction and its window; its interval is one-sided, by inversion
    ranks: tuple[float, ...] | None = None
    k: int = 0

    def interval(self, level: float) -> tuple[float, float] | None:
        """The two-sided interval at one-sided ``level`` on the weighted-p scale (what
        the metric's p is compared with); None where unbounded (its side's p >= 1/2).
        A quantile test's is one-sided (``robust.quantile_bound``): the least shift the
        test still finds at that level, the other end infinite."""
        alpha = min(max(level * self.weight, 1e-300), 0.5)
        if self.ranks is not None:
            up = self.rel >= 0
            bound = quantile_bound(self.ranks, abs(self.rel), self.k, alpha)
            if bound is None:
                return None
            return ((bound + self.offset, math.inf) if up
                    else (-math.inf, -bound + self.offset))
        p_side = self.p_up if self.rel >= 0 else self.p_down
        z_side = float(special.stdtrit(self.df, 1.0 - p_side)) if p_side < 0.5 else 0.0
        if not z_side > 0.0:
            return None
        se = max(self.se_rel, abs(self.rel) / z_side)
        t = float(special.stdtrit(self.df, 1.0 - alpha))
        return self.rel - t * se + self.offset, self.rel + t * se + self.offset

    def confidence(self, level: float) -> float:
        """The confidence of ``interval(level)`` (two-sided; a quantile test's one-sided)."""
        alpha = min(max(level * self.weight, 0.0), 0.5)
        return 1.0 - alpha if self.ranks is not None else 1.0 - 2.0 * alpha


@dataclass(frozen=True)
class Judgement:
    """What the statistics say about one metric of one run (before BH)."""

    status: str  # "ok" (judged) or "insufficient-history"
    baseline: float | None
    value: float
    rel_change: float | None  # (value - baseline) / |baseline| of the deciding window
    ci: tuple[float, float] | None  # 95% CI of rel_change
    z: float  # signed: > 0 means worse
    p_worse: float  # one-sided p of a change in the bad direction (Bonferroni over windows)
    p_better: float  # one-sided p of a change in the good direction
    floor: float  # relative practical floor used
    window: int  # runs in the deciding evidence window
    n_baseline: int
    own_change: float | None  # the new run's own relative change
    sign: int = 1  # +1: an increase is bad (lower is better); -1: a decrease is bad
    statistic: str = "robust-t"
    extras: JudgeExtras = field(default_factory=JudgeExtras)
    reason: str = ""  # why the model could not judge (status ``unguarded``)
    decider: Decider | None = None  # the deciding test (status "ok"): its interval at a level

    @property
    def p(self) -> float:
        """The p-value of the observed direction."""
        return self.p_worse if (self.z >= 0) else self.p_better


class Case(NamedTuple):
    """One metric's judgement to make (``judge_summaries``' arguments)."""

    history: np.ndarray  # past run summaries, oldest first
    value: float  # the new run's summary
    sign: int  # +1: an increase is bad (lower is better); -1: a decrease is bad
    params: GateParams = DEFAULTS
    n_trials: float | None = None
    extra_var: float = 0.0
    min_change: float | None = None
    hosts: Sequence[str | None] | None = None
    host: str | None = None
    mean_of: int = 1
    standin_last: bool = False


def judge_summaries(history: np.ndarray, value: float, *, sign: int,
                    **settings: Any) -> Judgement:
    """Judge a new run summary ``value`` against past run summaries (oldest first):
    ``judge_many`` of one ``Case``, ``settings`` its other fields by name."""
    return judge_many([Case(history, value, sign, **settings)])[0]


def judge_many(cases: Sequence[Case]) -> list[Judgement]:
    """Judge each case's new run summary ``value`` against its past run summaries
    ``history`` (oldest first). The model on one page: ``docs/gates/design.md``.

    ``sign``: +1 when an increase is bad (lower is better), -1 otherwise.
    ``extra_var``: added to the new run's variance (fewer samples than usual).
    ``hosts`` (aligned with ``history``) and ``host``: each run's machine
    (``provenance.host_key``); the machine model (``gates.model.machines``) adds the
    between-machine variance, so a machine a little slower than those seen
    before is not a regression of the code. ``mean_of``: ``value`` is the mean
    of that many attempts of one run; they share what the previous run predicts
    beyond rho_lo, the rest of their noise is divided by ``mean_of``, and the
    rank and tail bounds use means of ``mean_of``-subsets of baseline runs
    unless the bad side's tail is heavy. ``standin_last``: the newest history
    value is a confirm rerun standing in for a transient first attempt
    (``gates.store.baselines``): under AR(1) its prediction gains 2 rho^2 s1c^2.

    Tests, weighted-Bonferroni combined (Holm, Scand. J. Stat. 6 (1979) 65-70):
    the new run alone against its prediction, one step ahead under AR(1) where
    the baseline is clearly autocorrelated (Box, Jenkins & Reinsel, *Time Series
    Analysis*, 4th ed., 2008, sec. 5.2); the Huber location of the last 3 and 10
    runs; on heavy-tailed or two-mode baselines the least bad of the last
    7 and 10 runs (``QUANTILE_SHARES``). Each is a robust predictive t-test (centre median,
    scale Qn, df 0.82 (n - 1)), its variance inflated for lag-1 autocorrelation,
    its p bounded below by the rank p and an exponential tail where the baseline
    already produced a value as extreme: a level the noise has produced before
    is not evidence. Assumptions: runs exchangeable up to AR(1) dependence and
    machine offsets; the change of interest is a shift in location.
    """
    groups: dict[tuple, list[int]] = {}
    rows: list[tuple[np.ndarray, bool]] = []
    for i, cs in enumerate(cases):
        h, lab, standin = _finite_runs(cs.history, cs.hosts, cs.host, cs.standin_last)
        rows.append((h, standin))
        groups.setdefault((h.size, lab, cs.host is None, cs.params, cs.mean_of), []).append(i)
    out: list[Judgement] = [None] * len(cases)  # type: ignore[list-item]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for (size, lab, no_host, params, mean_of), idx in groups.items():
            H = np.stack([rows[i][0] for i in idx]) if size else np.zeros((len(idx), 0))
            cs, standin = [cases[i] for i in idx], np.array([rows[i][1] for i in idx])
            for i, j in zip(idx, _judge_rows(H, cs, standin, lab, no_host, params, mean_of),
                            strict=True):
                out[i] = j
    _beyond_machines(cases, out)
    return out


def _beyond_machines(cases: Sequence[Case], out: list[Judgement]) -> None:
    """A run on a machine whose spread the baseline cannot tell (``SPREAD_UNKNOWN``),
    changed by more than ``MACHINE_BOUND`` on the bad side: judged on its change beyond
    that bound (the most any machine change seen has moved a metric), as one machine.
    Its value less the bound is tested; the judgement reports the whole change, its
    interval shifted back, and a floor raised by the bound. Within the bound it stays
    ``unguarded``: no run on that machine can tell a code change from the machine."""
    redo = [i for i, j in enumerate(out)
            if j.status == "unguarded" and j.reason == SPREAD_UNKNOWN and j.baseline
            and j.sign * (j.value - j.baseline) / abs(j.baseline) > MACHINE_BOUND]
    if not redo:
        return
    shifted = [cases[i]._replace(value=cases[i].value - cases[i].sign * MACHINE_BOUND
                                 * abs(out[i].baseline), hosts=None, host=None)  # type: ignore[arg-type]
               for i in redo]
    # (judged "ok": as many runs as before, and no machine model to leave it unguarded)
    for i, j in zip(redo, judge_many(shifted), strict=True):
        off = j.sign * MACHINE_BOUND
        j.extras.new_host, j.extras.machine_bound = True, MACHINE_BOUND
        out[i] = dataclasses.replace(
            j, value=cases[i].value, floor=j.floor + MACHINE_BOUND,
            rel_change=None if j.rel_change is None else j.rel_change + off,
            own_change=None if j.own_change is None else j.own_change + off,
            ci=None if j.ci is None else (j.ci[0] + off, j.ci[1] + off),
            decider=None if j.decider is None else dataclasses.replace(j.decider, offset=off),
            statistic=f"{j.statistic} beyond {100 * MACHINE_BOUND:g}%")


def _judge_rows(H: np.ndarray, cs: list[Case], standin: np.ndarray,
                lab: tuple[str, ...] | None, no_host: bool, params: GateParams,
                mean_of: int) -> list[Judgement]:
    """Judge rows of one shape: the named steps, then one ``Judgement`` a row."""
    n_h = H.shape[1]
    if n_h < params.min_history:
        return [Judgement("insufficient-history", median(h) if n_h else None, c.value, None,
                          None, 0.0, 1.0, 1.0, _min_change(c), 1, n_h, None, c.sign)
                for h, c in zip(H, cs, strict=True)]
    b = _baseline(H, cs, standin, params, lab)
    why = _unguarded_reasons(b)
    sr = _serial(b)
    rt = _run_test(b, sr, mean_of)
    w, quant = _test_weights(b, sr, rt.heavy)
    # (the candidates' order breaks ties: the new run, then the windows, then the quantile)
    # One run alone heads the judgement on the bad side only: one run is one draw, and an
    # improvement is read on the windows (``_sustained_better``); its p_better still
    # counts in ``Judgement.p_better``. A mean of several runs (a comparison of commits,
    # a bisection step) is several draws: it heads both sides.
    p_head = rt.pw if mean_of == 1 else np.minimum(rt.pw, rt.pb)
    cands = [_Candidate(p_head / w[:, 0], rt.pw / w[:, 0], rt.pb / w[:, 0],
                        1, rt.centre, b.value, rt.se, rt.z, rt.df, "run", w[:, 0])]
    p_win = {}
    for i, k in enumerate(b.ks, start=1):
        cand, p_win[k] = _window_test(b, sr, k, w[:, i])
        cands.append(cand)
    pq_w, q_change, q_k = np.ones(b.c.size), np.zeros(b.c.size), np.zeros(b.c.size, dtype=int)
    if quant.any():
        for kq, share in _quantile_shares(b.ks):
            cand, pw_k = _quantile_test(b, sr, quant, kq, share)
            cands.append(cand)
            # The family's p, scaled so that p_q_worse / QUANTILE_WEIGHT is its weighted p,
            # and the least bad run's change of the test that gave it.
            pw_k = pw_k * (QUANTILE_WEIGHT / share)
            q_change = np.where(pw_k < pq_w, b.sign * (cand.est - b.c) / np.abs(b.c), q_change)
            q_k = np.where(pw_k < pq_w, kq, q_k)
            pq_w = np.minimum(pq_w, pw_k)
    new_host = b.mm is not None and not no_host and b.lab_new not in b.mm.known
    extras = {
        "p_run_worse": rt.pw,
        "w_run": w[:, 0], "rho_lo": sr.rho_lo, "rho_q": sr.rho_q, "s1": sr.s1,
        "s1c": rt.s1c, "mu1": rt.mu1, "heavy": rt.heavy,
        # The value beyond every baseline run: on a heavy-tailed baseline
        # a confirm rerun this far out is corroborated (decisions.corroborate).
        "beyond": rt.worse == 0,
        # ... and its rank among them: (1 + #{as bad or worse}) / (n + 1).
        "rank_worse": (rt.worse + 1) / (rt.n_ref + 1),
        "quantile": quant, "p_q_worse": pq_w, "q_change": q_change, "q_k": q_k,
        "p_better_sustained": _sustained_better(cands if mean_of > 1 else cands[1:],
                                                b.c.size),
        "host_var": (b.mm.run_var(b.lab_new) - b.mm.within2 if new_host and b.mm is not None
                     else np.zeros(b.c.size)),
    }
    fixed = {"n_base": b.n, "machines": b.mm.groups if b.mm is not None else 0,
             "new_host": new_host, "host_var_known": new_host}
    return _judgements(b, params, cands, why, p_win, extras, fixed, rt.centre)


def _sustained_better(cands: list[_Candidate], rows: int) -> np.ndarray:
    """The good direction's evidence of a change that lasts: the weighted p of ``cands``,
    the windows and the quantile test, and the run itself only where it is a mean of
    several runs. One run is one draw: a regression needs its rerun to tell it from an
    outlier, and an improvement gets no rerun (a fast mode, the GEMM's power-cap
    headroom after idle, is 13-16% below the rest)."""
    if not cands:
        return np.ones(rows)
    return np.minimum(1.0, np.min([x.pb for x in cands], axis=0))


def _min_change(c: Case) -> float:
    return c.params.min_change if c.min_change is None else c.min_change


class _Candidate(NamedTuple):
    """One test's evidence, a row per metric: its weighted p (both directions' smaller)
    and what it estimates."""

    p: np.ndarray  # min(pw, pb): the candidate with the smallest decides the headline
    pw: np.ndarray  # weighted one-sided p, bad direction (inf: the test did not run)
    pb: np.ndarray  # ... good direction
    k: int  # runs in its window
    centre: np.ndarray  # what the estimate is compared with
    est: np.ndarray  # the window's estimate (the new run, a Huber location, a least-bad run)
    se: np.ndarray  # the estimate's standard error about ``centre``
    z: np.ndarray  # signed: > 0 means worse
    df: np.ndarray  # t degrees of freedom for the CI
    method: str  # "run", "huber-k", "quantile-k"
    weight: np.ndarray  # its Bonferroni share of the level (p = unweighted p / weight)


@dataclass(frozen=True, slots=True)
class _Baseline:
    """The runs every test reads: one baseline for all windows, and its machines; the
    cases' own settings, a value a row."""

    cases: list[Case]
    value: np.ndarray  # the new run's summary
    sign: np.ndarray  # +1: an increase is bad
    extra: np.ndarray  # the new run's extra variance
    min_change: list[float]
    standin: np.ndarray  # the newest history run stands in for a transient first attempt

    h: np.ndarray  # finite past run summaries, oldest first
    full: np.ndarray  # ... and the new run
    base: np.ndarray  # the baseline: the ``window`` runs before the last kmax
    base_end: int  # index in ``h`` just past the baseline
    tail: np.ndarray | None  # the runs between the baseline and the new one
    ks: list[int]  # evidence windows beyond the new run alone
    n: int  # baseline runs
    c: np.ndarray  # its centre (median)
    s: np.ndarray  # its run-to-run scale (Qn)
    lab: tuple[str, ...] | None  # every run's machine label (the new run last); None: unnamed
    mm: MachineModel | None  # the machine model over the baseline and the runs after it
    lab_new: str  # the new run's machine label


def _finite_runs(history: np.ndarray, hosts: Sequence[str | None] | None, host: str | None,
                 standin_last: bool) -> tuple[np.ndarray, tuple[str, ...] | None, bool]:
    """The finite past run summaries, the machine labels of those runs and the new one
    (None: no run names one) and whether the newest stands in for a transient first
    attempt."""
    h = np.asarray(history, dtype=float)
    finite = np.isfinite(h)
    standin_last = standin_last and finite.size > 0 and bool(finite[-1])
    if hosts is None or len(hosts) != finite.size or (
            host is None and all(x is None for x in hosts)):
        return h[finite], None, standin_last
    kept = (tuple(hosts) if finite.all()
            else tuple(x for x, f in zip(hosts, finite, strict=True) if f))
    return h[finite], labels_of((*kept, host)), standin_last


def _baseline(H: np.ndarray, cs: list[Case], standin: np.ndarray, params: GateParams,
              lab: tuple[str, ...] | None) -> _Baseline:
    """One baseline for every window: the W runs before the last kmax, so that the
    first runs of a sustained change never dilute the reference they are judged
    against (short histories fall back to the last W runs)."""
    W, n_h = params.window, H.shape[1]
    ks = [k for k in params.windows if k > 1]
    kmax = max(ks, default=1)
    value = np.array([c.value for c in cs], dtype=float)
    full = np.concatenate([H, value[:, None]], axis=1)
    if ks and n_h - (kmax - 1) >= params.min_history:
        base, base_end, tail = full[:, -kmax - W : -kmax], n_h + 1 - kmax, full[:, -kmax:-1]
    else:
        base, ks, base_end, tail = H[:, -W:], [], n_h, None
    n = base.shape[1]
    c, s = center_scale(base, np.array([c.n_trials or 0.0 for c in cs], dtype=float))
    # Machines (a history whose runs name theirs): every run's offset is unknown about
    # the baseline's centre (``gates.model.machines``). Estimated over the baseline and the
    # runs after it (every run before the new one): the recent runs are where a growing
    # pool shows its new machines.
    mm = (machine_model(H[:, base_end - n :], lab[base_end - n : n_h], s, n)
          if lab is not None else None)
    return _Baseline(cs, value, np.array([c.sign for c in cs], dtype=float),
                     np.array([c.extra_var for c in cs], dtype=float),
                     [_min_change(c) for c in cs], standin, H, full, base, base_end, tail, ks,
                     n, c, s, lab, mm, lab[-1] if lab is not None else "")


SPREAD_UNKNOWN = ("machine spread unknown: the runs before name fewer than two machines, "
                  "and not all are this run's")


def _unguarded_reasons(b: _Baseline) -> list[str | None] | None:
    """Why the machine model says a metric cannot be guarded on this run, where it does."""
    mm, lab, c = b.mm, b.lab, b.c
    if mm is None or lab is None:
        return None
    if mm.tau2 is None and any(x != b.lab_new for x in lab[b.base_end - b.n:]):
        return [SPREAD_UNKNOWN] * c.size
    # The spread between machines alone (a new machine's inflated): the part of a run's
    # variance that a machine change shares with a code change. Spread within a machine
    # (a second mode that every machine shows) is left to the within-machine tests, as
    # on one machine. (A spread relative to the level means something on a ratio scale
    # only: every run on the centre's side of 0.)
    sd = np.sqrt(np.maximum(mm.run_var(b.lab_new) - mm.within2, 0.0))
    bad = (sd > UNGUARDED_CV * np.abs(c)) & np.all(b.base * c[:, None] > 0, axis=1)
    if not bad.any():
        return None
    return [f"spread between machines {x:.0f}% of the metric: no change worth "
            "guarding stands out of it" if f else None
            for x, f in zip((100 * sd / np.abs(c)).tolist(), bad.tolist(), strict=True)]


@dataclass(frozen=True, slots=True)
class _Serial:
    """The baseline's serial dependence and the scales it implies."""

    rho: np.ndarray  # lag-1 autocorrelation, bias-corrected
    rho_hi: np.ndarray  # cautious upper bound (the windows use it)
    rho_lo: np.ndarray  # cautious lower bound (> 0: the new run is predicted one step ahead)
    rho_q: np.ndarray  # ... read about the mean (the quantile test's guard)
    s1: np.ndarray  # run-to-run scale, corrected for autocorrelation
    cvar: np.ndarray  # variance of the centre
    df: np.ndarray  # t degrees of freedom of the scale
    s_w: np.ndarray  # ... the same three with the cautious rho_hi, for the windows
    cvar_w: np.ndarray
    df_w: np.ndarray


def _serial(b: _Baseline) -> _Serial:
    """Serial dependence read from the baseline and the runs after it, each about its
    own centre: 9 more runs (on runs 30-38 the baseline has only 21-29), and a change
    among the recent runs does not read as dependence (``lag1_autocorr``). Where the
    runs name machines, each less its machine's predicted offset: a host's stretch of
    runs is the machine term's, not AR(1) (``docs/gates/design.md``).
    Autocorrelated runs: the sample scale is biased low by about AR(rho, n) / n and
    worth fewer degrees of freedom (Bayley & Hammersley, JRSS B 8 (1946) 184-197)."""
    base, tail = b.base, b.tail
    off = _machine_offsets(b)
    if off is not None:
        base, tail = base - off[:, : b.n], None if tail is None else tail - off[:, b.n :]
    rho, rho_hi, rho_lo = rho_bounds(base, b.c, b.s, tail)
    # The quantile test ranks runs as exchangeable: its guard asks whether they are
    # dependent at all, read about the mean, so a skewed iid baseline (a slow mode:
    # what the test is for) does not pass for a dependent one. Everything else keeps
    # the median-centred reading, biased up on skewed runs, which is the cautious side
    # for windows, the one-step prediction and the sequential confirm.
    rho_q = rho_bounds(base, b.c, b.s, tail, demean=True)[2]
    # Windows sum runs, so under-estimated autocorrelation makes them over-confident:
    # they use the cautious rho throughout.
    return _Serial(rho, rho_hi, rho_lo, rho_q, *_ar1_scales(b.s, b.n, rho),
                   *_ar1_scales(b.s, b.n, rho_hi))


def _machine_offsets(b: _Baseline) -> np.ndarray | None:
    """Each run's machine offset (``MachineModel.offsets``) over the baseline and the runs
    after it, a row per metric; None where no run is predicted off the centre."""
    if b.mm is None or b.lab is None or b.mm.tau2 is None:
        return None
    first = b.base_end - b.n
    off = b.mm.offsets(b.h[:, first:], b.lab[first : b.h.shape[1]], b.c)
    return off if off.any() else None


def _ar1_scales(s: np.ndarray, n: int, rho: np.ndarray) -> tuple[np.ndarray, ...]:
    """(scale corrected for lag-1 autocorrelation rho, the centre's variance, t df)."""
    f = ar1_variance_factor(rho, n)
    s1 = s / np.sqrt(np.maximum(0.3, 1.0 - f / n))
    return (s1, HALF_PI * s1 * s1 / n * f,
            np.maximum(QN_EFF * (n - 1) * (1 - rho) / (1 + rho), 2.0))


class _RunTest(NamedTuple):
    """The k = 1 test: the new run alone against its one-step prediction."""

    mu1: np.ndarray  # the prediction
    s1c: np.ndarray  # its scale (conditional under AR(1); of a mean of ``mean_of``)
    se: np.ndarray  # the prediction error's standard error
    z: np.ndarray  # signed: > 0 means worse
    df: np.ndarray  # t degrees of freedom
    pw: np.ndarray  # one-sided p, bad direction (after the rank and tail bounds)
    pb: np.ndarray  # ... good direction
    worse: np.ndarray  # reference runs as bad as the new run or worse
    n_ref: np.ndarray  # reference runs (baseline runs, residuals or subset means)
    heavy: np.ndarray  # 3+ reference runs beyond PAIR_TAIL scales on the bad side
    centre: np.ndarray  # what the run's change is read against: the baseline's centre, or
    # where its machine has runs before it, that machine's level (``MachineModel.own_level``)


def _run_test(b: _Baseline, sr: _Serial, mean_of: int) -> _RunTest:
    """Predict the new run one step ahead under AR(1) where the baseline is clearly
    autocorrelated (rho_lo > 0; iid-looking runs keep the plain test) and test it."""
    c, s1 = b.c, sr.s1
    mu1, s1c, df1, cvar1 = c.copy(), s1.copy(), sr.df.copy(), sr.cvar.copy()
    ar = sr.rho_lo > 0
    # Deviations the rank and tail bounds read, by the rows that share their width.
    devs = []
    if (~ar).any():
        i = np.flatnonzero(~ar)
        devs.append((i, b.sign[i, None] * (b.base[i] - c[i, None])))
    if ar.any():
        i = np.flatnonzero(ar)
        res = _ar1_prediction(b, sr, i, mu1, s1c, df1, cvar1)
        devs.append((i, b.sign[i, None] * res))
    u1 = TAIL_SCALES * s1c  # where the exponential tail bound starts
    # A heavy bad-side tail or second mode: pairs of slow runs are ordinary (no pair
    # means), and a window's minimum says more than its location (quantile test).
    heavy = np.zeros(c.size, dtype=bool)
    for i, dev in devs:
        heavy[i] = np.add.reduce(dev > PAIR_TAIL * s1c[i, None], axis=1) >= 3
    # The run's machine offset beyond what the one-run scale holds; attempts of one run
    # share it (a rerun runs on the same machine), so it is not divided by ``mean_of``.
    m_var1 = (np.maximum(0.0, b.mm.run_var(b.lab_new) - s1c * s1c) if b.mm is not None
              else 0.0)
    if mean_of > 1:
        s1c = s1 * np.sqrt(np.maximum(sr.rho_hi - sr.rho_lo, 0.0) ** 2
                           + (1.0 - sr.rho_hi * sr.rho_hi) / mean_of)
        devs = [(i[m], d[m]) for i, d in devs for m in (heavy[i], ~heavy[i]) if m.any()]
        devs = [(i, d if heavy[i[0]] else subset_means(d, mean_of)) for i, d in devs]
        u1 = np.where(heavy, u1, TAIL_SCALES * s1c)
    own = (b.mm.own_level(b.lab_new, c, cvar1)
           if b.mm is not None and b.mm.within_dev is not None else None)
    if own is not None:
        # The run's machine has runs before it: predict from its own level (shrunk
        # toward the centre) with the within-machine scale; a deviation of one run from
        # its machine's other runs that the history has shown bounds p (``gates.machines``).
        mu1, m_var1 = own
        cvar1 = np.zeros(c.size)
        s1c = np.broadcast_to(np.sqrt(b.mm.within2 / mean_of), c.shape).copy()
        if b.mm.within_df > 0:
            df1 = np.full(c.size, b.mm.within_df)
        devs = [(np.arange(c.size), b.sign[:, None] * b.mm.within_dev)]
        u1 = TAIL_SCALES * np.sqrt(b.mm.within2) * np.ones(c.size)
    se1 = np.sqrt(np.maximum(s1c * s1c + cvar1 + b.extra + m_var1, 1e-300))
    d1 = b.sign * (b.value - mu1)
    z1 = d1 / se1
    pw, pb = predictive_z_pvalue(z1, df1), predictive_z_pvalue(-z1, df1)
    worse, n_ref = np.zeros(c.size, dtype=int), np.zeros(c.size, dtype=int)
    for i, dev in devs:
        pw[i], pb[i] = empirical_bound(dev, d1[i], pw[i], pb[i])
        pw[i], pb[i] = tail_bound(dev, d1[i], u1[i], pw[i], pb[i])
        worse[i], n_ref[i] = np.add.reduce(dev >= d1[i, None], axis=1), dev.shape[1]
    return _RunTest(mu1, s1c, se1, z1, df1, pw, pb, worse, n_ref, heavy,
                    c if own is None else mu1)


def _ar1_prediction(b: _Baseline, sr: _Serial, i: np.ndarray, mu1: np.ndarray,
                    s1c: np.ndarray, df1: np.ndarray, cvar1: np.ndarray) -> np.ndarray:
    """Rows ``i``'s one-step AR(1) prediction, written into the other arrays; returns
    their one-step residuals.

    Predict with the point estimate: a lower bound under-predicts after a high run,
    and a rerun shares that error with its first attempt. The scale is the one-step
    residuals' own (at least what the marginal scale implies), worth n - 2 degrees of
    freedom: residuals are nearly independent, unlike the runs whose AR-reduced df the
    windows use."""
    c, s, rho, n = b.c[i], b.s[i], sr.rho[i], b.n
    lo, hi = c - 3.0 * s, c + 3.0 * s
    xp = np.minimum(np.maximum(b.h[i, -1], lo), hi) - c
    mu1[i] = c + rho * xp
    res = (b.base[i, 1:] - c[:, None]) - rho[:, None] * (
        np.clip(b.base[i, :-1], lo[:, None], hi[:, None]) - c[:, None])
    s1c[i] = np.maximum(robust_scale(res), sr.s1[i] * np.sqrt(1.0 - rho * rho))
    df1[i] = max(QN_EFF * (n - 2), 2.0)
    # Prediction error beyond the residuals: the centre enters with weight 1 - rho,
    # and rho's own error (se^2 ~ (1 - rho^2) / n) scales with x_prev - c.
    cv = sr.cvar[i] * (1.0 - rho) ** 2 + xp * xp * rho_var(rho, n)
    # x_prev a rerun standing in for the run: another innovation.
    cvar1[i] = np.where(b.standin[i], cv + 2.0 * rho * rho * s1c[i] * s1c[i], cv)
    return res


def _test_weights(b: _Baseline, sr: _Serial, heavy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Bonferroni weights of the new run and the windows (a row per metric), and
    where the quantile test runs: where the baseline has a heavy tail or a second mode
    (and looks at most mildly autocorrelated: under AR(1) an excursion keeps several
    runs high), its runs are on machines that show no spread between them, and every
    run it reads is on a machine the baseline knows (a rank test has no room for a
    machine offset: a stretch of runs on a slow machine is its least bad run's rank)."""
    w0 = _weights(len(b.ks) + 1)
    new_m = b.mm is not None and b.lab is not None and any(
        x not in b.mm.known for x in b.lab[-max(QUANTILE_KS):])
    spread = (np.asarray(b.mm.tau2) > 0 if b.mm is not None and b.mm.tau2 is not None
              else np.zeros(b.c.size, dtype=bool))
    quant = (sr.rho_q <= QUANTILE_RHO) & heavy & ~spread & (bool(b.ks) and not new_m)
    w = np.empty((b.c.size, len(w0)))
    w[:] = w0
    w[quant, 1:] = [x * (1.0 - QUANTILE_WEIGHT / (1.0 - w0[0])) for x in w0[1:]]
    return w, quant


def _window_test(b: _Baseline, sr: _Serial, k: int,
                 weight: np.ndarray) -> tuple[_Candidate, np.ndarray]:
    """The Huber location of the last ``k`` runs against the baseline's bootstrap of it:
    its candidate and its unweighted p, bad direction (the cautious rho_hi throughout)."""
    n, mm, sign = b.n, b.mm, b.sign
    # One Huber pass over the window, its bootstrap draws and the baseline's
    # rolling k-run stretches (rows are independent; stacked for speed).
    boot_idx = bootstrap_idx(n, k)
    nb, rolled = boot_idx.shape[0], n >= k + 4
    # Filled in place: concatenated gathers keep a layout huber_location copies again.
    x = np.empty((b.c.size, 1 + nb + (n - k + 1 if rolled else 0), k))
    x[:, 0], x[:, 1 : 1 + nb] = b.full[:, -k:], b.base[:, boot_idx]
    if rolled:
        x[:, 1 + nb :] = b.base[:, rolling_idx(n, k)]
    locs = huber_location(x, b.s[:, None])
    est = locs[:, 0]
    # Bootstrap the window estimator over the baseline's own distribution: its
    # mean and variance under second modes and heavy tails (iid), then inflate
    # the variance for AR(1) dependence.
    boot = locs[:, 1 : 1 + nb]
    ck = np.add.reduce(boot, axis=1) / nb
    dev = boot - ck[:, None]
    var_iid = np.maximum(np.maximum(sr.s_w * sr.s_w * HUBER_VAR / k,
                                    np.add.reduce(dev * dev, axis=1) / nb),
                         HUBER_VAR * mm.total / k if mm is not None else 0.0)
    se = np.sqrt(var_iid * ar1_variance_factor(sr.rho_hi, k) + sr.cvar_w
                 + (mm.window_extra(b.lab[-k:]) if mm is not None and b.lab is not None
                    else 0.0))
    z = sign * (est - ck) / se
    pw, pb = predictive_z_pvalue(z, sr.df_w), predictive_z_pvalue(-z, sr.df_w)
    pw, pb = tail_bound(sign[:, None] * dev, sign * (est - ck), 3.0 * np.sqrt(var_iid),
                        pw, pb)
    if rolled:
        # Rolling k-run stretches of the baseline: a level it already produced.
        roll = locs[:, 1 + nb :] - ck[:, None]
        pw, pb = empirical_bound(sign[:, None] * roll, sign * (est - ck), pw, pb)
    return _Candidate(np.minimum(pw, pb) / weight, pw / weight, pb / weight, k, ck, est, se,
                      z, sr.df_w, f"huber-{k}", weight), pw


def _quantile_shares(ks: Sequence[int]) -> list[tuple[int, float]]:
    """The quantile tests' windows and shares: ``QUANTILE_SHARES`` within the longest
    evidence window (the baseline ends before the last max(ks) runs), shares summed
    where two windows meet there."""
    top, out = max(ks), {}
    for k, w in QUANTILE_SHARES:
        out[min(k, top)] = out.get(min(k, top), 0.0) + w
    return sorted(out.items())


def _quantile_test(b: _Baseline, sr: _Serial, quant: np.ndarray, kq: int,
                   share: float) -> tuple[_Candidate, np.ndarray]:
    """The least bad of the last ``kq`` runs against the baseline (exact under
    exchangeability), on the rows ``quant``, at ``share`` of the level: its candidate and
    its unweighted p, bad direction (rows without the test: p inf in the candidate, 1
    returned)."""
    c, sign = b.c, b.sign
    dev_base = sign[:, None] * (b.base - c[:, None])
    last = sign[:, None] * (b.full[:, -kq:] - c[:, None])
    pw, pb = np.ones(c.size), np.ones(c.size)
    i = np.flatnonzero(quant)
    pw[i] = quantile_p(dev_base[i], last[i])
    pb[i] = quantile_p(-dev_base[i], -last[i])
    # Reported as the least bad run of the window against the centre, with the
    # spread of one run.
    least = np.where(pw <= pb, c + sign * np.min(last, axis=1),
                     c - sign * np.min(-last, axis=1))
    off = np.where(quant, 1.0, np.inf)
    weight = np.full(c.size, share)
    cand = _Candidate(off * np.minimum(pw, pb) / share, off * pw / share, off * pb / share,
                      kq, c, least, sr.s1, sign * (least - c) / sr.s1, sr.df,
                      f"quantile-{kq}", weight)
    return cand, pw


def _judgements(b: _Baseline, params: GateParams, cands: list[_Candidate],
                why: list[str | None] | None, p_win: dict[int, np.ndarray],
                extras: dict[str, np.ndarray], fixed: dict,
                own_centre: np.ndarray) -> list[Judgement]:
    """The headline of each row: the candidate with the smallest p decides (the first
    on ties), its relative change, 95% CI and interval evidence (``Decider``)."""
    # (candidate, field, row): every field an array of one value a row
    t = np.array([[x.p, x.pw, x.pb, x.centre, x.est, x.se, x.z, x.df, x.weight] for x in cands])
    best = np.argmin(t[:, 0], axis=0)
    p_worse, p_better = np.minimum(1.0, t[:, 1].min(axis=0)), np.minimum(1.0, t[:, 2].min(axis=0))
    pw_b, pb_b, centre, est, se, z, df, weight = t[best, 1:, np.arange(b.c.size)].T
    denom = np.where(np.abs(centre) > 0, np.abs(centre), np.nan)
    rel = (est - centre) / denom
    d1 = np.where(np.abs(b.c) > 0, np.abs(b.c), np.nan)
    # The new run's own change: against its machine's level where it has one.
    own = (b.value - own_centre) / np.where(np.abs(own_centre) > 0, np.abs(own_centre), np.nan)
    tq = special.stdtrit(df, 0.975)
    ci_lo, ci_hi = (est - centre - tq * se) / denom, (est - centre + tq * se) / denom
    floor = np.where(d1 == d1, np.maximum(b.min_change, params.noise_floor * b.s / d1),
                     b.min_change)
    # The decider's p, unweighted, of a rise and of a fall.
    pw_d, pb_d = pw_b * weight, pb_b * weight
    p_up, p_down = np.where(b.sign > 0, pw_d, pb_d), np.where(b.sign > 0, pb_d, pw_d)
    won = [cands[i] for i in best.tolist()]
    quantile = {x.k: x for x in cands if x.method.startswith("quantile-")}
    cols = {k: v.tolist() for k, v in extras.items()}
    wins = {k: v.tolist() for k, v in p_win.items()}
    vals = zip(b.c.tolist(), rel.tolist(), ci_lo.tolist(), ci_hi.tolist(), z.tolist(),
               p_worse.tolist(), p_better.tolist(), floor.tolist(), own.tolist(),
               (se / np.abs(centre)).tolist(), df.tolist(), weight.tolist(),
               p_up.tolist(), p_down.tolist(), centre.tolist(), strict=True)
    out = []
    for j, (c, rl, lo, hi, zz, pw, pb, fl, ow, se_rel, dfj, wj, pu, pd, ce) in enumerate(vals):
        cs = b.cases[j]
        if why is not None and why[j]:  # the noise model says it cannot be guarded here
            out.append(Judgement("unguarded", c, cs.value, None, None, 0.0, 1.0, 1.0,
                                 b.min_change[j], 1, b.h.shape[1], None, cs.sign,
                                 reason=why[j]))
            continue
        ex = JudgeExtras(**{k: v[j] for k, v in cols.items()}, **fixed,
                         p_window_worse={k: v[j] for k, v in wins.items()})
        nan = rl != rl
        dec = None if nan or not ce else Decider(rl, se_rel, dfj, wj, pu, pd)
        if dec is not None and won[j].method.startswith("quantile-"):
            dec = _rank_decider(b, j, won[j])
        if ex.quantile and ex.q_k in quantile:
            ex.q_decider = _rank_decider(b, j, quantile[ex.q_k])
        out.append(Judgement(
            "ok", c, cs.value, None if nan else rl, None if nan else (lo, hi), zz, pw, pb, fl,
            won[j].k, b.h.shape[1], None if ow != ow else ow, cs.sign,
            statistic=f"robust-t/{won[j].method}", decider=dec, extras=ex))
    return out


def _rank_decider(b: _Baseline, j: int, x: _Candidate) -> Decider | None:
    """Row ``j``'s ``Decider`` of a quantile candidate: its least bad run's change and the
    baseline's deviations in that change's direction (``Decider.ranks``: an exact
    interval by inversion, where a t-interval about one run's spread says nothing of
    the rank test that decided)."""
    c, est, w = float(b.c[j]), float(x.est[j]), float(x.weight[j])
    if not c or not math.isfinite(est) or not math.isfinite(float(x.pw[j])):
        return None
    rel = (est - c) / abs(c)
    ranks = np.sort((1.0 if rel >= 0 else -1.0) * (b.base[j] - c) / abs(c))[::-1]
    pw, pb = float(x.pw[j]) * w, float(x.pb[j]) * w  # unweighted
    up, down = (pw, pb) if b.sign[j] > 0 else (pb, pw)
    return Decider(rel, float(x.se[j]) / abs(c), float(x.df[j]), w, up, down,
                   ranks=tuple(ranks.tolist()), k=x.k)


def _weights(m: int) -> tuple[float, ...]:
    """Weighted Bonferroni: half the level to the new run alone, the rest to windows.

    Holm, Scand. J. Stat. 6 (1979) 65-70 (weighted form); the new run alone
    carries the first-bad-run detection, the windows sustained and slow changes.
    """
    if m == 1:
        return (1.0,)
    return (0.5, *([0.5 / (m - 1)] * (m - 1)))
