"""What the store's writes take and the words its rows use: `TestResult`, `RunRecord`,
the run statuses and test outcomes, and `HistoryError` (a history cannot be used as asked).

Apart from `gates.store.history` so that the write modules (`run_writes`, `after_writes`)
and the `History` that composes them share them without an import cycle.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gates.store.backend import mask_secrets
from gates.store.metrics import Metric
from gates.store.provenance import Provenance
from gates.store.schema import VERDICT_COLUMNS

# pytest ExitCode.INTERRUPTED, INTERNAL_ERROR and USAGE_ERROR (a bad -k expression is
# found after the run started): the session did not run what it was asked to.
_INTERRUPTED = (2, 3, 4)
_VERDICT_KEYS = frozenset(VERDICT_COLUMNS)
_DETAIL_JSON = json.JSONEncoder(sort_keys=True, default=str).encode  # json.dumps', built once
OUTCOMES = ("passed", "failed", "skipped", "error", "xfailed", "xpassed")
FAILING = ("failed", "error")
# The error text of a test row written as the test starts: still there, the test never
# finished (its process crashed, hung or was killed); see `RunWrites.record_tests`.
UNFINISHED = "did not finish"
# ``gate-unfinished``: pytest finished and the run was recorded, but its gate was killed,
# crashed or ran past its limit before it finished (`History.mark_gate_unfinished`): its
# verdicts are missing or partial, the session failed (exit 1), and the run is never a
# baseline and never reads as passed.
# ``gate-error``: the same, but the gate refused its input (exit 2) and judged nothing.
STATUSES = ("incomplete", "complete", "interrupted", "crashed", "gate-unfinished",
            "gate-error")
GATE_UNFINISHED = "gate-unfinished"
GATE_ERROR = "gate-error"
BUSY_TIMEOUT_S = 60.0
# Where a history path comes from, as users give it: `nox -s SUITE -- --history PATH` and
# `gate-report --history PATH`, pytest's own `--gates-history PATH`, or the environment.
HISTORY_OPTION = "--history PATH, pytest's --gates-history PATH, or GATES_HISTORY"
STALE_NOTE = ("its writer died without closing the run (closed as crashed by the next "
              "writer on this host)")
PENDING = ":pending"  # notifications: a claim, not yet answered 2xx
NOTIFY_CLAIM_STALE_S = 600.0  # a claim this old was left by a killed sender


class HistoryError(Exception):
    """A history file cannot be used as asked; the message names the file and the fix."""


# ------------------------------------------------------------------- records


@dataclass
class TestResult:
    """One test's outcome in a run (one attempt)."""

    __test__ = False  # not a pytest test class despite the name

    nodeid: str
    path: str | None  # relative to the rootdir, posix; None for session-level errors
    outcome: str
    duration: float = 0.0
    skip_reason: str | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        # A test's failure or skip text can hold a credential (the URL it connected to,
        # a token it printed); the history is uploaded, merged and reported: none is kept.
        if self.error:
            self.error = mask_secrets(self.error)
        if self.skip_reason:
            self.skip_reason = mask_secrets(self.skip_reason)


@dataclass
class RunRecord:
    """Everything the plugin hands to `RunWrites.record_run` at the end of a session."""

    provenance: Provenance
    tests: list[TestResult] = field(default_factory=list)
    metrics: list[tuple[str, Metric]] = field(default_factory=list)  # (nodeid, metric)
    plan: Mapping[str, Any] | None = None
    exit_status: int | None = None
