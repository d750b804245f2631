"""Peer detectors for the gate benchmark: what teams use today, and two oracles.

Every detector sees run summaries (one value per run, higher is worse) and
answers at run ``t`` from ``x[: t + 1]``; the score detectors also take a
(series, runs) matrix and score every row at once (``benchmarks/held.py``). Score detectors return a number per
evaluation and alarm when it exceeds a threshold, so their threshold can be
calibrated to a false-alarm rate; the two change-point libraries are driven
by their own p-value parameter instead (see ``ParamDetector``).

- ``FixedPercent``: alarm when the run is more than X% worse than the previous
  run (Bencher/CodSpeed/vLLM-style percentage thresholds; default 5%).
- ``MilesBand``: mean of the last 20 runs +/- max(rel * |ref|, abs) (miles;
  default rel 5%, abs 0).
- ``ZScore``: (x - mean) / sd over the last 100 runs, alarm at z > 5 (Conbench's
  lookback z-score and its default threshold).
- ``CusumOracle``: one-sided CUSUM (Page, Biometrika 41 (1954) 100-115) on
  (x - mu0) / sigma with reference k = delta / (2 sigma), knowing the noise
  (mu0, sigma of a run summary) and the shift size delta, not when it starts;
  accumulates from the first gated run. Only shown calibrated.
- ``PluginCusum``: the same CUSUM with the noise learnt instead of known: mu0
  and sigma are the mean and SD of the runs before the first gated run (the
  Phase I / Phase II setup of statistical process control), the shift size
  still known, the threshold still calibrated per cell. What an online gate
  that learns the noise from history could reach at best with one value per
  run; estimated parameters cost a CUSUM much of its power with tens of
  Phase I runs (Jensen, Jones-Farmer, Champ & Woodall,
  J. Quality Technology 38 (2006), a review).
- ``OfflineOracle``: knows mu0, sigma and the change run tau: z of the mean of
  runs tau..t (the most powerful test of a known step, Neyman-Pearson).
- ``Otava``: Apache Otava 0.8.0 ``compute_change_points`` (window 50); alarm
  when a change point with p <= max_pvalue (default 0.001) starts within the
  last 10 runs. Scored as -log10 p from one call at max_pvalue = 0.05.
- ``EDivisive``: MongoDB's ``signal_processing_algorithms`` E-divisive
  (Matteson & James, JASA 109 (2014) 334-345), 100 permutations; alarm when a
  change point starts within the last 10 runs; parameter = its p-value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = [
    "ScoreDetector",
    "ParamDetector",
    "FixedPercent",
    "MilesBand",
    "ZScore",
    "CusumOracle",
    "PluginCusum",
    "OfflineOracle",
    "Otava",
    "EDivisive",
    "available_libraries",
]

RECENT = 10  # a change point counts as an alarm at run t if it starts within the last RECENT runs


class ScoreDetector:
    name = "score"
    default: float | None = None  # default alarm threshold on the score

    def scores(self, x: np.ndarray, ts: Sequence[int]) -> np.ndarray:
        raise NotImplementedError


class FixedPercent(ScoreDetector):
    name = "fixed-5%"
    default = 0.05

    def scores(self, x: np.ndarray, ts: Sequence[int]) -> np.ndarray:
        t = np.asarray(ts)
        return (x[..., t] - x[..., t - 1]) / np.abs(x[..., t - 1])


class MilesBand(ScoreDetector):
    name = "miles-band"
    default = 1.0

    def __init__(self, n: int = 20, rel: float = 0.05, abs_: float = 0.0) -> None:
        self.n, self.rel, self.abs = n, rel, abs_

    def scores(self, x: np.ndarray, ts: Sequence[int]) -> np.ndarray:
        out = np.empty(x.shape[:-1] + (len(ts),))
        for i, t in enumerate(ts):
            ref = np.mean(x[..., max(0, t - self.n) : t], axis=-1)
            out[..., i] = (x[..., t] - ref) / np.maximum(np.maximum(self.rel * np.abs(ref),
                                                                    self.abs), 1e-300)
        return out


class ZScore(ScoreDetector):
    name = "z-score"
    default = 5.0

    def __init__(self, lookback: int = 100) -> None:
        self.lookback = lookback

    def scores(self, x: np.ndarray, ts: Sequence[int]) -> np.ndarray:
        out = np.empty(x.shape[:-1] + (len(ts),))
        for i, t in enumerate(ts):
            h = x[..., max(0, t - self.lookback) : t]
            sd = np.std(h, axis=-1, ddof=1)
            out[..., i] = (x[..., t] - np.mean(h, axis=-1)) / np.maximum(sd, 1e-300)
        return out


class CusumOracle(ScoreDetector):
    name = "cusum-oracle"
    default = None

    def __init__(self, mu0, sigma, delta, start: int) -> None:
        # Scalars for one series, or arrays of shape (series, 1) for a matrix of them.
        self.mu0, self.sigma, self.start = mu0, sigma, start
        self.k = np.where(np.asarray(delta) > 0, delta / (2 * np.asarray(sigma)), 0.5)

    def scores(self, x: np.ndarray, ts: Sequence[int]) -> np.ndarray:
        z = (x - self.mu0) / self.sigma - self.k
        s = np.zeros(z.shape)
        acc = np.zeros(z.shape[:-1])
        for t in range(self.start, z.shape[-1]):
            acc = np.maximum(0.0, acc + z[..., t])
            s[..., t] = acc
        return s[..., np.asarray(ts)]


class PluginCusum(CusumOracle):
    name = "cusum-plugin"

    def __init__(self, x: np.ndarray, rel: float, start: int) -> None:
        base = np.asarray(x, dtype=float)[..., :start]
        rows = base.ndim > 1  # a (series, runs) matrix: one mean and SD per row
        mu = base.mean(axis=-1, keepdims=rows)
        sd = base.std(axis=-1, ddof=1, keepdims=rows)
        sd = np.where(sd > 0, sd, 1e-300)
        if not rows:
            mu, sd = float(mu), float(sd)
        super().__init__(mu, sd, rel * np.abs(mu), start)


class OfflineOracle(ScoreDetector):
    name = "offline-oracle"
    default = None

    def __init__(self, mu0: float, sigma: float, tau: int) -> None:
        self.mu0, self.sigma, self.tau = mu0, sigma, tau

    def scores(self, x: np.ndarray, ts: Sequence[int]) -> np.ndarray:
        c = np.cumsum((x - self.mu0) / self.sigma)
        before = c[self.tau - 1] if self.tau > 0 else 0.0
        t = np.asarray(ts)
        m = t - self.tau + 1
        out = np.where(m > 0, (c[t] - before) / np.sqrt(np.maximum(m, 1)), -np.inf)
        return out


class Otava(ScoreDetector):
    name = "otava"
    default = 3.0  # -log10(0.001)

    def __init__(self) -> None:
        from otava.analysis import compute_change_points

        self._ccp = compute_change_points

    def scores(self, x: np.ndarray, ts: Sequence[int]) -> np.ndarray:
        out = np.zeros(len(ts))
        for i, t in enumerate(ts):
            # A plain list: a numpy array longer than the window raises inside 0.8.0.
            cps, _ = self._ccp([float(v) for v in x[: t + 1]], window_len=50,
                               max_pvalue=0.05, min_magnitude=0.0)
            best = 0.0
            for cp in cps:
                if int(cp.index) > t - RECENT and float(cp.stats.mean_2) > float(cp.stats.mean_1):
                    p = max(float(cp.stats.pvalue), 1e-300)
                    best = max(best, -math.log10(p))
            out[i] = best
        return out


class ParamDetector:
    """A detector driven by a strictness parameter (loosest first in ``grid``)."""

    name = "param"
    default: float = 0.0
    grid: tuple[float, ...] = ()

    def alarm(self, x: np.ndarray, t: int, param: float) -> bool:
        raise NotImplementedError


class EDivisive(ParamDetector):
    name = "e-divisive"
    default = 0.05
    grid = (0.05, 0.02, 0.01)

    def __init__(self, permutations: int = 100) -> None:
        from signal_processing_algorithms.energy_statistics import energy_statistics

        self._ed = energy_statistics.e_divisive
        self.permutations = permutations

    def alarm(self, x: np.ndarray, t: int, param: float) -> bool:
        np.random.seed(t)  # e_divisive draws its permutations from the global RNG
        cps = self._ed(np.asarray(x[: t + 1], dtype=float), pvalue=param,
                       permutations=self.permutations)
        for c in cps:
            c = int(c)
            if c > t - RECENT and np.median(x[c : t + 1]) > np.median(x[max(0, c - 20) : c]):
                return True
        return False


def available_libraries() -> dict[str, str]:
    """Which peer libraries import here, and why not where they do not."""
    out: dict[str, str] = {}
    for name, mod in (("otava", "otava.analysis"),
                      ("e-divisive", "signal_processing_algorithms.energy_statistics")):
        try:
            __import__(mod)
            out[name] = "ok"
        except Exception as e:  # noqa: BLE001 - report any import failure, keep going
            out[name] = f"unavailable ({type(e).__name__}: {e})"
    return out
