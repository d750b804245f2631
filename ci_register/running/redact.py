"""Credentials out of every text a person or a log sees (stdlib only).

`ci_register` echoes command lines that may carry a history URL, and `gates` prints
history locations and errors; both mask through `mask_secrets` (ci_register never imports
gates, so it lives here).
"""

from __future__ import annotations

import re
import sys

__all__ = ["GuardedStream", "clean_text", "guarded_output", "mask_secrets", "neutralise_line",
           "raw_stream"]

# user:password@ in any URL; password= (and the like) in a query string or a libpq
# conninfo, quoted or not. No nested quantifiers: linear on any text.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/?#@:]*):[^\s/?#@]*@")
_SECRET_KEYS = ("password|passwd|pwd|sslpassword|sslkey_password|token|access_token|"
                "secret|api_key|apikey|auth")
_KEY_VALUE = re.compile(rf"(?i)(?<![a-z0-9_])({_SECRET_KEYS})(\s*=\s*)"
                        r"('(?:[^'\\]|\\.)*'?|[^\s&;#'\"]+)")
_PERCENT_KEY = re.compile(rf"(?i)({_SECRET_KEYS})(%3D)([^\s&;#%]+)")


def mask_secrets(text: str) -> str:
    """`text` with every credential in it replaced by ``***``: the password of
    ``scheme://user:password@host`` and the value of ``password=`` (``passwd``, ``token``,
    ``secret``...) in a URL query, a libpq conninfo or an option (``%3D`` encoded too).

    Every print, log, exception and stored text that may hold a history location or a
    command line goes through this (`gates.store.backend.display_location`, the runner's echo, `gate-report`'s
    output streams)."""
    if "@" in text and "://" in text:
        text = _USERINFO.sub(r"\1:***@", text)
    if "=" in text:
        text = _KEY_VALUE.sub(r"\1\2***", text)
    if "%3d" in text.lower():
        text = _PERCENT_KEY.sub(r"\1\2***", text)
    return text


# ------------------------------------------------------------- output streams

_COMMAND_STARTS = ("::", "##[")  # a workflow command (and the runner's older form)


def neutralise_line(line: str) -> str:
    """A line that the GitHub runner would read as a workflow command (``::`` or ``##[``
    after leading spaces), with a space inside its opening; any other line as it is."""
    body = line.lstrip()
    if not body.startswith(_COMMAND_STARTS):
        return line
    lead = line[:len(line) - len(body)]
    return f"{lead}{body[0]} {body[1:]}"


def clean_text(text: str) -> str:
    """Secrets masked and no line a workflow command. The runner splits a step's output
    at ``\\r`` as well as ``\\n``, so both start a line here."""
    text = mask_secrets(text)
    if "::" not in text and "##[" not in text:
        return text
    return "\n".join("\r".join(neutralise_line(seg) for seg in line.split("\r"))
                     for line in text.split("\n"))


class GuardedStream:
    """A text stream that writes only `clean_text` lines to the stream it wraps.

    Whole lines go out as they complete; ``flush`` sends a partial line too, and
    remembers whether it held only blanks (then the rest still starts the line).
    `raw_stream` reaches the wrapped stream: the one place that emits workflow commands
    on purpose (`gates.report.ghactions` annotations) writes there."""

    def __init__(self, raw) -> None:
        self.raw = raw
        self._pending = ""
        self._blank_so_far = True  # the current output line holds only blanks so far

    def write(self, text: str) -> int:
        data = self._pending + text
        self._pending = ""
        cut = max(data.rfind("\n"), data.rfind("\r"))
        if cut >= 0:
            self._emit(data[:cut + 1])
            data = data[cut + 1:]
        self._pending = data
        return len(text)

    def _emit(self, text: str) -> None:
        if not self._blank_so_far and text:
            # The rest of a line whose start went out at a flush: not a line start.
            head_len = min([i for i in (text.find("\n"), text.find("\r")) if i >= 0],
                           default=len(text)) + 1
            head, text = text[:head_len], text[head_len:]
            self.raw.write(mask_secrets(head))
            self._blank_so_far = True
        if text:
            self.raw.write(clean_text(text))

    def flush(self) -> None:
        if self._pending:
            part, self._pending = self._pending, ""
            body = part.lstrip()
            if self._blank_so_far and any(s.startswith(body) for s in _COMMAND_STARTS):
                self._pending = part  # blanks, ":" or "##": undecided, kept for what follows
            else:
                if self._blank_so_far:
                    self.raw.write(clean_text(part))
                else:
                    self.raw.write(mask_secrets(part))
                self._blank_so_far = False
        self.raw.flush()

    def __getattr__(self, name: str):
        return getattr(self.raw, name)


def raw_stream(stream):
    """The stream under a `GuardedStream` (flushed first), or `stream` itself."""
    if isinstance(stream, GuardedStream):
        stream.flush()
        return stream.raw
    return stream


class guarded_output:
    """``with guarded_output():`` stdout and stderr are `GuardedStream`s inside."""

    def __enter__(self) -> None:
        self.saved = (sys.stdout, sys.stderr)
        sys.stdout = GuardedStream(sys.stdout)
        sys.stderr = GuardedStream(sys.stderr)

    def __exit__(self, *exc: object) -> None:
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, GuardedStream):
                stream._blank_so_far = stream._blank_so_far and not stream._pending.strip()
                pending, stream._pending = stream._pending, ""
                try:
                    if pending:
                        stream.raw.write(clean_text(pending) if stream._blank_so_far
                                         else mask_secrets(pending))
                    stream.raw.flush()
                except (OSError, ValueError):  # a reader that left (`| head`), a closed file
                    pass
        sys.stdout, sys.stderr = self.saved
