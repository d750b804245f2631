"""Detection benchmark of the regression gate against its peers and two oracles.

Run: ``nox -s bench-gates`` (own venv with the peers) or
``python benchmarks/bench_gates.py [--quick] [--out benchmarks/results/bench_gates.md]``;
other seeds with ``--seed N --out ...``, and the targets over several seeds' results
with ``--pool A.json B.json ...``.

Series come from ``benchmarks/series.py`` (60 runs, change at run 40; runs
30-59 are the 30 gated runs of a null series). Per detector and cell:

- FA/series: share of null series with any alarm over the 30 gated runs;
- FA/run: alarms per gated null run;
- spike FA: the same on series with one +20% transient run at run 40;
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
noise), and on a second rerun (the second twin) when the first is borderline
(the two-stage confirm, ``stats.confirm(another=True)`` then
``stats.confirm_pair``), exactly as ``gates.gate`` does in a suite session
with its default two confirm attempts.
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
)

from gates import stats  # noqa: E402

__all__ = ["main", "run_benchmark", "gate_alarms", "speed_1000"]

TAU = 40
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


def gate_alarms(
    s: Series, ts: Sequence[int], *, confirm: bool = True, first_only: bool = False,
    machines: bool = True,
) -> np.ndarray:
    """Alarms of this project's gate at runs ``ts`` (defaults, confirm on trip).

    ``machines``: pass the series' machine names (when it has them) as a suite
    session does from the runs' GPU uuids; False judges as if none were recorded.
    """
    P = stats.DEFAULTS
    x = s.summaries.copy()  # a transient's rerun replaces it for later runs (as in a session)
    tw, tw2 = s.twin_summaries, s.twin2_summaries
    out = np.zeros(len(ts), dtype=bool)
    names = s.hosts if machines else None
    for i, t in enumerate(ts):
        kw = {"hosts": names[:t], "host": names[t]} if names else {}
        j = stats.judge_summaries(x[:t], float(x[t]), sign=1, **kw)
        two_stage = confirm and tw2 is not None
        level = stats.level_for(j, P.level) if two_stage else P.level
        v = stats.decide(j, j.p_worse, level=level)
        suspect = v == "pass" and stats.is_suspect(j, j.p_worse, level=level)
        if (v == "regression" or suspect) and confirm:
            jc, v = stats.confirm(x[:t], float(tw[t]), sign=1, first=float(x[t]),
                                  suspect=suspect, another=two_stage, **kw)
            if v == "suspect":  # borderline: the second rerun and the two reruns' mean decide
                _, v = stats.confirm_pair(x[:t], float(tw[t]), float(tw2[t]), sign=1, **kw)
            if v != "regression" and jc.extras.get("p_split", 1.0) <= P.transient_level:
                x[t] = tw[t]
        out[i] = v == "regression"
        if out[i] and first_only:
            break
    return out


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
    fn: Callable[[Series, Sequence[int], bool], np.ndarray],
    series: dict[str, list[Series]],
) -> Cell:
    cell = Cell()
    t0 = time.perf_counter()
    n_eval = 0
    nulls = [fn(s, GATED, False) for s in series["null"]]
    n_eval += len(GATED) * len(nulls)
    cell.n_null = len(nulls)
    cell.fa_series = float(np.mean([a.any() for a in nulls]))
    cell.fa_run = float(np.mean([a.mean() for a in nulls]))
    spikes = [fn(s, GATED, True) for s in series["spike"]]
    n_eval += sum(int(np.argmax(a)) + 1 if a.any() else len(GATED) for a in spikes)
    cell.spike_fa = float(np.mean([a.any() for a in spikes]))
    for e in DETECT_EFFECTS:
        firsts = []
        for s in series[e]:
            a = fn(s, AFTER, True)
            n_eval += (_first(a) or 9) + 1
            firsts.append(_first(a))
        cell.det[e] = _detect_stats(firsts)
    cell.us_per_eval = (time.perf_counter() - t0) / max(n_eval, 1) * 1e6
    return cell


def _eval_score(
    make: Callable[[Series], ScoreDetector],
    series: dict[str, list[Series]],
    *,
    null_ts: Sequence[int] = GATED,
    spike_ts: Sequence[int] = GATED,
) -> tuple[Cell, Cell]:
    """(default, matched) cells of a score detector."""
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
    # Calibrated threshold: the (1 - target) quantile of the per-series maximum on nulls.
    thr_matched = float(np.quantile(maxes, 1 - TARGET_FA, method="higher"))
    d0 = make(series["null"][0]).default
    out = []
    for thr in (d0, thr_matched):
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
    return out[0], out[1]


def _per_effect(make: Callable[[Series, str], ScoreDetector], series: dict[str, list[Series]],
                *, fa_from: str | None = "step5", note: str = "", **kw) -> Cell:
    """Matched cell of a detector built for each effect (an oracle that knows its size):
    calibrated on the nulls once per effect; FA, spike FA and time from ``fa_from``'s
    calibration (or the last effect's FA without spikes when None)."""
    cell = Cell(n_null=len(series["null"]), note=note)
    for e in DETECT_EFFECTS:
        sub = {"null": series["null"], "spike": series["spike"],
               **{k: (series[e] if k == e else []) for k in DETECT_EFFECTS}}
        _, mt = _eval_score(lambda s, e=e: make(s, e), sub, **kw)
        cell.det[e] = mt.det[e]
        cell.us_per_eval = mt.us_per_eval
        if fa_from is None:
            cell.fa_series, cell.fa_run = mt.fa_series, mt.fa_run
        elif e == fa_from:
            cell.fa_series, cell.fa_run, cell.spike_fa = mt.fa_series, mt.fa_run, mt.spike_fa
    return cell


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


def _cell_series(model: str, m: int, reps: int, seed: int,
                 effects: Sequence[str] = EFFECTS) -> dict[str, list[Series]]:
    """The series of one cell, drawn effect by effect in ``EFFECTS`` order from one
    generator per (seed, model, m); a prefix of ``EFFECTS`` gives the same series."""
    if tuple(effects) != EFFECTS[: len(effects)]:
        raise ValueError(f"effects {effects!r} must be a prefix of {EFFECTS!r}")
    rng = np.random.default_rng([seed, NOISE_MODELS.index(model), m])
    rng2 = np.random.default_rng([seed, NOISE_MODELS.index(model), m, 2])  # second twins
    return {e: [make_series(model, e, rng, tau=TAU, m=m, rng2=rng2) for _ in range(reps)]
            for e in effects}


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
                lambda s, ts, stop: gate_alarms(s, ts, first_only=stop), series)
            cells[("gate-no-confirm", "default")] = _eval_boolean(
                lambda s, ts, stop: gate_alarms(s, ts, confirm=False, first_only=stop), series)
            for make in (lambda s: FixedPercent(), lambda s: MilesBand(), lambda s: ZScore()):
                d, mt = _eval_score(make, series)
                name = make(series["null"][0]).name
                cells[(name, "default")], cells[(name, "matched")] = d, mt

            def oracle_stats(s: Series, model: str = model, m: int = m) -> tuple[float, float]:
                return null_summary_stats(model, m, s.bench)

            # The online oracle knows the shift size: one CUSUM per effect, calibrated on nulls;
            # the plug-in learns the noise from the runs before the first gated one.
            cells[("cusum-oracle", "matched")] = _per_effect(
                lambda s, e: CusumOracle(*oracle_stats(s), effect_size(e), start=GATED[0]), series)
            cells[("cusum-plugin", "matched")] = _per_effect(
                lambda s, e: PluginCusum(s.summaries, effect_size(e), GATED[0]), series,
                note=f"noise from runs 0-{GATED[0] - 1}")
            cells[("offline-oracle", "matched")] = _per_effect(
                lambda s, e: OfflineOracle(*oracle_stats(s), TAU), series, fa_from=None,
                null_ts=AFTER, spike_ts=AFTER, note="FA over runs 40-49 only (knows when)")
            # Held to the gate's constraints: its first rerun, and spikes count as false alarms.
            for make in (lambda ss, e: FixedPercent(), lambda ss, e: MilesBand(),
                         lambda ss, e: ZScore()):
                cells[(make([], "").name, "held")] = _eval_held(make, series, per_effect=False)

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


def fa_over_seeds(seeds: Sequence[int], reps: int, *, models: Sequence[str] = NOISE_MODELS,
                  ms: Sequence[int] = (1, 5), log=print) -> dict[str, dict]:
    """The gate's rates the targets are about, per cell and seed.

    ``null``: false alarms per 30-run null series; ``spike``: the same on
    series with one transient spike; ``first``: detection on the first bad run
    of ``FIRST_RUN_CELL``. The same series the full benchmark draws for each
    seed (same generator and order), so seed 0 reproduces its columns. One
    seed's worst cell of 14 is a noisy maximum; the mean over seeds is the rate
    the target is about.
    """
    out: dict[str, dict] = {"null": {}, "spike": {}, "first": {}}
    for model in models:
        for m in ms:
            t0 = time.perf_counter()
            first = (model, m) == FIRST_RUN_CELL[:2]
            for seed in seeds:
                ser = _cell_series(model, m, reps, seed)
                for e in ("null", "spike"):
                    out[e].setdefault((model, m), []).append(float(np.mean(
                        [gate_alarms(s, GATED, first_only=e == "spike").any() for s in ser[e]])))
                if first:
                    out["first"].setdefault((model, m), []).append(float(np.mean(
                        [gate_alarms(s, [TAU]).any() for s in ser[FIRST_RUN_CELL[2]]])))
            log(f"  {model:9s} m={m}: {time.perf_counter() - t0:6.1f} s")
    return out


def render_fa(fa: dict[str, dict], *, seeds: Sequence[int], reps: int, elapsed: float) -> str:
    from tabulate import tabulate  # noqa: PLC0415 - as in render: only the report needs it

    n = reps * len(seeds)

    def mean_se(v: Sequence[float]) -> tuple[float, float]:
        mean = float(np.mean(v))
        return mean, math.sqrt(max(mean * (1 - mean), 1e-12) / n)

    rows = []
    for cell, v in fa["null"].items():
        mean, se = mean_se(v)
        sp, sp_se = mean_se(fa["spike"][cell])
        rows.append([cell[0], cell[1], " / ".join(f"{100 * x:.1f}" for x in v),
                     f"{100 * mean:.2f}%", f"{100 * se:.2f}", "yes" if mean <= TARGET_FA else "NO",
                     f"{100 * sp:.2f}%", "yes" if sp - mean <= 2 * math.hypot(se, sp_se) else "NO"])
    worst = max(fa["null"].items(), key=lambda kv: float(np.mean(kv[1])))
    out = [
        "# Gate false alarms and first-bad-run detection over several seeds\n",
        f"Command: `python benchmarks/bench_gates.py --fa-seeds {','.join(map(str, seeds))}"
        f" --reps {reps}`; {reps} series per cell, effect and seed ({n} per cell), the gate "
        f"at its defaults with its confirm reruns; {elapsed:.0f} s.\n",
        "Targets: at most 5% false alarms per 30-run null series in every noise model; single "
        "spikes no more false alarms than nulls (here: within 2 standard errors of the "
        "difference). One seed's worst cell of 14 is a noisy maximum (standard error about "
        "1.5 points at 200 series); the mean over seeds is the rate the targets are about.\n",
        tabulate(rows, headers=["noise", "m", "null FA % per seed", "mean", "se (points)",
                                "<= 5%", "spike FA", "spike <= null"], tablefmt="github"),
        "",
        f"Worst cell: {worst[0][0]}/m={worst[0][1]}, {100 * float(np.mean(worst[1])):.2f}%.",
        "",
    ]
    for (model, m), v in fa["first"].items():
        mean, se = mean_se(v)
        out += [f"First bad run ({model}, m={m}, {FIRST_RUN_CELL[2]}; target >= 90%): "
                + " / ".join(f"{100 * x:.1f}" for x in v)
                + f" per seed, mean {100 * mean:.1f}% (se {100 * se:.1f} points): "
                + ("met." if mean >= 0.9 else "MISSED."), ""]
    return "\n".join(out)


POOLS = ((3, 0.1), (2, 0.03))  # (machines at the start, chance a run lands on a new one)


def machines_benchmark(reps: int, *, seed: int = 0, log=print) -> dict:
    """The gate on runs spread over a growing pool of machines, with and without names.

    Series from ``series.make_pool_series`` (machine offsets 1.5%, run noise 0.5%,
    5 samples per run); per pool setting: null FA per 30-run series and detection
    of 5% and 10% steps (first bad run / within 10), the gate given the machines'
    names (as a suite session gives it GPU uuids) and not given them.
    """
    out: dict = {}
    for pool, p_new in POOLS:
        rng = np.random.default_rng([seed, 100 + pool, int(p_new * 1000)])
        rng2 = np.random.default_rng([seed, 100 + pool, int(p_new * 1000), 2])
        series = {e: [make_pool_series(e, rng, tau=TAU, pool=pool, p_new=p_new, rng2=rng2)
                      for _ in range(reps)] for e in ("null", "step5", "step10")}
        for named in (True, False):
            t0 = time.perf_counter()
            fa = float(np.mean([gate_alarms(s, GATED, machines=named).any()
                                for s in series["null"]]))
            det = {e: _detect_stats([_first(gate_alarms(s, AFTER, first_only=True,
                                                        machines=named))
                                     for s in series[e]])
                   for e in ("step5", "step10")}
            out[(pool, p_new, named)] = {"fa": fa, "det": det}
            log(f"  pool {pool}, new {p_new}, names {named}: {time.perf_counter() - t0:.1f} s")
    return out


def render_machines(res: dict, *, reps: int, seed: int, elapsed: float) -> str:
    from tabulate import tabulate  # noqa: PLC0415 - as in render: only the report needs it

    rows = []
    for (pool, p_new, named), r in res.items():
        d5, d10 = r["det"]["step5"], r["det"]["step10"]
        rows.append([pool, p_new, "yes" if named else "no", _pct(r["fa"]),
                     f"{_pct(d5[0])} / {_pct(d5[2])}", f"{_pct(d10[0])} / {_pct(d10[2])}"])
    return "\n".join([
        "# The gate on a growing pool of machines\n",
        f"Command: `python benchmarks/bench_gates.py --machines --reps {reps} --seed {seed}`; "
        f"{reps} series per cell; {elapsed:.0f} s.\n",
        "Series (`series.make_pool_series`): 60 runs of 5 samples, change at run 40, runs "
        "30-59 gated; each machine has an offset N(0, 1.5%), each run N(0, 0.5%) plus "
        "N(0, 0.5%) per sample; a run lands on a machine already seen, or with the given "
        "chance on a new one; its confirm rerun runs on the same machine. `names`: the gate "
        "is given each run's machine (GPU uuids in a suite session) and adds the "
        "between-machine variance (`stats.host_variance`) for a machine its baseline has "
        "not seen.\n",
        tabulate(rows, headers=["machines at start", "P(new machine)", "names", "FA/series",
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
    js = [stats.judge(h, x, better="lower") for h, x in zip(hist, new, strict=True)]
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
  regime), and a second one (the second twin) when the first is borderline, because
  that is how it runs in a suite session (`--confirm 2`). `gate-no-confirm` shows
  the first attempt alone, at the gate's own level.
- Peers `matched` are calibrated on the null series of the same cell, so their
  matched FA is 5% by construction (up to sampling noise); the gate is never tuned
  per cell. Otava is scored by -log10 p of the change points one call at
  max_pvalue = 0.05 reports in the last 10 runs (default = p <= 0.001); E-divisive
  is calibrated over its p-value grid 0.05 / 0.02 / 0.01 (100 permutations).
- Spikes are transient runner glitches (their rerun is clean); a spike alarm
  counts as a false alarm whether it fires on the spike run or after it.
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
- "Best peer" is the best matched peer whose matched FA is within 2 standard
  errors of 5%; a peer that cannot be calibrated that low (E-divisive on some
  cells, see its note) is left out of that comparison, not counted as a win.
- Sampling error: with 200 series a rate near 5% has a standard error of about
  1.5 points; Otava and E-divisive use fewer series (see the header). The gate's
  false alarms over six seeds (1,200 null series per cell), the rate the FA target
  is about: `bench_gates_fa.md` (`python benchmarks/bench_gates.py --fa-seeds
  0,1,2,3,4,5`).
"""


ATTEMPTS = """\
What was tried on the detection side (a quick harness on this benchmark's own
series, 150-300 per cell, then this full run; FA = false alarms per 30-run null
series; "before" = the previous committed run, level 0.01, no AR prediction, no
consistency check):

- Where power is lost (gauss3, m=1, 5% step): the first stage misses (p above
  the level, mostly before the 10-run window fills), then the confirm rerun's
  pooled check (first + rerun mean at p <= 0.05) drops about a fifth of the
  window detections; the empirical rank bound (one baseline run as high ->
  p >= 2/31) caps single-run evidence.
- Where false alarms came from: at the spike run itself the first attempt trips
  (k = 1) and its clean rerun passes the 0.05 confirm by its own noise
  (Student-t, bimodal, H200): that was the spike excess; on AR(1) the k = 1 test
  trips on a persistent excursion and the rerun, sharing the state, confirms.
- Kept (all defaults, no per-model setting): (1) k = 1 predicted one step ahead
  under AR(1) with a cautious lower bound of rho (0 for iid-looking baselines,
  whose test is unchanged): AR(1) m=1 FA 6% -> 3% at level 0.01; (2) a
  consistency check in the confirm (first attempt far above its rerun,
  one-sided p <= 0.01 for two draws of one regime -> a transient): spike FA
  down to the null rate; (3) with that headroom the first-stage level
  0.01 -> 0.02, the largest at which AR(1) and H200 stay <= 5% (0.03 gave
  AR(1) 6-7%).
- Result, before -> after: worst null FA 6% (ar1 m=1) -> 4%; spike cells more
  than 2 points over nulls 5 -> 0; within 10 runs, e.g. gauss3 m=5 step 5%
  45% -> 56%, gauss1 m=5 step 2% 68% -> 75%, gauss8 step 10% 28/25% -> 32/32%,
  ar1 m=5 step 10% 68% -> 73%; 5 samples/run, 1% noise, 5% step on the first
  bad run 84% -> 86%. Costs: the consistency check turns away 1-2% of real
  changes on their first bad run (7 points for a 20% step under Student-t
  noise, m=1: 95% -> 88%), which trip on the next run instead; h200 m=1 step
  10% within 10 runs 66% -> 62%.
- Rejected: confirm_run_level 0.05 -> 0.2 (+10-30 points of detection, but
  bimodal/H200 FA 9-11%); level 0.03 (AR(1) FA 6-7%); dropping each window's
  worst run (no spike gain once the consistency check is in); consistency level
  0.002 (first run +2 points, spike excess back to +2 points); letting an
  inconsistent pair stand when the rerun alone has p <= 0.01 (recovers the
  first-run loss on large steps, but H200 m=1 FA 5% and spike excess +2-3);
  for window decisions, dropping the rerun's own single-run floor in the
  confirm (no detection change: the rerun's p and the pooled pair check bind).
- Not reached: first-run 90% at 5 samples/run, 1% noise (misses are first runs
  below ~2.5 scales and reruns below the 0.05 bar; the rerun must stand alone
  for the confirm's FA control); peers and the CUSUM oracle within 10 runs (the
  confirm's pooled check is the main loss; a windowed robust CUSUM (Page 1954)
  calibrated by simulation was not built in this pass and would only help the
  2-10 run region).

Second round (2026-11-30, evening). Harness: `benchmarks/attempts/` (stage-1 and
confirm judgements cached per series, then decision rules searched over the
cache; `python benchmarks/attempts/compare.py 1 2` after `cache.py 200 1|2` and
`cache2.py 200 1`, about 2.5 min per seed on 2 cores). Seeds 1 and 2, 200 series
per cell, the gate only; "miss" counts cells below max(best matched peer, 90% of
the CUSUM oracle) of the committed run, "mean" is the mean within-10 detection
over the 84 effect cells.

- The gate as it was at the start of this round, on other seeds: worst null FA 6.5% on both (seed 1: AR(1)
  m=5 6.5%, AR(1) m=1 5.0%; seed 2: bimodal m=5 6.5%, AR(1) m=5 6.0%, bimodal
  m=1 5.5%), against 4% on seed 0 above. With 14 cells and a standard error of
  1.5 points per cell, the worst cell of a ~4.5% rate lands at 6-7% on some
  seeds: the <= 5% target holds on seed 0, not robustly. mean 0.445/0.443,
  miss 63/64, first-bad-run (1% noise, m=5, 5% step) 86%/89%.
- Where the power goes (gauss3, 5% step, diagnostics over 150 series): two
  thirds of all first-stage trips in runs 40-49 fail the confirm (the rerun
  alone must reach p <= 0.05: about half of 1.7-sigma reruns do not), and the
  first stage misses half the remaining runs (k = 3 needs z ~ 2.9 under its
  1/4 Bonferroni weight).
- Pooled confirm (first attempt and rerun averaged, variance halved, judged
  at p <= 0.02 over all windows; consistency check kept): mean 0.547/0.544,
  miss 38/38, but worst FA 11.5%/14% and spike excess +10 points. Two draws
  of one heavy-tailed or bimodal regime are not worth twice one draw.
- Screen loose, confirm pooled and strict (stage 1 at 0.05; pooled p <= 0.002;
  rerun alone p <= 0.3 and beyond the floor): seed 1 worst FA 5.5%, mean
  0.456, first-bad-run 91%; seed 2 worst FA 10% (bimodal m=5: both attempts in
  the slow mode 9% of the time). Rejected for the same reason.
- Windowed scan statistic instead of the 3- and 10-run windows: max over
  k = 2..10 of backward sums of Huber-clipped (2 scales), baseline-standardised
  residuals, inflated for AR(1); p from a simulated Gaussian null table
  (400,000 draws, exponential tail beyond) bounded by a 256-draw bootstrap of
  the baseline; pooled confirm at 0.004 (seed 1): mean 0.501, miss 52, worst
  FA 9% (AR(1) m=5) and large steps under bimodal noise fall from 76-82% to
  ~50% (clipping saturates at the slow mode's level). Not adopted.
- Over 6 seeds (1,200 null series per cell) the shipped rule's one cell above
  5% was AR(1) with 5 samples per run: 5.83% (se 0.7), then AR(1) m=1 4.2%,
  H200 m=5 3.9%, bimodal 3.0-3.3%. A run offset that follows AR(1) but is seen
  through within-run noise is ARMA(1, 1): its lag-1 value understates how
  slowly it decays, so the windows' AR(1) variance factor was too small.
  Adopted: the windows take rho at r + 1.0 se (was r + 0.5 se, while the
  docstring said 0.84): AR(1) m=5 5.83% -> 4.25%, m=1 4.17% -> 3.17% over 6
  seeds, at 0.5-1 point of within-10 detection in every model (mean over
  the 84 cells 0.447 -> 0.440 on seed 0). An ARMA(1, 1) factor with the decay
  from r2 / r1 did less (5.83% -> 5.17%: r2 from 30 runs is too noisy); the
  level 0.015 instead would cost 1 point everywhere and leave AR(1) m=5 at
  5.25%. The FA per seed and its mean: `bench_gates_fa.md`
  (`python benchmarks/bench_gates.py --fa-seeds 0,1,2,3,4,5`).
- Noise-adaptive rules (a higher first-stage level, or the pooled confirm,
  only where the baseline looks Gaussian and independent: Shapiro-Wilk
  p > 0.1-0.3 and no lag-1 autocorrelation): mean within-10 detection
  +0.5-4 points, worst FA up to 7.5-12% (Student-t baselines of 30 runs pass
  Shapiro-Wilk too often). Dropping the AR(1) caution where r is not
  significant: AR(1) FA 7-10.5%. Neither adopted.
- More of the level to the new run alone (Bonferroni weights 0.7-0.8 for
  k = 1 instead of 0.5, the rest to the windows), after the AR(1) change:
  first bad run at 1% noise, m=5, 5% step 86% -> 89-90% (seeds 0, 1), but
  AR(1) m=5 false alarms 4.25% -> 5.42% over 6 seeds (the k = 1 test carries
  part of the AR(1) excess). Not adopted: it trades the FA target for the
  first-run one.
- Most promising, not built: screen the new run alone at a looser level
  (k = 1 at 0.05 instead of 0.02) and let such a trip hold when the rerun
  alone has p <= 0.05 (weighted), the first attempt and the rerun agree (the
  consistency check), and their mean has p <= 0.002; window trips keep the
  present confirm. On the cached judgements (after the AR(1) change, seeds 0
  and 1, AR(1) over 6 seeds): first bad run at 1% noise, m=5, 5% step 86% ->
  89-90%, mean within-10 detection 0.439 -> 0.445, AR(1) m=5 FA 4.25% ->
  4.83%, spikes unchanged. It needs a first-attempt state that triggers the
  rerun without failing alone (with `--confirm 0` or `--gate warn` a k = 1
  trip at 0.05 must not be reported as a regression): a change to the
  verdict set, the runner and the report, left for the next session.
- Every rule tried moves along the same frontier: at a worst-cell FA of
  5-6%, the mean within-10 detection stays at 0.44-0.46. Reaching the targets
  needs p-values that stay calibrated under heavy tails, second modes and
  AR(1) with 30 baseline runs (so the level can rise where the noise is
  Gaussian), not a different confirm rule.

Third round (2026-11-30, late session). Harness: the benchmark's own series and
`gate_alarms`, 200 per cell; FA over seeds 0-5 (1,200 null series per cell),
detection on seed 0; "mean" = mean within-10 detection over the 56 cells of
steps 2/5/10% and drift; the change is adopted only with every cell's 6-seed FA
<= 5%.

- Where the power went (gauss3, m=1, 5% step, 100 series): of 35 series
  missed within 10 runs, most had tripped (the 10-run window at p 1e-4 to 0.03)
  and failed the confirm's pooled check: the mean of the first attempt and its
  rerun was bounded by the rank among *single* baseline runs (p >= 2/31 as soon
  as one run of 30 was as high), so the halved variance of a two-attempt mean
  was never used.
- Adopted (1), pair means: the two-attempt mean is ranked among the means of
  every pair of baseline runs (`judge_summaries(pair=True)`), with a variance
  that keeps what the previous run predicts beyond rho_lo; only where the
  baseline looks independent (rho_lo = 0) and light-tailed (fewer than 3 runs
  beyond 2 scales on the bad side), at 0.01, beside the single-run test at
  0.05. Unguarded at 0.05 it lifted the mean by 7 points but gave bimodal 6%
  and H200 8.5-9% FA on seed 0 (two slow attempts are ordinary there); the
  tail guard at 3 scales still left H200 m=5 at 8%; at 2 scales the 6-seed FA
  was AR(1) m=5 5.33% (the attempts share the AR state the baseline's rho
  underestimates; a rho_hi-aware pair variance did not change it); at 0.01
  beside the old test, and with the independence guard: worst 4.58%.
- Adopted (2), the confirm re-tests the window that decided the first attempt
  without a second Bonferroni split (independent-looking baselines only):
  alone, AR(1) m=5 4.25% -> 4.67% unguarded.
- Adopted (3), suspects: the new run alone at the 0.05 screen (after its
  Bonferroni weight), short of the level, earns a rerun without failing; it
  holds only when the rerun reaches the confirm level and the pair's mean has
  p <= 0.002 against pair means. Independent-looking baselines only: unguarded,
  first bad run (1% noise, m=5, 5% step) 92.0% over 6 seeds but AR(1) m=5 FA
  5.50%; guarded 90.2% (86.8% before; per seed 89.0/87.5/92.0/92.5/92.0/88.0)
  and worst FA 4.75% (AR(1) m=5). The 0.002 pair level: 0.001 and 0.0005 left
  AR(1) m=5 at 5.17% and 5.08% without the guard (the excess was not there).
- Together, seed 0: mean within-10 detection 0.407 -> 0.431 (steps 2/5/10%
  and drift); largest gains Student-t m=1 step 5% 72% -> 83%, drift 36% -> 46%,
  gauss3 m=1 step 5% 63% -> 71%, gauss8 m=1 step 10% 32% -> 42%; bimodal and
  AR(1) unchanged (the guards switch the new rules off there), H200 +1-2 points.
- Full run with (1)-(3) (seed 0): cells short of the best matched peer
  51 -> 49, of 90% of the CUSUM oracle 52 -> 50; worst null FA 4% -> 6%
  (H200 m=1, 12 of 200 series; 4.25% over six seeds, where the worst cell
  was AR(1) m=5 at 4.75%); first bad run 86% -> 89% on this seed, 90.2%
  over six. With (4) as well (the tables above): 40 and 43 cells short.
- Spikes over six seeds (new in `--fa-seeds`): the Gaussian m=1 cells show
  spike false alarms above their nulls by more than two standard errors,
  gauss3 2.92% vs 1.67% and gauss8 3.25% vs 1.67%. It predates this round: the
  gate before it gave gauss8 m=1 2.50% vs 0.67% and gauss3 m=1 2.08% vs 1.17%
  on the same series; the round added 0.5-1.3 points to nulls and spikes
  alike. Where (gauss8 m=1, six seeds): 23 of the 39 spike series that
  alarmed did so on the spike run itself (+20% is 2.5 run scales at 8% noise:
  the first attempt trips at k = 1, and its clean rerun reaches the confirm
  level by its own noise, as 2.5-5% of reruns do); the rest spread over the
  runs before and after it. Requiring the pair's mean also for k = 1 confirms
  changed none of them (a rerun high enough to confirm makes the pair's mean
  clear too); keeping the k = 1 confirm weighted changed none of them either
  and cost 0.9 points of first-bad-run detection. Not fixed: with one rerun,
  a spike's excess is its trip probability times the confirm level.
- Still the same frontier where the noise is not independent and Gaussian:
  bimodal, AR(1) and H200 cells gain nothing, and they are most of the cells
  still short of the best matched peer.
- Adopted (4), a quantile test: the least bad of the last 5 runs against the
  baseline, exact under exchangeability (`quantile_p`: with m of the n
  baseline runs at or beyond it, p = C(m + 5, 5) / C(n + 5, 5)). Under a slow
  second mode the Huber location of a window moves with the slow runs while
  the window's minimum does not: on bimodal m=1, 10% step, a 10-run window
  sat at +9-11% against a main mode at 0 +/- 1.4% and still failed (Huber p
  0.005-0.04, then the pooled check, which a slow mode defeats). The
  prototype (`benchmarks/attempts/quantile_window.diff`, knobs QT, QK, QR,
  QAR, QP2, QHEAVY) applied it to every independent-looking baseline: seed 0
  mean within-10 detection step 2% 22.1 -> 25.1, 5% 47.1 -> 55.2, 10%
  69.6 -> 76.5, drift 33.7 -> 39.6, but AR(1) m=5 FA 6.25% over six seeds
  (13 of 66 alarming series, on AR baselines that look independent), and
  neither an effective run count from rho or rho_hi (5.50% / 5.25%), a pair
  level of 0.05 (5.33%) nor weight 0.05 with k = 6 (5.33%) brought it under
  5%. Restricted to baselines with a heavy tail or second mode (3 or more
  runs beyond 2 scales on the bad side; the AR(1) baselines that fool the
  independence check look Gaussian): AR(1) m=5 back to 4.75-4.83%. Shipped
  that way, with 0.1 of the level taken from the windows only where the test
  applies (Gaussian cells unchanged), confirmed by the rerun's own quantile
  test at 0.05 and both attempts beyond a point at most 10% of baseline
  pairs reach. Seed 0 (quick harness): bimodal step 5% 10 -> 32% (m=1) and
  3 -> 18% (m=5), step 10% 19 -> 46/50%, drift 4 -> 17/22%; H200 step 5%
  50 -> 66% / 52 -> 68%, step 10% 64 -> 78% / 71 -> 86%; Student-t drift
  46 -> 50%. Six-seed FA: worst AR(1) m=5 4.83%, H200 4.75/4.42%, bimodal
  3.67/3.25%. Full-run and six-seed figures: the tables above and
  `bench_gates_fa.md`.
- Next: a confirm for quantile trips that needs the rerun alone beyond the
  quantile point (the rerun's window shares 4 of its 5 runs with the first
  attempt), the quantile test over k = 5 and 10, and a way into AR(1) and
  Gaussian m=1 cells, where the new rules are off or the budget is unused.

Fourth round (2026-11-30, night). Quick harness as before (`gate_alarms` over
`_cell_series`), now every effect on six seeds (1,200 series per cell for
nulls, spikes and each effect); "mean" = the mean over the 14 cells of that
effect's within-10 detection.

- Adopted: a baseline window of 40 runs instead of 30. Mean within-10
  detection, 30 -> 40: step 1% 10.3 -> 10.7, 2% 22.9 -> 23.9, 5% 51.9 ->
  53.5, 10% 75.1 -> 75.5, 20% 95.3 -> 95.5, drift 36.2 -> 38.2. Largest
  gains: Student-t drift 52.7 -> 62.8% (m=1) and 42.4 -> 51.0% (m=5),
  Student-t m=1 step 5% 84.6 -> 91.1%, gauss3 m=1 step 5% 73.5 -> 77.7%,
  gauss8 m=1 step 10% 43.9 -> 49.1%; largest loss AR(1) m=1 step 10%
  56.6 -> 53.9%. Null FA: mean over cells 3.1 -> 3.1%, worst cell AR(1)
  m=5 4.8 -> 4.6%, H200 m=1 4.7 -> 4.3%, bimodal m=5 3.2 -> 4.0%. First bad
  run (1% noise, m=5, 5% step) 90.2 -> 90.6%. Why: scale, autocorrelation
  and degrees of freedom from more runs, and one baseline run as high as the
  new one now bounds p at 2/41 = 0.049 instead of 2/31 = 0.065, under the
  confirm level. Real H200 history (`rejudge_history.py`): identical
  verdicts (no metric there has 40 runs yet).
- Window 50: the same detection as 40 on these series (they hold at most 40
  runs before a 10-run window) and null FA 3.1 -> 2.9% on average; not
  taken: a real metric would need 60 runs before the window is full, and
  the baseline would follow an accepted change more slowly.
- Rejected: the rank bound only from two baseline runs as extreme (one old
  spike in the baseline no longer caps p): within-10 detection +1.5-3 points
  on average, but null FA H200 8.1/7.6%, Student-t 4.9/5.9%, bimodal
  4.9/5.8%, AR(1) m=5 5.7%. The one-run bound does most of the work of
  keeping heavy tails quiet.
- Adopted: a first attempt that its confirm finds a transient (far above its
  rerun: the consistency check's two-draw p <= 0.001, `transient_level`)
  enters later baselines with its rerun's value, so a +20% glitch stops
  feeding the 3- and 10-run windows of the runs after it (in a session: the
  confirm verdict's detail says `transient`, and both baseline paths read the
  rerun's samples for that run). At p <= 0.01 (30-run window) it cost 0.5-1
  point of detection in every Gaussian cell; at 0.001 (40-run window, six
  seeds, against the 40-run window without it): spike FA bimodal m=1 4.5 ->
  3.5%, m=5 3.6 -> 3.2%, H200 m=1 6.2 -> 5.2%, m=5 5.0 -> 4.7%, gauss3 m=1
  unchanged at 2.9% (the two runs after the spike stop alarming, 13 -> 0 of
  1,200 series, and null-rate alarms later in the series take part of their
  place); null FA unchanged (mean 3.1%, worst AR(1) m=5 4.7%); mean within-10
  detection -0.2 points (bimodal -0.5 to -1: a slow-mode first attempt with
  a main-mode rerun is replaced too).
- Spikes, once more: with one rerun, the excess over nulls on the spike run
  is the spike's trip probability times the rerun's chance to pass the
  confirm alone, about 0.5 x 0.05 at 8% noise. The rerun is the only draw the
  spike does not touch, and a one-sided test of it at 0.05 is already the
  most powerful at that level; lowering that level to ~0.02 would bring the
  excess inside the noise but costs the first-run and within-10 detection of
  every real step that trips on one run. A second rerun, only when the first
  is borderline, would do it at little cost in power, but it is a second
  confirm attempt by default (CI time) and the benchmark's series carry one
  twin: not built.
- Speed (`bench_gate_speed.py`): the bulk path now reads each baseline run's
  stored median (`metrics.median`) and the samples of the newest 10 runs
  only (the within-run spread a new run is compared with; it was every
  baseline run's). Paired on this machine under load: 0.95-0.99 s ->
  0.78-0.81 s for 1,000 metrics x 200 runs.

Fifth round (2026-12-01). Same quick harness (`gate_alarms` over
`_cell_series`); FA and spikes over seeds 0-5 (1,200 series per cell),
detection over seeds 0-2 (600 series per cell and effect).

- Where the AR(1) cells lost (m=1, 10% step, 200 series): the first bad run
  sat 3-6 scales above its one-step prediction, yet its k = 1 p was 0.002-0.05:
  the t test took the marginal scale's AR-reduced degrees of freedom,
  0.82 (n - 1) (1 - rho) / (1 + rho), 3.5-9 at rho 0.55-0.8, and the
  prediction used the cautious lower bound of rho, which under-predicts after
  a high run (and the rerun shares that error). Once the first bad run was
  missed, the next prediction absorbed 0.7 of the step.
- Adopted: where rho_lo > 0, the k = 1 test predicts with the bias-corrected
  rho, takes the Qn of the baseline's one-step residuals as its scale (at
  least s1 sqrt(1 - rho^2)) with 0.82 (n - 2) degrees of freedom, and adds the
  centre's error with weight (1 - rho)^2 and rho's own error times
  (x_prev - c)^2. On 197 AR(1) baselines (phi 0.7) a null next run now has
  p <= 0.05 in 3.0% (0.5% before: the test was conservative) and a +10% step
  p <= 0.01 in 96% (45%) (`test_stats.py::test_autocorrelated_prediction_is_calibrated_and_sees_a_step`).
  Within 10 runs: AR(1) m=1 step 5% 14.8 -> 32.0%, step 10% 54.0 -> 98.0%,
  step 20% 90.7 -> 100%, drift 5.7 -> 7.3%; m=5 step 5% 25.8 -> 31.5%,
  step 10% 68.7 -> 86.2%, step 20% 96.2 -> 100%; other models within 1 point.
  Null FA AR(1) 2.8 -> 3.7% (m=1), 4.7 -> 4.4% (m=5); bimodal 2.6 -> 3.2%,
  4.2 -> 4.6% (a chance lag-1 correlation engages the sharper test); others
  +0-0.3 points. Steps on the way: the df alone, or the residual scale with
  rho_lo, left AR(1) m=5 at 5.2% and 5.4%; the point estimate of rho brought
  it to 4.2%.
- Adopted: the quantile test reads the least bad of the last 7 runs (was 5).
  Within 10 runs, seeds 0-2, 5 -> 7: bimodal step 5% 26.8 -> 40.8% (m=1),
  20.8 -> 35.3% (m=5), step 10% 46.5 -> 52.3 / 48.7 -> 53.7%, drift
  14.3 -> 22.2 / 15.2 -> 24.8%; H200 step 5% 56.7 -> 63.8 / 66.0 -> 70.8%;
  Student-t within 2 points. Null FA lower: bimodal 3.2 -> 2.8 / 4.6 -> 4.4%,
  H200 4.4 -> 4.2 / 4.2 -> 3.9%. k = 6 detected about as much with FA
  unchanged; k = 10 halved drift detection under bimodal noise (the slow mode
  needs all 10 runs shifted).
- Rejected: the window tests' rho caution at r + 0.5 se instead of r + 1 se
  (AR(1) FA 4.6% (m=1) and 5.8% (m=5)). It is what holds the Gaussian m=1
  cells back: an iid baseline of 40 runs shows r ~ 0.3 by chance often
  enough, and rho_hi ~ 0.5 then triples a 10-run window's variance (a
  gauss1 series with a 2% step: ten bad runs averaging +1.6 scales, 10-run
  window p 0.027).
- Rejected: the pair-mean check of window confirms at 0.2 instead of 0.05
  against single runs where the baseline looks independent and light-tailed:
  within 10 runs +4-7 points at steps of 2-5% in the Gaussian and Student-t
  cells, but null FA +1 point everywhere and spikes above their nulls by more
  than two standard errors (gauss8 m=5 5.1% vs 3.2%, m=1 5.3% vs 3.4%).
- Rejected: consistency level 0.05 with the rerun's own p <= 0.005 overriding
  it: gauss8 m=1 spike FA 4.2 -> 3.9% against 2.2% for its nulls. The spike
  excess there stays the rerun's 5% chance to pass the confirm alone.
- Rejected: for autocorrelated baselines, 3- and 10-run windows of the
  one-step residuals (their mean against 0, on the residuals' scale, inflated
  only for the residuals' own cautious lag-1 correlation) instead of the
  runs' Huber location with the runs' AR(1) inflation: within 10 runs +3-5
  points in AR(1) cells (step 5% 32.0 -> 36.7% m=1, step 10% 86.2 -> 89.7%
  m=5, drift 7.3 -> 10.5% m=1), but null FA AR(1) 3.7 -> 5.0% / 4.4 -> 5.3%
  and bimodal m=5 4.4 -> 6.8% (a chance lag-1 correlation engages them, and
  a slow mode is not a residual). The inflated windows had spent almost none
  of the level there.
- Rejected: level 0.025 (was 0.02) with both adopted changes: null FA
  bimodal m=5 4.4 -> 5.2%, AR(1) m=5 4.4 -> 5.0%, +0.1-0.8 points elsewhere.
- Both adopted changes, full run (seed 0, the tables above): cells short of
  the best matched peer 41 -> 34 (by more than 2 standard errors 12 -> 6),
  of 90% of the CUSUM oracle 42 -> 40 (27 -> 23); AR(1) m=1 step 10%
  52 -> 98% (peer 91%), bimodal step 5% 28/21 -> 40/38%, H200 step 5%
  60/68 -> 64/72%. Six seeds (`bench_gates_fa.md`): worst null FA 4.42%
  (bimodal m=5 and AR(1) m=5), spikes above their nulls only in gauss8 m=1
  (4.00% vs 2.17%), first bad run 90.6 -> 91.3%.

Sixth round (2026-12-01, second session). Prototyped in
`benchmarks/attempts/two_stage_confirm.py`, then shipped (last item) (the benchmark's series with a
second twin per run from its own generator, so the series are unchanged;
`TWO=0 LIID=0` reproduces the shipped gate cell for cell). FA and spikes over
seeds 0-5 (1,200 series per cell), detection within 10 runs over seeds 0-2
(600 series per cell and effect).

- The design: a second confirm rerun only when the first is borderline. A
  level trip (not a suspect, not a quantile trip, not a transient, not a
  heavy-tailed baseline) holds at once when the first rerun alone has
  p <= 0.0005 (z ~ 3.4); when its p is above 0.46 the one-rerun confirm's
  verdict stands; in between, a second rerun is taken and the regression
  holds when the mean of the two reruns (`judge_summaries(pair=True)`) has
  p <= 0.02 and it and the second rerun clear the floor. For Gaussian noise
  that holds 2% of null trips instead of 5% and has more power at every
  shift (0.39 / 0.78 / 0.99 at 1.25 / 2 / 3 SD, against 0.35 / 0.64 / 0.91):
  it frees false-alarm budget that a higher first-attempt level then spends.
- Two-stage alone (level 0.02, applied to heavy-tailed baselines too, seeds
  0-2): null FA mean 3.1 -> 2.0%, bimodal m=5 5.2 -> 1.7%, H200 m=1
  5.2 -> 2.7%; spikes 3.6 -> 2.3% (gauss8 m=1 3.5 -> 1.3% against its nulls'
  1.7%: the spike excess gone); within-10 detection about the same (mean over
  the 14 cells: step 5% 57.5 -> 57.6, step 10% 81.7 -> 80.2, drift
  38.9 -> 37.7), but bimodal step 10-20% -3 to -7 points (two reruns in the
  slow mode): heavy-tailed baselines keep the one-rerun confirm (`HG=1`).
- With the first-attempt level 0.1 where the baseline looks independent
  (rho_lo = 0) and light-tailed (fewer than 3 runs beyond 2 scales on the bad
  side), 0.02 elsewhere, and no two-stage confirm where rho_lo > 0 (two reruns
  share the previous run's state: without that guard AR(1) m=5 FA was 5.25%
  over six seeds): within 10 runs gauss3 m=1 step 5% 75.7 -> 81.3%, drift
  37.7 -> 50.5%; gauss3 m=5 step 5% 64.5 -> 75.5%, drift 30.3 -> 38.7%;
  gauss8 m=1 step 10% 48.3 -> 58.7%, m=5 40.5 -> 48.2%; gauss1 step 2%
  88.2 -> 91.8% (m=1), 79.5 -> 84.3% (m=5); Student-t drift 56.5 -> 62.5% /
  48.0 -> 55.5%, step 2% 17.5 -> 22.5% / 11.5 -> 16.8%; bimodal, AR(1) and
  H200 within 1.3 points. Mean over the 14 cells: step 2% 24.2 -> 26.6,
  step 5% 57.5 -> 59.5, step 10% 81.7 -> 82.9, drift 38.9 -> 41.7. Six-seed
  null FA: worst 4.92% (AR(1) m=5, was 4.42%: AR(1) baselines that look
  independent get the higher level), Student-t 4.00 / 4.67%, H200 4.42 /
  4.50%, the rest <= 3.5%; spikes: gauss8 m=1 3.17% against its nulls'
  2.83% (was 4.17 against 2.17%), but Student-t m=1 4.92 against 4.00% and
  gauss8 m=5 4.08 against 2.42%. The first-attempt level alone (0.05, one
  rerun as shipped) gave half the gain at a higher cost (gauss3 m=5 FA 4.3%,
  spikes +0.5-1.8 points on seeds 0-2).
- Shipped later in the session (52e2ec7 and after) as measured here, with
  `heavy` and `rho_lo` read from the rerun's own judgement
  (`stats.independent`), the level as a multiple of the gate's (`independent_factor`,
  so a declared level scales) and only for enforced gates with two reruns
  left (`stats.level_for`; `--confirm 1`, `--confirm 0` and `--gate warn`
  keep the gate's level and one rerun). The runner (`--confirm 2` by
  default) passes `--attempts-left` to the gate; the first rerun's gate says
  `suspect` for a borderline metric and lists only those tests; the second
  rerun's gate judges them with `stats.confirm_pair`, leaves the first attempt
  out of its baseline and carries the first rerun's held failures. The
  benchmark's series carry a second twin from a second generator per cell.
  Quick harness on the shipped code (seeds 0-2 detection, 0-5 FA): the same
  figures as the prototype within sampling error (its second twins are other
  draws): with a factor of 5 (level 0.1), mean within-10 step 2%
  24.2 -> 26.4, step 5% 57.5 -> 59.4, step 10% 81.7 -> 82.8, drift
  38.9 -> 41.7; six-seed null FA worst 4.92% (AR(1) m=5), Student-t m=1
  4.83%; spikes above their nulls by more than 2 se in gauss8 m=1 (3.92 vs
  2.42%) and m=5 (3.75 vs 2.33%); full run (seed 0): cells short of the best
  matched peer by more than 2 se 6 -> 3, of 90% of the CUSUM oracle 40 -> 35
  (23 -> 19). Adopted instead: a factor of 4 (level 0.08): mean within-10
  step 2% 26.0, step 5% 59.1, step 10% 82.4, drift 40.9 (0.3-0.8 points
  under 5; at most 3.5 points in a cell, gauss3 m=5 drift 39.7 -> 36.2%);
  six-seed null FA Student-t m=1 4.08% (4.83% at 5), worst still AR(1) m=5
  4.92% (AR(1) baselines that look independent); spikes gauss8 m=1 3.50 vs
  2.08% (still above by 2 se), m=5 3.17 vs 2.17% (within). The full run and
  six-seed tables above are of the shipped code.
- Runs on several machines (`--machines`): with the two-stage confirm the
  named pools' null FA rose 12 -> 20% and 15 -> 19% (two reruns on the run's
  own machine share its offset, as AR(1) reruns share the previous state).
  Adopted: `stats.independent` also needs a baseline that names at most one
  machine, so named pools keep the gate's level and one rerun (12% and 15%,
  as before). Pools whose runs name no machine cannot be told apart from
  independent noise: 19 -> 29% and 18 -> 22%. A suite session names every
  run's GPUs, so this is histories recorded without hardware provenance.
- Rejected: transient level 0.01 (a first attempt this far above its rerun
  stands in by its rerun in later baselines, to keep a spike out of the next
  windows): gauss8 spikes unchanged (3.83 / 3.83%), AR(1) null FA 5.50% (m=1
  and m=5) over six seeds.
- Left: the spike excess in gauss8 (the higher first-attempt level trips more
  often next to a spike), the Gaussian cells' distance to the CUSUM oracle,
  and bimodal, AR(1) and H200 cells, which the two-stage confirm does not
  reach (heavy tails and autocorrelation keep one rerun).

Seventh round (2026-12-01, third session): how far the Gaussian cells can go.

- A yardstick, `cusum-plugin` (`peers.PluginCusum`): the oracle's CUSUM with
  mean and SD learnt from runs 0-29, the shift size still known and the
  threshold still tuned on each cell's nulls. On this seed, of the 20 cells
  short of 90% of the CUSUM oracle by more than 2 se, the plug-in is short
  too in 10 (e.g. gauss3 m=5 step 2%: plug-in 12% against the oracle's 26%;
  gauss8 m=5 step 10%: 62 against 80%; AR(1) m=5 step 5%: 36 against 62%):
  those cells are out of reach of any gate that learns the noise from 30-40
  runs and does not know the shift. With runs 0-39 as Phase I (ten more
  runs, some of them gated later) the plug-in moved by -3 to +25 points
  (AR(1) m=1 step 5%: 32 -> 57%) and still missed 90% of the oracle in
  gauss3 m=5 step 1%, gauss8 m=1 step 1/2/5% and drift, gauss8 m=5 step 10%,
  bimodal m=1 step 5-10% and m=5 step 5%, AR(1) m=5 step 5% and H200 step
  1%. The gate beats the plug-in in most heavy-tailed cells (Student-t
  drift 58 / 51% against 34 / 34%, bimodal step 5% 40 / 38% against
  14 / 11%, H200 m=1 step 5% 64 against 46%) and is below 90% of it by more
  than 2 se in 9: small Gaussian steps and drifts (gauss1 step 1%, gauss3
  m=1 step 1-2% and drift), gauss8 m=1 step 10% (56 against 78%) and drift,
  Student-t m=5 step 1%, bimodal m=1 step 20%. The first attempt alone at
  the gate's level (`gate-no-confirm`, 16-26% FA) detects little more than
  the plug-in at 5% (gauss3 m=1 step 2%: 33 against 38%): the windows
  (1, 3, 10 runs, Bonferroni) accumulate evidence less efficiently than a
  CUSUM, and the confirm then halves what they find.
- Tried (prototype in `/tmp`, the gate's flow plus a second path): a windowed
  CUSUM on independent, light-tailed baselines, S = max over j <= 10 of the
  sum of the last j runs' (clip((x - c) / s1, -3, CLIP) - 0.5), centre and
  scale from the gate's baseline; it trips at S > H and holds when S with
  the rerun in place of the first attempt is still > H and the rerun is above
  the centre. CUSUM-only null FA on seeds 0-1 (gauss3, gauss8, Student-t):
  CLIP 2.5: H 4 6.5-10%, H 5 0-8%, H 6 0-4.5%, H 7 0-2.5%; CLIP 1.5: H 4
  0.5-4%, H 5 0-2%. Beside the gate (seed 0, gauss3 and gauss8, mean of the
  4 cells): CLIP 2.5, H 6: within-10 step 2% 7.5 -> 10.2, step 5%
  45.5 -> 48.5, step 10% 75.6 -> 79.1, drift 23.0 -> 25.8, null FA
  3.1 -> 3.6%, spikes 4.0 -> 5.9%; CLIP 1.5, H 5: +1.4 / +2.0 / +2.3 / +1.1
  points, null FA 3.1 -> 3.4%, spikes 4.0 -> 4.6%. Rejected: a few points
  of detection for more false alarms where spikes are already the missed
  target. Its threshold has to sit high because the centre's error (40
  runs) adds to every term of the sum and the sum is looked at after every
  run; the plug-in pays the same price and is tuned per cell.
- Not changed: the noise floor. At 0.25 run-to-run CV instead of 0.5 the
  Gaussian cells moved 0-1 points (seed 0): significance binds, not the floor.

Eighth round (2026-12-01, fourth session): the heavy-tailed cells short of
the best peer.

- Where bimodal m=1 step 20% (81%) and H200 m=1 step 10% (81%) lose (seed 0,
  every missed series traced): the first attempt trips, mostly on the
  10-run window, and its rerun re-tests that window at p 1e-2 to 1e-12, but
  the check that the two attempts themselves lean the bad way (their mean
  at p <= 0.05 against single baseline runs) fails: the slow mode (bimodal:
  30% of runs at +3 to +28%; H200 fi_decode: a quarter of runs at +10 to
  +27%, clustered, so rho_lo > 0) already produced single runs as slow as
  the shifted fast mode, and the rank bound holds the pair's p at 0.06-0.3.
  In H200 a clustered slow mode also reads as AR(1), which inflates the
  windows' variance (a 10% step at a 1.7% scale: z 2.8-3.8 after 10 runs).
- Tried (prototype in `/tmp`, seed 0, the four heavy or autocorrelated
  models, 200 series): (a) a window this strong holds on a weaker lean
  (rerun's window p <= 1e-4 and the pair's mean at p <= 0.5): H200 m=1
  step 10% 81 -> 84%, bimodal m=1 step 20% 81 -> 84.5%, null FA H200 m=5
  4.5 -> 5.5%, bimodal m=1 2.5 -> 3.5%, bimodal m=5 spikes 3.0 -> 5.0%;
  (b) for heavy, independent baselines, both attempts beyond a point at most
  5% of baseline pairs reach (``quantile_p`` of the two) as another way to
  hold: within-10 detection +0.3 to +2 points (drifts +1.5 to 6), null FA
  3.3 -> 4.0% on average (H200 m=5 4.5 -> 6.5%, bimodal m=5 2.5 -> 4.5%),
  spikes 4.4 -> 5.2%. Rejected both: the few points cost the false alarms
  these cells have no room for (six-seed H200 null FA is 4.0 / 4.25%). The
  best peer in H200 m=1 step 10% is E-divisive calibrated on 20 null series
  to 10% FA (the lowest its p-value grid reaches there), twice the budget.
- Tried on the Gaussian and Student-t cells (seed 0, 200 series): window trips
  of independent, light-tailed baselines confirmed by re-testing the window
  with the rerun in place of the first attempt at a strict level WL (rerun
  above the centre, consistency check kept, no second rerun), instead of the
  pair's lean check and the two-stage confirm. WL 0.01: null FA 3.0 -> 5.7%
  and spikes 3.3 -> 5.8% (mean of the 8 cells) for +3 to +5 points of
  within-10 detection (steps 1/2/5%, drift); WL 0.003: FA 3.0 -> 3.1%,
  detection -1.3 to +0.9 points. The same frontier as every rule before it:
  at the false alarms the target allows, nothing gained. Rejected.
- Tried and rejected: the two-stage confirm's second stage at 0.015 instead
  of 0.02 (``rerun_pair_level``; Gaussian null holds 2.0 -> 1.5%, power at
  1.25 / 2 / 3 SD 0.38 / 0.78 / 0.98 -> 0.34 / 0.74 / 0.98, normal
  approximation), aimed at the gauss8 m=1 spike excess, which it is: the
  spike run's first attempt trips (or is a suspect) in 57% of the series
  (680 of 1,200) and its clean reruns then pass the second stage at about
  its null rate (of the 42 gauss8 m=1 spike alarms over six seeds, 18 on
  the spike run itself). Six seeds (full
  `--fa-seeds`): gauss8 spikes 3.50 / 3.17 -> 2.58 / 2.42% against nulls
  1.75 / 1.83%, every Gaussian null 0.16-0.5 points lower, AR(1) m=5
  4.92 -> 4.67%; but H200 m=1 then misses the spike check instead (spikes
  5.42 -> 5.08%, its nulls 4.00 -> 3.42%: a difference of 1.66 points
  against 1.65 for two standard errors), and the full run (seed 0) lost
  detection: cells more than 2 se below 90% of the CUSUM oracle 20 -> 22,
  below 90% of the plug-in 9 -> 12, within-10 detection down by up to 4
  points in Gaussian cells (gauss1 m=5 step 1% 30 -> 26%, gauss8 m=5 step 10%
  46 -> 42%). A borderline spike cell moved, for detection lost.
- Why the bimodal and H200 misses had lost their quantile test: all 38
  missed bimodal m=1 step 20% series had rho_lo > 0 at run 49 (88 of 91 at
  step 10%; H200 m=1 step 10%: 37 of 38), though the bimodal runs are
  independent. ``lag1_autocorr`` centres
  the clipped runs on the baseline's median, not on their mean, so a skewed
  baseline (a slow mode, a one-sided tail) reads as autocorrelated: over
  4,000 independent 40-run baselines its mean r is 0.15 for the bimodal model
  (0.05 Gaussian) and the cautious bound rho_lo is above 0 in 61% of them
  (24% Gaussian), above 0.2 in 17% (2.5%). rho_lo > 0 switched the quantile
  test off (and its confirm path), leaving the windows and the pair's lean
  check, which a slow mode defeats.
- Adopted: the quantile test (and its confirm) where rho_lo <= 0.2
  (``QUANTILE_RHO``; was = 0). Harness, seed 0, 200 series, within 10 runs:
  bimodal step 5% 39.5 / 37.5 -> 64.0 / 58.5% (m=1 / m=5), step 10%
  54.5 / 54.5 -> 79.5 / 83.5%, step 20% 81.0 / 89.5 -> 94.0 / 95.5%, drift
  21.0 / 24.5 -> 36.5 / 41.0%; H200 step 5% 64.5 / 73.0 -> 78.0 / 86.5%,
  step 10% 81.0 / 88.0 -> 94.0 / 95.0%, drift 57.0 / 48.0 -> 64.5 / 57.0%;
  Student-t +0-1.5 points, AR(1) and the Gaussian cells unchanged. Six
  seeds: null FA within +0.17 points everywhere (bimodal m=1 2.83 -> 3.00%),
  AR(1) unchanged (worst cell still AR(1) m=5, 4.92%), spikes within +0.33
  (H200 m=1 5.42 -> 5.75% against its nulls' 3.92%: 0.08 points beyond two
  standard errors of the difference, where the gauss8 m=1 cell already
  was). The 37 real H200 runs in `history.db` replay to the same verdicts.
- Also measured: the guard at 0.1 gave about 70% of that gain; at 0.3 more
  (bimodal step 10% another +8 points) but AR(1) m=5 null FA 5.00% and its
  spikes 5.83%; no guard (1.0) AR(1) 5.33 / 4.58%. Centring
  ``lag1_autocorr`` on the clipped runs' mean (the textbook estimator, the
  root of the bias) gained as much in bimodal and H200 but raised AR(1)
  null FA to 5.42 / 4.42% (m=5 / m=1): the median-centred r's upward bias
  is part of what holds AR(1) at 5%, so the estimator stays as it is.

Ninth round (2026-12-01, fifth session): the yardsticks held to the gate's
constraints, and the CUSUM once more.

- The `matched` peers and both CUSUMs are calibrated on nulls alone and then
  alarm on 10-100% of the spike series (the CUSUM oracle 99% in gauss3 m=1,
  100% in gauss1): they are not at the false-alarm rate the gate is held to,
  where a spike alarm is a false alarm. `held` (``benchmarks/held.py``) gives
  them the gate's first rerun (an alarm stands only if the rerun trips too;
  an unconfirmed trip's rerun stands in for it later) and calibrates them to
  5% on nulls and on spikes. Held, the peers mostly gain (the rerun is worth
  more than the spike constraint costs: z-score gauss3 m=1 step 5% 44 -> 62%)
  and the CUSUMs lose where a spike is large against the noise (oracle gauss3
  m=1 step 2% 46 -> 34%, drift 66 -> 50%; plug-in step 2% 38 -> 12%).
- What that leaves (seed 0, full run below): against the held oracle the
  gate still falls short in small steps under light or moderate tails
  (gauss1 step 1%, gauss3 step 2%, Student-t step 2% and drift, gauss8
  step 10%), and the held plug-in, which knows the shift and is tuned per
  cell, reaches 90% of the held oracle in several of those; against the best
  held peer the AR(1) cells are short (a z-score given a rerun that shares
  the AR state).
- Tried again (quick harness over cached gate runs, seed 0, 200 series per
  cell): a windowed CUSUM, S = max over j <= 10 of the sum of the last j
  runs' clip((x - c) / s1, -3, 2.5) - 0.5, with the centre and scale of the
  gate's own baseline, only on independent baselines, confirmed by the rerun
  as `held` does, and with every run the gate reran but did not hold standing
  in by its rerun (new: that is what removed round 7's spike excess, the
  spike no longer sitting in the next ten sums). Beside the gate, H = 5:
  gauss1 m=1 step 1% 36 -> 44% for null FA 2.0 -> 4.0%; gauss3 m=1 step 2%
  14 -> 17% (1.5 -> 1.5%); spikes +0.5-1.5 points. Instead of the 3- and
  10-run windows on independent baselines (the gate keeps its k = 1 test):
  H = 4, gauss1 m=1 step 1% 36 -> 38% with null FA 2.0 -> 4.5%, gauss3 m=1
  drift 48 -> 43%, and H200 null FA 3.5 -> 7.0% (its baselines pass as
  independent often enough). The same CUSUM on its own (no gate paths
  beside it), H = 4: on every baseline it found Student-t drift 84% and step
  5% 100% (gate 60 / 90%) at 5% null FA, but bimodal, AR(1) and H200 null FA
  23-62%; guarded (rho_lo <= 0.2, at most 2 more baseline runs beyond 2
  scales on the bad side than on the good), Student-t drift 75% / 58% (m=1 /
  m=5) at 4.0% FA, but gauss3 m=5 null FA 7.5%, AR(1) m=5 15% (12% of its
  baselines pass the guard) and H200 5.5-6.5%, before any gate path adds
  its own. Rejected, all: the rolling robust baseline's
  centre error enters every term of the sum, and one threshold for every
  metric must sit where the per-cell tuned plug-in does not have to.
- Tried: where a 3- or 10-run window decided an independent baseline's trip
  and the one-rerun rules hold it (the window re-tested with the rerun in
  place at 0.05, the pair's lean check), hold it without the two-stage
  confirm's second stage, which judges the two reruns' mean alone and so
  drops the window's evidence (harness, seed 0, 200 series). Windows of 3 and
  10: within 10 runs gauss1 m=1 step 1% 36 -> 46%, gauss3 m=1 step 2%
  14 -> 20%, gauss8 m=5 step 10% 46 -> 56%, Student-t m=1 step 2% 22 -> 28%;
  null FA gauss3 m=5 4.5 -> 6.0%, gauss8 m=5 3.0 -> 5.0%, H200 m=1 / m=5
  3.5 / 4.5 -> 5.0 / 6.0%. The 10-run window only: +1-6 points, null FA
  +0-1 point (gauss3 m=5 5.5%). Rejected: the gain is bought with the false
  alarms the level would have to give back.
- Tried for the two spike cells: every rerun that did not hold its trip
  stands in for its first attempt in later baselines and windows (not only
  transients at p_split <= 0.001), on baselines with rho_lo = 0. Six seeds:
  spikes gauss8 m=1 3.50 -> 3.17%, H200 m=1 5.75 -> 5.42% (each then just
  inside two standard errors of its nulls, 1.92 and 3.75%), AR(1) unchanged;
  for every baseline (no rho guard) AR(1) m=1 null FA 4.00 -> 6.83%. But
  seed 0 detection fell where a real change's first trip went unheld and its
  lower rerun replaced it: gauss1 m=5 step 1% 30 -> 24%, gauss3 m=5 step 5%
  76 -> 68%, gauss8 m=1 step 5% / 10% 14 / 56 -> 8 / 50%, Student-t step 2%
  22 / 18 -> 18 / 14%. Rejected: a borderline check passed by a few tenths
  of a point, for up to 8 points of detection.
"""


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
             "Gate = `gates.stats` at its defaults with up to two confirm reruns (the second only when the first is borderline); peers "
             "`matched` = threshold calibrated to 5% FA/series on the same cell's nulls.\n")
    # Headline: within 10 runs for step5 and step10, FA, vs best peer (matched) and oracle.
    L.append("## Headline: false alarms and detection within 10 runs\n")
    rows = []
    for (model, m), c in cells.items():
        g = c[("gate", "default")]
        row = [model, m, _pct(g.fa_series), _pct(g.spike_fa)]
        for e in ("step2", "step5", "step10", "drift"):
            best = _best_peer(c, e, 2)
            cu = c[("cusum-oracle", "matched")].det[e][2]
            plug = c[("cusum-plugin", "matched")].det[e][2] if ("cusum-plugin", "matched") in c \
                else float("nan")
            row.append(f"{_pct(g.det[e][2])} / {_pct(best)} / {_pct(plug)} / {_pct(cu)}")
        rows.append(row)
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
        rows = []
        for (model, m), c in cells.items():
            g = c[("gate", "default")]
            row = [model, m]
            for e in ("step2", "step5", "step10", "drift"):
                row.append(f"{_pct(g.det[e][2])} / {_pct(_best_peer(c, e, 2, 'held'))} / "
                           f"{_pct(c[('cusum-plugin', 'held')].det[e][2])} / "
                           f"{_pct(c[('cusum-oracle', 'held')].det[e][2])}")
            rows.append(row)
        L.append(tabulate(rows, headers=["noise", "m",
                                         "step 2%: gate / best held peer / held plug-in / "
                                         "held oracle", "step 5%", "step 10%", "drift"],
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
             "are rates with 1.5-2 points of sampling error here; their means over six seeds "
             "are in `bench_gates_fa.md` (`--fa-seeds 0,1,2,3,4,5`).\n")
    L.extend(_targets(cells))
    L.append("")
    L.append("## Notes\n")
    L.append(NOTES)
    L.append("## Attempts (detection)\n")
    L.append(ATTEMPTS)
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


def _held_targets(cells: dict) -> list[str]:
    """The two detection targets against detectors held to the gate's constraints."""
    miss_peer, sig_peer, miss_or, sig_or, reach, gap_plug = _comparisons(cells, "held")
    return [
        "- Held to the gate's constraints (`held`: each detector gets the gate's first "
        "confirm rerun, and its threshold keeps FA/series <= 5% on the spike series as well "
        "as on nulls; fixed-5%, miles-band and z-score only):",
        "  - within 10 runs >= best held peer: "
        + ("met in every cell." if not miss_peer else
           f"short in {len(miss_peer)} cells, by more than 2 standard errors in "
           f"{len(sig_peer)}" + (f" ({', '.join(sig_peer)})." if sig_peer else ".")),
        "  - within 10 runs >= 90% of the held CUSUM oracle: "
        + ("met in every cell." if not miss_or else
           f"short in {len(miss_or)} cells, by more than 2 standard errors in {len(sig_or)}"
           + (f" ({'; '.join(m for m in miss_or if m.split(' ')[0] in sig_or)})." if sig_or
              else ".")),
        f"  - of those, where the held plug-in CUSUM reaches 90% of the held oracle within 2 "
        f"standard errors: {len(reach)}" + (f" ({'; '.join(reach)})." if reach else ".")
        + f" Below 90% of the held plug-in by more than 2 standard errors: {len(gap_plug)}"
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
    if any(("cusum-oracle", "held") in c for c in cells.values()):
        out.extend(_held_targets(cells))
    if ("gauss1", 5) in cells:
        f = cells[("gauss1", 5)][("gate", "default")].det["step5"][0]
        out.append(f"- 5 samples/run, 1% noise, 5% step caught on the first bad run: {_pct(f)} "
                   f"({'met' if f >= 0.9 else 'MISSED'}; target 90%).")
    bad = [(k, c[("gate", "default")].spike_fa, c[("gate", "default")].fa_series)
           for k, c in cells.items()]
    worse = [f"{k[0]}/m={k[1]} ({_pct(s)} vs {_pct(n)})" for k, s, n in bad if s > n + 0.02]
    out.append("- Single spikes no more false alarms than nulls (within 2 points of sampling "
               "noise): " + ("met." if not worse else "MISSED: " + "; ".join(worse) + "."))
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
            for f in ("fa_series", "fa_run", "spike_fa", "us_per_eval"):
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
        "cell for the gate).\n",
        *(made + [""] if made else []),
        *_targets(cells), ""])


def _dump(res: dict) -> dict:
    return {"libs": res["libs"], "cells": [
        {"model": k[0], "m": k[1], "detectors": [
            {"name": n, "mode": md, **{f: getattr(c, f) for f in
                                       ("fa_series", "fa_run", "spike_fa", "us_per_eval",
                                        "n_null", "note")}, "det": c.det}
            for (n, md), c in cells.items()]}
        for k, cells in res["cells"].items()]}


def _load(doc: dict) -> dict:
    out: dict = {"libs": doc["libs"], "cells": {}}
    for cell in doc["cells"]:
        d = {}
        for x in cell["detectors"]:
            c = Cell(x["fa_series"], x["fa_run"], x["spike_fa"],
                     {e: tuple(v) for e, v in x["det"].items()}, x["us_per_eval"], x["n_null"],
                     x["note"])
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
        fa = fa_over_seeds(seeds, a.reps or 200, models=models)
        md = render_fa(fa, seeds=seeds, reps=a.reps or 200, elapsed=time.perf_counter() - t0)
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
        md = render_pooled(pooled, a.pool, [d.get("meta", {}) for d in docs])
        print(md)
        if a.out:
            Path(a.out).write_text(md)
        return 0
    if a.render:
        doc = json.loads(Path(a.render).read_text())
        md = render(_load(doc["results"]), **{k: v for k, v in doc["meta"].items()
                                               if k not in ("seed", "models", "peers")})
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
    # Provenance for --pool (render takes only the fields above).
    meta = {**meta, "seed": a.seed, "models": models, "peers": not a.no_peers}
    print(md)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(md)
        Path(a.out).with_suffix(".json").write_text(
            json.dumps({"meta": meta, "results": _dump(res)}, indent=0))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
