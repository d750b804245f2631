"""Synthetic metric series with known answers, for the gate detection benchmark.

A series is ``n_runs`` CI runs of one latency-like metric (higher is worse),
baseline 1.0, each run holding ``m`` samples. Noise has two levels, as on real
GPUs: a run-level offset (one per process/run) and within-run sample noise.
Every run also has a *twin*: an independent rerun at the same point in time
(fresh process, same regime), used to simulate confirm-on-trip, and, when
``make_series`` is given more generators, one more twin from each (further
reruns, for the sequential confirm), so the series and first twins stay
those of the one generator.

Noise models (run-level / within-run):

- ``gauss1``/``gauss3``/``gauss8``: N(0, cv) / N(0, cv), cv = 1/3/8%.
- ``student_t``: 3% * t(3)/sqrt(3) at both levels (heavy tails, unit variance).
- ``bimodal``: N(0, 1%) plus, in 30% of runs, a slow mode U(3%, 28%) (the
  fresh-process FlashInfer decode of GPU-NOTES) / N(0, 0.5%).
- ``ar1``: AR(1) run offsets, phi = 0.7, marginal sd 3% (a rerun shares the
  previous state) / N(0, 3%).
- ``h200``: real H200 samples (``benchmarks/data/h200-noise``: each sample the median
  of 20 CUDA-event-timed iterations, 60 a series), one benchmark per
  series (matmul, flashinfer decode, SDPA decode in turn). Within-run noise is
  a contiguous block of the measured series (keeps the heavy tail, power-cap
  dips and lag-1 autocorrelation 0.7-0.9), normalised by its median; the run
  offset is the measured spread of medians across fresh processes: matmul
  N(0, 1.2%), SDPA N(0, 0.45%), FlashInfer N(0, 0.45%) plus the 3-in-10 slow
  mode U(3%, 28%).
- ``suite``: what the decode suite records today (``benchmarks/data/suite-noise/
  fa2_decode.json``, from ``benchmarks/gpu_noise.py history`` over the committed history
  and the fleet runs: fa2 decode at b8 kv32768, b32 kv8192 and b64 kv32768 on H200s, each
  run 5 samples of 20 CUDA-event-timed iterations with the L2 flushed, one benchmark per
  series). One GPU per series, as the ``h200`` model: the run offset is a recorded run's
  median over its GPU's median run (pooled over GPUs with 3 runs or more), the within-run
  noise a recorded run's samples over their median.
- ``paced``: as ``suite``, from the paced measurement the suite records since issue 56
  (``benchmarks/data/gpu_noise_paced_h100/series.json``: fa2 decode at b8, b32 and b64 kv32768,
  a fresh process a run on one lent GPU, 8 paced blocks a run; ``gpu_noise.md``).

Effects start at run ``tau``: ``null``; ``stepX`` (a lasting X% increase);
``drift`` (+0.5% per run, 5% after 10 runs); ``spike`` (one run +20%, a
transient runner glitch: its rerun is clean, later runs are clean).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

__all__ = [
    "NOISE_MODELS",
    "EFFECTS",
    "Series",
    "make_series",
    "with_spike",
    "effect_size",
    "null_summary_stats",
    "h200_data",
    "suite_data",
    "benches",
    "bench_index",
    "SUITE_BENCHES",
    "PACED_KEYS",
    "make_pool_series",
]

NOISE_MODELS = ("gauss1", "gauss3", "gauss8", "student_t", "bimodal", "ar1", "h200", "suite",
                "paced")
EFFECTS = ("null", "step1", "step2", "step5", "step10", "step20", "drift", "spike")
H200_BENCHES = ("matmul", "fi_decode", "sdpa_decode")
H200_BETWEEN = {"matmul": 0.012, "fi_decode": 0.0045, "sdpa_decode": 0.0045}
DRIFT_PER_RUN = 0.005
SPIKE = 0.20
AR_PHI, AR_SD = 0.7, 0.03  # AR(1) run offsets: lag-1 coefficient, marginal SD
DATA_DIR = Path(__file__).resolve().parent / "data" / "h200-noise"  # in the repository: any clone runs
SUITE_BENCHES = ("fa2_b8", "fa2_b32", "fa2_b64")
SUITE_KEYS = {"fa2_b8": "attn/decode/fa2/b8_kv32768/latency",
              "fa2_b32": "attn/decode/fa2/b32_kv8192/latency",
              "fa2_b64": "attn/decode/fa2/b64_kv32768/latency"}
SUITE_DATA = Path(__file__).resolve().parent / "data" / "suite-noise" / "fa2_decode.json"
SUITE_MIN_RUNS = 3  # a GPU with fewer runs says too little of its run-to-run spread
# The paced measurement (issue 56): fa2 decode as the suite now records it under
# <key>/paced/latency, a fresh process a run, all on one lent GPU
# (benchmarks/gpu_noise.py summarize --series-json of the device comparison).
PACED_KEYS = {"fa2_b8": "attn/decode/fa2/b8_kv32768/paced/latency",
              "fa2_b32": "attn/decode/fa2/b32_kv32768/paced/latency",
              "fa2_b64": "attn/decode/fa2/b64_kv32768/paced/latency"}
PACED_DATA = Path(__file__).resolve().parent / "data" / "gpu_noise_paced_h100" / "series.json"


@dataclass(frozen=True)
class Series:
    runs: np.ndarray  # (n_runs, m) samples
    twins: np.ndarray  # (n_runs, m) an independent rerun of each run
    tau: int | None  # first affected run, None for null series
    effect: str
    bench: str  # h200 benchmark used, "" otherwise
    hosts: tuple[str, ...] | None = None  # machine of each run (its rerun runs there too)
    more_twins: tuple[np.ndarray, ...] = ()  # (n_runs, m) each: further independent reruns

    @property
    def summaries(self) -> np.ndarray:
        return np.median(self.runs, axis=1)

    @property
    def twin_summaries(self) -> np.ndarray:
        return np.median(self.twins, axis=1)

    @property
    def more_twin_summaries(self) -> tuple[np.ndarray, ...]:
        return tuple(np.median(t, axis=1) for t in self.more_twins)


def effect_size(effect: str) -> float:
    """Relative size of an effect as the oracle knows it (the drift after 10 runs)."""
    if effect.startswith("step"):
        return int(effect[4:]) / 100.0
    if effect == "drift":
        return DRIFT_PER_RUN * 10
    if effect == "spike":
        return SPIKE
    return 0.0


@lru_cache(maxsize=1)
def h200_data() -> dict[str, list[np.ndarray]]:
    """Measured series per benchmark, each divided by its median (relative deviations)."""
    d = DATA_DIR
    out: dict[str, list[np.ndarray]] = {b: [] for b in H200_BENCHES}
    single = {"matmul": "matmul.json", "fi_decode": "decode_flashinfer.json",
              "sdpa_decode": "decode_sdpa.json"}
    for b, f in single.items():
        s = np.asarray(json.loads((d / f).read_text())["samples"], dtype=float)
        out[b].append(s / np.median(s) - 1.0)
    for p in sorted(d.glob("run2_proc*.json")):
        doc = json.loads(p.read_text())
        for b in H200_BENCHES:
            s = np.asarray([x["ms"] for x in doc[b]], dtype=float)
            out[b].append(s / np.median(s) - 1.0)
    return out


def benches(model: str) -> tuple[str, ...]:
    """The measured benchmarks a model draws its series from (none for the synthetic ones)."""
    return {"h200": H200_BENCHES, "suite": SUITE_BENCHES, "paced": tuple(PACED_KEYS)}.get(
        model, ())


def bench_index(model: str, bench: str) -> int:
    """A benchmark's place in its model's list, 9 for none (part of the seed of a cell)."""
    return benches(model).index(bench) if bench else 9


@lru_cache(maxsize=4)
def suite_data(path: Path = SUITE_DATA, keys: tuple[tuple[str, str], ...] = tuple(
        SUITE_KEYS.items())) -> dict[str, tuple[np.ndarray, list[np.ndarray]]]:
    """Per suite benchmark: the pooled run offsets (a run's median over its GPU's median
    run, minus 1; GPUs with ``SUITE_MIN_RUNS`` runs or more) and every run's samples over
    their median, minus 1. ``path``: the JSON of ``benchmarks/gpu_noise.py history`` (or
    ``summarize --series-json``); ``keys``: (benchmark, metric key) pairs to read."""
    doc = json.loads(path.read_text())
    out: dict[str, tuple[np.ndarray, list[np.ndarray]]] = {}
    for b, key in keys:
        by_gpu = doc["keys"][key]
        offsets: list[float] = []
        within: list[np.ndarray] = []
        for runs in by_gpu.values():
            meds = np.array([np.median(r) for r in runs])
            if len(runs) >= SUITE_MIN_RUNS:
                offsets.extend(meds / np.median(meds) - 1.0)
            within.extend(np.asarray(r, dtype=float) / np.median(r) - 1.0 for r in runs)
        if len(offsets) < 2:
            raise ValueError(f"{path}: {b} has {len(offsets)} run offsets; record more runs")
        out[b] = (np.asarray(offsets), within)
    return out


def _measured(model: str) -> dict[str, tuple[np.ndarray, list[np.ndarray]]]:
    """The recorded runs a measured model draws from (``suite_data``'s format)."""
    if model == "paced":
        return suite_data(PACED_DATA, tuple(PACED_KEYS.items()))
    return suite_data()


def _within(model: str, rng: np.random.Generator, n: int, m: int, bench: str) -> np.ndarray:
    if m == 1 and not benches(model):
        return np.zeros((n, 1))
    if model.startswith("gauss"):
        return rng.normal(0, int(model[5:]) / 100.0, (n, m))
    if model == "student_t":
        return 0.03 * rng.standard_t(3, (n, m)) / np.sqrt(3)
    if model == "bimodal":
        return rng.normal(0, 0.005, (n, m))
    if model == "ar1":
        return rng.normal(0, 0.03, (n, m))
    if model in ("suite", "paced"):
        runs = _measured(model)[bench][1]
        out = np.empty((n, m))
        for i in range(n):
            r = runs[rng.integers(len(runs))]
            if r.size < m:
                raise ValueError(f"suite noise: a recorded run has {r.size} samples, "
                                 f"fewer than m={m}")
            j = rng.integers(0, r.size - m + 1)
            out[i] = r[j : j + m]
        return out
    if model == "h200":
        series = h200_data()[bench]
        out = np.empty((n, m))
        for i in range(n):
            s = series[rng.integers(len(series))]
            j = rng.integers(0, s.size - m + 1)
            out[i] = s[j : j + m]
        return out
    raise ValueError(f"unknown noise model {model!r}; known: {', '.join(NOISE_MODELS)}")


def _offsets(
    model: str, rng: np.random.Generator, n: int, bench: str
) -> tuple[np.ndarray, np.ndarray]:
    """Run-level offsets and the offsets of their reruns (twins)."""
    if model.startswith("gauss"):
        cv = int(model[5:]) / 100.0
        return rng.normal(0, cv, n), rng.normal(0, cv, n)
    if model == "student_t":
        return (0.03 * rng.standard_t(3, n) / np.sqrt(3),
                0.03 * rng.standard_t(3, n) / np.sqrt(3))
    if model in ("bimodal", "h200"):
        sd = 0.01 if model == "bimodal" else H200_BETWEEN[bench]
        slow = model == "bimodal" or bench == "fi_decode"

        def draw() -> np.ndarray:
            x = rng.normal(0, sd, n)
            if slow:
                x = x + (rng.random(n) < 0.3) * rng.uniform(0.03, 0.28, n)
            return x

        return draw(), draw()
    if model in ("suite", "paced"):
        pool = _measured(model)[bench][0]
        return pool[rng.integers(len(pool), size=n)], pool[rng.integers(len(pool), size=n)]
    if model == "ar1":
        phi, sd = AR_PHI, AR_SD
        e = rng.normal(0, sd * np.sqrt(1 - phi**2), n)
        x = np.empty(n)
        x[0] = rng.normal(0, sd)
        for t in range(1, n):
            x[t] = phi * x[t - 1] + e[t]
        return x, _ar1_twin(x, rng)
    raise ValueError(f"unknown noise model {model!r}; known: {', '.join(NOISE_MODELS)}")


def _ar1_twin(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A rerun of each AR(1) run: the previous run's state, a fresh innovation."""
    prev = np.r_[rng.normal(0, AR_SD), x[:-1]]
    return AR_PHI * prev + rng.normal(0, AR_SD * np.sqrt(1 - AR_PHI**2), x.size)


def make_series(
    model: str,
    effect: str,
    rng: np.random.Generator,
    *,
    n_runs: int = 60,
    tau: int = 40,
    m: int = 1,
    bench: str = "",
    rerun_rngs: Sequence[np.random.Generator] = (),
) -> Series:
    """One series of ``n_runs`` runs with ``m`` samples each; the effect starts at ``tau``.

    ``rerun_rngs``: draw one more twin of every run from each (``Series.more_twins``)."""
    if benches(model) and not bench:
        bench = benches(model)[int(rng.integers(len(benches(model))))]
    lv, lv_twin = _offsets(model, rng, n_runs, bench)
    runs = 1.0 + lv[:, None] + _within(model, rng, n_runs, m, bench)
    twins = 1.0 + lv_twin[:, None] + _within(model, rng, n_runs, m, bench)
    more = []
    for g in rerun_rngs:
        lv2 = _ar1_twin(lv, g) if model == "ar1" else _offsets(model, g, n_runs, bench)[1]
        more.append(1.0 + lv2[:, None] + _within(model, g, n_runs, m, bench))
    t = np.arange(n_runs)
    factor = np.ones(n_runs)
    twin_factor = np.ones(n_runs)
    if effect.startswith("step"):
        factor[t >= tau] += effect_size(effect)
        twin_factor = factor.copy()
    elif effect == "drift":
        factor = 1.0 + DRIFT_PER_RUN * np.clip(t - tau + 1, 0, None)
        twin_factor = factor.copy()
    elif effect == "spike":
        factor[tau] += SPIKE  # the rerun of a glitch is clean
    elif effect != "null":
        raise ValueError(f"unknown effect {effect!r}; known: {', '.join(EFFECTS)}")
    return Series(runs * factor[:, None], twins * twin_factor[:, None],
                  None if effect == "null" else tau, effect, bench,
                  more_twins=tuple(t * twin_factor[:, None] for t in more))


def with_spike(s: Series, tau: int) -> Series:
    """``s`` with its run ``tau`` raised by ``SPIKE``, its reruns clean (a spike as
    ``make_series`` draws one). The benchmark's spike series are its null series so
    raised (common random numbers): the alarms they add are the spike's own, free of the
    sampling noise between two independent draws (Glasserman & Yao, Management Science
    38 (1992) 884-908); independently drawn, 1,200 series a cell told a 2-point excess
    from noise only at 2 standard errors of about 1 point, paired at about 0.3."""
    runs = s.runs.copy()
    runs[tau] *= 1.0 + SPIKE
    return dataclasses.replace(s, runs=runs, tau=tau, effect="spike")


@lru_cache(maxsize=64)
def null_summary_stats(model: str, m: int, bench: str = "") -> tuple[float, float]:
    """Mean and SD of a null run's summary (median), by simulation: what the oracles know."""
    rng = np.random.default_rng(12345)
    s = np.concatenate([
        make_series(model, "null", rng, n_runs=200, m=m, bench=bench).summaries
        for _ in range(40)
    ])
    return float(np.mean(s)), float(np.std(s))


def make_pool_series(
    effect: str,
    rng: np.random.Generator,
    *,
    n_runs: int = 60,
    tau: int = 40,
    m: int = 5,
    pool: int = 3,
    p_new: float = 0.1,
    machine_sd: float = 0.015,
    run_sd: float = 0.005,
    rerun_rngs: Sequence[np.random.Generator] = (),
    stretch: int = 1,
) -> Series:
    """Runs spread over a pool of machines that grows: the between-machine case.

    Each run lands on one of the machines seen so far (uniformly), or, with
    probability ``p_new``, on a machine never seen before (CI pools grow and
    rotate). Every machine has its own offset N(0, ``machine_sd``); runs add
    N(0, ``run_sd``) and within-run N(0, ``run_sd``) samples. A run's rerun
    (confirm on trip) runs on the same machine: same offset, fresh noise; so
    do further reruns, one drawn from each of ``rerun_rngs``. ``stretch`` > 1:
    a machine, once drawn, takes 2 to ``stretch`` runs in a row (uniformly), as a
    CI pool that hands a host several jobs does; the first ``pool`` stretches are
    each on a new machine.
    """
    offsets: list[float] = []
    machine: list[int] = []
    i = 0
    while len(machine) < n_runs:
        run = 1 if stretch <= 1 else int(rng.integers(2, stretch + 1))
        if not offsets or i < pool or rng.random() < p_new:
            offsets.append(float(rng.normal(0, machine_sd)))
            machine += [len(offsets) - 1] * run
        else:
            machine += [int(rng.integers(len(offsets)))] * run
        i += 1
    machine = machine[:n_runs]
    hosts = [f"GPU-{k}" for k in machine]
    off = np.array(offsets)[machine]
    runs = 1.0 + off[:, None] + rng.normal(0, run_sd, n_runs)[:, None] + rng.normal(
        0, run_sd, (n_runs, m))
    twins = 1.0 + off[:, None] + rng.normal(0, run_sd, n_runs)[:, None] + rng.normal(
        0, run_sd, (n_runs, m))
    more = [1.0 + off[:, None] + g.normal(0, run_sd, n_runs)[:, None] + g.normal(
        0, run_sd, (n_runs, m)) for g in rerun_rngs]
    factor = np.ones(n_runs)
    if effect.startswith("step"):
        factor[np.arange(n_runs) >= tau] += effect_size(effect)
    elif effect != "null":
        raise ValueError(f"unknown effect {effect!r} for pool series; use null or stepN")
    return Series(runs * factor[:, None], twins * factor[:, None],
                  None if effect == "null" else tau, effect, "", tuple(hosts),
                  tuple(t * factor[:, None] for t in more))
