"""Streaming benchmark client for OpenAI-compatible servers (requests + SSE).

Each request is timed from just before it is sent: TTFT to the first chunk with text,
inter-token latencies between successive text chunks, end-to-end to the end of the
stream. The body is read with ``iter_content(chunk_size=None)``, which hands over each
network read as it arrives; ``iter_lines`` was seen delivering a whole stream at once
(SERVING-NOTES), which inflates TTFT.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

import requests

from serving.deadline import DEFAULT_DEADLINE_S, attach, deadline, fetch
from serving.sse import DONE, SSEParser, parse_openai_chunk
from serving.stats import summarize

__all__ = [
    "Endpoint",
    "RequestResult",
    "LoadResult",
    "new_session",
    "make_prompts",
    "build_payload",
    "stream_request",
    "run_load",
    "complete",
]

Endpoint = Literal["completions", "chat"]

_PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}

_WORDS = (
    "the river model server token batch queue cache latency kernel prompt answer "
    "number seven garden window engine yellow careful quietly measure history "
    "stream request compile memory bridge orange mountain eleven quick paper"
).split()


@dataclass
class RequestResult:
    """Timing of one streamed request; ``error`` is set when it did not complete."""

    ttft_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    e2e_s: float | None = None
    output_tokens: int = 0
    text: str = ""
    error: str | None = None
    # Monotonic arrival time of each text chunk, for checks against server timestamps.
    arrivals: list[float] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class LoadResult:
    """All requests of one concurrency level, with their wall time."""

    concurrency: int
    results: list[RequestResult]
    wall_s: float

    @property
    def completed(self) -> list[RequestResult]:
        return [r for r in self.results if r.ok]

    @property
    def errors(self) -> list[str]:
        return [r.error for r in self.results if r.error is not None]

    @property
    def ttft_s(self) -> list[float]:
        return [r.ttft_s for r in self.completed if r.ttft_s is not None]

    @property
    def itl_s(self) -> list[float]:
        return [x for r in self.completed for x in r.itl_s]

    @property
    def e2e_s(self) -> list[float]:
        return [r.e2e_s for r in self.completed if r.e2e_s is not None]

    @property
    def output_tokens(self) -> int:
        return sum(r.output_tokens for r in self.completed)

    @property
    def request_throughput(self) -> float:
        return len(self.completed) / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def output_tokens_per_s(self) -> float:
        return self.output_tokens / self.wall_s if self.wall_s > 0 else 0.0

    def report(self) -> dict[str, Any]:
        """Plain-data summary (medians, p90/p99 in seconds) for logs and reports."""
        return {
            "concurrency": self.concurrency,
            "requests": len(self.results),
            "errors": len(self.errors),
            "error_samples": self.errors[:3],
            "wall_s": self.wall_s,
            "request_throughput": self.request_throughput,
            "output_tokens_per_s": self.output_tokens_per_s,
            "ttft_s": summarize(self.ttft_s),
            "itl_s": summarize(self.itl_s),
            "e2e_s": summarize(self.e2e_s),
        }


def new_session() -> requests.Session:
    """A session that ignores proxy and netrc settings from the environment: benchmark
    traffic goes straight to the server (loopback here), and the per-request proxy
    lookup (about 1 ms of CPU) stays out of the timings. Its requests obey an enclosing
    `serving.deadline.deadline`."""
    session = requests.Session()
    session.trust_env = False
    return attach(session)


def make_prompts(n: int, *, seed: int = 0, words: int = 24) -> list[str]:
    """``n`` deterministic prompts of ``words`` words each: same seed, same prompt set."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(_WORDS) for _ in range(words)) for _ in range(n)]


def build_payload(
    endpoint: Endpoint,
    model: str,
    prompt: str,
    *,
    max_tokens: int,
    seed: int,
    stream: bool = True,
    ignore_eos: bool = True,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Request body; greedy, seeded, and (vLLM/SGLang ``ignore_eos``) fixed output length."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "seed": seed,
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    if ignore_eos:
        body["ignore_eos"] = True
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    body.update(extra or {})
    return body


def stream_request(
    session: requests.Session,
    base_url: str,
    endpoint: Endpoint,
    payload: dict[str, Any],
    *,
    timeout_s: float = 60.0,
    connect_timeout_s: float = 5.0,
) -> RequestResult:
    """Send one streaming request and time it. Never raises for server or network errors:
    they come back as ``RequestResult.error`` so the caller counts them. The whole request,
    headers included, ends within ``timeout_s`` (`serving.deadline`)."""
    result = RequestResult()
    url = base_url.rstrip("/") + _PATHS[endpoint]
    attach(session)
    # Encode and prepare before the clock starts, as a raw reader builds its bytes first.
    prepared = session.prepare_request(requests.Request("POST", url, json=payload))
    start = time.perf_counter()  # before the watchdog's clock: it fires after deadline_at
    try:
        with deadline(timeout_s):
            return _stream(session, prepared, result, start, timeout_s, connect_timeout_s)
    except (requests.RequestException, ValueError) as exc:
        # A read timeout mid-stream surfaces as a ConnectionError from iter_content.
        timed_out = isinstance(exc, requests.Timeout) or "timed out" in str(exc)
        result.error = f"{'timeout' if timed_out else type(exc).__name__}: {exc}"
        return result


def _stream(
    session: requests.Session,
    prepared: requests.PreparedRequest,
    result: RequestResult,
    start: float,
    timeout_s: float,
    connect_timeout_s: float,
) -> RequestResult:
    deadline_at = start + timeout_s
    last: float | None = None
    usage_tokens: int | None = None
    chunks = 0
    texts: list[str] = []
    parser = SSEParser()
    with session.send(prepared, stream=True, timeout=(connect_timeout_s, timeout_s)) as resp:
        if resp.status_code != 200:
            head = next(resp.iter_content(chunk_size=200), b"")[:200]  # never the whole body
            result.error = f"HTTP {resp.status_code}: {head.decode('utf-8', 'replace')}"
            return result
        done = False
        for data in resp.iter_content(chunk_size=None):
            now = time.perf_counter()
            for event in parser.feed(data):
                if event == DONE:
                    done = True
                    continue
                chunk = parse_openai_chunk(event)
                if chunk.error is not None:
                    result.error = f"stream error: {chunk.error}"
                    return result
                if chunk.completion_tokens is not None:
                    usage_tokens = chunk.completion_tokens
                if chunk.text:
                    chunks += 1
                    texts.append(chunk.text)
                    result.arrivals.append(now)
                    if last is None:
                        result.ttft_s = now - start
                    else:
                        result.itl_s.append(now - last)
                    last = now
            if now > deadline_at:
                result.error = f"timeout: stream still open after {timeout_s:g} s"
                return result
        if not done:
            cut = time.perf_counter() > deadline_at  # the deadline's watchdog closed it
            result.error = (f"timeout: stream still open after {timeout_s:g} s" if cut
                            else "stream ended without [DONE]")
            return result
    result.e2e_s = time.perf_counter() - start
    result.text = "".join(texts)
    result.output_tokens = usage_tokens if usage_tokens is not None else chunks
    if chunks == 0:
        result.error = "stream carried no text"
    return result


def run_load(
    base_url: str,
    model: str,
    *,
    concurrency: int,
    num_requests: int,
    max_tokens: int,
    endpoint: Endpoint = "completions",
    prompts: Sequence[str] | None = None,
    seed: int = 0,
    timeout_s: float = 60.0,
    extra: dict[str, Any] | None = None,
    request_fn: Callable[[str, Endpoint, dict[str, Any], float], RequestResult] | None = None,
) -> LoadResult:
    """Run ``num_requests`` streamed requests, at most ``concurrency`` in flight.

    Prompts are taken round-robin from ``prompts`` (default: ``make_prompts`` with
    ``seed``); request ``i`` uses seed ``seed + i``, so a rerun sends the same requests.
    ``request_fn`` swaps the reader (the overhead benchmark passes a raw-socket one).
    """
    if concurrency < 1 or num_requests < 1:
        raise ValueError("concurrency and num_requests must be at least 1")
    prompts = list(prompts) if prompts else make_prompts(max(num_requests, 1), seed=seed)
    local = threading.local()

    def one(i: int) -> RequestResult:
        payload = build_payload(
            endpoint,
            model,
            prompts[i % len(prompts)],
            max_tokens=max_tokens,
            seed=seed + i,
            extra=extra,
        )
        if request_fn is not None:
            return request_fn(base_url, endpoint, payload, timeout_s)
        if not hasattr(local, "session"):
            local.session = new_session()
        return stream_request(local.session, base_url, endpoint, payload, timeout_s=timeout_s)

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        results = list(pool.map(one, range(num_requests)))
    return LoadResult(concurrency, results, time.perf_counter() - start)


def complete(
    session: requests.Session,
    base_url: str,
    model: str,
    prompt: str,
    *,
    max_tokens: int,
    stop: Sequence[str] = (),
    seed: int = 0,
    timeout_s: float = 60.0,
    deadline_s: float = DEFAULT_DEADLINE_S,
) -> str:
    """One greedy, non-streamed /v1/completions call; raises on HTTP or network errors.
    ``timeout_s`` bounds each socket operation, ``deadline_s`` the whole call
    (`serving.deadline.DeadlineExceeded`, a `requests.Timeout`)."""
    body = build_payload(
        "completions",
        model,
        prompt,
        max_tokens=max_tokens,
        seed=seed,
        stream=False,
        ignore_eos=False,
        extra={"stop": list(stop)} if stop else None,
    )
    resp = fetch(session, "POST", base_url.rstrip("/") + "/v1/completions", json=body,
                 timeout=timeout_s, deadline_s=deadline_s)
    resp.raise_for_status()
    return str(resp.json()["choices"][0]["text"])
