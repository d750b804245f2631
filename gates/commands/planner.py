"""`python -m gates.commands.planner matrix|plan ...`: ci_register's planner with the
history's durations read in this process.

ci_register never imports gates (docs/internals.md: the dependency runs one way), so
on its own ``python -m ci_register matrix`` reads durations through one
``python -m gates.store.durations`` process: a second interpreter, its imports and
the history's opening, each time. gates may import ci_register, so this entry point
(what ``nox -s matrix`` runs) hands ci_register's planner gates' own reader
(`read_durations`, a `ci_register.planning.durations.DurationsReader`): the same
reply, the same one-line warnings, no process. The arguments and output are
``python -m ci_register``'s.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ci_register.cli import main as ci_register_main

__all__ = ["main", "read_durations"]


def read_durations(path: Path | str, suites: Sequence[str], fingerprint: str, *, limit: int,
                   lock_wait_s: float) -> Mapping[str, Mapping[str, object]]:
    """{suite: {"fingerprint", "durations"}} read in this process, as
    ``python -m gates.store.durations`` replies; ValueError with one line naming the file
    when the history cannot be read (the planner then warns and plans with est_time)."""
    try:
        from gates.store.durations import suites_durations  # noqa: PLC0415 - only with a history
        from gates.store.history import HistoryError  # noqa: PLC0415
    except ImportError as exc:  # as the reader process reports it
        raise ValueError(f"cannot read durations (gates not importable: {exc})") from None
    try:
        return suites_durations(path, list(dict.fromkeys(suites)), fingerprint, limit=limit,
                                lock_wait_s=lock_wait_s)
    except (HistoryError, sqlite3.Error, OSError, ValueError, ImportError) as exc:
        # ImportError: an older file's migration needs sqlite-utils, absent here.
        reason = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        raise ValueError(reason if reason.startswith(str(path)) else f"{path}: {reason}") from None


def main(argv: Sequence[str] | None = None) -> int:
    return ci_register_main(list(sys.argv[1:] if argv is None else argv),
                            read_durations=read_durations)


if __name__ == "__main__":
    raise SystemExit(main())
