"""Run pytest as a supervised child: signals forwarded, hangs and leftovers killed.

pytest runs in its own process group (``process_group=0``), so a terminal's Ctrl-C
reaches the runner, not pytest directly, and every process a test leaves behind
shares a group the runner can kill. The runner:

- forwards SIGINT, SIGTERM and SIGHUP to pytest's group, waits up to `grace_s` for
  pytest to record an ``interrupted`` run, then kills the group (a second signal
  kills at once);
- kills the group when the file that is running has overrun its budget by
  `grace_s` (pytest-timeout's in-process signal cannot stop a test stuck in C
  code, such as a CUDA or NCCL wait); the plugin's progress file says which file
  runs and its deadline;
- kills whatever is left in the group once pytest has exited (children a test
  leaked), and, being a child subreaper (``PR_SET_CHILD_SUBREAPER``), every orphan
  re-parented to it: a process a test started in a session of its own escapes the
  group but not this sweep.

The runner itself gets SIGTERM when its parent dies (``PR_SET_PDEATHSIG``; nox
killed by SIGTERM never forwards it), and pytest gets SIGTERM when the runner dies.
A runner killed by SIGKILL cleans up nothing, and a test stuck in C code never acts
on that SIGTERM: a watchdog process (`ci_register.running.watchdog`) then stops pytest's
group and marks the run.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ci_register.running.procs import _proc_stats, group_members
from ci_register.running.relay import Relay
from ci_register.running.watchdog import Watchdog

__all__ = ["DEFAULT_GRACE_S", "Supervised", "die_with_parent", "group_members", "kill_grace",
           "run_supervised"]

SAME_INTERRUPT_S = 1.0  # a second signal sooner than this is the first one, relayed
DEFAULT_GRACE_S = 20.0  # pytest-timeout's own limit goes first; this is its time to unwind
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_POLL_S = 0.2
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def kill_grace() -> float:
    """Seconds between a deadline (or a forwarded signal) and SIGKILL of pytest's group.

    ``CI_REGISTER_KILL_GRACE_S`` overrides the default (tests use a second)."""
    try:
        value = float(os.environ.get("CI_REGISTER_KILL_GRACE_S", DEFAULT_GRACE_S))
    except ValueError:
        return DEFAULT_GRACE_S
    return value if 0 <= value < 3600 else DEFAULT_GRACE_S


@dataclass
class Supervised:
    """How a supervised pytest ended."""

    returncode: int  # negative: killed by that signal
    signal_received: int | None = None  # a signal sent to the runner and forwarded
    hung: str | None = None  # why the runner killed a hung test, if it did
    running: str | None = None  # the test the progress file last named
    leftovers: int = 0  # processes still in pytest's group after it exited, killed
    session_finished: bool = False  # the plugin saw pytest's session end
    tests_started: bool = False  # the plugin named a test it started: pytest got past its set-up


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Ask Linux to send `sig` to this process when its parent exits (no-op elsewhere)."""
    if sys.platform != "linux":
        return
    try:
        import ctypes  # noqa: PLC0415

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(sig))
    except (OSError, AttributeError):
        pass


def _prctl(option: int, value: int) -> None:
    if sys.platform != "linux":
        return
    try:
        import ctypes  # noqa: PLC0415

        ctypes.CDLL(None, use_errno=True).prctl(option, value)
    except (OSError, AttributeError):
        pass


def _orphans() -> list[int]:
    """Live processes whose parent is this one (orphans a subreaper inherits)."""
    me = os.getpid()
    return [pid for pid, fields in _proc_stats() if len(fields) > 1 and int(fields[1]) == me]


def _sweep_orphans(counted: set[int], keep: frozenset[int] = frozenset()) -> int:
    """Kill and reap every process re-parented to this runner but `keep` (its own
    children); how many of them were not `counted` already (members of pytest's group,
    killed, come back here as zombies)."""
    killed: set[int] = set()
    for _ in range(50):  # a killed orphan's own children are re-parented here next
        found = [p for p in _orphans() if p not in keep and (p not in killed or _alive(p))]
        if not found:
            break
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)
            killed.add(pid)
    return len(killed - counted)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _child_setup(parent: int) -> None:  # runs in the child between fork and exec
    die_with_parent(signal.SIGTERM)
    if os.getppid() != parent:  # the runner died before the prctl: no signal will come
        os._exit(128 + signal.SIGTERM)


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _progress(path: Path | None) -> dict:
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


@contextlib.contextmanager
def _catching(received: list[int]) -> Iterator[None]:
    def handler(signum: int, frame: object) -> None:
        received.append(signum)

    old = {}
    try:
        for sig in _FORWARDED:
            with contextlib.suppress(ValueError, OSError):  # not the main thread
                old[sig] = signal.signal(sig, handler)
        yield
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)


def run_supervised(cmd: list[str], *, cwd: Path, progress: Path | None = None,
                   deadline_s: float | None = None, grace_s: float | None = None,
                   if_runner_dies: Sequence[str] = (), relay: Relay | None = None) -> Supervised:
    """Run `cmd` in its own process group under the rules of this module.

    `deadline_s`: seconds the whole run may take before it counts as hung when no
    file's deadline applies (a hang in collection or start-up).
    `if_runner_dies`: the command the watchdog runs after it stopped pytest's group,
    should this process die without cleaning up.
    `relay`: pytest's stdout and stderr go through pipes to it (`ci_register.running.relay`)
    instead of straight to this process's streams.
    """
    grace = kill_grace() if grace_s is None else grace_s
    received: list[int] = []
    forwarded = 0
    first_at = 0.0
    hung = None
    kill_at = None
    start_wall = time.time()
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    with _catching(received):
        parent = os.getpid()
        piped = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE} if relay else {}
        proc = subprocess.Popen(cmd, cwd=cwd, process_group=0,
                                preexec_fn=(lambda: _child_setup(parent))
                                if sys.platform == "linux" else None, **piped)
        if relay is not None:
            relay.start(proc.stdout, proc.stderr)
        pgid = proc.pid
        dog = None
        if sys.platform == "linux":
            try:
                dog = Watchdog(pgid, grace, if_runner_dies, cwd)
            except OSError as e:
                print(f"warning: no watchdog for pytest ({e}); a SIGKILL of the runner "
                      "would leave it running", file=sys.stderr, flush=True)
        while True:
            try:
                rc = proc.wait(timeout=_POLL_S)
                break
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if len(received) > forwarded:
                if not forwarded:
                    _killpg(pgid, received[-1])
                    kill_at = now + grace
                    first_at = now
                elif now - first_at > SAME_INTERRUPT_S:  # asked twice: stop waiting
                    _killpg(pgid, signal.SIGKILL)
                # else: the same Ctrl-C twice, from the terminal (to the whole group) and
                # relayed by nox (`ci_register.running.nox_sessions`): one interrupt
                forwarded = len(received)
            if kill_at is not None:
                if now >= kill_at:
                    _killpg(pgid, signal.SIGKILL)
                continue
            info = _progress(progress)
            deadline = info.get("deadline")
            if not isinstance(deadline, (int, float)):
                deadline = start_wall + deadline_s if deadline_s is not None else None
            if deadline is not None and time.time() > deadline + grace:
                what = info.get("path") or "the run"
                hung = (f"{what} overran its budget by more than the {grace:g} s grace "
                        f"(still running {time.time() - float(info.get('started') or start_wall):.0f} s); "
                        "the runner killed pytest's process group")
                _killpg(pgid, signal.SIGKILL)
                kill_at = now
    members = group_members(pgid)
    _killpg(pgid, signal.SIGKILL)
    escaped = _sweep_orphans(set(members), frozenset([dog.pid]) if dog else frozenset())
    if dog is not None:
        dog.release()
    if relay is not None:
        relay.join()
    info = _progress(progress)
    running = info.get("nodeid") if isinstance(info.get("nodeid"), str) else None
    return Supervised(rc, received[0] if received else None, hung, running,
                      len(members) + escaped,
                      info.get("session") == "finished", bool(info.get("path")) or "session" in info)
