"""``python -m serving.keeper FD STOP_S -- ARGV...``: run a server and stop its whole group
when the process that started it goes away.

`serving.lifecycle.start_server` launches this keeper as the leader of a new
process group, holding the read end FD of a pipe whose write end only the starting
process holds. The keeper starts ARGV in its group and waits. When the starter
exits in any way (SIGKILL and os._exit included, from whichever thread started the
server), the pipe reads EOF and the keeper stops the group: SIGTERM, then SIGKILL
after STOP_S seconds, so forked workers die with the server. (PR_SET_PDEATHSIG
fires when the starting *thread* exits, and reaches only the direct child.) When
the server exits by itself, the keeper exits with its code; SIGTERM to the group
(`Server.stop`) lets the server shut down while the keeper waits for it.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

__all__ = ["main"]


def _stop_group(stop_s: float, child: subprocess.Popen[bytes]) -> int:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the group's SIGTERM is for the server
    os.killpg(os.getpgrp(), signal.SIGTERM)
    try:
        child.wait(timeout=stop_s)
    except subprocess.TimeoutExpired:
        pass
    os.killpg(os.getpgrp(), signal.SIGKILL)  # workers too, and this keeper
    return 1


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: python -m serving.keeper FD STOP_S -- ARGV...", file=sys.stderr)
        return 2
    fd, stop_s, command = int(argv[0]), float(argv[1]), argv[3:]
    terminated = []
    signal.signal(signal.SIGTERM, lambda *_: terminated.append(True))
    child = subprocess.Popen(command)
    deadline = None
    while True:
        rc = child.poll()
        if rc is not None:
            return rc if rc >= 0 else 128 - rc
        if terminated and deadline is None:
            deadline = time.monotonic() + stop_s  # Server.stop sweeps the group after that
        if deadline is not None and time.monotonic() > deadline:
            return _stop_group(0, child)
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready and not os.read(fd, 1):  # EOF: the starting process is gone
            return _stop_group(stop_s, child)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
