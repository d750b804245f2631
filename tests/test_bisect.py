"""gates.model.bisect: the pure bisection on a simulated measurement (the git edge: test_bisect_git)."""

from __future__ import annotations

import numpy as np
import pytest

from gates.model.bisect import bisect, classify


def _measure(levels, seed=0, noise=0.01):
    rng = np.random.default_rng(seed)
    calls: list[str] = []

    def measure(commit: str) -> np.ndarray:
        calls.append(commit)
        return levels[commit] * (1 + rng.normal(0, noise)) * (1 + rng.normal(0, 0.003, 5))

    return measure, calls


@pytest.mark.parametrize("culprit", [1, 17, 40, 64])
def test_a_step_is_bisected_to_its_commit_with_evidence(culprit):
    commits = [f"c{i:02d}" for i in range(65)]
    levels = {c: 1.0 + 0.03 * (i >= culprit) for i, c in enumerate(commits)}
    measure, calls = _measure(levels, seed=culprit)
    r = bisect(commits, measure, better="lower")
    assert r.outcome == "culprit" and r.culprit == commits[culprit]
    assert r.executions == len(calls) and r.executions < 200
    assert {e["commit"] for e in r.evidence} >= {commits[0], commits[-1], commits[culprit]}
    assert all(e["class"] in ("good", "bad") for e in r.evidence)
    # Interleaved: every candidate's runs sit between runs of good and of bad.
    first = calls.index(commits[32]) if commits[32] in calls else None
    if first is not None:
        assert calls[first - 1] == commits[0] and calls[first + 1] == commits[-1]


def test_higher_is_better_metric():
    commits = [f"c{i:02d}" for i in range(17)]
    levels = {c: 100.0 * (1 - 0.05 * (i >= 9)) for i, c in enumerate(commits)}
    measure, _ = _measure(levels, seed=3)
    r = bisect(commits, measure, better="higher")
    assert (r.outcome, r.culprit) == ("culprit", "c09")


def test_no_step_says_no_isolable_change():
    commits = [f"c{i:02d}" for i in range(65)]
    measure, calls = _measure(dict.fromkeys(commits, 1.0), seed=11)
    r = bisect(commits, measure, better="lower")
    assert r.outcome == "no-isolable-change" and r.culprit is None
    assert "no isolable change" in r.message and set(calls) == {commits[0], commits[-1]}


def test_gradual_drift_names_no_commit():
    commits = [f"c{i:02d}" for i in range(65)]
    levels = {c: 1.0 + 0.06 * i / 64 for i, c in enumerate(commits)}
    measure, _ = _measure(levels, seed=2)
    r = bisect(commits, measure, better="lower")
    assert r.outcome == "gradual-drift" and r.culprit is None
    assert "between good and bad" in r.message


def test_classify_and_bad_input():
    rng = np.random.default_rng(0)
    good = list(1 + rng.normal(0, 0.01, 12))
    bad = list(1.05 + rng.normal(0, 0.01, 12))
    assert classify(good, bad, [1.05, 1.049, 1.052], sign=1)[0] == "bad"
    assert classify(good, bad, [1.0, 0.999, 1.002], sign=1)[0] == "good"
    with pytest.raises(ValueError, match="good and the bad"):
        bisect(["a"], lambda c: [1.0], better="lower")
    with pytest.raises(ValueError, match="calib=3, verify=8: the gate judges from 5 runs"):
        bisect(["a", "b"], lambda c: [1.0], better="lower", calib=3)
    with pytest.raises(ValueError, match="better="):
        bisect(["a", "b"], lambda c: [1.0], better="up")
