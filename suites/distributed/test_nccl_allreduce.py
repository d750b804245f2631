"""NCCL all-reduce over every visible GPU (one process per GPU): exact sums and bus
bandwidth per message size, against the 2x H200 figures of GPU-NOTES.md."""

from __future__ import annotations

import pytest

from ci_register import register_cuda_ci
from suitelib import hardware as hw
from suitelib.dist import allreduce_bench, size_label

# base-b-2gpu's est_time is what `nox -s est-time -- --write` proposed from history.db (the
# p90 of the file's passing runs on 2 H200s, rounded up to 5 s); stage-c-4gpu has no
# measured run yet.
register_cuda_ci(est_time=10, suite="base-b-2gpu")
register_cuda_ci(est_time=90, suite="stage-c-4gpu")

pytestmark = [hw.needs_cuda, hw.needs_gpus(2)]

SIZES = [1 << 20, 16 << 20, 256 << 20, 1 << 30]
# Bus bandwidth measured on 2x H200 over NVLink (NV18), bf16, median of 20 (GPU-NOTES).
# A ring over more GPUs of an NVSwitch host carries at least this per link. The floor is
# a quarter of it: only a topology check that catches a fallback off NVLink (PCIe or host
# memory run at a tenth of these). Regressions are the history gate's job: a fixed floor
# at half sat inside the noise of the latency-bound 1 MiB case (11.6-17.7 GB/s over six
# runs on three H200 hosts, 2026-11-30).
H200_BUSBW_GB_S = {1 << 20: 28.0, 16 << 20: 175.0, 256 << 20: 292.0, 1 << 30: 327.0}
FLOOR_FRACTION = 0.25


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    world = hw.device_count()
    out = allreduce_bench(world, SIZES, tmp_path_factory.mktemp("allreduce"), samples=5, iters=10)
    return {r.size_bytes: r for r in out}


@pytest.mark.parametrize("size", SIZES, ids=size_label)
def test_allreduce_exact_sum(results, size: int) -> None:
    r = results[size]
    assert r.world_size == hw.device_count()
    assert r.exact, f"{size_label(size)} all-reduce over {r.world_size} GPUs: {r.first_mismatch}"


@pytest.mark.parametrize("size", SIZES, ids=size_label)
def test_allreduce_bus_bandwidth(results, size: int, metrics, record_property) -> None:
    r = results[size]
    busbw = [b / 1e9 for b in r.busbw]
    key = f"nccl/allreduce/bf16/{r.world_size}gpu/{size_label(size)}"
    metrics.record(f"{key}/busbw", busbw, unit="GB/s", better="higher")
    metrics.record(f"{key}/latency", r.samples_s, unit="s", better="lower")
    med = sorted(busbw)[len(busbw) // 2]
    record_property(f"{key}/median_busbw_GB_s", med)
    if hw.is_h200():
        floor = FLOOR_FRACTION * H200_BUSBW_GB_S[size]
        assert med >= floor, (
            f"{key}: {med:.0f} GB/s, under a quarter of the {H200_BUSBW_GB_S[size]} on H200: "
            "is NCCL off NVLink (check `nvidia-smi topo -m` and NCCL_P2P_DISABLE)?"
        )
