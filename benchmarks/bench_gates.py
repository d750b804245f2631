"""Detection benchmark of the regression gate against its peers and two oracles.

Run: ``nox -s bench-gates`` (own venv with the peers) or
``python benchmarks/bench_gates.py [--quick] [--out benchmarks/results/bench_gates.md]``;
other seeds with ``--seed N --out ...``, and the targets over several seeds' results
with ``--pool A.json B.json ...``.

Series come from ``benchmarks/series.py`` (60 runs, change at run 40; runs
30-59 are the 30 gated runs of a null series). Per detector and cell:

- FA/series: share of null series with any alarm over the 30 gated runs;
- FA/run: alarms per gated null run;
- spike FA: the same on the null series with one +20% transient run at run 40
  (paired: the same noise, so the difference is the spike's own; the gate's
  cells also keep the shares alarmed only with and only without the spike);
- first / <=3 / <=10: share of series whose first alarm at or after the
  change falls on the first bad run / within 3 / within 10 runs;
- delay: median runs from the change to the first alarm (detected within 10).

``default``: every detector at its shipped settings. ``matched``: each peer's
threshold calibrated so that its FA/series on the null series of the same
cell is 5% (the gate's target); this project's gate always runs at defaults.
``held`` (``benchmarks/held.py``): the score peers and both CUSUMs given the
gate's first confirm rerun and calibrated to 5% FA/series on the spike series
as well as on nulls, the two constraints the gate is held to.
The gate trips, then confirms on a rerun (the run's twin: same regime, fresh
noise), and on further reruns (further twins) while the reruns' mean is
borderline (the sequential confirm, ``stats.confirm(another=True)`` then
``stats.confirm_reruns``, with the reruns of unheld sequential confirms of the
last 10 runs carried), exactly as ``gates.gate`` does in a suite session with
its default four confirm attempts. At each run the first attempts of a cell's
series are judged in one ``stats.judge_many`` call, as the gate judges a run's
metrics, and only the series that trip go on to the confirm stages
(``gate_alarms_many``); each series' alarms are those it gets judged alone.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from held import calibrate_held, confirmed_first  # noqa: E402
from peers import (  # noqa: E402
    CusumOracle,
    EDivisive,
    FixedPercent,
    MilesBand,
    OfflineOracle,
    Otava,
    ParamDetector,
    PluginCusum,
    ScoreDetector,
    ZScore,
    available_libraries,
)
from series import (  # noqa: E402
    EFFECTS,
    NOISE_MODELS,
    Series,
    effect_size,
    make_pool_series,
    make_series,
    null_summary_stats,
    with_spike,
)

from gates.model import stats  # noqa: E402

__all__ = ["main", "run_benchmark", "gate_alarms", "gate_alarms_many", "speed_1000"]

TAU = 40
GATE_FA = "gate-fa"  # mode: calibrated to the gate's own FA/series in the cell
GATED = list(range(30, 60))
AFTER = list(range(TAU, TAU + 10))
TARGET_FA = 0.05
DETECT_EFFECTS = [e for e in EFFECTS if e not in ("null", "spike")]


@dataclass
class Cell:
    fa_series: float = float("nan")
    fa_run: float = float("nan")
    spike_fa: float = float("nan")
    det: dict[str, tuple[float, float, float, float]] = field(default_factory=dict)
    us_per_eval: float = float("nan")
    n_null: int = 0
    note: str = ""
    spike_only: float = float("nan")  # share of series alarmed with the spike, not without
    null_only: float = float("nan")  # ... without it, not with it (paired series)


def gate_alarms(
    s: Series, ts: Sequence[int], *, confirm: bool = True, first_only: bool = False,
    machines: bool = True, trace: list[dict] | None = None,
) -> np.ndarray:
    """Alarms of this project's gate at runs ``ts`` (defaults, confirm on trip):
    ``gate_alarms_many`` of one series.

    ``machines``: pass the series' machine names (when it has them) as a suite
    session does from the runs' GPU uuids; False judges as if none were recorded.
    ``trace``, when given, receives one dict per trip: the run, the first
    attempt's judgement and level, whether it was a suspect, the confirm path
    (``one-rerun``, ``corroborate``, ``sequential-N`` for N reruns) and the verdict.
    """
    return gate_alarms_many([s], ts, confirm=confirm, first_only=first_only, machines=machines,
                            traces=None if trace is None else [trace])[0]


def gate_alarms_many(
    ss: Sequence[Series], ts: Sequence[int], *, confirm: bool = True, first_only: bool = False,
    machines: bool = True, traces: Sequence[list[dict]] | None = None,
) -> list[np.ndarray]:
    """``gate_alarms`` of each series (``traces``: one list per series), the first
    attempts of all series at a run judged together (``stats.judge_many``, as the gate
    judges a run's metrics); only the series that trip go on to the confirm stages,
    one by one. A series' verdicts depend on its own runs only."""
    gs = [_GateSeries(s, machines) for s in ss]
    out = np.zeros((len(ss), len(ts)), dtype=bool)
    live = list(range(len(ss)))
    for i, t in enumerate(ts):
        js = stats.judge_many([gs[k].case(t) for k in live])
        for k, j in zip(live, js, strict=True):
            v = gs[k].settle(t, j, confirm=confirm, trace=None if traces is None else traces[k])
            out[k, i] = v == "regression"
        if first_only:
            live = [k for k in live if not out[k, i]]
    return list(out)


class _GateSeries:
    """One series as the gate's history holds it while ``gate_alarms_many`` walks it."""

    def __init__(self, s: Series, machines: bool) -> None:
        self.x = s.summaries.copy()  # a transient's rerun replaces it for later runs
        self.tw, self.more = s.twin_summaries, s.more_twin_summaries
        self.names = s.hosts if machines else None
        self.unheld: dict[int, list[float]] = {}  # run -> reruns of its unheld sequential confirm
        self.standins: set[int] = set()  # runs whose transient first attempt their rerun replaced
        # Runs that serve later baselines: a run whose chain held a regression does not,
        # until accepted (never, here), as ``gates.store.baselines.failed_runs`` reads it.
        self.kept = np.ones(self.x.size, dtype=bool)
        # The newest run's failure nobody accepted (``decisions.still_red``; gates.gate)
        self.open: stats.OpenRegression | None = None

    def _before(self, t: int) -> np.ndarray:
        """Indices of the runs before ``t`` that serve its baseline."""
        return np.flatnonzero(self.kept[:t])

    def base(self, t: int) -> np.ndarray:
        return self.x[self._before(t)]

    def kw(self, t: int) -> dict:
        idx = self._before(t)
        kw: dict = ({"hosts": [self.names[i] for i in idx], "host": self.names[t]}
                    if self.names else {})
        if idx.size and int(idx[-1]) in self.standins:
            kw["standin_last"] = True
        return kw

    def case(self, t: int) -> stats.Case:
        """The first attempt of run ``t`` against the runs before it."""
        return stats.Case(self.base(t), float(self.x[t]), 1, **self.kw(t))

    def settle(self, t: int, j: stats.Judgement, *, confirm: bool,
               trace: list[dict] | None) -> str:
        """Run ``t``'s verdict given its first attempt's judgement ``j``: on a trip, the
        confirm reruns as ``gates.gate`` takes them in a suite session."""
        o = self.open
        if (confirm and o is not None and j.baseline is not None
                and stats.still_red(o, float(self.x[t]), 1)):
            # A red stays red until accepted (never, here), final.
            self.kept[t] = False  # the open regression stays the one that held
            if trace is not None:
                trace.append({"t": t, "judgement": j, "level": None, "suspect": False,
                              "path": "still-red", "verdict": "regression"})
            return "regression"
        held: list[float] = []
        v = self._settle(t, j, confirm=confirm, trace=trace, held=held)
        if v == "regression":
            self.kept[t] = False
            self.open = (stats.OpenRegression(str(t), float(j.baseline), float(np.mean(held)))
                         if confirm and held and j.baseline is not None else None)
        else:
            self.open = None  # a run that passed closes it (the code changed back)
        return v

    def _settle(self, t: int, j: stats.Judgement, *, confirm: bool,
                trace: list[dict] | None, held: list[float]) -> str:
        """``settle`` without the open regression; ``held`` receives the attempts' values
        (first attempt and reruns) where the chain held."""
        P = stats.DEFAULTS
        x, tw, more, kw, base = self.x, self.tw, self.more, self.kw(t), self.base(t)
        sequential = confirm and bool(more)
        level = stats.level_for(j, P.level) if sequential else P.level
        v = stats.decide(j, j.p_worse, level=level)
        suspect = v == "pass" and stats.is_suspect(j, j.p_worse, level=level)
        if not ((v == "regression" or suspect) and confirm):
            return v
        jc, v = stats.confirm(base, float(tw[t]), sign=1, first=float(x[t]),
                              suspect=suspect, another=sequential, **kw)
        path = "one-rerun"
        if v == "suspect" and jc.extras.corroborate and more:
            # A rerun beyond every run of a heavy-tailed baseline: the next one decides.
            _, v = stats.corroborate(base, float(more[0][t]), sign=1, first=float(x[t]),
                                     previous=float(tw[t]), **kw)
            path = "corroborate"
        reruns = [float(tw[t])]
        # The unheld sequential confirms of the last w baseline runs join the mean (as
        # the gate's baselines.unheld_chains reads them from the history).
        w = max(P.windows, default=1)
        carried = [r for u in self._before(t)[-w:].tolist() for r in self.unheld.get(u, ())]
        for tk in more:  # borderline: another rerun, and the reruns' mean decides
            if v != "suspect":
                break
            reruns.append(float(tk[t]))
            path = f"sequential-{len(reruns)}"
            _, v = stats.confirm_reruns(base, reruns, sign=1, final=len(reruns) > len(more),
                                        carried=carried, first=float(x[t]), **kw)
        if len(reruns) >= 2 and v != "regression":
            self.unheld[t] = reruns
        if v == "regression":
            held += [float(x[t]), *reruns]
        if v != "regression" and jc.extras.p_split <= stats.TRANSIENT_LEVEL:
            x[t] = tw[t]
            self.standins.add(t)
        if trace is not None:
            trace.append({"t": t, "judgement": j, "level": level, "suspect": suspect,
                          "path": path, "verdict": v})
        return v


def paired_shares(null: Sequence[bool], spike: Sequence[bool]) -> tuple[float, float]:
    """(share alarmed only with the spike, share only without) over paired series."""
    a, b = np.asarray(null, dtype=bool), np.asarray(spike, dtype=bool)
    if a.shape != b.shape or not a.size:
        return float("nan"), float("nan")
    return float(np.mean(b & ~a)), float(np.mean(a & ~b))


def paired_se(spike_only: float, null_only: float, n: int) -> float:
    """Standard error of spike FA - null FA over ``n`` paired series (McNemar's:
    only the discordant series vary)."""
    d = spike_only - null_only
    return math.sqrt(max(spike_only + null_only - d * d, 0.0) / max(n, 1))


def _detect_stats(first_idx: list[int | None]) -> tuple[float, float, float, float]:
    n = len(first_idx)
    if n == 0:
        return (float("nan"),) * 4
    d = [i for i in first_idx if i is not None]
    first = sum(1 for i in d if i == 0) / n
    w3 = sum(1 for i in d if i < 3) / n
    w10 = sum(1 for i in d if i < 10) / n
    delay = float(np.median(d)) if d else float("nan")
    return first, w3, w10, delay


def _first(alarms: np.ndarray) -> int | None:
    idx = np.flatnonzero(alarms)
    return int(idx[0]) if idx.size else None


def _eval_boolean(
    fn: Callable[[list[Series], Sequence[int], bool], list[np.ndarray]],
    series: dict[str, list[Series]],
) -> Cell:
    """The cell of a detector that alarms on a list of series at once:
    ``fn(series, runs, stop at the first alarm)``."""
    cell = Cell()
    t0 = time.perf_counter()
    n_eval = 0
    nulls = fn(series["null"], GATED, False)
    n_eval += len(GATED) * len(nulls)
    cell.n_null = len(nulls)
    cell.fa_series = float(np.mean([a.any() for a in nulls]))
    cell.fa_run = float(np.mean([a.mean() for a in nulls]))
    spikes = fn(series["spike"], GATED, True)
    n_eval += sum(int(np.argmax(a)) + 1 if a.any() else len(GATED) for a in spikes)
    cell.spike_fa = float(np.mean([a.any() for a in spikes]))
    cell.spike_only, cell.null_only = paired_shares([a.any() for a in nulls],
                                                    [a.any() for a in spikes])
    for e in DETECT_EFFECTS:
        firsts = [_first(a) for a in fn(series[e], AFTER, True)]
        n_eval += sum((f or 9) + 1 for f in firsts)
        cell.det[e] = _detect_stats(firsts)
    cell.us_per_eval = (time.perf_counter() - t0) / max(n_eval, 1) * 1e6
    return cell


def _eval_score(
    make: Callable[[Series], ScoreDetector],
    series: dict[str, list[Series]],
    *,
    null_ts: Sequence[int] = GATED,
    spike_ts: Sequence[int] = GATED,
    targets: Sequence[float] = (TARGET_FA,),
) -> tuple[Cell, ...]:
    """(default, matched, ...) cells of a score detector, scored once: one matched cell
    per FA/series target on the nulls (5%, then the gate's own rate in the cell for the
    ``gate-fa`` mode)."""
    t0 = time.perf_counter()
    n_eval = 0

    def sc(s: Series, ts: Sequence[int]) -> np.ndarray:
        nonlocal n_eval
        n_eval += len(ts)
        return make(s).scores(s.summaries, ts)

    nulls = [sc(s, null_ts) for s in series["null"]]
    spikes = [sc(s, spike_ts) for s in series["spike"]]
    dets = {e: [sc(s, AFTER) for s in series[e]] for e in DETECT_EFFECTS}
    us = (time.perf_counter() - t0) / max(n_eval, 1) * 1e6
    maxes = np.array([a.max() for a in nulls])
    # Calibrated thresholds: the (1 - target) quantile of the per-series maximum on nulls.
    thr_matched = [float(np.quantile(maxes, 1 - t, method="higher")) for t in targets]
    d0 = make(series["null"][0]).default
    out = []
    for thr in (d0, *thr_matched):
        cell = Cell(us_per_eval=us, n_null=len(nulls))
        if thr is None:
            out.append(cell)
            continue
        cell.fa_series = float(np.mean(maxes > thr))
        cell.fa_run = float(np.mean([np.mean(a > thr) for a in nulls]))
        cell.spike_fa = float(np.mean([(a > thr).any() for a in spikes]))
        for e in DETECT_EFFECTS:
            cell.det[e] = _detect_stats([_first(a > thr) for a in dets[e]])
        out.append(cell)
    return tuple(out)


def _per_effect(make: Callable[[Series, str], ScoreDetector], series: dict[str, list[Series]],
                *, fa_from: str | None = "step5", note: str = "",
                targets: Sequence[float] = (TARGET_FA,), **kw) -> tuple[Cell, ...]:
    """Matched cells, one per FA target (``_eval_score``), of a detector built for each
    effect (an oracle that knows its size): calibrated on the nulls once per effect; FA,
    spike FA and time from ``fa_from``'s calibration (or the last effect's FA without
    spikes when None)."""
    cells = tuple(Cell(n_null=len(series["null"]), note=note) for _ in targets)
    for e in DETECT_EFFECTS:
        sub = {"null": series["null"], "spike": series["spike"],
               **{k: (series[e] if k == e else []) for k in DETECT_EFFECTS}}
        _, *mts = _eval_score(lambda s, e=e: make(s, e), sub, targets=targets, **kw)
        for cell, mt in zip(cells, mts, strict=True):
            cell.det[e] = mt.det[e]
            cell.us_per_eval = mt.us_per_eval
            if fa_from is None:
                cell.fa_series, cell.fa_run = mt.fa_series, mt.fa_run
            elif e == fa_from:
                cell.fa_series, cell.fa_run, cell.spike_fa = (mt.fa_series, mt.fa_run,
                                                              mt.spike_fa)
    return cells


def _eval_param(det: ParamDetector, series: dict[str, list[Series]]) -> tuple[Cell, Cell]:
    """(default, matched) cells of a parameter-driven detector (grid loosest first).

    A stricter setting is evaluated only where the looser one alarmed (its
    alarms are, up to permutation noise, a subset).
    """
    t0 = time.perf_counter()
    n_eval = 0

    def alarms(s: Series, ts: Sequence[int], grid: Sequence[float], stop: bool) -> np.ndarray:
        nonlocal n_eval
        a = np.zeros((len(grid), len(ts)), dtype=bool)
        x = s.summaries
        for i, t in enumerate(ts):
            for g, p in enumerate(grid):
                if g > 0 and not a[g - 1, i]:
                    break
                n_eval += 1
                a[g, i] = det.alarm(x, t, p)
            if stop and a[-1, i]:
                break
        return a

    grid = det.grid
    nulls = [alarms(s, GATED, grid, False) for s in series["null"]]
    spikes = [alarms(s, GATED, grid, False) for s in series["spike"]]
    dets = {e: [alarms(s, AFTER, grid, True) for s in series[e]] for e in DETECT_EFFECTS}
    us = (time.perf_counter() - t0) / max(n_eval, 1) * 1e6
    fa = [float(np.mean([a[g].any() for a in nulls])) for g in range(len(grid))]
    ok = [g for g in range(len(grid)) if fa[g] <= TARGET_FA]
    g_matched = ok[0] if ok else len(grid) - 1
    out = []
    for g in (grid.index(det.default), g_matched):
        cell = Cell(us_per_eval=us, n_null=len(nulls))
        cell.fa_series = fa[g]
        cell.fa_run = float(np.mean([a[g].mean() for a in nulls]))
        cell.spike_fa = float(np.mean([a[g].any() for a in spikes]))
        for e in DETECT_EFFECTS:
            cell.det[e] = _detect_stats([_first(a[g]) for a in dets[e]])
        out.append(cell)
    out[1].note = f"pvalue={grid[g_matched]}" + ("" if ok else " (cannot reach 5% FA on this grid)")
    return out[0], out[1]


def _matrix(series: list[Series]) -> tuple[np.ndarray, np.ndarray]:
    """(series, runs) matrices of run summaries and of their first reruns."""
    return (np.array([s.summaries for s in series]), np.array([s.twin_summaries for s in series]))


def _eval_held(make: Callable[[list[Series], str], ScoreDetector],
               series: dict[str, list[Series]], *, per_effect: bool, note: str = "") -> Cell:
    """``held`` cell of a score detector (``benchmarks/held.py``): the gate's first confirm
    rerun, threshold calibrated to 5% FA/series on nulls and on spikes. ``make(series,
    effect)`` builds the detector over a list of series; with ``per_effect`` (the oracles,
    which know the shift) it is calibrated once per effect and FA is step 5%'s."""
    t0 = time.perf_counter()
    null, spike = _matrix(series["null"]), _matrix(series["spike"])
    cell = Cell(n_null=len(series["null"]),
                note=(note + "; " if note else "") + "us/eval: whole calibration per null run")
    cal = None
    for e in DETECT_EFFECTS:
        if cal is None or per_effect:
            cal = calibrate_held(make(series["null"], e), make(series["spike"], e), null, spike,
                                 GATED)
            if e == "step5" or not per_effect:
                cell.fa_series, cell.spike_fa = cal[1], cal[2]
        first = confirmed_first(make(series[e], e), *_matrix(series[e]), AFTER, cal[0])
        cell.det[e] = _detect_stats([int(f) if f >= 0 else None for f in first])
    cell.us_per_eval = (time.perf_counter() - t0) * 1e6 / (len(series["null"]) * len(GATED))
    return cell


def _rerun_rngs(key: list[int]) -> list[np.random.Generator]:
    """One generator per confirm rerun after the first (key + [2], [3], ...): adding
    reruns leaves the series and the earlier reruns as they were."""
    return [np.random.default_rng([*key, i]) for i in range(2, stats.DEFAULTS.confirm_attempts + 1)]


def _cell_series(model: str, m: int, reps: int, seed: int,
                 effects: Sequence[str] = EFFECTS) -> dict[str, list[Series]]:
    """The series of one cell, drawn effect by effect in ``EFFECTS`` order from one
    generator per (seed, model, m); a prefix of ``EFFECTS`` gives the same series. The
    spike series (last) are the null series with run ``TAU`` raised (``with_spike``)."""
    if tuple(effects) != EFFECTS[: len(effects)]:
        raise ValueError(f"effects {effects!r} must be a prefix of {EFFECTS!r}")
    rng = np.random.default_rng([seed, NOISE_MODELS.index(model), m])
    more = _rerun_rngs([seed, NOISE_MODELS.index(model), m])
    out: dict[str, list[Series]] = {}
    for e in effects:  # spikes last: the null series raised at TAU (paired)
        out[e] = ([with_spike(s, TAU) for s in out["null"]] if e == "spike" else
                  [make_series(model, e, rng, tau=TAU, m=m, rerun_rngs=more)
                   for _ in range(reps)])
    return out


def run_benchmark(
    reps: int, slow_reps: int, *, seed: int = 0, peers_on: bool = True,
    models: Sequence[str] = NOISE_MODELS, ms: Sequence[int] = (1, 5), log=print,
) -> dict:
    libs = available_libraries() if peers_on else {}
    results: dict = {"libs": libs, "cells": {}}
    for model in models:
        for m in ms:
            series = _cell_series(model, m, reps, seed)
            t0 = time.perf_counter()
            cells: dict[tuple[str, str], Cell] = {}
            cells[("gate", "default")] = _eval_boolean(
                lambda ss, ts, stop: gate_alarms_many(ss, ts, first_only=stop), series)
            cells[("gate-no-confirm", "default")] = _eval_boolean(
                lambda ss, ts, stop: gate_alarms_many(ss, ts, confirm=False, first_only=stop),
                series)
            # Matched: FA/series 5% on the cell's nulls; gate-fa: at most the gate's own
            # there (the "matched" taken literally). One scoring pass serves both.
            fas = (TARGET_FA, cells[("gate", "default")].fa_series)
            for make in (lambda s: FixedPercent(), lambda s: MilesBand(), lambda s: ZScore()):
                name = make(series["null"][0]).name
                (cells[(name, "default")], cells[(name, "matched")],
                 cells[(name, GATE_FA)]) = _eval_score(make, series, targets=fas)

            def oracle_stats(s: Series, model: str = model, m: int = m) -> tuple[float, float]:
                return null_summary_stats(model, m, s.bench)

            # The online oracle knows the shift size: one CUSUM per effect, calibrated on nulls;
            # the plug-in learns the noise from the runs before the first gated one.
            cells[("cusum-oracle", "matched")], cells[("cusum-oracle", GATE_FA)] = _per_effect(
                lambda s, e: CusumOracle(*oracle_stats(s), effect_size(e), start=GATED[0]), series,
                targets=fas)
            cells[("cusum-plugin", "matched")], cells[("cusum-plugin", GATE_FA)] = _per_effect(
                lambda s, e: PluginCusum(s.summaries, effect_size(e), GATED[0]), series,
                note=f"noise from runs 0-{GATED[0] - 1}", targets=fas)
            (cells[("offline-oracle", "matched")],) = _per_effect(
                lambda s, e: OfflineOracle(*oracle_stats(s), TAU), series, fa_from=None,
                null_ts=AFTER, spike_ts=AFTER, note="FA over runs 40-49 only (knows when)")
            # Held to the gate's constraints: its first rerun, and spikes count as false alarms.
            for peer in (FixedPercent, MilesBand, ZScore):
                cells[(peer.name, "held")] = _eval_held(lambda ss, e, peer=peer: peer(), series,
                                                        per_effect=False)

            def oracle_matrix(ss: list[Series], e: str, model: str = model, m: int = m):
                st = np.array([null_summary_stats(model, m, s.bench) for s in ss]).reshape(-1, 2)
                mu, sd = st[:, :1], st[:, 1:]
                return CusumOracle(mu, sd, effect_size(e) * np.abs(mu), start=GATED[0])

            cells[("cusum-oracle", "held")] = _eval_held(oracle_matrix, series, per_effect=True)
            cells[("cusum-plugin", "held")] = _eval_held(
                lambda ss, e: PluginCusum(_matrix(ss)[0], effect_size(e), GATED[0]), series,
                per_effect=True, note=f"noise from runs 0-{GATED[0] - 1}")
            if peers_on and m == 1:
                slow = {e: v[:slow_reps] for e, v in series.items()}
                if libs.get("otava") == "ok":
                    otava = Otava()
                    d, mt = _eval_score(lambda s, o=otava: o, slow)
                    cells[("otava", "default")], cells[("otava", "matched")] = d, mt
                if libs.get("e-divisive") == "ok":
                    d, mt = _eval_param(EDivisive(), slow)
                    cells[("e-divisive", "default")], cells[("e-divisive", "matched")] = d, mt
            results["cells"][(model, m)] = cells
            log(f"  {model:9s} m={m}: {time.perf_counter() - t0:6.1f} s")
    return results


FIRST_RUN_CELL = ("gauss1", 5, "step5")  # the first-bad-run target: 1% noise, 5 samples, 5%
FIRST_RUN_TARGET = 0.94  # ... and its target: the first bad run caught in >= 94% of series


def _fa_cell(task: tuple) -> tuple[str, int, dict[str, list], float]:
    """One cell of ``fa_over_seeds``: its per-seed rates (a worker's unit)."""
    model, m, seeds, reps = task
    t0 = time.perf_counter()
    out: dict[str, list] = {"null": [], "spike": [], "paired": [], "first": []}
    first = (model, m) == FIRST_RUN_CELL[:2]
    for seed in seeds:
        ser = _cell_series(model, m, reps, seed)
        flags = {e: [a.any() for a in gate_alarms_many(ser[e], GATED, first_only=True)]
                 for e in ("null", "spike")}
        for e, f in flags.items():
            out[e].append(float(np.mean(f)))
        out["paired"].append(paired_shares(flags["null"], flags["spike"]))
        if first:
            out["first"].append(float(np.mean(
                [a.any() for a in gate_alarms_many(ser[FIRST_RUN_CELL[2]], [TAU])])))
    return model, m, out, time.perf_counter() - t0


def fa_tasks(seeds: Sequence[int], reps: int, models: Sequence[str],
             ms: Sequence[int]) -> list[tuple]:
    """``_fa_cell``'s work units: one per cell and seed (each draws its own series), so
    that ``--jobs N`` keeps N processes busy (14 cells x 6 seeds: 84 units)."""
    return [(model, m, [seed], reps) for model in models for m in ms for seed in seeds]


def fa_over_seeds(seeds: Sequence[int], reps: int, *, models: Sequence[str] = NOISE_MODELS,
                  ms: Sequence[int] = (1, 5), log=print, jobs: int = 1) -> dict[str, dict]:
    """The gate's rates the targets are about, per cell and seed.

    ``null``: false alarms per 30-run null series; ``spike``: the same on
    those series with one transient spike; ``paired``: per seed, the shares
    alarmed only with the spike and only without (``paired_shares``);
    ``first``: detection on the first bad run of ``FIRST_RUN_CELL``. The same
    series the full benchmark draws for each seed (same generator and order),
    so seed 0 reproduces its columns. One
    seed's worst cell of 14 is a noisy maximum; the mean over seeds is the rate
    the target is about. ``jobs``: cells judged in that many processes (each
    cell draws its own series: the rates do not depend on it).
    """
    out: dict[str, dict] = {"null": {}, "spike": {}, "paired": {}, "first": {}}
    tasks = fa_tasks(seeds, reps, models, ms)
    if jobs > 1:
        from concurrent.futures import ProcessPoolExecutor  # noqa: PLC0415

        with ProcessPoolExecutor(jobs) as ex:
            done = list(ex.map(_fa_cell, tasks))
    else:
        done = map(_fa_cell, tasks)
    secs: dict[tuple[str, int], float] = {}
    for model, m, cell, sec in done:  # in task order: seeds in order within a cell
        for k, v in cell.items():
            if v:
                out[k].setdefault((model, m), []).extend(v)
        secs[(model, m)] = secs.get((model, m), 0.0) + sec
        if len(out["null"][(model, m)]) == len(seeds):
            log(f"  {model:9s} m={m}: {secs[(model, m)]:6.1f} s")
    return out


def render_fa(fa: dict[str, dict], *, seeds: Sequence[int], reps: int, elapsed: float,
              jobs: int = 1) -> str:
    from tabulate import tabulate  # noqa: PLC0415 - as in render: only the report needs it

    n = reps * len(seeds)

    def mean_se(v: Sequence[float]) -> tuple[float, float]:
        # A mean of per-seed rates of equal counts is a count over n: round away the float
        # residue, or 60 alarms in 1,200 series reads as more than 5%.
        mean = round(float(np.mean(v)) * n) / n
        return mean, math.sqrt(max(mean * (1 - mean), 1e-12) / n)

    rows = []
    for cell, v in fa["null"].items():
        mean, se = mean_se(v)
        sp, sp_se = mean_se(fa["spike"][cell])
        pairs = fa.get("paired", {}).get(cell)
        if pairs:  # the spike series are the null series raised: McNemar's se
            so, no = (float(np.mean([p[i] for p in pairs])) for i in (0, 1))
            d_se = paired_se(so, no, n)
            added = f"{100 * (sp - mean):+.2f} ({100 * so:.2f} / {100 * no:.2f}, se {100 * d_se:.2f})"
        else:  # independent draws (results from before the pairing)
            d_se = math.hypot(se, sp_se)
            added = f"{100 * (sp - mean):+.2f} (se {100 * d_se:.2f})"
        rows.append([cell[0], cell[1], " / ".join(f"{100 * x:.1f}" for x in v),
                     f"{100 * mean:.2f}%", f"{100 * se:.2f}", "yes" if mean <= TARGET_FA else "NO",
                     f"{100 * sp:.2f}%", added, "yes" if sp - mean <= 2 * d_se + 1e-12 else "NO"])
    worst = max(fa["null"].items(), key=lambda kv: float(np.mean(kv[1])))
    out = [
        "# Gate false alarms and first-bad-run detection over several seeds\n",
        f"Command: `python benchmarks/bench_gates.py --fa-seeds {','.join(map(str, seeds))}"
        f" --reps {reps}{f' --jobs {jobs}' if jobs > 1 else ''}`; {reps} series per cell, "
        f"effect and seed ({n} per cell), the gate at its defaults with its confirm reruns; "
        f"{elapsed:.0f} s{f' in {jobs} processes' if jobs > 1 else ''}.\n",
        "Targets: at most 5% false alarms per 30-run null series in every noise model; single "
        "spikes no more false alarms than nulls (here: within 2 standard errors of the "
        "difference). One seed's worst cell of 14 is a noisy maximum (standard error about "
        "1.5 points at 200 series); the mean over seeds is the rate the targets are about. "
        "The spike series are the null series with run 40 raised 20% (its reruns clean), so "
        "`spike - null` is what the spike adds: series alarmed only with it / only without "
        "it, and the paired (McNemar) standard error of the difference, in points.\n",
        tabulate(rows, headers=["noise", "m", "null FA % per seed", "mean", "se (points)",
                                "<= 5%", "spike FA", "spike - null (with / without, se)",
                                "spike <= null"], tablefmt="github"),
        "",
        f"Worst cell: {worst[0][0]}/m={worst[0][1]}, {100 * float(np.mean(worst[1])):.2f}%.",
        "",
    ]
    for (model, m), v in fa["first"].items():
        mean, se = mean_se(v)
        out += [f"First bad run ({model}, m={m}, {FIRST_RUN_CELL[2]}; "
                f"target >= {100 * FIRST_RUN_TARGET:.0f}%): "
                + " / ".join(f"{100 * x:.1f}" for x in v)
                + f" per seed, mean {100 * mean:.1f}% (se {100 * se:.1f} points): "
                + ("met." if mean >= FIRST_RUN_TARGET else "MISSED."), ""]
    return "\n".join(out)


# (machines at the start, chance a run lands on a new one, most runs a machine takes in a
# row: 1, each run draws its machine; 8, stretches of 2-8 runs, as CI pools hand out hosts)
POOLS = ((3, 0.1, 1), (2, 0.03, 1), (3, 0.3, 8))


def machines_benchmark(reps: int, *, seed: int = 0, log=print) -> dict:
    """The gate on runs spread over a growing pool of machines, with and without names.

    Series from ``series.make_pool_series`` (machine offsets 1.5%, run noise 0.5%,
    5 samples per run); per pool setting: null FA per 30-run series and detection
    of 5% and 10% steps (first bad run / within 10), the gate given the machines'
    names (as a suite session gives it GPU uuids) and not given them.
    """
    out: dict = {}
    for pool, p_new, stretch in POOLS:
        key = [seed, 100 + pool, int(p_new * 1000)] + ([stretch] if stretch > 1 else [])
        rng = np.random.default_rng(key)
        more = _rerun_rngs(key)
        series = {e: [make_pool_series(e, rng, tau=TAU, pool=pool, p_new=p_new, rerun_rngs=more,
                                       stretch=stretch)
                      for _ in range(reps)] for e in ("null", "step5", "step10")}
        for named in (True, False):
            t0 = time.perf_counter()
            fa = float(np.mean([a.any() for a in gate_alarms_many(series["null"], GATED,
                                                                  machines=named)]))
            det = {e: _detect_stats([_first(a) for a in gate_alarms_many(
                       series[e], AFTER, first_only=True, machines=named)])
                   for e in ("step5", "step10")}
            out[(pool, p_new, stretch, named)] = {"fa": fa, "det": det}
            log(f"  pool {pool}, new {p_new}, stretch {stretch}, names {named}: "
                f"{time.perf_counter() - t0:.1f} s")
    return out


def render_machines(res: dict, *, reps: int, seed: int, elapsed: float) -> str:
    from tabulate import tabulate  # noqa: PLC0415 - as in render: only the report needs it

    rows = []
    for (pool, p_new, stretch, named), r in res.items():
        d5, d10 = r["det"]["step5"], r["det"]["step10"]
        rows.append([pool, p_new, "1" if stretch <= 1 else f"2-{stretch}",
                     "yes" if named else "no", f"{100 * r['fa']:.1f}%",
                     f"{_pct(d5[0])} / {_pct(d5[2])}", f"{_pct(d10[0])} / {_pct(d10[2])}"])
    return "\n".join([
        "# The gate on a growing pool of machines\n",
        f"Command: `python benchmarks/bench_gates.py --machines --reps {reps} --seed {seed}`; "
        f"{reps} series per cell; {elapsed:.0f} s.\n",
        "Series (`series.make_pool_series`): 60 runs of 5 samples, change at run 40, runs "
        "30-59 gated; each machine has an offset N(0, 1.5%), each run N(0, 0.5%) plus "
        "N(0, 0.5%) per sample; a run lands on a machine already seen, or with the given "
        "chance on a new one (`runs in a row` 2-8: a machine, once drawn, takes that many "
        "runs, as a CI pool hands a host several jobs); its confirm rerun runs on the same "
        "machine. `names`: the gate "
        "is given each run's machine (GPU uuids in a suite session) and adds the "
        "between-machine variance (`stats.host_variance`) for a machine its baseline has "
        "not seen.\n",
        tabulate(rows, headers=["machines at start", "P(new machine)", "runs in a row",
                                "names", "FA/series",
                                "step 5%: first / within 10", "step 10%"],
                 tablefmt="github"),
        "",
    ])


def speed_1000(n_metrics: int = 1000, n_runs: int = 200, seed: int = 0) -> float:
    """Seconds to judge n_metrics metrics against n_runs-run histories, plus BH."""
    rng = np.random.default_rng(seed)
    hist = [rng.normal(1, 0.03, (n_runs, 5)) for _ in range(n_metrics)]
    new = [rng.normal(1, 0.03, 5) for _ in range(n_metrics)]
    t0 = time.perf_counter()
    # As the gate does: each metric reduced to run summaries, the run's metrics judged
    # together (``stats.judge_many``).
    summed = [stats.summarize(h, x) for h, x in zip(hist, new, strict=True)]
    js = stats.judge_many([stats.Case(h, x, 1, extra_var=e) for h, x, e in summed])
    q = stats.bh_qvalues([j.p_worse for j in js])
    [stats.decide(j, qi, level=stats.DEFAULTS.level) for j, qi in zip(js, q, strict=True)]
    return time.perf_counter() - t0


# ---------------------------------------------------------------- report


def _calibrated(cell: Cell) -> bool:
    """A matched peer counts only if its FA really is about 5% (2 standard errors)."""
    n = max(cell.n_null, 1)
    return cell.fa_series <= TARGET_FA + 2 * (TARGET_FA * (1 - TARGET_FA) / n) ** 0.5


def _best_peer_cell(c: dict, e: str, idx: int, mode: str = "matched") -> Cell | None:
    """The calibrated peer in ``mode`` with the highest detection ``det[e][idx]``, if any."""
    peers = [c[(p, mode)] for p in PEERS if (p, mode) in c and _calibrated(c[(p, mode)])]
    return max(peers, key=lambda x: x.det[e][idx], default=None)


def _best_peer(c: dict, e: str, idx: int, mode: str = "matched") -> float:
    best = _best_peer_cell(c, e, idx, mode)
    return float("nan") if best is None else best.det[e][idx]


def _pct(x: float) -> str:
    return "-" if x != x else f"{100 * x:.0f}%"


PEERS = ("fixed-5%", "miles-band", "z-score", "otava", "e-divisive")

NOTES = """\
- Every detector sees the same run summaries (the median of a run's samples); only
  this project's gate also gets a confirm rerun (the run's twin: fresh process, same
  regime), and up to three more (further twins) while the reruns' mean is borderline,
  because that is how it runs in a suite session (`--confirm 4`). `gate-no-confirm` shows
  the first attempt alone, at the gate's own level.
- Peers `matched` are calibrated on the null series of the same cell, so their
  matched FA is 5% by construction (up to sampling noise); the gate is never tuned
  per cell. Otava is scored by -log10 p of the change points one call at
  max_pvalue = 0.05 reports in the last 10 runs (default = p <= 0.001); E-divisive
  is calibrated over its p-value grid 0.05 / 0.02 / 0.01 (100 permutations).
- Spikes are transient runner glitches (their rerun is clean); a spike alarm
  counts as a false alarm whether it fires on the spike run or after it. The
  spike series are the null series with run 40 raised (paired), so spike FA
  minus FA/series is what the spike adds; the targets judge it against its
  paired (McNemar) standard error.
- The CUSUM oracle knows the mean and SD of a null run summary and the shift
  size (for drift: the 10-run total), and starts at the first gated run; the
  offline oracle also knows the change run, so its FA is over runs 40-49 only.
- The plug-in CUSUM is the same CUSUM with the noise learnt as a gate must learn
  it: mean and SD of runs 0-29 (statistical process control's Phase I), the
  shift size still known and the threshold still tuned on the cell's nulls. It
  is a yardstick for what history allows, not a target: where it falls short
  of 90% of the oracle, so must any gate that learns the noise from 30-40 runs
  and does not know the shift (estimated parameters cost a CUSUM much of its
  power; Jensen, Jones-Farmer, Champ & Woodall, J. Quality Technology 38
  (2006)).
- `held` detectors (fixed-5%, miles-band, z-score and both CUSUMs; Otava and
  E-divisive are not run held, a library call per run per threshold) get what
  the gate gets and meet what it must: on a trip they look again with the
  run's first rerun in its place, the alarm stands only if that trips too, and
  an unconfirmed trip's rerun stands in for it in later looks; the threshold is
  the lowest at which FA/series is at most 5% on the nulls and on the spike
  series (bisection). `matched` detectors are held to nulls only, and alarm on
  10-100% of spike series (see each cell's spike FA), which the issue's spike
  target rules out for a gate. The held CUSUM oracle is the ceiling for an
  online gate with one value and one rerun per run under both constraints.
- `gate-fa` detectors (fixed-5%, miles-band, z-score and both CUSUMs) are the
  `matched` ones calibrated to the gate's own FA/series on the cell's nulls instead
  of 5%: the issue asks for detectors compared at matched false-alarm rates, and
  the gate, one setting for every noise model, sits at 0-5% by cell (1-2% in the
  Gaussian ones), where `matched` allows every peer and oracle 5%. A rate of 1.5%
  is 3 of 200 series, so one seed's threshold is a noisy quantile; the pooled
  report averages seeds.
- "Best peer" is the best matched peer whose matched FA is within 2 standard
  errors of 5%; a peer that cannot be calibrated that low (E-divisive on some
  cells, see its note) is left out of that comparison, not counted as a win.
- Sampling error: with 200 series a rate near 5% has a standard error of about
  1.5 points; Otava and E-divisive use fewer series (see the header). The gate's
  false alarms over twelve seeds (2,400 null series per cell), the rate the FA
  target is about: `bench_gates_fa.md` (`python benchmarks/bench_gates.py --fa-seeds
  0,1,2,3,4,5,6,7,8,9,10,11`).
"""


# What was tried on the detection side, round by round: a document of its own, rendered
# into the report (the harnesses it names are at commit 703120f).
ATTEMPTS_FILE = Path(__file__).resolve().parent / "results" / "attempts.md"


ATTEMPTS_MARK = "<!-- report -->\n"  # the report takes what follows this line


def _attempts() -> str:
    return ATTEMPTS_FILE.read_text().partition(ATTEMPTS_MARK)[2]


def _headline(c: dict, mode: str) -> list[str]:
    """Within-10 detection of steps 2/5/10% and drift in one cell: gate / best peer /
    plug-in CUSUM / CUSUM oracle, the last three in ``mode`` (matched or held)."""
    g = c[("gate", "default")]
    plug = c.get(("cusum-plugin", mode))
    return [f"{_pct(g.det[e][2])} / {_pct(_best_peer(c, e, 2, mode))} / "
            f"{_pct(plug.det[e][2] if plug is not None else float('nan'))} / "
            f"{_pct(c[('cusum-oracle', mode)].det[e][2])}"
            for e in ("step2", "step5", "step10", "drift")]


def render(results: dict, *, reps: int, slow_reps: int, elapsed: float, speed: float,
           quick: bool, e2e: float | None = None) -> str:
    from tabulate import tabulate

    cells = results["cells"]
    L: list[str] = []
    L.append("# Gate detection benchmark\n")
    L.append(f"Command: `{'python benchmarks/bench_gates.py --quick' if quick else 'nox -s bench-gates'}`"
             f"; {reps} series per cell ({slow_reps} for Otava and E-divisive, one value per run"
             f" only); total {elapsed:.0f} s.\n")
    L.append("Peer libraries: " + (", ".join(f"{k}: {v}" for k, v in results["libs"].items())
                                   or "not run") + "\n")
    L.append(f"Gating 1,000 metrics (5 samples/run) against 200-run histories, with BH: "
             f"**{speed:.2f} s** (statistics alone)"
             + (f"; end to end through SQLite (`gates.gate.evaluate_run`, bulk baseline "
                f"queries, verdicts saved; `python benchmarks/bench_gates.py --speed`): "
                f"**{e2e:.2f} s** (best of 3)" if e2e is not None else
                "; end to end through SQLite: see `bench_gates_speed.md` "
                "(`python benchmarks/bench_gates.py --speed`)") + ".\n")
    L.append("Series: 60 runs, change at run 40, runs 30-59 gated. `m` = samples per run. "
             "Gate = `gates.model.stats` at its defaults with up to four confirm reruns (each after the first only while the reruns' mean is borderline); peers "
             "`matched` = threshold calibrated to 5% FA/series on the same cell's nulls.\n")
    # Headline: within 10 runs for step5 and step10, FA, vs best peer (matched) and oracle.
    L.append("## Headline: false alarms and detection within 10 runs\n")
    rows = []
    for (model, m), c in cells.items():
        g = c[("gate", "default")]
        rows.append([model, m, _pct(g.fa_series), _pct(g.spike_fa), *_headline(c, "matched")])
    L.append(tabulate(rows, headers=["noise", "m", "gate FA/series", "gate spike FA",
                                     "step 2%: gate / best peer / CUSUM plug-in / oracle",
                                     "step 5%", "step 10%", "drift 0.5%/run"],
                      tablefmt="github"))
    L.append("")
    if any(("cusum-oracle", "held") in c for c in cells.values()):
        L.append("## Headline: held to the gate's constraints\n")
        L.append("Each detector below gets the gate's first confirm rerun and a threshold at "
                 "which FA/series is at most 5% on the spike series as well as on nulls "
                 "(`held`, `benchmarks/held.py`); the gate is as above.\n")
        rows = [[model, m, *_headline(c, "held")] for (model, m), c in cells.items()]
        L.append(tabulate(rows, headers=["noise", "m",
                                         "step 2%: gate / best held peer / held plug-in / "
                                         "held oracle", "step 5%", "step 10%", "drift"],
                          tablefmt="github"))
        L.append("")
    if any(("cusum-oracle", GATE_FA) in c for c in cells.values()):
        L.append("## Headline: at the gate's own false-alarm rate\n")
        L.append("Each detector below is calibrated so that its FA/series on the cell's nulls "
                 "is at most the gate's there (`gate-fa`; the gate sits at 0-5% by cell, one "
                 "setting for every noise model, where `matched` gives every peer 5%); the "
                 "gate is as above.\n")
        rows = [[model, m, _pct(c[("gate", "default")].fa_series), *_headline(c, GATE_FA)]
                for (model, m), c in cells.items()]
        L.append(tabulate(rows, headers=["noise", "m", "gate FA/series",
                                         "step 2%: gate / best peer / plug-in / oracle",
                                         "step 5%", "step 10%", "drift"],
                          tablefmt="github"))
        L.append("")
    L.append("## Headline: first bad run (step 5% and 10%)\n")
    rows = []
    for (model, m), c in cells.items():
        g = c[("gate", "default")]
        row = [model, m]
        for e in ("step5", "step10", "step20"):
            best = _best_peer(c, e, 0)
            cu = c[("cusum-oracle", "matched")].det[e][0]
            off = c[("offline-oracle", "matched")].det[e][0]
            row.append(f"{_pct(g.det[e][0])} / {_pct(best)} / {_pct(cu)} / {_pct(off)}")
        rows.append(row)
    L.append(tabulate(rows, headers=["noise", "m", "step 5%: gate / best peer / CUSUM / offline",
                                     "step 10%", "step 20%"], tablefmt="github"))
    L.append("")
    L.append("## Targets\n")
    L.append("On this seed's 200 series per cell. False alarms, spikes and the first bad run "
             "are rates with 1.5-2 points of sampling error here; their means over "
             "held-out seeds are in `bench_gates_fa.md` (`--fa-seeds`).\n")
    L.extend(_targets(cells))
    L.append("")
    L.append("## Notes\n")
    L.append(NOTES)
    L.append("## Attempts (detection)\n")
    L.append(_attempts())
    L.append("## All cells\n")
    L.append("Each detection cell: first bad run / within 3 / within 10 runs (median delay).\n")
    for (model, m), c in cells.items():
        L.append(f"### {model}, {m} sample(s) per run\n")
        rows = []
        for (name, mode), cell in c.items():
            row = [name, mode, _pct(cell.fa_series), f"{100 * cell.fa_run:.2f}%"
                   if cell.fa_run == cell.fa_run else "-", _pct(cell.spike_fa)]
            for e in DETECT_EFFECTS:
                if e in cell.det:
                    f, w3, w10, dl = cell.det[e]
                    row.append(f"{_pct(f)}/{_pct(w3)}/{_pct(w10)} ({'-' if dl != dl else int(dl)})")
                else:
                    row.append("-")
            row.append(f"{cell.us_per_eval:.0f}")
            row.append(cell.note)
            rows.append(row)
        L.append(tabulate(rows, headers=["detector", "mode", "FA/series", "FA/run", "spike FA",
                                         *DETECT_EFFECTS, "us/eval", "note"], tablefmt="github"))
        L.append("")
    return "\n".join(L) + "\n"


def _short_by_2se(g: float, n_g: int, b: float, n_b: int) -> bool:
    """g below b by more than 2 standard errors of the difference of two rates.

    Rates smoothed as (x + 1) / (n + 2) for the standard error, so 0% and 100%
    cells still carry sampling error.
    """
    def var(p: float, n: int) -> float:
        q = (p * n + 1) / (n + 2)
        return q * (1 - q) / n

    return b - g > 2 * math.sqrt(var(g, n_g) + var(b, n_b))


def _comparisons(cells: dict, mode: str) -> tuple[list[str], ...]:
    """The gate's within-10 detection against the best peer and 90% of the CUSUM oracle in
    ``mode`` (matched or held): (misses against the peer, those by more than 2 se, misses
    against the oracle, those by more than 2 se, those the plug-in reaches, cells below
    90% of the plug-in by more than 2 se)."""
    miss_peer, miss_or, sig_peer, sig_or, reach, gap_plug = [], [], [], [], [], []
    for (model, m), c in cells.items():
        g = c[("gate", "default")]
        oracle, plug = c.get(("cusum-oracle", mode)), c.get(("cusum-plugin", mode))
        for e in DETECT_EFFECTS:
            peer = _best_peer_cell(c, e, 2, mode)
            best = 0.0 if peer is None else peer.det[e][2]
            cell = f"{model}/m={m}/{e}"
            if g.det[e][2] + 1e-9 < best:
                miss_peer.append(f"{cell} ({_pct(g.det[e][2])} < {_pct(best)})")
                # A detector's series per effect number its null series (n_null).
                if _short_by_2se(g.det[e][2], g.n_null, best, peer.n_null):
                    sig_peer.append(cell)
            cu = oracle.det[e][2] if oracle is not None else 0.0
            if g.det[e][2] + 1e-9 < 0.9 * cu:
                miss_or.append(f"{cell} ({_pct(g.det[e][2])} vs oracle {_pct(cu)})")
                if _short_by_2se(g.det[e][2], g.n_null, 0.9 * cu, oracle.n_null):
                    sig_or.append(cell)
                    # Out of reach when the plug-in CUSUM, which learns the noise as a gate
                    # must but knows the shift and is tuned to this cell, falls short too.
                    if plug is not None and not _short_by_2se(plug.det[e][2], plug.n_null,
                                                              0.9 * cu, oracle.n_null):
                        reach.append(f"{cell} (gate {_pct(g.det[e][2])}, plug-in "
                                     f"{_pct(plug.det[e][2])}, oracle {_pct(cu)})")
            if plug is not None and _short_by_2se(g.det[e][2], g.n_null, 0.9 * plug.det[e][2],
                                                  plug.n_null):
                gap_plug.append(f"{cell} ({_pct(g.det[e][2])} vs {_pct(plug.det[e][2])})")
    return miss_peer, sig_peer, miss_or, sig_or, reach, gap_plug


MODE_INTRO = {
    "held": "Held to the gate's constraints (`held`: each detector gets the gate's first "
            "confirm rerun, and its threshold keeps FA/series <= 5% on the spike series as "
            "well as on nulls; fixed-5%, miles-band and z-score only):",
    GATE_FA: "At the gate's own false-alarm rate (`gate-fa`: each detector's threshold "
             "keeps its FA/series on the cell's nulls at most the gate's there, the "
             "issue's \"matched\" taken literally; fixed-5%, miles-band and z-score only):",
}


def _mode_targets(cells: dict, mode: str) -> list[str]:
    """The two detection targets against detectors in ``mode`` (held or gate-fa)."""
    miss_peer, sig_peer, miss_or, sig_or, reach, gap_plug = _comparisons(cells, mode)
    tag = mode
    return [
        f"- {MODE_INTRO[mode]}",
        f"  - within 10 runs >= best {tag} peer: "
        + ("met in every cell." if not miss_peer else
           f"short in {len(miss_peer)} cells, by more than 2 standard errors in "
           f"{len(sig_peer)}" + (f" ({', '.join(sig_peer)})." if sig_peer else ".")),
        f"  - within 10 runs >= 90% of the {tag} CUSUM oracle: "
        + ("met in every cell." if not miss_or else
           f"short in {len(miss_or)} cells, by more than 2 standard errors in {len(sig_or)}"
           + (f" ({'; '.join(m for m in miss_or if m.split(' ')[0] in sig_or)})." if sig_or
              else ".")),
        f"  - of those, where the {tag} plug-in CUSUM reaches 90% of the {tag} oracle within 2 "
        f"standard errors: {len(reach)}" + (f" ({'; '.join(reach)})." if reach else ".")
        + f" Below 90% of the {tag} plug-in by more than 2 standard errors: {len(gap_plug)}"
        + (f" ({'; '.join(gap_plug)})." if gap_plug else "."),
    ]


def _targets(cells: dict) -> list[str]:
    out = []
    fa = [(k, c[("gate", "default")].fa_series) for k, c in cells.items()]
    worst = max(fa, key=lambda t: t[1])
    out.append(f"- FA/series <= 5% in every noise model at defaults: "
               f"{'met' if worst[1] <= TARGET_FA else 'MISSED'} (worst {worst[0][0]} m={worst[0][1]}:"
               f" {_pct(worst[1])}).")
    miss_peer, sig_peer, miss_or, sig_or, reach, gap_plug = _comparisons(cells, "matched")
    out.append("- Within 10 runs >= best matched peer in every cell: "
               + ("met." if not miss_peer else f"MISSED in {len(miss_peer)} cells: "
                  + "; ".join(miss_peer) + "."))
    out.append(f"  - Of these, short by more than 2 standard errors (the rest are within "
               f"sampling error): {len(sig_peer)}"
               + (f" ({', '.join(sig_peer)})." if sig_peer else "."))
    out.append("- Within 10 runs >= 90% of the CUSUM oracle: "
               + ("met." if not miss_or else f"MISSED in {len(miss_or)} cells: "
                  + "; ".join(miss_or) + "."))
    out.append(f"  - Of these, short by more than 2 standard errors: {len(sig_or)}"
               + (f" ({', '.join(sig_or)})." if sig_or else "."))
    if any(("cusum-plugin", "matched") in c for c in cells.values()):
        out.append(f"  - Of those, where the plug-in CUSUM (noise learnt from the "
                   f"{GATED[0]} runs before the gated ones, shift size known, threshold tuned "
                   f"on the cell's nulls) reaches 90% of the oracle within 2 standard errors, "
                   f"so a gate that learns the noise from history might: {len(reach)}"
                   + (f" ({'; '.join(reach)})." if reach else ".")
                   + f" In the other {len(sig_or) - len(reach)} the plug-in falls short too.")
        out.append(f"- Not a target of the issue, a yardstick: within 10 runs below 90% of the "
                   f"plug-in CUSUM by more than 2 standard errors: {len(gap_plug)} cells"
                   + (f" ({'; '.join(gap_plug)})." if gap_plug else "."))
    for mode in ("held", GATE_FA):
        if any(("cusum-oracle", mode) in c for c in cells.values()):
            out.extend(_mode_targets(cells, mode))
    if ("gauss1", 5) in cells:
        f = cells[("gauss1", 5)][("gate", "default")].det["step5"][0]
        out.append(f"- 5 samples/run, 1% noise, 5% step caught on the first bad run: {_pct(f)} "
                   f"({'met' if f >= 0.9 else 'MISSED'}; target 90%).")
    worse = []
    for k, c in cells.items():
        g = c[("gate", "default")]
        if g.spike_only == g.spike_only:  # paired series: McNemar's se of the difference
            se = paired_se(g.spike_only, g.null_only, g.n_null)
        else:  # independent draws (results from before the pairing)
            se = math.hypot(*(math.sqrt(x * (1 - x) / max(g.n_null, 1))
                              for x in (g.spike_fa, g.fa_series)))
        if g.spike_fa - g.fa_series > 2 * se + 1e-12:
            worse.append(f"{k[0]}/m={k[1]} ({_pct(g.spike_fa)} vs {_pct(g.fa_series)}, "
                         f"se {100 * se:.1f} points)")
    out.append("- Single spikes no more false alarms than nulls (within 2 standard errors of "
               "the difference; paired series): "
               + ("met." if not worse else "MISSED: " + "; ".join(worse) + "."))
    return out


def pool(results: Sequence[dict]) -> dict:
    """Several seeds' results as one: each cell and detector present in all of them, its
    rates averaged (weighted by series) and its series counted together (``n_null``
    summed), so the targets' 2-standard-error calls use every series."""
    first = results[0]["cells"]
    cells: dict = {}
    for k in [k for k in first if all(k in r["cells"] for r in results)]:
        cells[k] = {}
        for d in [d for d in first[k] if all(d in r["cells"][k] for r in results)]:
            cs = [r["cells"][k][d] for r in results]
            w = np.array([max(x.n_null, 1) for x in cs], dtype=float)

            def avg(v: Sequence[float], w: np.ndarray = w) -> float:
                v = np.asarray(v, dtype=float)
                ok = ~np.isnan(v)
                return float(np.average(v[ok], weights=w[ok])) if ok.any() else float("nan")

            c = Cell(n_null=sum(x.n_null for x in cs), note=cs[0].note)
            for f in ("fa_series", "fa_run", "spike_fa", "spike_only", "null_only",
                      "us_per_eval"):
                setattr(c, f, avg([getattr(x, f) for x in cs]))
            c.det = {e: tuple(avg([x.det[e][i] for x in cs]) for i in range(4))
                     for e in cs[0].det if all(e in x.det for x in cs)}
            cells[k][d] = c
    return {"libs": results[0]["libs"], "cells": cells}


def render_pooled(pooled: dict, files: Sequence[str], metas: Sequence[dict] = ()) -> str:
    cells = pooled["cells"]
    n = max((c[("gate", "default")].n_null for c in cells.values()), default=0)
    made = [f"- `{f}`: seed {m['seed']}, {m['reps']} series per cell, "
            f"{', '.join(m['models'])}{'' if m.get('peers', True) else ', no Otava/E-divisive'}"
            for f, m in zip(files, metas, strict=False) if "seed" in m and "models" in m]
    return "\n".join([
        "# Detection targets over several seeds\n",
        f"Command: `python benchmarks/bench_gates.py --pool {' '.join(files)}`; each cell and "
        f"detector present in every file, rates averaged, series counted together ({n} per "
        "cell for the gate). The false-alarm lines are over these files' seeds only; the "
        "gate's null and spike rates over held-out seeds are in `bench_gates_fa.md`.\n",
        *(made + [""] if made else []),
        *_targets(cells), ""])


def _dump(res: dict) -> dict:
    return {"libs": res["libs"], "cells": [
        {"model": k[0], "m": k[1], "detectors": [
            {"name": n, "mode": md, **{f: getattr(c, f) for f in
                                       ("fa_series", "fa_run", "spike_fa", "spike_only",
                                        "null_only", "us_per_eval", "n_null", "note")},
             "det": c.det}
            for (n, md), c in cells.items()]}
        for k, cells in res["cells"].items()]}


def _load(doc: dict) -> dict:
    out: dict = {"libs": doc["libs"], "cells": {}}
    for cell in doc["cells"]:
        d = {}
        for x in cell["detectors"]:
            c = Cell(x["fa_series"], x["fa_run"], x["spike_fa"],
                     {e: tuple(v) for e, v in x["det"].items()}, x["us_per_eval"], x["n_null"],
                     x["note"], x.get("spike_only", math.nan), x.get("null_only", math.nan))
            d[(x["name"], x["mode"])] = c
        out["cells"][(cell["model"], cell["m"])] = d
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer replicates (CI smoke run)")
    ap.add_argument("--reps", type=int, default=None, help="series per cell")
    ap.add_argument("--slow-reps", type=int, default=None, help="series per cell for Otava/E-divisive")
    ap.add_argument("--no-peers", action="store_true", help="skip Otava and E-divisive")
    ap.add_argument("--models", default=",".join(NOISE_MODELS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="Markdown report path (results JSON beside it)")
    ap.add_argument("--render", default=None, help="re-render a results JSON, run nothing")
    ap.add_argument("--pool", nargs="+", default=None, metavar="JSON",
                    help="the targets over several seeds' results JSONs (--seed N --out ...), "
                         "run nothing")
    ap.add_argument("--fa-seeds", default=None,
                    help="only the gate's null false alarms over these seeds (e.g. 0,1,2,3,4,5)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="with --fa-seeds: cells x seeds judged in this many processes (same rates)")
    ap.add_argument("--machines", action="store_true",
                    help="only the growing-pool-of-machines series, with and without names")
    ap.add_argument("--speed", action="store_true",
                    help="only the end-to-end speed through SQLite (benchmarks/bench_gate_speed.py)")
    a = ap.parse_args(argv)
    if a.speed:
        from bench_gate_speed import main as speed_main

        return speed_main(["--per-metric"] + (["--out", a.out] if a.out else []))
    reps = a.reps or (40 if a.quick else 200)
    slow = a.slow_reps or (6 if a.quick else 20)
    models = [m for m in a.models.split(",") if m]
    unknown = [m for m in models if m not in NOISE_MODELS]
    if unknown:
        print(f"error: unknown noise model {unknown[0]!r}; known: {', '.join(NOISE_MODELS)}",
              file=sys.stderr)
        return 2
    if a.fa_seeds:
        try:
            seeds = [int(x) for x in a.fa_seeds.split(",") if x.strip()]
        except ValueError:
            print(f"error: --fa-seeds {a.fa_seeds!r}: give integers, e.g. 0,1,2", file=sys.stderr)
            return 2
        t0 = time.perf_counter()
        if a.jobs < 1:
            print(f"error: --jobs {a.jobs}: give 1 or more processes", file=sys.stderr)
            return 2
        fa = fa_over_seeds(seeds, a.reps or 200, models=models, jobs=a.jobs)
        md = render_fa(fa, seeds=seeds, reps=a.reps or 200, elapsed=time.perf_counter() - t0,
                       jobs=a.jobs)
        print(md)
        if a.out:
            Path(a.out).write_text(md)
        return 0
    if a.machines:
        t0 = time.perf_counter()
        res = machines_benchmark(a.reps or 200, seed=a.seed)
        md = render_machines(res, reps=a.reps or 200, seed=a.seed,
                             elapsed=time.perf_counter() - t0)
        print(md)
        if a.out:
            Path(a.out).write_text(md)
        return 0
    if a.pool:
        try:
            docs = [json.loads(Path(f).read_text()) for f in a.pool]
            pooled = pool([_load(d["results"]) for d in docs])
        except (OSError, ValueError, KeyError) as exc:
            print(f"error: --pool: {exc}; give results JSONs written by --out", file=sys.stderr)
            return 2
        md = render_pooled(pooled, a.pool, [{**d["meta"], **d.get("provenance", {})}
                                            for d in docs])
        print(md)
        if a.out:
            Path(a.out).write_text(md)
        return 0
    if a.render:
        doc = json.loads(Path(a.render).read_text())
        md = render(_load(doc["results"]), **doc["meta"])
        print(md)
        if a.out:
            Path(a.out).write_text(md)
        return 0
    t0 = time.perf_counter()
    libs = available_libraries()
    for k, v in libs.items():
        if v != "ok" and not a.no_peers:
            print(f"note: peer {k} {v}; the benchmark runs without it", file=sys.stderr)
    res = run_benchmark(reps, slow, seed=a.seed, peers_on=not a.no_peers, models=models)
    sp = speed_1000()
    e2e = None
    if not a.quick:
        import tempfile

        try:  # needs the history store's dependencies (sqlite-utils), not in every venv
            from bench_gate_speed import build_history, time_evaluate
        except ImportError as exc:
            print(f"note: end-to-end speed skipped ({exc}); run --speed where gates imports",
                  file=sys.stderr)
        else:
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "history.db"
                rid = build_history(path)
                e2e = min(time_evaluate(path, rid, repeat=3)[0])
    meta = {"reps": reps, "slow_reps": slow, "elapsed": time.perf_counter() - t0, "speed": sp,
            "quick": a.quick, "e2e": e2e}
    md = render(res, **meta)
    provenance = {"seed": a.seed, "models": models, "peers": not a.no_peers}  # for --pool
    print(md)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(md)
        Path(a.out).with_suffix(".json").write_text(
            json.dumps({"meta": meta, "provenance": provenance, "results": _dump(res)}, indent=0))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
