"""A confirm chain's outcome and a session's exit code (``gates.model.verdicts``)."""

from __future__ import annotations

import pytest

from gates.model.verdicts import chain_outcome, gate_exit, pytest_exit, session_exit, shown_verdict


def row(verdict: str, attempt: int, stage: str, mode: str = "enforce", key: str = "lat"):
    return {"key": key, "nodeid": "t.py::t", "verdict": verdict, "attempt": attempt,
            "stage": stage, "mode": mode}


def test_a_later_attempt_decides_what_its_previous_attempt_tripped():
    chain = [[row("regression", 1, "first"), row("pass", 1, "first", key="other")],
             [row("suspect", 2, "rerun")], [row("pass", 3, "reruns")]]
    out = chain_outcome(chain)
    assert out[("lat", "t.py::t")][0]["verdict"] == "pass" and out[("lat", "t.py::t")][1] == 2
    assert out[("other", "t.py::t")][1] == 0


def test_a_failure_a_rerun_held_is_the_chains_outcome_whatever_follows():
    chain = [[row("regression", 1, "first")], [row("regression", 2, "rerun")],
             [row("pass", 3, "reruns")]]
    (v, i), = chain_outcome(chain).values()
    assert (v["verdict"], i) == ("regression", 1)
    assert gate_exit([v]) == 1


def test_a_rerun_row_saying_improvement_stands_for_a_pass():
    assert shown_verdict(row("improvement", 2, "rerun")) == "pass"
    assert shown_verdict({"verdict": "improvement", "attempt": 2}) == "pass"  # no stage column
    assert shown_verdict(row("improvement", 1, "first")) == "improvement"


def test_exit_codes_follow_the_runner():
    assert gate_exit([row("error", 1, "first")]) == 2
    assert gate_exit([row("error", 1, "first", mode="warn")]) == 0
    assert gate_exit([row("regression", 1, "first", mode="warn")]) == 0
    assert gate_exit([row("missing", 1, "first")]) == 1
    assert [pytest_exit("complete", s) for s in (None, 0, 1, 5, 4)] == [0, 0, 1, 1, 2]
    assert pytest_exit("incomplete", None) == 1 and pytest_exit("interrupted", 130) == 130
    assert session_exit(0, [0, 1]) == 1 and session_exit(2, [1]) == 2


def test_an_interval_that_spans_zero_beside_a_held_verdict_contradicts_it():
    from gates.model.verdicts import interval_contradicts

    assert interval_contradicts("regression", "lower", -0.01, 0.056)  # the row
    assert not interval_contradicts("regression", "lower", 0.004, 0.056)
    assert interval_contradicts("regression", "higher", -0.05, 0.01)
    assert not interval_contradicts("regression", "higher", -0.05, -0.01)
    assert not interval_contradicts("improvement", "lower", -0.05, -0.01)
    assert not interval_contradicts("pass", "lower", -0.05, 0.05)
    assert not interval_contradicts("regression", "lower", None, None)


@pytest.mark.parametrize("stored", [10**18, 2**63 - 1, -1, 256, "x", "nan", 3.5, b"\x00", True])
def test_a_damaged_exit_status_reads_as_a_failure_in_range(stored):
    # A merged shard's row is outside data: its exit status becomes an exit code only as
    # a process could have returned it; anything else is a failure (1), never a pass.
    from gates.model.verdicts import pytest_exit
    assert pytest_exit("complete", stored) == 1
    assert pytest_exit("crashed", stored) == 1
    assert pytest_exit("complete", 0) == 0 and pytest_exit("complete", 4) == 2
    assert pytest_exit("interrupted", 130) == 130
