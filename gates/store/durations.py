"""`python -m gates.store.durations`: measured file durations, for ci_register's planner.

`ci_register` plans shards from these figures but never imports `gates` (the
dependency runs one way, gates -> ci_register); it runs this command, as it
runs ``python -m gates.gate``, and reads one JSON object from stdout:

    {"fingerprint": "nvidia-h200-x1-sm90" | null,
     "durations": {"suites/x/test_a.py": [seconds, ...newest first], ...}}

Several ``--suite`` options read every suite in this one process (the matrix plans all
suites at once; a process per suite paid the imports and the file's opening each time):
the reply is then ``{"suites": {SUITE: {"fingerprint": ..., "durations": ...}, ...}}``.

``--fingerprint latest`` means the fingerprint of the suite's newest trusted run
(planning GPU suites from a CPU runner). A history that cannot be read (corrupt,
locked past ``--lock-wait``, foreign, newer schema) exits 2 with one line on
stderr naming the file; the planner then falls back to est_time.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gates.store.backend import history_location
from gates.store.history import HistoryError
from gates.store.open import open_for_reading, open_history
from gates.store.sqlite_backend import check_file

__all__ = ["LATEST", "file_durations", "main", "suites_durations"]

LATEST = "latest"


def file_durations(path: Path | str, suite: str, fingerprint: str, *, limit: int,
                   lock_wait_s: float) -> dict[str, Any]:
    """The reply ``main`` prints: the fingerprint used and each file's recent seconds."""
    return suites_durations(path, [suite], fingerprint, limit=limit, lock_wait_s=lock_wait_s)[suite]


def suites_durations(path: Path | str, suites: Sequence[str], fingerprint: str, *, limit: int,
                     lock_wait_s: float) -> dict[str, dict[str, Any]]:
    """``file_durations`` of every suite, the history opened once."""
    if isinstance(path, Path):
        check_file(path, create=False)  # a directory or a non-SQLite file, with its fix
    out: dict[str, dict[str, Any]] = {}
    with (open_for_reading(path, busy_timeout_s=lock_wait_s) if isinstance(path, Path)
          else open_history(path, create=False, readonly=True, busy_timeout_s=lock_wait_s)) as hist:
        for suite in suites:
            fp = hist.planning_reads.latest_trusted_fingerprint(suite) if fingerprint == LATEST else fingerprint
            found = hist.planning_reads.file_durations(suite, fp, limit=limit) if fp is not None else {}
            out[suite] = {"fingerprint": fp, "durations": found}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gates.store.durations",
                                 description=__doc__.splitlines()[0])
    # A database URL comes in GATES_HISTORY, never on a command line (ci_register.planning.history_value.history_argv).
    ap.add_argument("--history", default=os.environ.get("GATES_HISTORY") or None,
                    required=not os.environ.get("GATES_HISTORY"), metavar="PATH",
                    help="history file or database URL (default $GATES_HISTORY)")
    ap.add_argument("--suite", required=True, action="append", help="repeat for several suites")
    ap.add_argument("--fingerprint", required=True,
                    help=f"a hardware fingerprint, or {LATEST!r}: the suite's newest trusted run's")
    ap.add_argument("--limit", type=int, default=15, help="newest runs per file")
    ap.add_argument("--lock-wait", type=float, default=2.0, metavar="S",
                    help="seconds to wait on another process's lock")
    a = ap.parse_args(argv)
    path = history_location(a.history)
    try:
        by_suite = suites_durations(path, list(dict.fromkeys(a.suite)), a.fingerprint,
                                    limit=a.limit, lock_wait_s=a.lock_wait)
    except (HistoryError, sqlite3.Error, OSError, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        print(reason if reason.startswith(str(path)) else f"{path}: {reason}", file=sys.stderr)
        return 2
    print(json.dumps(by_suite[a.suite[0]] if len(by_suite) == 1 else {"suites": by_suite}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
