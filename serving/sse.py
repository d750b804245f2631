"""Server-sent events, parsed incrementally from raw bytes (pure, no I/O).

The benchmark client feeds each network read into :class:`SSEParser` the moment it
arrives, so an event's timestamp is the time its last byte was read, not the time a
line-buffering layer decided to hand it over.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["DONE", "MAX_EVENT_BYTES", "SSEParser", "StreamChunk", "parse_openai_chunk"]

DONE = "[DONE]"
# One chunk of an OpenAI stream is a few hundred bytes; a 1 MiB event is a broken server.
MAX_EVENT_BYTES = 1 << 20


class SSEParser:
    """Split a byte stream into SSE events; return each event's joined ``data`` field.

    Events end at a blank line (``\\n\\n``, ``\\r\\n\\r\\n`` or ``\\r\\r``); bytes of an
    unfinished event stay buffered until the next :meth:`feed`, at most
    ``max_event_bytes`` of them (more raises ``ValueError``).

    Linear in the bytes fed: each read's line endings are normalised once as it arrives
    (a '\\r' that ends a read is a line end already; a '\\n' that starts the next read
    is then its other half and dropped), and the search for the end of an event resumes
    where the last one stopped, so neither many events in one read nor one event spread
    over many reads rescans the buffer.
    """

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._buf = bytearray()  # normalised: '\n' line ends only
        self._cr = False  # the last read ended in '\r': a '\n' next completes it
        self._max = max_event_bytes

    def feed(self, data: bytes) -> list[str]:
        if self._cr and data:
            self._cr = False
            data = data[1:] if data[:1] == b"\n" else data
        if data:
            self._cr = data.endswith(b"\r")
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        # A blank line may straddle the old buffer's last byte and the new data.
        search = max(len(self._buf) - 1, 0)
        self._buf += data
        events: list[str] = []
        start = 0
        while (end := self._buf.find(b"\n\n", search)) >= 0:
            payload = _event_data(self._buf[start:end].decode("utf-8", errors="replace"))
            if payload is not None:
                events.append(payload)
            start = search = end + 2
        if start:
            del self._buf[:start]
        if len(self._buf) > self._max:
            # A stream that never ends its event buffered until memory ran out.
            raise ValueError(f"an SSE event over {self._max} bytes without its blank line")
        return events

    @property
    def pending(self) -> bytes:
        """Bytes of an event that has not ended yet (line ends normalised to '\\n')."""
        return bytes(self._buf)


def _event_data(block: str) -> str | None:
    lines = []
    for line in block.split("\n"):
        if line.startswith(":"):  # comment / keep-alive
            continue
        field, _, value = line.partition(":")
        if field == "data":
            lines.append(value[1:] if value.startswith(" ") else value)
    return "\n".join(lines) if lines else None


@dataclass(frozen=True)
class StreamChunk:
    """What one OpenAI streaming chunk carries for timing purposes."""

    text: str
    completion_tokens: int | None = None  # from a usage chunk, when the server sends one
    finish_reason: str | None = None
    error: str | None = None


def parse_openai_chunk(data: str) -> StreamChunk:
    """Parse the JSON of one ``data:`` event of /v1/completions or /v1/chat/completions.

    Raises ``ValueError`` on malformed JSON or a chunk of another shape (a choice, delta
    or usage that is not an object); an ``{"error": ...}`` event becomes a chunk with
    ``error`` set so the caller counts it instead of dropping it.
    """
    obj: Any = json.loads(data)
    if not isinstance(obj, dict):
        raise ValueError(f"stream chunk is not a JSON object: {data[:80]!r}")
    try:
        return _chunk(obj)
    except (AttributeError, TypeError) as exc:  # a list where an object belongs, ...
        raise ValueError(f"stream chunk of an unexpected shape ({exc}): {data[:80]!r}") from None


def _chunk(obj: dict[str, Any]) -> StreamChunk:
    if "error" in obj:
        err = obj["error"]
        msg = err.get("message", str(err)) if isinstance(err, dict) else str(err)
        return StreamChunk(text="", error=msg)
    text_parts: list[str] = []
    finish = None
    for choice in obj.get("choices") or []:
        if "text" in choice:  # /v1/completions
            text_parts.append(choice.get("text") or "")
        delta = choice.get("delta") or {}  # /v1/chat/completions
        text_parts.append(delta.get("content") or "")
        text_parts.append(delta.get("reasoning_content") or "")
        finish = choice.get("finish_reason") or finish
    usage = obj.get("usage") or {}
    tokens = usage.get("completion_tokens")
    return StreamChunk(
        text="".join(text_parts),
        completion_tokens=int(tokens) if tokens is not None else None,
        finish_reason=finish,
    )
