"""Processes as /proc shows them: what the supervisor and its watchdog both look up.

Its own module so that `supervise` (which starts the watchdog) and `watchdog`
(which waits on pytest's group) import it, not each other.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

__all__ = ["group_members"]


def _proc_stats() -> Iterator[tuple[int, list[bytes]]]:
    """(pid, the /proc/PID/stat fields after `comm`) of every readable process (Linux)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
        yield int(name), stat[stat.rfind(b")") + 2:].split()


def group_members(pgid: int) -> list[int]:
    """Pids whose process group is `pgid` (Linux /proc; empty where unreadable)."""
    return [pid for pid, fields in _proc_stats()
            if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z"]
