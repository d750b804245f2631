"""Confirm-rule attempts of 2026-11-30 on cached judgements (see ../results/bench_gates.md).

Exploration harness, not part of the product. Steps (2 cores, about 2.5 min per seed):

    python benchmarks/attempts/cache.py 200 1      # stage-1 + confirm judgements, seed 1
    python benchmarks/attempts/cache.py 200 2
    python benchmarks/attempts/cache2.py 200 1     # + the windowed scan statistic (seed 1)
    python benchmarks/attempts/compare.py 1 2

Cache files go to $GATE_ATTEMPTS_CACHE (default /tmp/gate-attempts).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rules  # noqa: E402
from rules import conf_current, conf_pool3, conf_pooled, evaluate, load, report  # noqa: E402

for seed in [int(a) for a in sys.argv[1:]] or [1]:
    C = load(seed)
    report(f"current s{seed}", evaluate(C, dict(w=(0.5, 0.25, 0.25), L1=0.02, confirm=conf_current)))
    report(f"pooled L1=0.02 Lp=0.02 s{seed}", evaluate(C, dict(
        w=(0.5, 0.25, 0.25), L1=0.02, confirm=conf_pooled, Lcons=0.01, a=0, Lp=0.02,
        pooled_k1=False)))
    report(f"pool3 L1=0.05 Lp=0.002 Lr=0.3 s{seed}", evaluate(C, dict(
        w=(0.5, 0.25, 0.25), wp=(0.5, 0.25, 0.25), L1=0.05, confirm=conf_pool3, Lcons=0.01, a=1,
        Lp=0.002, Lr=0.3)))
    try:
        D = rules.loadd(seed)
    except FileNotFoundError:
        continue
    report(f"scan L1=0.05 Lp=0.004 s{seed}", rules.evaluate_s(D, dict(w1=0.5, L1=0.05, Lcons=0.01, a=0,
                                                                      Lp=0.004)))
