"""serving.deadline: every request of the serving client ends by a total deadline, against
a real local socket server that trickles its answer one byte at a time."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import requests

from serving.client import build_payload, complete, new_session, stream_request
from serving.deadline import DeadlineExceeded, ResponseTooLarge, fetch
from serving.lifecycle import Server
from serving.multiturn import tokenize_chat

BYTE_EVERY_S = 0.05  # far under any per-operation timeout below
SERVER_GIVES_UP_S = 30.0  # the old client hung this long, then the test failed on time
# A call with a 0.5 s deadline must end well before the server gives up (what a call
# without one waits for). Not 0.5 s plus a little: on a loaded 2-core machine the
# threads that start, cut and join the request wait their turn for seconds.
ENDS_BEFORE_S = SERVER_GIVES_UP_S / 2


def _read_request(conn: socket.socket) -> None:
    """Read one whole request: the head, then the body its Content-Length declares.
    A socket closed with request bytes unread sends a reset, not a FIN, and the client
    may then lose the answer already sent (ConnectionResetError); requests sends the
    head and the body in two writes, so one recv gets both only when the server thread
    happens to run late (an idle machine), and the answer was lost under load."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return
        body += chunk


def _serve(conn: socket.socket, part: str, stop: threading.Event) -> None:
    with conn:
        conn.settimeout(SERVER_GIVES_UP_S)
        try:
            _read_request(conn)
            if part == "headers":
                head, trickle = b"HTTP/1.1 200 OK\r\n", b"X-Slow: " + b"a" * 100000
            elif part == "big":
                body = b'{"pad": "' + b"x" * 5000 + b'"}'
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n" % len(body) + body)
                return
            else:
                head, trickle = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 b"Content-Length: 100000\r\n\r\n{"), b" " * 100000
            conn.sendall(head)
            end = time.monotonic() + SERVER_GIVES_UP_S
            for i in range(len(trickle)):
                if stop.is_set() or time.monotonic() > end:
                    return
                conn.sendall(trickle[i:i + 1])
                time.sleep(BYTE_EVERY_S)
        except OSError:
            return  # the client hung up: what a deadline does


@contextmanager
def trickler(part: str) -> Iterator[str]:
    """A server on a loopback port that answers slowly: ``part`` is "headers" (one
    header line, a byte at a time), "body" (a declared body, a byte at a time) or "big"."""
    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    threads: list[threading.Thread] = []

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            t = threading.Thread(target=_serve, args=(conn, part, stop), daemon=True)
            t.start()
            threads.append(t)

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        acceptor.join(5)
        listener.close()
        for t in threads:
            t.join(5)


@pytest.mark.parametrize("part", ["headers", "body"])
def test_complete_ends_by_its_deadline(part):
    with trickler(part) as url, new_session() as session:
        start = time.monotonic()
        with pytest.raises(requests.Timeout, match="within the 0.5 s deadline"):
            complete(session, url, "m", "p", max_tokens=4, timeout_s=5.0, deadline_s=0.5)
        assert time.monotonic() - start < ENDS_BEFORE_S


def test_a_plain_session_gets_the_deadline_too():
    with trickler("body") as url, requests.Session() as session:
        start = time.monotonic()
        with pytest.raises(DeadlineExceeded):
            tokenize_chat(session, url, "m", [{"role": "user", "content": "hi"}],
                          timeout_s=5.0, deadline_s=0.5)
        assert time.monotonic() - start < ENDS_BEFORE_S


@pytest.mark.parametrize("part", ["headers", "body"])
def test_health_check_of_a_trickling_server_is_not_healthy_and_ends(part):
    with trickler(part) as url:
        start = time.monotonic()
        assert Server(url).healthy(timeout_s=0.5) is False
        assert time.monotonic() - start < ENDS_BEFORE_S


def test_streaming_request_ends_by_its_timeout_when_headers_trickle():
    payload = build_payload("completions", "m", "p", max_tokens=4, seed=0)
    with trickler("headers") as url, new_session() as session:
        start = time.monotonic()
        r = stream_request(session, url, "completions", payload, timeout_s=0.5)
        assert time.monotonic() - start < ENDS_BEFORE_S
    assert r.error is not None and r.error.startswith("timeout"), r.error


def test_body_over_the_bound_is_an_error_and_a_fast_answer_passes():
    with trickler("big") as url, requests.Session() as session:
        with pytest.raises(ResponseTooLarge, match="over 1000 bytes"):
            fetch(session, "GET", url, timeout=5.0, max_bytes=1000)
        resp = fetch(session, "GET", url, timeout=5.0, deadline_s=5.0)
    assert len(resp.json()["pad"]) == 5000


def test_a_stream_of_another_shape_is_a_counted_error():
    # run_load counted a malformed chunk only when it raised ValueError; a list where an
    # object belongs raised AttributeError out of stream_request.
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            _read_request(conn)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Connection: close\r\n\r\ndata: {\"choices\": [\"x\"]}\n\n")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    payload = build_payload("completions", "m", "p", max_tokens=4, seed=0)
    with new_session() as session:
        r = stream_request(session, f"http://127.0.0.1:{listener.getsockname()[1]}",
                           "completions", payload, timeout_s=5.0)
    t.join(5)
    listener.close()
    assert r.error is not None and "unexpected shape" in r.error, r.error
