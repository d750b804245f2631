"""suitelib.blocks on the CPU: fresh inputs a block, the reference interleaved, and what
the ratio cancels. A fake clock gives each call its duration, so no test depends on load."""

from __future__ import annotations

import pytest
import torch

from suitelib.attention import build_paged_kv
from suitelib.blocks import BlockTiming, cpu_measure, run_blocks


class _Call:
    """A callable whose fake duration is ``seconds``; records each call in ``log``."""

    def __init__(self, name: str, seconds: float, log: list[str]) -> None:
        self.name, self.seconds, self.log = name, seconds, log

    def __call__(self) -> None:
        self.log.append(self.name)


def _fake_measure(process_factor: float = 1.0):
    """Times each call by its ``seconds``, all scaled by ``process_factor`` (a process
    whose GPU runs slow for its whole life)."""

    def measure(calls):
        out = []
        for fn in calls:
            fn()
            out.append(fn.seconds * process_factor)
        return out

    return measure


def test_each_block_gets_fresh_inputs_warms_up_untimed_and_interleaves_the_reference():
    log: list[str] = []
    built: list[int] = []

    def setup(b: int):
        built.append(b)
        return _Call(f"k{b}", 1.0, log)

    ref = _Call("r", 0.5, log)
    t = run_blocks(setup, ref, measure=_fake_measure(), blocks=3, iters=4, warmup=2, slowdown=0.0)
    assert built == [0, 1, 2]
    # Per block: the warm-up calls, then reference and kernel in turn.
    assert log[:10] == ["k0", "k0", "r", "k0", "r", "k0", "r", "k0", "r", "k0"]
    assert len(log) == 3 * (2 + 2 * 4)
    assert t.samples == [1.0, 1.0, 1.0] and t.reference == [0.5, 0.5, 0.5]
    assert t.ratios == [2.0, 2.0, 2.0]
    assert t.first_call_s == 1.0 and (t.iters, t.warmup) == (4, 2)


def test_a_bad_placement_is_one_block_not_the_run():
    # Block 1's inputs landed badly (20% slow): one sample of five, the median unmoved.
    log: list[str] = []
    t = run_blocks(lambda b: _Call("k", 1.2 if b == 1 else 1.0, log), _Call("r", 1.0, log),
                   measure=_fake_measure(), blocks=5, iters=3, warmup=0, slowdown=0.0)
    assert t.samples == [1.0, 1.2, 1.0, 1.0, 1.0]
    assert t.median == 1.0


def test_the_ratio_cancels_what_slows_the_whole_process_and_the_raw_value_keeps_it():
    log: list[str] = []

    def run(factor: float) -> BlockTiming:
        return run_blocks(lambda b: _Call("k", 2.0, log), _Call("r", 0.25, log),
                          measure=_fake_measure(factor), blocks=4, iters=5, warmup=1,
                          slowdown=0.0)

    fast, slow = run(1.0), run(1.15)
    assert slow.median == pytest.approx(1.15 * fast.median)
    assert slow.ratios == pytest.approx(fast.ratios)


def test_an_injected_slowdown_is_in_the_kernel_not_in_the_reference(monkeypatch):
    log: list[str] = []
    monkeypatch.setenv("SUITELIB_INJECT_SLOWDOWN", "0.02")
    t = run_blocks(lambda b: _Call("k", 1.0, log), _Call("r", 0.5, log),
                   measure=_fake_measure(), blocks=2, iters=3, warmup=0)
    assert t.samples == pytest.approx([1.02, 1.02])
    assert t.reference == pytest.approx([0.5, 0.5])
    assert t.ratios == pytest.approx([2.04, 2.04])


def test_without_a_reference_there_are_samples_and_no_ratios():
    log: list[str] = []
    t = run_blocks(lambda b: _Call("k", 3.0, log), None, measure=_fake_measure(),
                   blocks=2, iters=2, warmup=0, slowdown=0.0)
    assert t.samples == [3.0, 3.0] and t.reference == [] and t.ratios == []
    assert log == ["k"] * 4


def test_the_kernel_settles_untimed_before_the_first_block_only():
    # A kernel fast for its first 0.1 s (a GPU not yet settled under load): the settle
    # phase absorbs it, and no later block runs it again.
    log: list[str] = []
    calls = [0]

    class Settling(_Call):
        def __call__(self) -> None:
            super().__call__()
            calls[0] += 1

    fn = Settling("k", 0.02, log)
    measure = _fake_measure()

    def timed(calls_):
        # The first 6 calls of the kernel take 0.01 s, the rest 0.02 s.
        out = []
        for c in calls_:
            out.append(measure([c])[0] * (0.5 if c is fn and calls[0] <= 6 else 1.0))
        return out

    t = run_blocks(lambda b: fn, _Call("r", 0.01, log), measure=timed, blocks=3, iters=4,
                   warmup=1, settle_s=0.1, slowdown=0.0)
    assert t.samples == [0.02, 0.02, 0.02] and t.first_call_s == 0.01
    # Settling: chunks of 5 until 0.1 s (0.05 + 0.08 after 10 calls); then per block 1
    # warm-up and 4 timed calls.
    assert log.count("k") == 10 + 3 * (1 + 4)
    with pytest.raises(ValueError, match="settle_s"):
        run_blocks(lambda b: fn, None, measure=timed, settle_s=-1.0)


def test_bad_arguments_say_what_is_needed():
    for kw in ({"blocks": 0}, {"iters": 0}, {"warmup": -1}):
        with pytest.raises(ValueError, match="need blocks, iters >= 1"):
            run_blocks(lambda b: (lambda: None), None, measure=cpu_measure, **kw)


def test_cpu_measure_times_each_call_in_order():
    order: list[int] = []
    ts = cpu_measure([lambda: order.append(1), lambda: order.append(2)])
    assert order == [1, 2] and len(ts) == 2 and all(t >= 0 for t in ts)


def test_reseated_moves_every_request_to_other_pages_of_the_same_cache():
    paged = build_paged_kv([40, 16, 100], num_kv_heads=2, head_dim=8, page_size=16,
                           spare_pages=4, seed=3)
    pages = paged.cache.shape[0]
    a, b = paged.reseated(1), paged.reseated(2)
    again = paged.reseated(1)
    for p in (a, b):
        assert p.cache is paged.cache  # no new allocation
        assert torch.equal(p.indptr, paged.indptr) and p.lengths == paged.lengths
        ids = p.indices.tolist()
        assert len(ids) == len(paged.indices) and len(set(ids)) == len(ids)
        assert all(0 <= i < pages for i in ids)
    assert torch.equal(a.indices, again.indices)  # the same table in every process
    assert not torch.equal(a.indices, b.indices)
    assert not torch.equal(a.indices, paged.indices)
    # Spare pages come into use: the pool is larger than the requests' pages.
    used = set(a.indices.tolist()) | set(b.indices.tolist())
    assert len(used) > len(paged.indices)
    # Each request's K/V follow its new page table.
    k, v = a.request_kv(2)
    first = int(a.indices[int(a.indptr[2])])
    assert torch.equal(k[:16], paged.cache[first, 0]) and torch.equal(v[:16], paged.cache[first, 1])


def test_paced_calls_leave_a_gap_of_their_own_time_after_each_call():
    # pace 0.5: the gap is half the kernel's time, measured on 3 untimed calls first; every
    # later list (settle, warm-up, timed) is measured with that gap.
    log: list[str] = []
    gaps: list[float] = []
    base = _fake_measure()

    def measure(calls, gap_s=0.0):
        gaps.append(gap_s)
        return base(calls)

    t = run_blocks(lambda b: _Call("k", 2.0, log), None, measure=measure, blocks=2, iters=3,
                   warmup=1, pace=0.5, slowdown=0.0)
    assert gaps == [0.0, 1.0, 1.0, 1.0, 1.0]  # estimate; per block: warm-up, timed
    assert t.gap_s == 1.0 and t.samples == [2.0, 2.0] and t.first_call_s == 2.0
    assert log.count("k") == 3 + 2 * (1 + 3)
    # Unpaced, measure is called as before (no gap argument).
    t = run_blocks(lambda b: _Call("k", 2.0, log), None, measure=_fake_measure(), blocks=1,
                   iters=1, warmup=0, slowdown=0.0)
    assert t.gap_s == 0.0
    with pytest.raises(ValueError, match="pace"):
        run_blocks(lambda b: _Call("k", 2.0, log), None, measure=measure, pace=-1.0)


def test_with_a_clock_settling_goes_on_until_three_readings_agree_then_one_a_block():
    log: list[str] = []
    reads = iter([1700.0, 1800.0, 1980.0, 1965.0, 1980.0, 1980.0, 1980.0, 1.0, 2.0, 3.0])
    t = run_blocks(lambda b: _Call("k", 0.001, log), None, measure=_fake_measure(), blocks=3,
                   iters=2, warmup=0, clock=lambda: next(reads), settle_max_s=60.0,
                   slowdown=0.0)
    assert t.settle_clocks == [1700.0, 1800.0, 1980.0, 1965.0, 1980.0, 1980.0, 1980.0]
    assert t.clocks == [1.0, 2.0, 3.0]
    assert log.count("k") == 7 * 5 + 3 * 2  # settling in chunks of 5, then the blocks


def test_settling_on_a_clock_that_never_steadies_stops_at_its_bound():
    log: list[str] = []
    n = [0]

    def wobbly() -> float:
        n[0] += 1
        return 1980.0 if n[0] % 2 else 1965.0

    t = run_blocks(lambda b: _Call("k", 0.001, log), None, measure=cpu_measure, blocks=1,
                   iters=1, warmup=0, clock=wobbly, settle_max_s=0.05, slowdown=0.0)
    # Bounded by wall time: a few readings, never three equal, then the block and its read.
    assert 1 <= len(t.settle_clocks) and len(set(t.settle_clocks[-3:])) > 1
    assert len(t.clocks) == 1
    # An unreadable clock (None) never counts as steady either.
    t = run_blocks(lambda b: _Call("k", 0.001, log), None, measure=cpu_measure, blocks=1,
                   iters=1, warmup=0, clock=lambda: None, settle_max_s=0.02, slowdown=0.0)
    assert t.settle_clocks and set(t.settle_clocks) == {None} and t.clocks == [None]


def test_sm_clock_reads_nvml_by_the_gpus_uuid_and_none_when_it_cannot(monkeypatch):
    import types

    from suitelib import hardware

    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda i: types.SimpleNamespace(uuid="212313b9-8698"))
    asked: list[str] = []
    state = {"fail": False}

    def clock(h, kind):
        if state["fail"]:
            raise RuntimeError("gone")
        return 1980

    nvml = types.SimpleNamespace(
        nvmlInit=lambda: None, NVML_CLOCK_SM=0,
        nvmlDeviceGetHandleByUUID=lambda u: asked.append(u) or "h",
        nvmlDeviceGetClockInfo=clock)
    read = hardware.sm_clock(0, nvml=nvml)
    assert asked == ["GPU-212313b9-8698"] and read() == 1980.0
    state["fail"] = True
    assert read() is None
    broken = types.SimpleNamespace(nvmlInit=lambda: (_ for _ in ()).throw(RuntimeError("no")))
    assert hardware.sm_clock(0, nvml=broken) is None
