"""What history says CI could stop measuring: twin metrics, dead metrics, redundant tests.

``gate-report trim`` reads per-run metric values (trusted, complete runs; first
attempts), verdicts and test durations from the store and suggests, never edits:

- **Twins**: metrics of one suite and hardware whose per-run values move together,
  Spearman |rho| >= 0.98 over at least ``min_runs`` common runs (a latency and the
  bandwidth computed from it; one variant's batch sizes that share a kernel). In each
  group the metric of the cheapest *variant* is kept and the others are suggested.
- **Dead**: metrics that never carried a verdict other than ``pass`` (or
  ``insufficient-history``) and whose run-to-run noise is so large that the smallest
  shift the gate could detect exceeds ``realistic`` (20% by default): the smallest
  detectable shift is (z_0.95 + z_0.80) x the relative robust scale of the run values
  (Qn, :func:`gates.model.robust.robust_scale`) x sqrt(1 + 1/n) for one new run against
  ``n`` baseline runs.
- **Variants and tests to drop**: a *variant* is a test node and the key prefix its
  metrics share (``attn/decode/fa2/b1_kv1024`` for ``.../latency`` and
  ``.../bandwidth``). A variant whose every metric is a twin of a metric kept in
  another variant, or dead, can go; when every variant of a test can go, the test
  can. Its cost is the test's mean duration shared equally among its variants (the
  history times tests, not variants), in GPU-minutes per week: seconds x GPUs of the
  suite x runs per week (7 for nightly suites, else the rate observed over the
  window) / 60.

Each suggestion says what detection is lost: for a twin, a shift confined to the
dropped metric (1 - rho^2 of its rank variance is its own); for a dead metric, every
shift below its detectable size was never visible anyway. Pure: :class:`TrimInput`
in, :class:`TrimReport` out; ``ReportReads.trim_rows`` (``gates.store.report_reads``) reads the input.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as sps

from ci_register.registered.machine import fingerprint_gpus
from gates.model.robust import robust_scale

__all__ = ["Metric", "TrimInput", "TrimReport", "Twin", "Dead", "Drop", "analyse", "variant_of",
           "SIGNAL_FREE", "Z_DETECT"]

SIGNAL_FREE = frozenset({"pass", "insufficient-history"})  # verdicts that say nothing changed
Z_DETECT = float(sps.norm.ppf(0.95) + sps.norm.ppf(0.80))  # one-sided 5% test, 80% power


def variant_of(key: str) -> str:
    """The key without its last component: the measured configuration."""
    return key.rpartition("/")[0] or key


@dataclass
class Metric:
    suite: str
    fingerprint: str
    key: str
    nodeid: str
    values: dict[str, float]  # run_id -> the run's median
    verdicts: Mapping[str, int] = field(default_factory=dict)  # verdict -> count

    @property
    def variant(self) -> tuple[str, str]:
        return (self.nodeid, variant_of(self.key))


@dataclass
class TrimInput:
    metrics: list[Metric]
    durations: dict[tuple[str, str, str], float]  # (suite, fingerprint, nodeid) -> mean seconds
    runs_per_week: dict[tuple[str, str], float]  # (suite, fingerprint) -> runs a week
    gpus: dict[tuple[str, str], int]  # (suite, fingerprint) -> GPUs a run holds


@dataclass
class Twin:
    suite: str
    fingerprint: str
    key: str
    nodeid: str
    keep: str  # the key kept
    keep_nodeid: str
    rho: float
    runs: int

    def lost(self) -> str:
        return (f"a shift confined to {self.key}: {self.keep} tracks it with rank correlation "
                f"{self.rho:+.3f} over {self.runs} runs ({(1 - self.rho ** 2) * 100:.1f}% of its rank variance is its own)")


@dataclass
class Dead:
    suite: str
    fingerprint: str
    key: str
    nodeid: str
    detectable: float  # smallest relative shift the gate could see
    noise: float  # relative robust scale of the run values
    runs: int
    verdicts: int

    def lost(self) -> str:
        return (f"none that was visible: shifts under {self.detectable:.0%} were below its noise "
                f"({self.noise:.1%} run to run over {self.runs} runs; {self.verdicts} verdicts, none but pass)")


@dataclass
class Drop:
    kind: str  # "variant" | "test"
    suite: str
    fingerprint: str
    nodeid: str
    variant: str  # "" for a whole test
    seconds: float  # per run
    minutes_per_week: float
    because: list[str]  # one line per metric: twin of X / dead

    @property
    def subject(self) -> str:
        return f"{self.nodeid} [{self.variant}]" if self.variant else self.nodeid


@dataclass
class TrimReport:
    twins: list[Twin]
    dead: list[Dead]
    drops: list[Drop]
    params: dict[str, float]
    suites: list[tuple[str, str, int, float, int]]  # suite, fingerprint, metrics, runs/week, GPUs

    @property
    def minutes_per_week(self) -> float:
        return sum(d.minutes_per_week for d in self.drops)

    def to_json(self) -> dict[str, object]:
        return {
            "params": self.params,
            "suites": [dict(zip(("suite", "fingerprint", "metrics", "runs_per_week", "gpus"), s, strict=True)) for s in self.suites],
            "twins": [t.__dict__ | {"lost": t.lost()} for t in self.twins],
            "dead": [d.__dict__ | {"lost": d.lost()} for d in self.dead],
            "drops": [d.__dict__ | {"subject": d.subject} for d in self.drops],
            "gpu_minutes_per_week": round(self.minutes_per_week, 1),
        }


def _spearman_pairs(ms: list[Metric], min_runs: int) -> dict[tuple[int, int], tuple[float, int]]:
    """|rho| and common-run count for every pair of metrics with enough common runs."""
    runs = sorted({r for m in ms for r in m.values})
    idx = {r: i for i, r in enumerate(runs)}
    a = np.full((len(runs), len(ms)), np.nan)
    for j, m in enumerate(ms):
        for r, v in m.values.items():
            a[idx[r], j] = v
    present = ~np.isnan(a)
    out: dict[tuple[int, int], tuple[float, int]] = {}
    # Metrics seen in the same runs share one rank matrix (the common case).
    groups: dict[bytes, list[int]] = defaultdict(list)
    for j in range(len(ms)):
        groups[present[:, j].tobytes()].append(j)
    for cols in groups.values():
        rows = present[:, cols[0]]
        if rows.sum() < min_runs or len(cols) < 2:
            continue
        ranks = np.apply_along_axis(sps.rankdata, 0, a[rows][:, cols])
        sd = ranks.std(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            rho = np.corrcoef(ranks, rowvar=False)
        n = int(rows.sum())
        for x in range(len(cols)):
            for y in range(x + 1, len(cols)):
                if sd[x] > 0 and sd[y] > 0 and np.isfinite(rho[x, y]):
                    out[(cols[x], cols[y])] = (float(rho[x, y]), n)
    keys = list(groups)
    for gi, g1 in enumerate(keys):  # pairs across run sets: only where they share enough runs
        for g2 in keys[gi + 1:]:
            for x in groups[g1]:
                for y in groups[g2]:
                    both = present[:, x] & present[:, y]
                    if both.sum() >= min_runs and np.ptp(a[both, x]) > 0 and np.ptp(a[both, y]) > 0:
                        r = sps.spearmanr(a[both, x], a[both, y]).statistic
                        if np.isfinite(r):
                            out[(min(x, y), max(x, y))] = (float(r), int(both.sum()))
    return out


def analyse(inp: TrimInput, *, rho_min: float = 0.98, realistic: float = 0.20, min_runs: int = 8) -> TrimReport:
    twins: list[Twin] = []
    dead: list[Dead] = []
    drops: list[Drop] = []
    suites = []
    by_suite: dict[tuple[str, str], list[Metric]] = defaultdict(list)
    for m in inp.metrics:
        by_suite[(m.suite, m.fingerprint)].append(m)
    for (suite, fp), ms in sorted(by_suite.items()):
        ms = sorted(ms, key=lambda m: (m.nodeid, m.key))
        n_var: dict[str, set[str]] = defaultdict(set)
        for m in ms:
            n_var[m.nodeid].add(variant_of(m.key))

        def cost(m: Metric, suite=suite, fp=fp, n_var=n_var) -> float:
            return inp.durations.get((suite, fp, m.nodeid), 0.0) / len(n_var[m.nodeid])

        # Twins: components of |rho| >= rho_min; the cheapest variant's metric is kept and
        # a member goes only if it is itself a twin of that keeper.
        pairs = _spearman_pairs(ms, min_runs)
        strong = {p: v for p, v in pairs.items() if abs(v[0]) >= rho_min}
        parent = list(range(len(ms)))

        def find(i: int, parent=parent) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for x, y in strong:
            parent[find(x)] = find(y)
        comps: dict[int, list[int]] = defaultdict(list)
        for i in range(len(ms)):
            comps[find(i)].append(i)
        twin_of: dict[int, int] = {}
        for members in comps.values():
            todo = sorted(members, key=lambda i: (cost(ms[i]), ms[i].nodeid, len(ms[i].key), ms[i].key))
            while len(todo) > 1:
                keep, rest = todo[0], []
                for i in todo[1:]:
                    pair = strong.get((min(keep, i), max(keep, i)))
                    if pair is None:
                        rest.append(i)
                        continue
                    twin_of[i] = keep
                    twins.append(Twin(suite, fp, ms[i].key, ms[i].nodeid, ms[keep].key, ms[keep].nodeid, pair[0], pair[1]))
                todo = rest
        # Dead: no signal in any verdict and a detectable shift beyond the realistic one.
        dead_idx: set[int] = set()
        for i, m in enumerate(ms):
            vals = np.array(list(m.values.values()), dtype=float)
            signals = sum(c for v, c in m.verdicts.items() if v not in SIGNAL_FREE)
            if len(vals) < min_runs or signals:
                continue
            center = float(np.median(vals))
            if center == 0:
                continue
            noise = robust_scale(vals) / abs(center)
            detect = Z_DETECT * noise * math.sqrt(1 + 1 / len(vals))
            if detect > realistic:
                dead_idx.add(i)
                dead.append(Dead(suite, fp, m.key, m.nodeid, detect, noise, len(vals), sum(m.verdicts.values())))
        # Variants (then tests) whose every metric is dead or a twin of a metric kept in
        # another variant. A variant holding a live keeper of a metric elsewhere stays, so
        # no group loses its last member.
        keepers = {ms[k].variant for i, k in twin_of.items() if ms[i].variant != ms[k].variant and k not in dead_idx}
        per_variant: dict[tuple[str, str], list[int]] = defaultdict(list)
        for i, m in enumerate(ms):
            per_variant[m.variant].append(i)
        rate = inp.runs_per_week.get((suite, fp), 0.0)
        gpus = inp.gpus.get((suite, fp), 1)
        gone: dict[str, list[Drop]] = defaultdict(list)
        for var, idxs in sorted(per_variant.items()):
            if var in keepers or not all(i in dead_idx or (i in twin_of and ms[twin_of[i]].variant != var) for i in idxs):
                continue
            secs = cost(ms[idxs[0]])
            because = [f"{ms[i].key}: dead" if i in dead_idx else f"{ms[i].key}: twin of {ms[twin_of[i]].key}" for i in idxs]
            gone[var[0]].append(Drop("variant", suite, fp, var[0], var[1], secs, secs * gpus * rate / 60, because))
        for nodeid, ds in sorted(gone.items()):
            if len(ds) == len(n_var[nodeid]):  # every variant: the whole test goes
                secs = sum(d.seconds for d in ds)
                drops.append(Drop("test", suite, fp, nodeid, "", secs, secs * gpus * rate / 60,
                                  [b for d in ds for b in d.because]))
            else:
                drops += ds
        suites.append((suite, fp, len(ms), rate, gpus))
    drops.sort(key=lambda d: (-d.minutes_per_week, d.suite, d.nodeid, d.variant))
    return TrimReport(twins, dead, drops, {"rho_min": rho_min, "realistic": realistic, "min_runs": min_runs}, suites)


def build_input(rows: Mapping[str, Iterable[Mapping]], *, gpus: Mapping[str, int] | None = None,
                nightly: Iterable[str] = (), weeks: float | None = None) -> TrimInput:
    """A :class:`TrimInput` from the store's rows (``History.trim_rows``).

    ``gpus``: suite -> GPUs a run holds (the catalog); else the count the fingerprint
    names (`ci_register.registered.machine.fingerprint_gpus`), else 1. Runs per week: 7 for ``nightly`` suites, else runs in the window over
    ``weeks`` (default: the span of the runs, at least one day).
    """
    nightly = set(nightly)
    metrics: dict[tuple[str, str, str, str], Metric] = {}
    for r in rows["metrics"]:
        k = (r["suite"], r["fingerprint"], r["nodeid"], r["key"])
        m = metrics.setdefault(k, Metric(r["suite"], r["fingerprint"], r["key"], r["nodeid"], {}, {}))
        m.values[r["run_id"]] = float(r["median"])
    verdicts: dict[tuple[str, str, str], dict[str, int]] = defaultdict(dict)
    for r in rows["verdicts"]:
        verdicts[(r["suite"], r["fingerprint"], r["key"])][r["verdict"]] = int(r["n"])
    for m in metrics.values():
        m.verdicts = verdicts.get((m.suite, m.fingerprint, m.key), {})
    durations = {(r["suite"], r["fingerprint"], r["nodeid"]): float(r["seconds"]) for r in rows["tests"]}
    runs: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in rows["runs"]:
        runs[(r["suite"], r["fingerprint"])].append(r["started_at"])
    per_week, gpu = {}, {}
    import datetime as dt  # noqa: PLC0415

    for key, starts in runs.items():
        if key[0] in nightly:
            per_week[key] = 7.0
        else:
            if weeks is None:
                t = sorted(dt.datetime.fromisoformat(s) for s in starts)
                span = max((t[-1] - t[0]).total_seconds() / (7 * 86400), 1 / 7)
            else:
                span = weeks
            per_week[key] = len(starts) / span
        gpu[key] = (gpus or {}).get(key[0]) or fingerprint_gpus(key[1]) or 1
    return TrimInput(list(metrics.values()), durations, per_week, gpu)


def render(rep: TrimReport, fmt: str = "text") -> str:
    """The suggestions as terminal text or Markdown (``fmt="md"``); JSON via ``to_json``."""
    md = fmt == "md"
    h = (lambda t: f"### {t}") if md else (lambda t: f"{t}\n{'-' * len(t)}")
    code = (lambda t: f"`{t}`") if md else (lambda t: t)
    p = rep.params
    out = [("## " if md else "") + "Trim suggestions (nothing is edited; review each before removing a test)", "",
           f"Twins: Spearman |rho| >= {p['rho_min']:g} over >= {p['min_runs']:g} common runs. Dead: no verdict but pass, "
           f"and the smallest shift the gate could detect (5% one-sided, 80% power) above {p['realistic']:.0%}.", ""]
    for suite, fp, n, rate, gpus in rep.suites:
        out.append(f"- {code(suite)} on {code(fp)}: {n} metrics, {rate:.1f} runs/week x {gpus} GPU(s)")
    out += ["", h(f"Variants and tests to drop: {rep.minutes_per_week:.2f} GPU-minutes/week"), ""]
    if not rep.drops:
        out.append("None: every variant carries a metric that is neither dead nor a twin of another variant's.")
    for d in rep.drops:
        out.append(f"{'- ' if md else ''}{d.kind} {code(d.subject)} ({code(d.suite)}): {d.seconds:.1f} s/run, "
                   f"{d.minutes_per_week:.2f} GPU-min/week")
        out += [f"    {b}" if not md else f"  - {b}" for b in d.because]
    out += ["", h(f"Twin metrics ({len(rep.twins)}): drop the first, keep the second"), ""]
    same = [t for t in rep.twins if variant_of(t.key) == variant_of(t.keep) and t.nodeid == t.keep_nodeid]
    for t in [t for t in rep.twins if t not in same] + same:  # across variants first: those save GPU time
        if t in same:
            out.append(f"{'- ' if md else ''}{code(t.key)} ~ {code(t.keep)}: rho {t.rho:+.3f}, {t.runs} runs; one "
                       "measurement in two units: gating one saves false alarms, not GPU time")
            continue
        out.append(f"{'- ' if md else ''}{code(t.key)} ~ {code(t.keep)}: rho {t.rho:+.3f}, {t.runs} runs")
        out.append(f"    lost: {t.lost()}" if not md else f"  - lost: {t.lost()}")
    out += ["", h(f"Dead metrics ({len(rep.dead)})"), ""]
    for d in rep.dead:
        out.append(f"{'- ' if md else ''}{code(d.key)} ({code(d.nodeid)}): detects only shifts >= {d.detectable:.0%}")
        out.append(f"    lost: {d.lost()}" if not md else f"  - lost: {d.lost()}")
    return "\n".join(out) + "\n"
