"""Server-sent events, parsed incrementally from raw bytes (pure, no I/O).

The benchmark client feeds each network read into :class:`SSEParser` the moment it
arrives, so an event's timestamp is the time its last byte was read, not the time a
line-buffering layer decided to hand it over.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["DONE", "SSEParser", "StreamChunk", "parse_openai_chunk"]

DONE = "[DONE]"


class SSEParser:
    """Split a byte stream into SSE events; return each event's joined ``data`` field.

    Events end at a blank line (``\\n\\n``, ``\\r\\n\\r\\n`` or ``\\r\\r``); bytes of an
    unfinished event stay buffered until the next :meth:`feed`.
    """

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> list[str]:
        self._buf += data
        # Normalise line endings once; a lone '\r' at the end may be half of '\r\n'.
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

    @property
    def pending(self) -> bytes:
        """Bytes of an event that has not ended yet."""
        return self._buf


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

    Raises ``ValueError`` on malformed JSON; an ``{"error": ...}`` event becomes a chunk
    with ``error`` set so the caller counts it instead of dropping it.
    """
    obj: Any = json.loads(data)
    if not isinstance(obj, dict):
        raise ValueError(f"stream chunk is not a JSON object: {data[:80]!r}")
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
