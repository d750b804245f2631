"""A line on the terminal while one test runs long: `nox -s tests` printed nothing for
minutes while a test built a real nox venv (tests/test_adoption_guide.py), which read as
a hang. Past ``TESTS_STILL_RUNNING_S`` seconds (default 30; 0 turns it off), and every
as many seconds after, one line names the test and how long it has run.

pytest captures the test's own output at the file-descriptor level while it runs, so the
line goes to a copy of stdout's descriptor taken at configure time, when capture is
suspended: the terminal (or nox's pipe), never the test's captured output.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

__all__ = ["ENV", "pytest_configure", "pytest_runtest_logfinish", "pytest_runtest_logstart",
           "pytest_unconfigure"]

ENV = "TESTS_STILL_RUNNING_S"
_state: dict = {"fd": None, "every": 30.0, "timers": {}}  # timers: nodeid -> its next beat
_lock = threading.Lock()  # a beat and the test's end never interleave


def _stop(nodeid: str | None = None) -> None:
    """Cancel the beats of one test (None: of every test)."""
    with _lock:
        timers = _state["timers"]
        gone = list(timers.values()) if nodeid is None else [t for t in (timers.get(nodeid),) if t]
        if nodeid is None:
            timers.clear()
        else:
            timers.pop(nodeid, None)
    for timer in gone:
        timer.cancel()


def pytest_configure(config: pytest.Config) -> None:
    try:
        every = float(os.environ.get(ENV, "30"))
    except ValueError:
        raise pytest.UsageError(f"{ENV}={os.environ[ENV]!r}: give seconds (0 turns it off)") from None
    # Under pytest-xdist (`nox -s tests` runs `-n 2`) a worker's stdout is not the
    # terminal; the controller hears every worker's test start and end through these same
    # hooks and writes the lines, one timer per running test.
    if every > 0 and not hasattr(config, "workerinput"):
        _state.update(fd=os.dup(1), every=every)


def pytest_unconfigure(config: pytest.Config) -> None:
    _stop()
    fd, _state["fd"] = _state["fd"], None
    if fd is not None:
        os.close(fd)


def pytest_runtest_logstart(nodeid: str, location: tuple) -> None:
    _stop(nodeid)
    fd = _state["fd"]
    if fd is None:
        return
    start = time.monotonic()

    def beat() -> None:
        with _lock:
            if _state["timers"].get(nodeid) is not timer_box[0]:
                return  # the test finished meanwhile
            line = f"\n[still running after {time.monotonic() - start:.0f} s: {nodeid}]\n"
            try:
                os.write(fd, line.encode("utf-8", "replace"))
            except OSError:
                return  # the terminal went away: nothing to tell
            schedule()

    def schedule() -> None:
        timer = threading.Timer(_state["every"], beat)
        timer.daemon = True
        timer_box[0] = _state["timers"][nodeid] = timer
        timer.start()

    timer_box: list = [None]
    with _lock:
        schedule()


def pytest_runtest_logfinish(nodeid: str, location: tuple) -> None:
    _stop(nodeid)
