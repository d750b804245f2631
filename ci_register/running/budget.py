"""A planned file's wall-time budget: twice its expected time plus a minute of slack.

Standard library only: the plan-only commands (a suite's ``--dry-run``, ``rerun``
without ``--run``) print budgets from nox's own interpreter, which a fresh machine
gives nothing but nox; the pytest plugin enforces the same budgets in the run.
"""

from __future__ import annotations

import os

__all__ = ["DEFAULT_SLACK_S", "file_timeout"]

DEFAULT_SLACK_S = 60.0


def file_timeout(expected_s: float) -> float:
    """Budget of one file: twice its expected time plus a minute of slack.

    ``CI_REGISTER_FILE_SLACK_S`` overrides the minute (the framework's own fault
    tests use 0 so that a budget runs out in seconds)."""
    try:
        slack = float(os.environ.get("CI_REGISTER_FILE_SLACK_S", DEFAULT_SLACK_S))
    except ValueError:
        slack = DEFAULT_SLACK_S
    if not 0 <= slack < 86400:
        slack = DEFAULT_SLACK_S
    return 2.0 * expected_s + slack
