"""What a verdict means for a session: the one definition of a failing verdict, of
a confirm chain's outcome and of a session's exit code.

The gate (``gates.gate``) exits 1 on a failing verdict, the report
(``gates.report.build``) puts it first and GitHub annotations name it; all ask
:func:`fails`. A suite session is a chain of attempts (the first attempt, then
confirm reruns, each ``confirm_of`` the attempt before it: ``ci_register.running.runner``);
:func:`chain_outcome` says what the chain concluded per metric and
:func:`session_exit` the exit code the runner returned for it. The gate's exit
code and every report surface (text, Markdown, HTML, JSON, GitHub summary, PR
comment, webhook) come from these two, so they cannot disagree
(``docs/gates/surfaces.md``). :class:`Verdict` is the record of one metric's verdict
that the gate fills and the store saves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["FAILING", "GATE_MODES", "VERDICTS", "Verdict", "attempt_exit", "chain_outcome", "fails",
           "gate_exit", "interval_contradicts", "never_judged", "pytest_exit", "session_exit",
           "shown_verdict"]

# A session's --gate. A run records its mode as pytest starts (``runs.gate_mode``); with
# enforce or warn its gate must save a result (``runs.gated_at``) before it reads passed.
GATE_MODES = ("enforce", "warn", "off")

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


def _enforced(mode: str | None) -> bool:
    return mode not in ("warn", "off")


def shown_verdict(row: Mapping[str, Any]) -> str:
    """The verdict a stored row stands for. A confirm attempt (stage other than
    ``first``, or attempt above 1) re-tests the bad direction only: it can hold a
    failure or clear it, never announce an improvement; such a row stands for
    ``pass`` (rows stored before the gate stopped writing it)."""
    v = str(row.get("verdict") or "")
    stage = row.get("stage")
    confirm = (stage not in (None, "", "first")) if stage is not None else \
        int(row.get("attempt") or 1) > 1
    return "pass" if v == "improvement" and confirm else v


def chain_outcome(attempts: Sequence[Sequence[Mapping[str, Any]]]
                  ) -> dict[tuple[str, str], tuple[Mapping[str, Any], int]]:
    """Per (key, nodeid): the row that decides it and the index of its attempt.

    ``attempts``: the verdict rows of each attempt of one chain, the first attempt
    first (rows of a run's highest pytest attempt count; see ``latest_rows``). A
    later attempt's verdict replaces an earlier one (a confirm rerun decides what
    its previous attempt tripped), except that a failure a confirm attempt held is
    final: the chain's outcome is the worst verdict it held, whatever a later row
    says.
    """
    out: dict[tuple[str, str], tuple[Mapping[str, Any], int]] = {}
    for i, rows in enumerate(attempts):
        latest: dict[tuple[str, str], Mapping[str, Any]] = {}
        for r in rows:
            k = (str(r["key"]), str(r.get("nodeid") or ""))
            if k not in latest or int(r.get("attempt") or 1) >= int(latest[k].get("attempt") or 1):
                latest[k] = r
        for k, r in latest.items():
            cur = out.get(k)
            if cur is not None and cur[1] > 0 and _held(cur[0]):
                continue
            out[k] = (r, i)
    return out


def _held(row: Mapping[str, Any]) -> bool:
    return fails(str(row.get("verdict") or ""), row.get("mode"))


def gate_exit(rows: Sequence[Mapping[str, Any]]) -> int:
    """The gate's exit code over a chain's deciding rows: 2 where the gate could not
    judge an enforced metric (``error``), 1 on an enforced failure, else 0. (A row's
    mode is already the weaker of its gate's and the session's.)"""
    verdicts = [(str(r.get("verdict") or ""), r.get("mode")) for r in rows]
    if any(v == "error" and _enforced(m) for v, m in verdicts):
        return 2
    return 1 if any(fails(v, m) for v, m in verdicts) else 0


def _exit_status(value: Any) -> int | None:
    """A stored exit status as a process could have returned it (0..255), or None when
    absent. Anything else (a hostile or damaged row: text, a float, -1, 10**18) reads as
    1: a failure of unknown kind, never a pass and never an exit code out of range."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 255:
        return 1
    return value


def pytest_exit(status: str | None, exit_status: Any) -> int:
    """What one attempt's pytest adds to the session's exit code (``runner._settle``):
    0 when it passed; 1 for failed tests or none collected (pytest 1, 5); 2 for
    pytest's usage error (4); a run whose gate refused its input (``gate-error``) 2,
    as the gate exited; an unfinished run or any other status at least 1."""
    code = _exit_status(exit_status)
    if status == "gate-error":
        return max(2, code or 0)
    if status not in (None, "complete"):
        return max(1, code or 0) if code != 4 else 2
    if code in (None, 0):
        return 0
    if code in (1, 5):
        return 1
    return 2 if code == 4 else code


def never_judged(run: Mapping[str, Any]) -> bool:
    """A ``complete`` run recorded with its gate on (``gate_mode`` enforce or warn) whose
    gate never saved a result (no ``gated_at``, written in the transaction of its
    verdicts): killed with its runner, or marked by nobody. It never reads as passed.
    A run without a recorded mode (older, or pytest run by hand) reads as it always did."""
    return (run.get("status") == "complete" and run.get("gate_mode") in ("enforce", "warn")
            and not run.get("gated_at"))


def attempt_exit(run: Mapping[str, Any]) -> int:
    """What one attempt's run row adds to the session's exit code: its pytest's
    (`pytest_exit`), and 1 where its gate never recorded a result (`never_judged`)."""
    code = pytest_exit(run.get("status"), run.get("exit_status"))
    return max(code, 1) if never_judged(run) else code


def session_exit(gate: int, pytest_codes: Sequence[int]) -> int:
    """The runner's exit code: the worst of every attempt's pytest and the last gate."""
    return max([gate, *pytest_codes])


def interval_contradicts(verdict: str | None, better: str | None, ci_low: float | None,
                         ci_high: float | None) -> bool:
    """A ``regression`` or ``improvement`` shown beside an interval of the relative change
    that does not exclude 0 on its side: the interval is not the statement of the test
    that decided (a rank or quantile rule, a mean of reruns), so it must not be shown
    as if it were. ``better``: "lower" (a rise is worse) or "higher". A one-sided
    interval (a quantile test's: its other end None) is read on its bounded end; with
    neither end there is no interval to contradict."""
    if verdict not in ("regression", "improvement") or (ci_low is None and ci_high is None):
        return False
    rise_is_bad = better != "higher"
    rises = (verdict == "regression") == rise_is_bad
    end = ci_low if rises else ci_high
    return end is None or not (end > 0.0 if rises else end < 0.0)


@dataclass
class Verdict:
    """One metric's verdict at one attempt, as the gate (``gates.gate``, ``gates.attempts``)
    fills it from a judgement and the store saves it (``row``)."""

    key: str
    verdict: str
    nodeid: str | None = None
    unit: str | None = None
    better: str | None = None
    baseline: float | None = None
    new: float | None = None
    rel_change: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    ci_conf: float | None = None  # the interval's confidence (the level that decided)
    level: float | None = None  # the level its p (BH q at a first attempt) was held to
    statistic: float | None = None  # signed z (> 0: worse)
    p_value: float | None = None
    q_value: float | None = None
    floor: float | None = None
    mode: str = "enforce"
    method: str = ""
    n_baseline: int = 0
    change_point: dict[str, Any] | None = None
    message: str = ""
    declared_at: str | None = None
    transient: bool = False  # confirm: the first attempt was a glitch; baselines take the rerun
    corroborate: bool = False  # confirm: a rerun beyond every baseline run; the next decides
    chain_transient: bool = False  # a chain's borderline hold undone: its first attempt a glitch
    stage: str = "first"  # where in the confirm protocol (``decisions.Stage``)
    # the first attempt of an open regression this run is still at (``still_red``): final
    open_of: str | None = None

    @property
    def enforced_failure(self) -> bool:
        return fails(self.verdict, self.mode)

    def row(self, attempt: int, confirm_of: str | None) -> dict[str, Any]:
        """A row for ``RunWrites.save_verdicts``."""
        detail = {"method": self.method, "n_baseline": self.n_baseline, "unit": self.unit,
                  "better": self.better}
        for k in ("change_point", "message", "declared_at"):
            v = getattr(self, k)
            if v:
                detail[k] = v
        if confirm_of:
            detail["confirm_of"] = confirm_of
        if self.transient:
            detail["transient"] = True
        if self.corroborate:
            detail["corroborate"] = True
        if self.chain_transient:
            detail["chain_transient"] = True
        if self.open_of:
            detail["open_of"] = self.open_of
        if self.level is not None:
            detail["level"] = self.level
        return {"key": self.key, "nodeid": self.nodeid, "verdict": self.verdict,
                "baseline": self.baseline, "new": self.new, "rel_change": self.rel_change,
                "ci_low": self.ci_low, "ci_high": self.ci_high, "statistic": self.statistic,
                "p_value": self.p_value, "q_value": self.q_value, "floor": self.floor,
                "mode": self.mode, "attempt": attempt, "stage": self.stage, "detail": detail,
                "ci_conf": self.ci_conf}
