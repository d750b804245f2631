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
    "NO_REFERENCE",
    "STEADY_READS",
    "copy_reference",
    "cpu_measure",
    "cuda_measure",
    "run_blocks",
    "time_cuda_blocks",
]

Call = Callable[[], Any]
# Times each call of the list, in order, in seconds; with ``gap_s=`` (only passed when
# pacing) the GPU idles that long after each call, untimed.
Measure = Callable[..., list[float]]
# Reads the GPU's SM clock in MHz (None where it cannot): ``suitelib.hardware.sm_clock``.
Clock = Callable[[], "float | None"]

# Settling with a clock ends when this many readings in a row agree.
STEADY_READS = 3

# The reference copy: 4x the H100's 50 MB L2 so it streams from HBM, and short enough
# (0.1-0.2 ms) that interleaving it costs a fraction of a decode shape's time.
COPY_BYTES = 256 << 20
# The idle kernel's calibration: about 1 ms at an H100's 1.98 GHz.
CALIBRATE_CYCLES = 2_000_000


@dataclass(frozen=True)
class BlockTiming(Timing):
    """A :class:`~suitelib.timing.Timing` of one sample per block (the kernel's median),
    with the reference's median of each block beside it, in seconds."""

    reference: list[float] = field(default_factory=list)
    # The SM clock (MHz) read after each block, and while settling (empty without a
    # clock); the idle gap after each call when paced (0 otherwise), in seconds.
    clocks: list[float | None] = field(default_factory=list)
    settle_clocks: list[float | None] = field(default_factory=list)
    gap_s: float = 0.0

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
    pace: float = 0.0,
    clock: Clock | None = None,
    settle_max_s: float = 0.0,
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

    ``pace``: after every call (timed or not) the GPU idles ``pace`` times the call's
    own duration (measured on the first untimed calls), so the average power stays
    under the card's cap and its SM clock stays where the load does not push it
    (``measure`` is then called with ``gap_s``). ``clock``: reads the SM clock (MHz,
    None where it cannot); read after each block (``BlockTiming.clocks``) and while
    settling: with a clock the settling goes on past ``settle_s`` until its last
    ``STEADY_READS`` readings agree, for at most ``settle_max_s`` seconds of wall time.
    """
    _check(blocks, iters, warmup)
    if settle_s < 0 or settle_max_s < 0 or pace < 0:
        raise ValueError(f"settle_s={settle_s}, settle_max_s={settle_max_s}, pace={pace}: "
                         "need 0 or more")
    scale = 1.0 + (injected_slowdown() if slowdown is None else slowdown)
    samples: list[float] = []
    refs: list[float] = []
    clocks: list[float | None] = []
    settle_reads: list[float | None] = []
    first: float | None = None
    gap = 0.0

    def timed(calls: list[Call], untimed: bool = False) -> list[float]:
        nonlocal first, gap
        t = measure(calls, gap_s=gap) if gap > 0 else measure(calls)
        if untimed and first is None:
            first = t[0]
            if pace > 0:  # the gap follows the kernel's own time (the median, not the first)
                gap = pace * statistics.median(t)
        return t

    for b in range(blocks):
        fn = setup(b)
        if b == 0:
            if pace > 0:
                timed([fn] * 3, untimed=True)
            spent, t0 = 0.0, time.perf_counter()
            while spent < settle_s or (clock is not None and not _steady(settle_reads)
                                       and time.perf_counter() - t0 < settle_max_s):
                spent += sum(timed([fn] * 5, untimed=True))
                if clock is not None:
                    settle_reads.append(clock())
        if warmup:
            timed([fn] * warmup, untimed=True)
        if reference is None:
            samples.append(scale * statistics.median(timed([fn] * iters)))
        else:
            t = timed([reference, fn] * iters)
            refs.append(statistics.median(t[0::2]))
            samples.append(scale * statistics.median(t[1::2]))
        if clock is not None:
            clocks.append(clock())
    return BlockTiming(samples, iters, warmup, first, reference=refs, clocks=clocks,
                       settle_clocks=settle_reads, gap_s=gap)


def _steady(reads: list[float | None]) -> bool:
    """The last ``STEADY_READS`` clock readings are all the same (and readable)."""
    last = reads[-STEADY_READS:]
    return len(last) == STEADY_READS and last[0] is not None and len(set(last)) == 1


def cpu_measure(calls: Sequence[Call], gap_s: float = 0.0) -> list[float]:
    """Wall-clock seconds of each call (the CPU clock for :func:`run_blocks`), a sleep of
    ``gap_s`` after each."""
    out = []
    for fn in calls:
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
        if gap_s > 0:
            time.sleep(gap_s)
    return out


def cuda_measure(flush_bytes: int | None = None) -> Measure:
    """CUDA-event timing of each call, the L2 flushed before each (outside its events),
    one synchronisation per list: ``time_cuda``'s method, for :func:`run_blocks`."""
    import torch  # local: keep this module importable without a CUDA build

    from suitelib.timing import _FLUSH_BYTES

    flush = torch.empty(flush_bytes or _FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    cycles_per_s: list[float] = []

    def idle(seconds: float) -> None:
        """A one-thread spin kernel of about ``seconds`` (``torch.cuda._sleep`` counts SM
        cycles: calibrated once, with events)."""
        if not cycles_per_s:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.cuda._sleep(CALIBRATE_CYCLES)
            end.record()
            end.synchronize()
            cycles_per_s.append(CALIBRATE_CYCLES / max(start.elapsed_time(end) / 1e3, 1e-6))
        torch.cuda._sleep(max(1, int(seconds * cycles_per_s[0])))

    def measure(calls: Sequence[Call], gap_s: float = 0.0) -> list[float]:
        evs = []
        for fn in calls:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            flush.zero_()
            start.record()
            fn()
            end.record()
            if gap_s > 0:
                idle(gap_s)
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


# Pass as ``reference`` to time the kernel alone (the default is a copy).
NO_REFERENCE: Call = lambda: None  # noqa: E731


def time_cuda_blocks(
    setup: Callable[[int], Call],
    *,
    reference: Call | None = None,
    blocks: int = 6,
    iters: int = 20,
    warmup: int = 3,
    settle_s: float = 0.0,
    pace: float = 0.0,
    clock: Clock | None = None,
    settle_max_s: float = 0.0,
) -> BlockTiming:
    """:func:`run_blocks` with CUDA events and an L2 flush before every timed call;
    ``reference``: a call, :data:`NO_REFERENCE` for none, or by default a
    :func:`copy_reference` of ``COPY_BYTES``."""
    if reference is NO_REFERENCE:
        ref = None
    else:
        ref = reference if reference is not None else copy_reference()
    return run_blocks(setup, ref, measure=cuda_measure(), blocks=blocks, iters=iters,
                      warmup=warmup, settle_s=settle_s, pace=pace, clock=clock,
                      settle_max_s=settle_max_s)
