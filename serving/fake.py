"""A tiny OpenAI-compatible fake server (stdlib http.server) for tests.

It streams ``tokens`` chunks ``interval_s`` apart, each stamped with the server's
``time.perf_counter()`` at send time, so tests can check a client's timing against
the server's. ``python -m serving.fake --port N`` runs it as a process (lifecycle
tests); ``FakeServer`` runs it in a thread.
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeOptions", "FakeServer", "main"]


@dataclass
class FakeOptions:
    tokens: int = 8
    interval_s: float = 0.0
    healthy_after_s: float = 0.0
    fail_status: int | None = None  # answer every generation request with this status
    error_after: int | None = None  # send an in-stream error event after this many tokens
    text: str = " 7"


def _handler(opts: FakeOptions, born: float) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            # Like uvicorn: no Nagle, or small event writes wait for a delayed ACK (40 ms).
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _json(self, status: int, obj: Any) -> None:
            body = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/health":
                ok = time.monotonic() - born >= opts.healthy_after_s
                self._json(200 if ok else 503, {})
            elif self.path == "/v1/models":
                self._json(200, {"data": [{"id": "fake"}]})
            else:
                self._json(404, {"error": "not found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            req = json.loads(self.rfile.read(length) or b"{}")
            if self.path == "/tokenize":
                text = json.dumps(req.get("messages") or req.get("prompt"))
                self._json(200, {"tokens": list(text.encode())})
                return
            if self.path not in ("/v1/completions", "/v1/chat/completions"):
                self._json(404, {"error": "not found"})
                return
            if opts.fail_status is not None:
                self._json(opts.fail_status, {"error": {"message": "injected failure"}})
                return
            chat = self.path.endswith("chat/completions")
            n = min(int(req.get("max_tokens", opts.tokens)), opts.tokens)
            if not req.get("stream"):
                choice = (
                    {"message": {"content": opts.text * n}} if chat else {"text": opts.text * n}
                )
                self._json(200, {"choices": [choice], "usage": {"completion_tokens": n}})
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(n):
                if opts.error_after is not None and i == opts.error_after:
                    self._event({"error": {"message": "injected stream error"}})
                    break
                if i:
                    time.sleep(opts.interval_s)
                choice = {"delta": {"content": opts.text}} if chat else {"text": opts.text}
                self._event({"choices": [choice], "server_time": time.perf_counter()})
            else:
                self._event({"choices": [], "usage": {"completion_tokens": n}})
            self._raw(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def _event(self, obj: Any) -> None:
            self._raw(b"data: " + json.dumps(obj).encode() + b"\n\n")

        def _raw(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that hang up mid-stream (timeout tests) are expected


class FakeServer:
    """The fake in a background thread on 127.0.0.1; use as a context manager."""

    def __init__(self, opts: FakeOptions | None = None, port: int = 0) -> None:
        self.opts = opts or FakeOptions()
        self.httpd = _QuietServer(("127.0.0.1", port), _handler(self.opts, time.monotonic()))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> FakeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--healthy-after", type=float, default=0.0)
    parser.add_argument(
        "--exit-after",
        type=float,
        default=None,
        help="exit with code 3 after this many seconds (a crashing server)",
    )
    parser.add_argument(
        "--spawn-child",
        action="store_true",
        help="start a sleeping child process in the same group (a worker)",
    )
    args = parser.parse_args(argv)
    print(f"fake server on port {args.port}", flush=True)
    if args.spawn_child:
        import subprocess
        import sys

        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        print(f"child pid {child.pid}", flush=True)
    server = FakeServer(FakeOptions(healthy_after_s=args.healthy_after), port=args.port)
    with server:
        if args.exit_after is not None:
            time.sleep(args.exit_after)
            print("fake server crashing on purpose", flush=True)
            return 3
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    raise SystemExit(main())
