"""Benchmark the fleet flow on SQLite: bytes per run, and merging shards into a history.

    python benchmarks/bench_fleet.py size --runs 200
        N gated runs of 73 metrics x 5 samples (benchmarks/fleet_runs.py); the file's
        size after VACUUM per run, and per table (target: <= 20 kB a run).
    python benchmarks/bench_fleet.py merge --history-runs 1000 --shards 32 --flow own
        a history of H gated runs, S shard files each holding one new gated run, and
        the time of `gate-report merge SHARDS --into` a copy of the history
        (target: 32 shards into 1,000 runs < 1 s).
        --flow own: each shard gated against a baseline snapshot and kept its own run
        (gates.store.snapshot: seed, gate, strip); --flow full: each shard started from a
        copy of the whole history (the flow before snapshots; runs on older gates too).
    --cache DIR keeps built histories for the next call (same --history-runs).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fleet_runs import METRICS, SAMPLES, build_history, make_run, write_run  # noqa: E402

from gates.store.merge import merge_histories  # noqa: E402
from gates.store.open import open_history  # noqa: E402


def _compact(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("VACUUM")
    conn.close()


def _history(runs: int, cache: Path | None, work: Path) -> Path:
    path = (cache or work) / f"history-{runs}.db"
    if not path.exists():
        t0 = time.perf_counter()
        build_history(path, runs)
        _compact(path)
        print(f"built {path} ({runs} gated runs) in {time.perf_counter() - t0:.0f} s", flush=True)
    return path


def bench_size(args: argparse.Namespace, work: Path) -> None:
    path = _history(args.runs, args.cache, work)
    size = os.path.getsize(path)
    print(f"{args.runs} runs x {METRICS} metrics x {SAMPLES} samples: {size / 1e6:.2f} MB, "
          f"{size / args.runs / 1e3:.1f} kB a run")
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name "
                            "ORDER BY 2 DESC LIMIT 8").fetchall()
    except sqlite3.OperationalError:  # SQLite built without dbstat
        rows = []
    for name, nbytes in rows:
        print(f"  {name:28s} {nbytes / args.runs / 1e3:6.1f} kB a run  {100 * nbytes / size:5.1f}%")
    conn.close()


def _shards(history: Path, n: int, flow: str, out: Path) -> list[Path]:
    base = 100_000
    shards = []
    snap = None
    if flow == "own":
        from gates.store.snapshot import make_snapshot, seed_shard, strip_shard  # noqa: PLC0415

        snap = out / "snapshot.db"
        print(make_snapshot(history, snap, ["stage-b-1gpu"]), flush=True)
    for k in range(n):
        shard = out / f"shard-{k}.db"
        if flow == "own":
            seed_shard(snap, shard)
        else:
            shutil.copyfile(history, shard)
        with open_history(shard) as h:
            write_run(h, make_run(base + k, shard=(k + 1, n), seed=1))
        if flow == "own":
            strip_shard(shard)
        else:
            _compact(shard)
        shards.append(shard)
    sizes = [s.stat().st_size for s in shards]
    print(f"{n} shard files ({flow}): {sum(sizes) / n / 1e3:.0f} kB each", flush=True)
    return shards


def bench_merge(args: argparse.Namespace, work: Path) -> None:
    history = _history(args.history_runs, args.cache, work)
    shards = _shards(history, args.shards, args.flow, work)
    times = []
    for _ in range(args.repeat):
        into = work / "into.db"
        shutil.copyfile(history, into)
        t0 = time.perf_counter()
        report = merge_histories(shards, into)
        times.append(time.perf_counter() - t0)
        assert len(report.added) == args.shards, report
        for p in (into, into.with_name("into.db-wal"), into.with_name("into.db-shm")):
            p.unlink(missing_ok=True)
    print(f"merge {args.shards} shards ({args.flow}) into {args.history_runs} runs: "
          f"{min(times):.2f} s (best of {args.repeat})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[1:]))
    ap.add_argument("--cache", type=Path, default=None, metavar="DIR",
                    help="keep built histories here (reused when present)")
    sub = ap.add_subparsers(dest="command", required=True)
    sz = sub.add_parser("size", help="bytes per run after VACUUM")
    sz.add_argument("--runs", type=int, default=200)
    mg = sub.add_parser("merge", help="time merging shard files into a history")
    mg.add_argument("--history-runs", type=int, default=1000)
    mg.add_argument("--shards", type=int, default=32)
    mg.add_argument("--flow", choices=("own", "full"), default="own")
    mg.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if args.cache:
        args.cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        (bench_size if args.command == "size" else bench_merge)(args, Path(tmp))


if __name__ == "__main__":
    main()
