"""Who holds a notification claim, and whether that process is gone (stdlib, no SQL).

A sender claims a regressing change before it posts the webhook (``notifications``
``CHANNEL:pending``). Killed mid-POST, it leaves the claim behind; a fixed age alone
(10 minutes) made every rerun in between print "already notified" and send nothing. So a
claim names its process: pid, host (with the kernel's boot id) and the process's start
time, which tells a reused pid apart. A later sender on the same host releases the claim
of a process that no longer runs; one on another host cannot see it and waits out the
age, as before.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

__all__ = ["claimant_gone", "this_claimant"]


def _host() -> str:
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = ""
    return f"{socket.gethostname()}/{boot}" if boot else socket.gethostname()


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22);
    None when no such process runs or the system has no ``/proc``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()  # the name may hold blanks and ")"
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def this_claimant(run_id: str | None) -> str:
    """This process as a claim's holder (JSON: run, pid, host, start)."""
    pid = os.getpid()
    return json.dumps({"run_id": run_id, "pid": pid, "host": _host(),
                       "start": _start_ticks(pid)}, sort_keys=True)


def claimant_gone(text: object) -> bool:
    """True only when the claim's process is known to be gone: same host and boot, and
    no process runs with its pid and start time. A claim written before claims named
    their process, or by another host, is not known gone (its age decides)."""
    try:
        who = json.loads(str(text))
        pid, host, start = int(who["pid"]), str(who["host"]), who.get("start")
    except (ValueError, TypeError, KeyError, AttributeError):
        return False
    if host != _host() or pid <= 0:
        return False
    if start is None:  # no /proc when it claimed: ask the kernel whether the pid runs
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except OSError:
            return False
        return False
    return _start_ticks(pid) != start
