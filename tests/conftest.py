"""Shared settings of the framework's own tests."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # Exit 5 ("no tests collected") from the framework's own test run means the test
    # tree is broken or filtered to nothing: make it a failure on purpose, with a
    # reason, rather than let CI read it either way by accident.
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        print("\nerror: no framework tests were collected; check the path or -k filter")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
