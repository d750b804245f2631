"""The serving suites' scoring model is trained (or found) before any test starts: a
file's budget starts with its first test, and minutes of training on a fresh machine
landed in whichever file ran first (suites/conftest.py, ``pytest_collection_finish``)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import serving.trained_model as trained_model

SUITES = Path(__file__).resolve().parents[1] / "suites"


@pytest.mark.parametrize(("body", "trained"), [
    ("def test_swap(scoring_model_dir):\n    assert scoring_model_dir.name == 'model'\n", True),
    ("def test_plain():\n    pass\n", False),
])
def test_the_model_is_ready_before_the_first_test(pytester, monkeypatch, body, trained):
    calls: list[str] = []

    def fake(**kw) -> Path:  # records whether a test was running when it was asked
        calls.append(os.environ.get("PYTEST_CURRENT_TEST", ""))
        return Path("model")

    monkeypatch.setattr(trained_model, "ensure_trained_model", fake)
    shutil.copy(SUITES / "conftest.py", pytester.path / "conftest.py")
    pytester.makepyfile(test_a=body)
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    result.assert_outcomes(passed=1)
    if trained:
        # Asked first outside the inner run's tests (this outer test's name aside).
        assert calls and "test_a.py::" not in calls[0], calls
    else:
        assert calls == []  # no serving test selected: nothing trained
