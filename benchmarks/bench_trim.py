"""Trim on a generated nightly history with planted twins and planted dead metrics.

The history is shaped like the GB300 nightly's per-variant serving matrix: model
variants x batch sizes, one test node per (variant, batch size), each recording a
throughput and a per-token latency computed from the same measurement. Planted:

- *twin variants*: their batch sizes 16 and 64 share one per-run factor (the kernel
  path both take), so their metrics move together (Spearman ~0.99); the node of
  batch 64 (the dearer) is redundant given batch 16;
- *dead metrics*: a p99 time-to-first-token with 30% run-to-run noise and only
  ``pass`` verdicts (and one equally noisy metric that once carried a regression:
  it must not be called dead);
- everything else independent (1-3% noise): nothing there may be called redundant.

    python benchmarks/bench_trim.py --seeds 0,1,2,3,4 [--out benchmarks/results/bench_trim.md]

Reports, over seeds: planted cross-node twins found, planted dead found, false
"redundant" (a twin across nodes that was not planted, or a dead call on a metric
that was not planted dead), and the GPU-minutes a week the drops would save.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gates.report.trim import TrimReport, analyse, build_input  # noqa: E402
from gates.store.history import RunRecord, TestResult  # noqa: E402
from gates.store.metrics import validate_metric  # noqa: E402
from gates.store.open import open_history  # noqa: E402
from gates.store.provenance import Provenance  # noqa: E402

SUITE = "gb300-nightly"
FP = "nvidia-gb300-x4-sm103"
FILE = "suites/perf/test_nightly_variants.py"
BATCHES = (1, 4, 16, 64)


@dataclass
class Truth:
    twins: set[frozenset[str]] = field(default_factory=set)  # cross-node key pairs planted as twins
    twin_nodes: set[str] = field(default_factory=set)  # nodes planted redundant (batch 64 of twin variants)
    dead: set[str] = field(default_factory=set)
    noisy_but_alive: set[str] = field(default_factory=set)


def node(variant: str, bs: int) -> str:
    return f"{FILE}::test_variant[{variant}-bs{bs}]"


def make_history(path: Path, *, seed: int = 0, runs: int = 40, variants: int = 8, twin_variants: int = 3,
                 dead_variants: int = 3) -> Truth:
    """Write ``runs`` nightly runs into ``path``; return what was planted."""
    rng = np.random.default_rng(seed)
    names = [f"model{i}" for i in range(variants)]
    truth = Truth()
    twins = set(names[:twin_variants])
    dead = set(names[twin_variants:twin_variants + dead_variants])
    for v in names:
        if v in twins:
            for m in ("throughput", "tpot"):
                truth.twins.add(frozenset({f"serve/{v}/bs16/{m}", f"serve/{v}/bs64/{m}"}))
            # tpot of one node and throughput of the other are twins too (same factor)
            truth.twins.add(frozenset({f"serve/{v}/bs16/throughput", f"serve/{v}/bs64/tpot"}))
            truth.twins.add(frozenset({f"serve/{v}/bs16/tpot", f"serve/{v}/bs64/throughput"}))
            truth.twin_nodes.add(node(v, 64))
        if v in dead:
            truth.dead.add(f"serve/{v}/bs1/ttft_p99")
    alive = names[twin_variants + dead_variants] if variants > twin_variants + dead_variants else None
    if alive:
        truth.noisy_but_alive.add(f"serve/{alive}/bs1/ttft_p99")
    base = {(v, b): float(rng.uniform(500, 5000)) * b ** 0.7 for v in names for b in BATCHES}
    with open_history(path) as h:
        for i in range(runs):
            prov = Provenance(run_id=f"night{seed}-{i:04d}", suite=SUITE, commit=f"{i:040x}",
                              started_at=f"2026-10-{1 + i // 24:02d}T{i % 24:02d}:00:00.000000+00:00",
                              fingerprint=FP)
            h.run_writes.start_run(prov)
            tests, metrics = [], []
            for v in names:
                shared = rng.normal(0, 0.05)  # the kernel path batch 16 and 64 share, this run
                for b in BATCHES:
                    own = rng.normal(0, 0.02 if b < 16 else 0.01)
                    factor = 1 + (shared + rng.normal(0, 0.002) if v in twins and b >= 16 else own)
                    tput = base[(v, b)] * factor
                    nid = node(v, b)
                    tests.append(TestResult(nid, FILE, "passed", 30.0 * (1 + b / 16) * (1 + rng.normal(0, 0.02))))
                    samples = [tput * (1 + rng.normal(0, 0.001)) for _ in range(3)]
                    metrics.append((nid, validate_metric(f"serve/{v}/bs{b}/throughput", samples, unit="tok/s", better="higher")))
                    metrics.append((nid, validate_metric(f"serve/{v}/bs{b}/tpot", [b / s for s in samples], unit="s", better="lower")))
                    if b == 1 and (v in dead or v == alive):
                        ttft = 0.2 * abs(1 + rng.normal(0, 0.30))
                        metrics.append((nid, validate_metric(f"serve/{v}/bs1/ttft_p99", [ttft], unit="s", better="lower")))
            h.run_writes.record_run(RunRecord(prov, tests, metrics, None, 0))
            verdicts = [{"key": m.key, "nodeid": nid, "verdict": "pass"} for nid, m in metrics]
            if alive and i == runs // 2:
                verdicts = [dict(v, verdict="regression") if v["key"] in truth.noisy_but_alive else v for v in verdicts]
            h.run_writes.save_verdicts(prov.run_id, verdicts)
    return truth


def score(rep: TrimReport, truth: Truth) -> dict[str, float]:
    found_pairs = {frozenset({t.key, t.keep}) for t in rep.twins if t.nodeid != t.keep_nodeid}
    # A planted group may be reported through any spanning set of pairs: count a planted
    # cross-node metric as found when it is reported as a twin of a planted partner.
    planted_members = {k for p in truth.twins for k in p if "/bs64/" in k}
    reported_members = {k for p in found_pairs & truth.twins for k in p if "/bs64/" in k}
    false_twins = found_pairs - truth.twins
    dead = {d.key for d in rep.dead}
    dropped_nodes = {d.nodeid for d in rep.drops if d.kind == "test"}
    return {
        "twins_found": len(reported_members) / max(len(planted_members), 1),
        "dead_found": len(dead & truth.dead) / max(len(truth.dead), 1),
        "false_twins": len(false_twins),
        "false_dead": len(dead - truth.dead),
        "nodes_found": len(dropped_nodes & truth.twin_nodes) / max(len(truth.twin_nodes), 1),
        "false_drops": len({d.nodeid for d in rep.drops} - truth.twin_nodes
                           - {node(k.split("/")[1], 1) for k in truth.dead}),
        "minutes": rep.minutes_per_week,
    }


def run(seeds: list[int], runs: int) -> list[dict[str, float]]:
    out = []
    for seed in seeds:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "h.db"
            truth = make_history(path, seed=seed, runs=runs)
            with open_history(path, create=False, readonly=True) as h:
                rows = h.report_reads.trim_rows()
        rep = analyse(build_input(rows, gpus={SUITE: 4}, nightly=[SUITE]))
        out.append(score(rep, truth) | {"seed": seed})
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="0,1,2,3,4")
    p.add_argument("--runs", type=int, default=40)
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args(argv)
    rows = run([int(s) for s in a.seeds.split(",")], a.runs)
    lines = [
        "# Trim on generated nightly histories", "",
        f"Command: `python benchmarks/bench_trim.py {' '.join(argv)}`", "",
        "| seed | planted twins found | planted dead found | redundant nodes found | false twins | false dead | false drops | GPU-min/week saved |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(f"| {r['seed']} | {r['twins_found']:.0%} | {r['dead_found']:.0%} | {r['nodes_found']:.0%} | "
                     f"{r['false_twins']} | {r['false_dead']} | {r['false_drops']} | {r['minutes']:.1f} |")
    mean = {k: float(np.mean([r[k] for r in rows])) for k in rows[0] if k != "seed"}
    lines.append(f"| all | {mean['twins_found']:.1%} | {mean['dead_found']:.1%} | {mean['nodes_found']:.1%} | "
                 f"{sum(r['false_twins'] for r in rows)} | {sum(r['false_dead'] for r in rows)} | "
                 f"{sum(r['false_drops'] for r in rows)} | {mean['minutes']:.1f} |")
    text = "\n".join(lines) + "\n"
    if a.out:
        a.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
