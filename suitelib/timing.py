"""Timing: several samples, each the median of many iterations, warm-up discarded.

GPU-NOTES: the first iterations of every batch are 6-12% slow and one sample per run is
weak evidence for a gate, so a measurement is ``samples`` medians of ``iters`` timed
calls each, after ``warmup`` untimed calls (which also absorb FlashInfer's JIT). GPU
calls are timed with CUDA events around each call, so host overhead between calls is
not counted but launch latency is.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Timing", "time_cpu", "time_cuda", "median", "injected_slowdown", "SLOWDOWN_ENV"]


@dataclass(frozen=True)
class Timing:
    """Per-sample medians in seconds, plus what produced them."""

    samples: list[float]
    iters: int
    warmup: int
    # Wall time of the first warm-up call, synchronised: includes JIT compilation and
    # lazy initialisation when the cache is cold. Reported, never mixed into samples.
    first_call_s: float | None = None

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def rate(self, amount: float) -> list[float]:
        """``amount / t`` for each sample (bytes -> B/s, FLOP -> FLOP/s)."""
        return [amount / t for t in self.samples]


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def _check(samples: int, iters: int, warmup: int) -> None:
    if samples < 1 or iters < 1 or warmup < 0:
        raise ValueError(
            f"samples={samples}, iters={iters}, warmup={warmup}: need samples, iters >= 1"
        )


def time_cpu(
    fn: Callable[[], Any], *, samples: int = 5, iters: int = 10, warmup: int = 2
) -> Timing:
    """Wall-clock timing of a CPU callable."""
    _check(samples, iters, warmup)
    for _ in range(warmup):
        fn()
    out: list[float] = []
    for _ in range(samples):
        ts = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        out.append(statistics.median(ts))
    return Timing(out, iters, warmup)


SLOWDOWN_ENV = "SUITELIB_INJECT_SLOWDOWN"


def injected_slowdown(env: dict[str, str] | None = None) -> float:
    """The fault injection a gate experiment asked for: ``SUITELIB_INJECT_SLOWDOWN=0.03``
    makes every ``time_cuda`` sample 3% longer (the measured time, noise and all, times
    1.03: a slowdown of the timed call by that share). 0 when unset. Never set it in CI:
    it exists to check that the gate catches a known slowdown on a real GPU
    (``benchmarks/fleet_device.py``)."""
    raw = (os.environ if env is None else env).get(SLOWDOWN_ENV, "").strip()
    if not raw:
        return 0.0
    try:
        f = float(raw)
    except ValueError:
        raise ValueError(f"{SLOWDOWN_ENV}={raw!r}: give a fraction such as 0.03") from None
    if not 0.0 <= f < 1.0:
        raise ValueError(f"{SLOWDOWN_ENV}={raw!r}: give a fraction in [0, 1), such as 0.03")
    return f


# Larger than any current L2 (H200: 60 MB, B200: 126 MB).
_FLUSH_BYTES = 256 << 20


def time_cuda(
    fn: Callable[[], Any],
    *,
    samples: int = 5,
    iters: int = 20,
    warmup: int = 3,
    flush_l2: bool = True,
) -> Timing:
    """CUDA-event timing of a callable that launches work on the current stream.

    Each iteration gets its own event pair; the stream is synchronised once per sample.
    With ``flush_l2`` a 256 MiB buffer is zeroed before each iteration (outside its
    events), as ``triton.testing.do_bench`` does: the kernel reads cold memory rather
    than what the last iteration left in L2, and the GPU stays busy while the host
    enqueues the next call, so host overhead does not show up as kernel time.
    """
    import torch  # local: keep this module importable without a CUDA build

    flush = torch.empty(_FLUSH_BYTES, dtype=torch.uint8, device="cuda") if flush_l2 else None

    _check(samples, iters, warmup)
    scale = 1.0 + injected_slowdown()
    first: float | None = None
    for i in range(warmup):
        t0 = time.perf_counter()
        fn()
        if i == 0:
            torch.cuda.synchronize()
            first = time.perf_counter() - t0
    torch.cuda.synchronize()
    out: list[float] = []
    for _ in range(samples):
        evs = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(iters)
        ]
        for start, end in evs:
            if flush is not None:
                flush.zero_()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        out.append(scale * statistics.median(s.elapsed_time(e) for s, e in evs) / 1e3)
    return Timing(out, iters, warmup, first)
