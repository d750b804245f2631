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


def test_the_session_server_starts_before_the_first_test_and_stops_after_the_last(
        pytester, monkeypatch):
    import importlib.util  # noqa: PLC0415

    import serving.lifecycle as lifecycle  # noqa: PLC0415

    events: list[str] = []

    class FakeServer:
        url, started_s, log_path = "http://127.0.0.1:9", 97.0, None

        def stop(self) -> None:
            events.append("stop")

    def fake_start(cfg, log_dir):
        events.append("start " + os.environ.get("PYTEST_CURRENT_TEST", ""))
        return FakeServer()

    monkeypatch.setattr(trained_model, "ensure_trained_model", lambda **kw: Path("model"))
    monkeypatch.setattr(lifecycle, "start_server", fake_start)
    monkeypatch.setattr(lifecycle, "vllm_cpu_config", lambda *a, **kw: type(
        "Cfg", (), {"args": lambda self: ["--max-model-len", "512"]})())
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "vllm" else real_find_spec(name, *a))
    shutil.copy(SUITES / "conftest.py", pytester.path / "conftest.py")
    pytester.makepyfile(test_a="""
        def test_one(vllm_server):
            assert vllm_server.start_s == 97.0 and vllm_server.url.endswith(":9")

        def test_two(vllm_server):
            assert vllm_server.launch_args == ("--max-model-len", "512")
        """)
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    result.assert_outcomes(passed=2)
    assert len(events) == 2 and events[1] == "stop", events  # one server, stopped at the end
    assert "test_a.py::" not in events[0], events  # started outside the inner run's tests
