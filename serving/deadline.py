"""A total wall-clock deadline for a request made with requests.

requests' ``timeout`` bounds each socket operation, not the request: a server that sends
one byte a second (of its headers or of its body) never trips a 30 s read timeout, and
holds the request forever. Here a request runs inside ``deadline(seconds)``: when its
connection starts waiting for the response, the socket is handed to one watchdog thread,
which shuts it down once the deadline passes. That wakes the blocked read, and the call
raises `DeadlineExceeded` (a `requests.Timeout`) naming the deadline.

`fetch` is a non-streamed request under a deadline with a bounded body; `attach` mounts
the adapter that hands sockets over on a session (`serving.client.new_session` does).
Nothing starts at import: the watchdog thread starts with the first armed request.
"""

from __future__ import annotations

import heapq
import itertools
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

__all__ = ["DEFAULT_DEADLINE_S", "MAX_BODY_BYTES", "DeadlineAdapter", "DeadlineExceeded",
           "ResponseTooLarge", "attach", "deadline", "fetch"]

# A non-streamed completion of a few hundred tokens on a 2-core CPU server takes tens of
# seconds; ten times that is a hung server, not a slow one.
DEFAULT_DEADLINE_S = 300.0
# An OpenAI-style JSON answer is kilobytes; a tokenized conversation well under a MB.
MAX_BODY_BYTES = 16 << 20


class DeadlineExceeded(requests.Timeout):
    """The request ran past its total deadline."""


class ResponseTooLarge(requests.RequestException):
    """The response body is over the size bound."""


class _Watchdog:
    """One daemon thread that shuts down the sockets of requests past their deadline."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, socket.socket]] = []
        self._live: set[int] = set()
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, when: float, sock: socket.socket) -> int:
        with self._cond:
            token = next(self._ids)
            heapq.heappush(self._heap, (when, token, sock))
            self._live.add(token)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="http-deadline", daemon=True)
                self._thread.start()
            self._cond.notify()
            return token

    def disarm(self, token: int) -> None:
        with self._cond:
            self._live.discard(token)

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._heap and self._heap[0][1] not in self._live:
                    heapq.heappop(self._heap)  # finished in time
                if not self._heap:
                    self._cond.wait()
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                _, token, sock = heapq.heappop(self._heap)
                self._live.discard(token)
                try:
                    sock.shutdown(socket.SHUT_RDWR)  # wakes a recv blocked in another thread
                except OSError:
                    pass  # already closed


_WATCHDOG = _Watchdog()
_local = threading.local()


def _arm(sock: socket.socket | None) -> None:
    when = getattr(_local, "when", None)
    if when is not None and sock is not None:
        _local.tokens.append(_WATCHDOG.arm(when, sock))


class _Connection(HTTPConnection):
    def getresponse(self, *args: Any, **kwargs: Any) -> Any:
        _arm(self.sock)
        return super().getresponse(*args, **kwargs)


class _HTTPSConnection(HTTPSConnection):
    def getresponse(self, *args: Any, **kwargs: Any) -> Any:
        _arm(self.sock)
        return super().getresponse(*args, **kwargs)


class _Pool(HTTPConnectionPool):
    ConnectionCls = _Connection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


class DeadlineAdapter(HTTPAdapter):
    """An HTTPAdapter whose connections obey an enclosing `deadline`."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _Pool, "https": _HTTPSPool}


def attach(session: requests.Session) -> requests.Session:
    """Mount `DeadlineAdapter` for http and https on ``session`` (unless it is there)."""
    for prefix in ("http://", "https://"):
        if not isinstance(session.adapters.get(prefix), DeadlineAdapter):
            session.mount(prefix, DeadlineAdapter())
    return session


@contextmanager
def deadline(seconds: float) -> Iterator[float]:
    """Requests of this thread's `attach`-ed sessions inside the block end by ``seconds``
    from now; one that does not raises `DeadlineExceeded`. Yields the deadline on the
    `time.monotonic` clock (a body cut short without an error is checked against it)."""
    if not seconds > 0:
        raise ValueError(f"deadline must be > 0 seconds, got {seconds!r}")
    outer = getattr(_local, "when", None), getattr(_local, "tokens", None)
    when = time.monotonic() + seconds
    _local.when = when if outer[0] is None else min(when, outer[0])
    _local.tokens = []
    try:
        yield _local.when
    except (requests.RequestException, OSError) as exc:
        if time.monotonic() >= _local.when and not isinstance(exc, DeadlineExceeded):
            raise DeadlineExceeded(f"no complete answer within the {seconds:g} s deadline "
                                   f"({type(exc).__name__})") from exc
        raise
    finally:
        for token in _local.tokens:
            _WATCHDOG.disarm(token)
        _local.when, _local.tokens = outer


def fetch(
    session: requests.Session,
    method: str,
    url: str,
    *,
    timeout: float | tuple[float, float],
    deadline_s: float = DEFAULT_DEADLINE_S,
    max_bytes: int = MAX_BODY_BYTES,
    **kwargs: Any,
) -> requests.Response:
    """``session.request`` with ``timeout`` per socket operation, all of it (headers and
    body) within ``deadline_s``, and a body of at most ``max_bytes``: the returned
    response's ``content``/``json()`` are read already. Raises `DeadlineExceeded`,
    `ResponseTooLarge` or requests' own errors."""
    attach(session)
    with deadline(deadline_s) as when:
        with session.request(method, url, timeout=timeout, stream=True, **kwargs) as resp:
            body = bytearray()
            for chunk in resp.iter_content(chunk_size=65536):
                body += chunk
                if len(body) > max_bytes:
                    raise ResponseTooLarge(f"{url}: response body over {max_bytes} bytes")
        if time.monotonic() >= when:  # a body without a length ends quietly when cut
            raise DeadlineExceeded(f"no complete answer within the {deadline_s:g} s deadline")
    resp._content = bytes(body)  # what requests itself stores once a body is read
    resp._content_consumed = True
    return resp
