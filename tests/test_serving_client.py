from __future__ import annotations

import json

import requests

from serving.client import build_payload, make_prompts, new_session, run_load, stream_request
from serving.fake import FakeOptions, FakeServer
from serving.stats import median


def test_prompts_are_seeded() -> None:
    assert make_prompts(4, seed=3) == make_prompts(4, seed=3)
    assert make_prompts(4, seed=3) != make_prompts(4, seed=4)


def test_payload_shapes() -> None:
    chat = build_payload("chat", "m", "hi", max_tokens=4, seed=1)
    assert chat["messages"] == [{"role": "user", "content": "hi"}] and "prompt" not in chat
    comp = build_payload("completions", "m", "hi", max_tokens=4, seed=1, extra={"top_k": 1})
    assert (comp["prompt"], comp["stream"], comp["ignore_eos"], comp["top_k"]) == (
        "hi",
        True,
        True,
        1,
    )
    assert comp["stream_options"] == {"include_usage": True}


def test_timing_tracks_server_send_times() -> None:
    """Each chunk is seen when the server sends it, not when the stream ends: a
    line-buffered reader that delivers all events at once fails this."""
    opts = FakeOptions(tokens=6, interval_s=0.05)
    with FakeServer(opts) as fake, requests.Session() as s:
        r = stream_request(
            s, fake.url, "completions", build_payload("completions", "m", "p", max_tokens=6, seed=0)
        )
    assert r.ok, r.error
    assert r.output_tokens == 6 and r.text == " 7" * 6
    assert len(r.itl_s) == 5
    assert all(0.02 < x < 0.3 for x in r.itl_s), r.itl_s
    assert r.ttft_s is not None and r.ttft_s < 0.1  # a buffered read: >= 0.25 s
    assert r.e2e_s is not None and r.e2e_s >= 0.25


def test_client_arrivals_match_server_timestamps() -> None:
    # Same process, same clock: the lag from send to client arrival stays small.
    stamps: list[float] = []
    opts = FakeOptions(tokens=5, interval_s=0.08)
    with FakeServer(opts) as fake:
        with requests.post(
            fake.url + "/v1/completions",
            json={"stream": True, "max_tokens": 5},
            stream=True,
            timeout=5,
        ) as resp:
            raw = b"".join(resp.iter_content(chunk_size=None))
        for line in raw.split(b"\n"):
            if line.startswith(b"data: {"):
                obj = json.loads(line[6:])
                if "server_time" in obj:
                    stamps.append(obj["server_time"])
        with requests.Session() as s:
            r = stream_request(
                s, fake.url, "chat", build_payload("chat", "m", "p", max_tokens=5, seed=0)
            )
    assert r.ok and len(r.arrivals) == 5 and len(stamps) == 5
    gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    client_gaps = r.itl_s
    for g, c in zip(gaps, client_gaps, strict=True):
        assert abs(g - c) < 0.04, (gaps, client_gaps)  # buffering: ~0.08


def test_http_errors_are_counted_not_dropped() -> None:
    with FakeServer(FakeOptions(fail_status=503)) as fake:
        load = run_load(fake.url, "m", concurrency=3, num_requests=7, max_tokens=4)
    assert len(load.results) == 7 and len(load.errors) == 7
    assert all(e.startswith("HTTP 503") for e in load.errors)
    assert load.report()["errors"] == 7 and load.request_throughput == 0.0


def test_in_stream_error_and_refused_connection_are_errors() -> None:
    with FakeServer(FakeOptions(tokens=4, error_after=2)) as fake, requests.Session() as s:
        r = stream_request(
            s, fake.url, "completions", build_payload("completions", "m", "p", max_tokens=4, seed=0)
        )
        port = fake.httpd.server_address[1]
    assert r.error == "stream error: injected stream error"
    with requests.Session() as s:
        r = stream_request(s, f"http://127.0.0.1:{port}", "completions", {}, timeout_s=2)
    assert r.error is not None and "ConnectionError" in r.error


def test_read_timeout_is_reported() -> None:
    with FakeServer(FakeOptions(tokens=3, interval_s=1.0)) as fake, requests.Session() as s:
        r = stream_request(
            s,
            fake.url,
            "completions",
            build_payload("completions", "m", "p", max_tokens=3, seed=0),
            timeout_s=0.3,
        )
    assert r.error is not None and r.error.startswith("timeout:"), r.error


def test_run_load_summary() -> None:
    with FakeServer(FakeOptions(tokens=4, interval_s=0.01)) as fake:
        load = run_load(
            fake.url, "m", concurrency=4, num_requests=12, max_tokens=4, endpoint="chat"
        )
    assert load.errors == [] and len(load.completed) == 12
    assert load.output_tokens == 48
    assert len(load.ttft_s) == 12 and len(load.itl_s) == 36 and len(load.e2e_s) == 12
    rep = load.report()
    assert rep["ttft_s"]["count"] == 12 and rep["output_tokens_per_s"] > 0


def test_kept_alive_session_adds_no_delayed_ack_stall() -> None:
    # A reused connection once showed 40 ms TTFTs (Nagle against delayed ACK); the
    # client must stay fast on its second and later requests, as run_load reuses them.
    payload = build_payload("completions", "m", "p", max_tokens=2, seed=0)
    with FakeServer(FakeOptions(tokens=2)) as fake, new_session() as s:
        ttfts = [stream_request(s, fake.url, "completions", payload).ttft_s for _ in range(10)]
    assert median([t for t in ttfts if t is not None]) < 0.02, ttfts  # a stall: >= 0.04


def test_sessions_ignore_proxy_environment(monkeypatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # would swallow the request
    with FakeServer() as fake, new_session() as s:
        r = stream_request(
            s, fake.url, "completions", build_payload("completions", "m", "p", max_tokens=2, seed=0)
        )
    assert r.ok, r.error
