"""The spread between machines of one model in a history: what ``machines.MACHINE_BOUND`` rests on.

    PYTHONPATH=$PWD python benchmarks/machine_spread.py history.db [--top 15]

Per metric series (suite, key, fingerprint) whose first attempts name 2+ machines with
2+ runs each: the range of the machines' medians as a share of the series' median, and
tau (the between-machine SD by moments, ``gates.model.machines``) as a share of the
centre. A range read from medians of 2-3 runs carries a within-machine slow mode (the
M=128 block GEMMs); tau by moments does not.
"""

from __future__ import annotations

import argparse
import collections
import sqlite3
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gates.model.machines import labels_of, machine_model  # noqa: E402
from gates.model.robust import center_scale  # noqa: E402
from gates.store.provenance import host_key  # noqa: E402


def spreads(path: str) -> list[tuple[float, float, str, int]]:
    """(range of machine medians, tau, key, machines) of each series, by range, largest first."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    hw = {rid: host_key(h) for rid, h in db.execute(
        "SELECT run_id, hardware FROM runs WHERE confirm_of IS NULL AND status = 'complete' "
        "AND trusted = 1")}
    series: dict = collections.defaultdict(lambda: collections.defaultdict(list))
    for rid, key, med, suite, fp in db.execute(
            "SELECT run_id, key, median, suite, fingerprint FROM metrics"):
        if hw.get(rid) and med:
            series[(suite, key, fp)][hw[rid]].append(float(med))
    out = []
    for (_, key, _), by in series.items():
        meds = [statistics.median(v) for v in by.values() if len(v) >= 2]
        if len(meds) < 2:
            continue
        labs = [m for m, v in by.items() for _ in v]
        x = np.array([[y for v in by.values() for y in v]])
        c, s = center_scale(x, np.zeros(1))
        mm = machine_model(x, labels_of((*labs, "new"))[:-1], s, x.shape[1])
        tau = (float(np.sqrt(np.maximum(np.asarray(mm.tau2, dtype=float), 0.0)).ravel()[0])
               if mm.tau2 is not None else float("nan"))
        centre = abs(float(c[0]))
        out.append(((max(meds) - min(meds)) / abs(statistics.median(x[0])), tau / centre,
                    key, len(by)))
    return sorted(out, reverse=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("history")
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args(argv)
    if not Path(a.history).is_file():
        print(f"error: {a.history}: no such file; pass a history database", file=sys.stderr)
        return 2
    rows = spreads(a.history)
    if not rows:
        print(f"error: {a.history}: no series names 2+ machines with 2+ runs", file=sys.stderr)
        return 1
    print(f"{len(rows)} series; range of machine medians: median "
          f"{100 * statistics.median(r[0] for r in rows):.2f}%; largest tau "
          f"{100 * max(r[1] for r in rows if r[1] == r[1]):.2f}%")
    for rng, tau, key, n in rows[:a.top]:
        print(f"{100 * rng:6.2f}%  tau {100 * tau:5.2f}%  {n} machines  {key}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
