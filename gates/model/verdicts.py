"""What a verdict means for a session: the one definition of a failing verdict.

The gate (``gates.gate``) exits 1 on it, the report (``gates.report.build``) puts it
first and GitHub annotations name it; all three ask :func:`fails`.
"""

from __future__ import annotations

__all__ = ["FAILING", "VERDICTS", "fails"]

# Verdicts that fail a session when their gate is enforced: a confirmed regression,
# a declared threshold crossed, a gated metric that was not recorded.
FAILING = ("regression", "threshold-fail", "missing")

# Every verdict the gate writes. Only FAILING ones fail a session; "unguarded" (the
# noise model cannot guard the metric on this run's machine: spread across machines
# unknown or too wide, gates.model.judge / gates.model.machines) is reported but never fails.
VERDICTS = ("pass", "regression", "improvement", "insufficient-history", "threshold-fail",
            "missing", "error", "suspect", "unguarded")


def fails(verdict: str | None, mode: str | None) -> bool:
    """A FAILING verdict of an enforced gate. A stored verdict without a mode counts
    as enforced (enforce is the default mode); warn and off never fail."""
    return (verdict or "").lower() in FAILING and mode not in ("warn", "off")
