"""suitelib.dist with gloo on CPU: the spawn, exact-sum check and bandwidth arithmetic."""

from __future__ import annotations

import pytest

from suitelib.dist import allreduce_bench, bus_bandwidth, size_label


def test_bus_bandwidth_and_labels() -> None:
    assert bus_bandwidth(1 << 30, 2, 1.0) == pytest.approx(float(1 << 30))
    assert bus_bandwidth(1000, 4, 1.0) == pytest.approx(1500.0)
    assert [size_label(s) for s in (1 << 20, 1 << 30, 3 << 10, 6)] == ["1MiB", "1GiB", "3KiB", "6B"]


def test_gloo_allreduce_sums_exactly_and_detects_a_wrong_rank(tmp_path) -> None:
    ok = allreduce_bench(
        2,
        [2048, 4 << 10],
        tmp_path / "ok",
        backend="gloo",
        samples=2,
        iters=2,
        warmup=1,
        timeout_s=120,
    )
    assert [r.exact for r in ok] == [True, True]
    assert all(len(r.samples_s) == 2 and min(r.busbw) > 0 for r in ok)
    bad = allreduce_bench(
        2,
        [2048],
        tmp_path / "bad",
        backend="gloo",
        samples=1,
        iters=1,
        warmup=0,
        timeout_s=120,
        perturb_rank=1,
    )
    assert not bad[0].exact
    assert bad[0].first_mismatch.startswith("rank 0: element 1023")


def test_bad_sizes_are_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match="even sizes"):
        allreduce_bench(2, [3], tmp_path, backend="gloo")
