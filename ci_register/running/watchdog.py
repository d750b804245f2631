"""Stop pytest's process group when the runner dies without cleaning up (a SIGKILL).

The runner supervises pytest (`ci_register.running.supervise`): it forwards signals, kills
hangs and sweeps leftovers. Killed by SIGKILL (an OOM kill, a CI cancel that kills
the runner's session), it does none of that, and ``PR_SET_PDEATHSIG`` only sends
pytest a SIGTERM that a test stuck in C code (signals blocked, a CUDA or NCCL wait)
never acts on. So the runner starts this watchdog:

- in a session of its own, so a kill of the runner's group or session spares it;
- holding the read end of a pipe whose write end only the runner holds; the runner
  writes ``done`` before it exits, so end-of-file without it means the runner died;
- then it sends SIGTERM to pytest's group (pytest may still record an interrupted
  run), SIGKILLs the group after `grace` seconds (longer while the group keeps using
  CPU: it is unwinding; `_wait_unwound`), and runs the `then` command
  (``gates.record.finish``: the run is marked crashed; what finished stays recorded).

    python -m ci_register.running.watchdog PGID GRACE_S [THEN ...]   (stdin: the pipe)
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ci_register.running.procs import _proc_stats, group_members

__all__ = ["Watchdog", "main"]

_DONE = b"done"
_THEN_TIMEOUT_S = 1800.0  # the runner's DEFAULT_STEP_TIMEOUT_S


class Watchdog:
    """The runner's side: start the watchdog of group `pgid`; `release` it when done."""

    def __init__(self, pgid: int, grace_s: float, then: Sequence[str] = (),
                 cwd: Path | None = None) -> None:
        read, self._write = os.pipe()  # not inheritable: no later child holds the write end
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "ci_register.running.watchdog", str(pgid), f"{grace_s:g}",
                 *then], stdin=read, cwd=cwd, start_new_session=True)
        finally:
            os.close(read)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def release(self) -> None:
        """The runner cleaned up itself: the watchdog exits without touching anything."""
        with contextlib.suppress(OSError):
            os.write(self._write, _DONE)
        with contextlib.suppress(OSError):
            os.close(self._write)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


UNWIND_S = 30.0  # the most a group still using CPU after SIGTERM gets beyond the grace


def _cpu_ticks(pgid: int) -> dict[int, int]:
    """pid -> clock ticks of CPU (user + system) used so far, of the group's live members."""
    return {pid: int(fields[11]) + int(fields[12]) for pid, fields in _proc_stats()
            if len(fields) > 12 and int(fields[2]) == pgid and fields[0] != b"Z"}


def _wait_unwound(pgid: int, grace: float) -> bool:
    """Wait for the group to exit after SIGTERM: `grace` seconds, then on while it keeps
    using CPU (pytest unwinding, recording an ``interrupted`` run), up to `UNWIND_S` more.

    Wall time alone misjudged a loaded machine (load 15 on 2 cores): pytest, acting on
    the SIGTERM, needed more than the grace to record its run and was killed, so the run
    read ``crashed``. A test stuck in C with the signal blocked uses no CPU and is still
    killed at the grace; one spinning in C is killed at grace + UNWIND_S."""
    began = time.monotonic()
    ticks = _cpu_ticks(pgid)
    if _wait_empty(pgid, grace):
        return True
    while time.monotonic() - began < grace + UNWIND_S:
        now = _cpu_ticks(pgid)
        if not any(t > ticks.get(pid, t) for pid, t in now.items()):
            return False  # no member used CPU in the last window: not unwinding
        ticks = now
        if _wait_empty(pgid, max(0.5, min(grace, 2.0))):
            return True
    return False


def _wait_empty(pgid: int, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while group_members(pgid):
        if time.monotonic() >= end:
            return False
        time.sleep(0.05)
    return True


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2:
        print("usage: python -m ci_register.running.watchdog PGID GRACE_S [THEN ...]", file=sys.stderr)
        return 2
    pgid, grace, then = int(args[0]), float(args[1]), args[2:]
    for sig in (signal.SIGINT, signal.SIGHUP):  # a terminal's Ctrl-C is the runner's to handle
        signal.signal(sig, signal.SIG_IGN)
    if sys.stdin.buffer.read() == _DONE:
        return 0
    if group_members(pgid):
        _killpg(pgid, signal.SIGTERM)
        if not _wait_unwound(pgid, grace):
            _killpg(pgid, signal.SIGKILL)
            _wait_empty(pgid, 10)  # nothing of pytest writes after gates.record.finish
    if then:
        # Marking the run (gates.record.finish) is bounded as the runner's own steps are:
        # a locked or unreachable history left this orphan waiting forever.
        try:
            limit = float(os.environ.get("GATES_STEP_TIMEOUT_S") or _THEN_TIMEOUT_S)
        except ValueError:
            limit = _THEN_TIMEOUT_S
        try:
            subprocess.run(then, check=False, timeout=limit if limit > 0 else _THEN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            print(f"error: the suite runner died and marking its run ran past {limit:g} s "
                  "(GATES_STEP_TIMEOUT_S); the run stays incomplete (never a baseline)",
                  file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
