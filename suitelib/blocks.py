"""Block timing: fresh inputs every block, a fixed reference interleaved with the kernel.

``timing.time_cuda`` takes ``samples`` medians of one set of inputs. On a GPU a process
can be slow for its whole life for reasons the code under test does not control (where
its inputs landed in device memory, the clock state it started in), and a run's samples
then all carry the same offset: within-run noise says nothing of run-to-run noise
(GPU-NOTES, "Noise"). Here a measurement is ``blocks`` blocks; each block

1. gets fresh inputs from ``setup(block)`` (a new page table over a KV pool, a new
   allocation: whatever moves the inputs elsewhere), so a bad placement is one block of
   the run, not all of it;
2. runs ``warmup`` untimed calls, then ``iters`` timed pairs: the reference, then the
   kernel, each after an L2 flush (``time_cuda``'s), so both see the same state of the
   GPU within microseconds of each other;
3. yields one sample: the median of its kernel calls, and beside it the median of its
   reference calls.

The reference is fixed work the code under test does not touch (a device-to-device copy
by default: memory-bound, like decode). ``BlockTiming.ratios`` (kernel over reference, a
block each) cancels what slows both, the clock and the memory system's state, and is
gated as a metric of its own; the raw samples are kept beside it.
``SUITELIB_INJECT_SLOWDOWN`` scales the kernel's samples only: the injected fault is in
the code under test, not in the reference.

The loop (:func:`run_blocks`) takes its clock as an argument, so it runs on the CPU in
tests; :func:`time_cuda_blocks` gives it CUDA events.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from suitelib.timing import Timing, injected_slowdown

__all__ = [
    "BlockTiming",
    "COPY_BYTES",
    "copy_reference",
    "cpu_measure",
    "cuda_measure",
    "run_blocks",
    "time_cuda_blocks",
]

Call = Callable[[], Any]
# Times each call of the list, in order, in seconds.
Measure = Callable[[Sequence[Call]], list[float]]

# The reference copy: 4x the H100's 50 MB L2 so it streams from HBM, and short enough
# (0.1-0.2 ms) that interleaving it costs a fraction of a decode shape's time.
COPY_BYTES = 256 << 20


@dataclass(frozen=True)
class BlockTiming(Timing):
    """A :class:`~suitelib.timing.Timing` of one sample per block (the kernel's median),
    with the reference's median of each block beside it, in seconds."""

    reference: list[float] = field(default_factory=list)

    @property
    def ratios(self) -> list[float]:
        """Kernel over reference, block by block (empty without a reference)."""
        if not self.reference:
            return []
        return [s / r for s, r in zip(self.samples, self.reference, strict=True)]


def _check(blocks: int, iters: int, warmup: int) -> None:
    if blocks < 1 or iters < 1 or warmup < 0:
        raise ValueError(
            f"blocks={blocks}, iters={iters}, warmup={warmup}: need blocks, iters >= 1, warmup >= 0"
        )


def run_blocks(
    setup: Callable[[int], Call],
    reference: Call | None,
    *,
    measure: Measure,
    blocks: int = 6,
    iters: int = 20,
    warmup: int = 3,
    settle_s: float = 0.0,
    slowdown: float | None = None,
) -> BlockTiming:
    """``blocks`` samples of ``setup(b)()``'s median time, ``reference`` interleaved.

    ``measure`` times a list of calls (:func:`cpu_measure`, or CUDA events in
    :func:`time_cuda_blocks`). ``settle_s``: before the first block, the kernel runs
    untimed until its calls add up to this many seconds, so that no block is timed
    before the GPU has settled under the load (a memory-bound kernel can run fast for
    its first tens of milliseconds: ``benchmarks/results/gpu_noise.md``). ``slowdown``:
    the injected fault (default: the environment's ``SUITELIB_INJECT_SLOWDOWN``),
    applied to the kernel's samples only.
    """
    _check(blocks, iters, warmup)
    if settle_s < 0:
        raise ValueError(f"settle_s={settle_s}: need 0 or more seconds")
    scale = 1.0 + (injected_slowdown() if slowdown is None else slowdown)
    samples: list[float] = []
    refs: list[float] = []
    first: float | None = None
    for b in range(blocks):
        fn = setup(b)
        spent = 0.0
        while b == 0 and spent < settle_s:
            t = measure([fn] * 5)
            first = t[0] if first is None else first
            spent += sum(t)
        if warmup:
            t = measure([fn] * warmup)
            if first is None:
                first = t[0]
        if reference is None:
            samples.append(scale * statistics.median(measure([fn] * iters)))
            continue
        t = measure([reference, fn] * iters)
        refs.append(statistics.median(t[0::2]))
        samples.append(scale * statistics.median(t[1::2]))
    return BlockTiming(samples, iters, warmup, first, reference=refs)


def cpu_measure(calls: Sequence[Call]) -> list[float]:
    """Wall-clock seconds of each call (the CPU clock for :func:`run_blocks`)."""
    out = []
    for fn in calls:
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def cuda_measure(flush_bytes: int | None = None) -> Measure:
    """CUDA-event timing of each call, the L2 flushed before each (outside its events),
    one synchronisation per list: ``time_cuda``'s method, for :func:`run_blocks`."""
    import torch  # local: keep this module importable without a CUDA build

    from suitelib.timing import _FLUSH_BYTES

    flush = torch.empty(flush_bytes or _FLUSH_BYTES, dtype=torch.uint8, device="cuda")

    def measure(calls: Sequence[Call]) -> list[float]:
        evs = []
        for fn in calls:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            flush.zero_()
            start.record()
            fn()
            end.record()
            evs.append((start, end))
        torch.cuda.synchronize()
        return [s.elapsed_time(e) / 1e3 for s, e in evs]

    return measure


def copy_reference(nbytes: int = COPY_BYTES) -> Call:
    """A device-to-device copy of ``nbytes``: fixed, memory-bound work to time beside a
    kernel. Its buffers are allocated once, here."""
    import torch

    src = torch.ones(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


def time_cuda_blocks(
    setup: Callable[[int], Call],
    *,
    reference: Call | None = None,
    blocks: int = 6,
    iters: int = 20,
    warmup: int = 3,
    settle_s: float = 0.0,
) -> BlockTiming:
    """:func:`run_blocks` with CUDA events and an L2 flush before every timed call;
    ``reference`` defaults to a :func:`copy_reference` of ``COPY_BYTES``."""
    ref = reference if reference is not None else copy_reference()
    return run_blocks(setup, ref, measure=cuda_measure(), blocks=blocks, iters=iters,
                      warmup=warmup, settle_s=settle_s)
