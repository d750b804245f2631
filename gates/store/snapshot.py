"""Baseline snapshots: a shard gates against a small copy of the history, and its own
file ends up holding only its own runs.

The planning job writes one snapshot per suite (`make_snapshot`): the runs a gate of
a new run reads (each key's newest ``baselines.SERIES_LIMIT`` rows, with confirm reruns
and the runs that date acceptances), the runs the planner's file durations read, and
the acceptances, ids unchanged, so judging against it gives the verdicts judging
against the whole history gives. A shard starts its history as a copy of the snapshot
(`seed_shard`; the snapshot itself is only read), records and gates its run there, and
drops the copied runs when it is done (`strip_shard`), so the file it uploads holds
its own run(s). A merge skips copied runs a shard still carries (a shard killed before
the strip).

    python -m gates.store.snapshot seed --snapshot snap.db --history shard.db
    python -m gates.store.snapshot strip --history shard.db

(what ``nox -s SUITE -- --baseline snap.db`` runs around the suite; the snapshot
itself is ``gate-report snapshot --suite S --out snap.db``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gates.store.backend import history_location
from gates.store.baselines import SERIES_LIMIT
from gates.store.history import HistoryError
from gates.store.open import open_for_reading, open_history
from gates.store.sqlite_backend import check_file

__all__ = ["PER_FILE", "SnapshotReport", "make_snapshot", "seed_shard", "strip_shard"]

PER_FILE = 15  # newest clean runs per file the planner reads (ci_register.planning.durations.WINDOW)


@dataclass
class SnapshotReport:
    out: Path
    runs: int
    of: int  # runs in the source history
    bytes: int

    def __str__(self) -> str:
        return (f"wrote {self.out}: {self.runs} of {self.of} run(s) the gate and planner "
                f"read ({self.bytes / 1e6:.2f} MB)")


def make_snapshot(history: str | os.PathLike[str], out: str | os.PathLike[str],
                  suites: Sequence[str], fingerprint: str | None = None, *,
                  rows_per_key: int = SERIES_LIMIT, per_file: int = PER_FILE) -> SnapshotReport:
    """Write the baseline snapshot of ``suites`` (on ``fingerprint``; None: every
    fingerprint) of ``history`` into the new file ``out``."""
    target = Path(out)
    if target.exists():
        raise HistoryError(f"{target}: exists; a snapshot is written into a new file "
                           "(remove it or give another --out)")
    source = history_location(history)
    # Read-only: an older file is read through a migrated temporary copy, never changed.
    with (open_for_reading(source) if isinstance(source, Path)
          else open_history(source, create=False)) as src:
        picked: set[int] = set()
        for suite in suites:
            picked |= src.fleet_sql.gate_read_runs(suite, fingerprint, rows_per_key=rows_per_key,
                                         per_file=per_file)
        total = len(src.merge_reads.run_ids())
        try:
            with open_history(target) as snap:
                if isinstance(source, Path):
                    snap.fleet_sql.copy_runs_from(src.data_file, picked, mark=True)
                else:  # a PostgreSQL history: its rows come through its connection
                    from gates.store.pg import copy_runs_into  # noqa: PLC0415

                    copy_runs_into(src, snap, picked, mark=True)
                snap.fleet_sql.vacuum()
        except BaseException:
            for p in _files(target):
                p.unlink(missing_ok=True)
            raise
    return SnapshotReport(target, len(picked), total, target.stat().st_size)


def seed_shard(snapshot: str | os.PathLike[str], shard: str | os.PathLike[str]) -> str:
    """Start the shard's history as a copy of ``snapshot``; what was done, in words.

    A shard file that exists is kept when it holds only runs of the snapshot or of
    this shard (a rerun in the same workspace); the snapshot is only read.
    """
    snap, target = Path(snapshot), Path(shard)
    check_file(snap, create=False)
    with open_history(snap, create=False, readonly=True) as s:
        if not s.fleet_sql.snapshot_run_ids() and s.merge_reads.run_ids():
            raise HistoryError(f"{snap}: a history, not a baseline snapshot; write one with "
                               "gate-report snapshot --suite S --out snap.db")
    if target.exists():
        with open_history(target, create=False) as h:
            if h.fleet_sql.snapshot_run_ids():
                return f"{target}: already seeded from a snapshot; kept"
            if h.merge_reads.run_ids():
                raise HistoryError(f"{target}: holds runs and was not seeded from a snapshot; "
                                   "give the shard a new --history file")
        for p in _files(target):
            p.unlink(missing_ok=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".seeding")
    shutil.copyfile(snap, tmp)
    os.replace(tmp, target)  # whole or not at all
    return f"{target}: seeded from {snap}"


def strip_shard(shard: str | os.PathLike[str]) -> str:
    """Drop the snapshot's runs from a shard's history, leaving the shard's own."""
    with open_history(Path(shard), create=False) as h:
        copied = h.fleet_sql.snapshot_run_ids()
        if not copied:
            return f"{h.path}: no snapshot runs; nothing to strip"
        h.fleet_sql.delete_runs(h.fleet_sql.run_nums(copied).values())
        h.fleet_sql.vacuum()
        own = len(h.merge_reads.run_ids())
    return f"{shard}: dropped {len(copied)} snapshot run(s); {own} run(s) of its own"


def _files(path: Path) -> list[Path]:
    return [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gates.store.snapshot",
                                 description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    sd = sub.add_parser("seed", help="start a shard's history from a snapshot")
    sd.add_argument("--snapshot", required=True, metavar="PATH")
    # A database URL comes in GATES_HISTORY, never on a command line
    # (ci_register.planning.history_value.history_argv).
    env_history = os.environ.get("GATES_HISTORY") or None
    sd.add_argument("--history", default=env_history, required=not env_history, metavar="PATH")
    st = sub.add_parser("strip", help="drop the snapshot's runs from a shard's history")
    st.add_argument("--history", default=env_history, required=not env_history, metavar="PATH")
    a = ap.parse_args(argv)
    try:
        if a.command == "seed":
            print(seed_shard(a.snapshot, a.history))
        else:
            print(strip_shard(a.history))
    except (HistoryError, sqlite3.Error, OSError) as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
