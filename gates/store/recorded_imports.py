"""`python -m gates.store.recorded_imports --history PATH`: the stored import maps, for selection.

``ci_register`` never imports ``gates``; it runs this command (as it runs
``python -m gates.store.durations``) and reads one JSON object from stdout::

    {"maps": [{"suite": "cpu", "path": "suites/x/test_a.py", "commit_sha": "...",
               "run_id": "...", "recorded_at": "2026-...Z", "files": ["pkg/a.py", ...]}, ...]}

A history file of an older schema is read through a migrated temporary copy (it is
never written). A history that cannot be read (corrupt, locked past ``--lock-wait``,
foreign, newer schema) exits 2 with one line on stderr naming the file; selection then uses
the static import graph alone.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from collections.abc import Sequence

from gates.store.backend import history_location
from gates.store.history import HistoryError
from gates.store.open import open_for_reading, open_history
from gates.store.sqlite_backend import check_file

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gates.store.recorded_imports", description=__doc__.splitlines()[0])
    # A database URL comes in GATES_HISTORY, never on a command line (ci_register.planning.history_value.history_argv).
    ap.add_argument("--history", default=os.environ.get("GATES_HISTORY") or None,
                    required=not os.environ.get("GATES_HISTORY"), metavar="PATH",
                    help="history file or database URL (default $GATES_HISTORY)")
    ap.add_argument("--lock-wait", type=float, default=2.0, metavar="S", help="seconds to wait on another process's lock")
    a = ap.parse_args(argv)
    path = history_location(a.history)
    try:
        if isinstance(path, str):  # PostgreSQL: read as it is
            hist = open_history(path, create=False, readonly=True, busy_timeout_s=a.lock_wait)
        else:  # a file of an older schema is read through a migrated copy: never written
            check_file(path, create=False)
            hist = open_for_reading(path, busy_timeout_s=a.lock_wait)
        with hist:
            rows = hist.planning_reads.import_maps()
    except (HistoryError, sqlite3.Error, OSError, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        print(reason if reason.startswith(str(path)) else f"{path}: {reason}", file=sys.stderr)
        return 2
    print(json.dumps({"maps": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
