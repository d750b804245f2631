from __future__ import annotations

import json

import pytest

from serving.sse import DONE, SSEParser, parse_openai_chunk
from serving.stats import percentile, summarize


def test_events_split_across_reads_are_joined() -> None:
    p = SSEParser()
    assert p.feed(b'data: {"a"') == []
    assert p.feed(b": 1}\n") == []
    assert p.feed(b"\ndata: [DO") == ['{"a": 1}']
    assert p.feed(b"NE]\n\n") == [DONE]
    assert p.pending == b""


def test_crlf_split_between_reads_and_comments_and_multiline() -> None:
    p = SSEParser()
    assert p.feed(b": keep-alive\r\n\r\ndata: x\r") == []
    assert p.feed(b"\n\r\n") == ["x"]
    assert p.feed(b"event: msg\ndata: a\ndata: b\n\ndata:c\n\n") == ["a\nb", "c"]


def test_several_events_in_one_read() -> None:
    raw = b"".join(b"data: " + json.dumps({"i": i}).encode() + b"\n\n" for i in range(5))
    assert [json.loads(e)["i"] for e in SSEParser().feed(raw)] == list(range(5))


def test_parse_completion_chat_usage_and_error_chunks() -> None:
    assert parse_openai_chunk('{"choices": [{"text": " hi", "finish_reason": null}]}').text == " hi"
    chat = parse_openai_chunk(
        '{"choices": [{"delta": {"content": "yo"}, "finish_reason": "stop"}]}'
    )
    assert (chat.text, chat.finish_reason) == ("yo", "stop")
    usage = parse_openai_chunk('{"choices": [], "usage": {"completion_tokens": 12}}')
    assert (usage.text, usage.completion_tokens) == ("", 12)
    assert parse_openai_chunk('{"error": {"message": "boom"}}').error == "boom"
    with pytest.raises(ValueError):
        parse_openai_chunk("not json")
    with pytest.raises(ValueError):
        parse_openai_chunk("[1, 2]")


def test_percentiles_interpolate() -> None:
    xs = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert percentile(xs, 50) == 3.0
    assert percentile(xs, 90) == pytest.approx(4.6)
    s = summarize(xs)
    assert (s["count"], s["median"], s["min"], s["max"]) == (5, 3.0, 1.0, 5.0)
    assert summarize([]) == {"count": 0}
    with pytest.raises(ValueError):
        percentile([], 50)
