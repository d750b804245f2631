"""SSE parsing cost: serving/sse.py against httpx-sse, many events arriving in one read.

A fast server (or a slow client) hands the benchmark client thousands of events in one
socket read. Each parser gets the same bytes of N OpenAI-style ``data:`` events: in one
read, and in 1400-byte reads (one TCP segment each); the client stamps every event with
the time the read that finished it returned, so an event's arrival time is kept whatever
the read size. Figures are CPU seconds (``time.process_time``), the best of ``--repeat``.

- ``serving.sse``      the parser the benchmark client uses (bytes in, events out)
- ``httpx-sse``        httpx_sse's SSELineDecoder + SSEDecoder over the decoded text,
                       what ``EventSource.iter_sse`` runs per read
- ``before (quadratic)`` the parser as it was before this benchmark, kept here verbatim
                       to show what it cost (only up to --old-max events: it is quadratic)

    python benchmarks/bench_sse.py                      # 4k, 16k, 64k events
    python benchmarks/bench_sse.py --events 16384 65536 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from serving.sse import SSEParser, _event_data  # noqa: E402


class QuadraticParser:
    """serving/sse.py's SSEParser before the linear rewrite (commit 7d814b7), verbatim."""

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> list[str]:
        self._buf += data
        events: list[str] = []
        while True:
            buf = self._buf.replace(b"\r\n", b"\n")
            if buf.endswith(b"\r"):
                head, tail = buf[:-1].replace(b"\r", b"\n"), b"\r"
            else:
                head, tail = buf.replace(b"\r", b"\n"), b""
            end = head.find(b"\n\n")
            if end < 0:
                self._buf = head + tail
                return events
            block, self._buf = head[:end], head[end + 2 :] + tail
            payload = _event_data(block.decode("utf-8", errors="replace"))
            if payload is not None:
                events.append(payload)


def stream(n: int) -> bytes:
    chunk = {"id": "cmpl-1", "object": "text_completion", "choices": [
        {"index": 0, "text": " token", "finish_reason": None}]}
    one = b"data: " + json.dumps(chunk).encode() + b"\n\n"
    return one * n + b"data: [DONE]\n\n"


def run_ours(reads: list[bytes], parser_cls=SSEParser) -> list[tuple[float, str]]:
    p, out = parser_cls(), []
    for r in reads:
        events = p.feed(r)
        now = time.perf_counter()  # every event of this read arrived when the read returned
        out.extend((now, e) for e in events)
    return out


def run_httpx_sse(reads: list[bytes]) -> list[tuple[float, str]]:
    import codecs

    from httpx_sse._decoders import SSEDecoder, SSELineDecoder

    text = codecs.getincrementaldecoder("utf-8")(errors="replace")
    lines, sse, out = SSELineDecoder(), SSEDecoder(), []
    for r in reads:
        events = []
        for line in lines.decode(text.decode(r)):
            ev = sse.decode(line.rstrip("\n"))
            if ev is not None:
                events.append(ev.data)
        now = time.perf_counter()
        out.extend((now, e) for e in events)
    return out


def best(fn, reads: list[bytes], repeat: int) -> tuple[float, int]:
    times, n = [], 0
    for _ in range(repeat):
        t = time.process_time()
        n = len(fn(reads))
        times.append(time.process_time() - t)
    return min(times), n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, nargs="+", default=[4096, 16384, 65536])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--old-max", type=int, default=16384,
                    help="run the quadratic parser only up to this many events")
    args = ap.parse_args(argv)
    import httpx_sse

    print(f"python {platform.python_version()}, httpx-sse {httpx_sse.__version__ if hasattr(httpx_sse, '__version__') else '?'}, "
          f"{platform.machine()}; CPU s, best of {args.repeat}")
    print()
    print("| events | reads | serving.sse | httpx-sse | ratio | before (quadratic) |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    worst = 0.0
    for n in args.events:
        raw = stream(n)
        for label, reads in (("one", [raw]),
                             ("1400 B", [raw[i:i + 1400] for i in range(0, len(raw), 1400)])):
            ours, got = best(run_ours, reads, args.repeat)
            theirs, want = best(run_httpx_sse, reads, args.repeat)
            if got != want or got != n + 1:
                raise SystemExit(f"event counts differ: serving.sse {got}, httpx-sse {want}, sent {n + 1}")
            old = "not run"
            if n <= args.old_max and label == "one":
                old_s, old_n = best(lambda r: run_ours(r, QuadraticParser), reads, 1)
                assert old_n == got
                old = f"{old_s:.3f} s"
            worst = max(worst, ours / theirs)
            print(f"| {n} | {label} | {ours:.4f} s | {theirs:.4f} s | {ours / theirs:.2f}x | {old} |")
    print()
    print(f"worst serving.sse / httpx-sse: {worst:.2f}x (target <= 2x)")
    return 0 if worst <= 2.0 else 1


if __name__ == "__main__":
    sys.exit(main())
