"""suitelib.timing on CPU: samples are medians of iterations, warm-up is not timed."""

from __future__ import annotations

import time

import pytest

from suitelib.timing import time_cpu


def test_warmup_calls_are_not_in_samples() -> None:
    calls: list[float] = []

    def fn() -> None:
        # The first two calls are slow, like a JIT or a cold cache; the others do nothing
        # (a 0.5 ms sleep took over 20 ms on a loaded machine: the bound read the load).
        if len(calls) < 2:
            time.sleep(0.5)
        calls.append(1.0)

    t = time_cpu(fn, samples=3, iters=5, warmup=2)
    assert len(calls) == 2 + 3 * 5
    assert len(t.samples) == 3
    assert max(t.samples) < 0.25, t.samples  # no 0.5 s warm-up call in any sample


def test_median_resists_one_outlier_per_sample() -> None:
    n = [0]

    def fn() -> None:
        n[0] += 1
        if n[0] % 5 == 0:  # one slow call in each sample's five; the others do nothing
            time.sleep(0.5)

    t = time_cpu(fn, samples=2, iters=5, warmup=0)
    assert all(s < 0.25 for s in t.samples), t.samples  # a median, not the 0.5 s outlier


def test_rate_and_bad_arguments() -> None:
    t = time_cpu(lambda: None, samples=2, iters=1, warmup=0)
    assert [r > 0 for r in t.rate(1e6)] == [True, True]
    with pytest.raises(ValueError, match="samples"):
        time_cpu(lambda: None, samples=0)


def test_injected_slowdown_reads_a_fraction_and_refuses_anything_else():
    from suitelib.timing import SLOWDOWN_ENV, injected_slowdown

    assert injected_slowdown({}) == 0.0
    assert injected_slowdown({SLOWDOWN_ENV: ""}) == 0.0
    assert injected_slowdown({SLOWDOWN_ENV: "0.03"}) == pytest.approx(0.03)
    for bad in ("3%", "-0.1", "1.5", "nan"):
        with pytest.raises(ValueError, match=SLOWDOWN_ENV):
            injected_slowdown({SLOWDOWN_ENV: bad})
