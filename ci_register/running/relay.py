"""pytest's output reaches the CI log through the runner, never straight from the tests.

Everything a test produces (its name, skip and xfail reasons, failure text, captured
output) is written by anyone who can open a pull request. The runner reads pytest's
stdout and stderr through pipes and writes each line through `GuardedStream` (secrets
masked, invisible characters shown as escapes, no line a workflow command), and in
GitHub Actions it stops workflow commands around the whole of it, as GitHub documents for
untrusted output: ``::stop-commands::TOKEN`` before, ``::TOKEN::`` after, a fresh random
token each time (a test cannot print the line that resumes them).
"""

from __future__ import annotations

import codecs
import contextlib
import os
import secrets
import threading
from collections.abc import Iterator
from typing import IO

from ci_register.running.redact import GuardedStream

__all__ = ["LINE_CAP", "Relay", "commands_stopped"]

LINE_CAP = 65536  # characters of one line held back before it goes out in parts
# The pipes end once pytest's group and orphans are killed; one that a process which
# escaped both still holds is not waited for longer.
_JOIN_S = 10.0


def _actions(environ: os._Environ[str] | dict[str, str]) -> bool:
    return environ.get("GITHUB_ACTIONS") == "true"


@contextlib.contextmanager
def commands_stopped(stream: IO[str], environ: os._Environ[str] | dict[str, str] | None = None
                     ) -> Iterator[None]:
    """In GitHub Actions, no workflow command is read from what `stream` carries inside.

    The resume line starts on a line of its own (a newline first: the output before it
    may end mid-line), else the runner would not read it and every later annotation of
    the step would be lost."""
    if not _actions(os.environ if environ is None else environ):
        yield
        return
    token = secrets.token_hex(16)
    stream.write(f"::stop-commands::{token}\n")
    stream.flush()
    try:
        yield
    finally:
        stream.write(f"\n::{token}::\n")
        stream.flush()


class Relay:
    """Two threads copying a child's stdout and stderr pipes to `out` and `err`, each
    through its own `GuardedStream` (one writer per guard: their line state is theirs)."""

    def __init__(self, out: IO[str], err: IO[str]) -> None:
        self._sinks = (out, err)
        self._threads: list[threading.Thread] = []

    def start(self, stdout: IO[bytes], stderr: IO[bytes]) -> None:
        for pipe, sink in zip((stdout, stderr), self._sinks, strict=True):
            t = threading.Thread(target=_copy, args=(pipe, sink), daemon=True,
                                 name="ci-register-relay")
            t.start()
            self._threads.append(t)

    def join(self, timeout_s: float = _JOIN_S) -> None:
        """Wait for both pipes to end; a pipe a leftover process still holds is left to
        its daemon thread after `timeout_s` (the runner has killed what it could)."""
        for t in self._threads:
            t.join(timeout_s)


def _copy(pipe: IO[bytes], sink: IO[str]) -> None:
    guard = GuardedStream(sink)
    # Not UTF-8: the bytes survive as lone surrogates, which `show_controls` escapes.
    decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
    fd = pipe.fileno()
    writing = True
    try:
        while chunk := os.read(fd, 65536):
            if not writing:
                continue  # drained all the same: a full pipe would stop pytest
            try:
                guard.write(decoder.decode(chunk))
                if len(guard._pending) > LINE_CAP:
                    guard.flush()
                sink.flush()
            except (OSError, ValueError):  # the runner's own stream closed (`| head`)
                writing = False
        if writing:
            rest = guard._pending + decoder.decode(b"", final=True)
            guard._pending = ""
            if rest:
                guard.write(rest + "\n")  # the last line, ended so the next starts a line
            sink.flush()
    except (OSError, ValueError):
        pass
    finally:
        with contextlib.suppress(OSError):
            pipe.close()
