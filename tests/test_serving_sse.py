from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def test_cr_and_lf_in_separate_reads_make_one_line_end() -> None:
    p = SSEParser()
    assert [p.feed(b) for b in (b"data: x\r", b"\n", b"\n")] == [[], [], ["x"]]
    assert [p.feed(b) for b in (b"data: y\r", b"", b"\r")] == [[], [], ["y"]]


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


def _reference_events(raw: bytes) -> list[str]:
    """The spec read literally: normalise every line ending, split at blank lines, drop
    the unfinished tail (what a one-shot parser of the whole stream returns)."""
    text = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    blocks = text.split(b"\n\n")[:-1]
    out = []
    for block in blocks:
        lines = [ln for ln in block.decode().split("\n") if not ln.startswith(":")]
        data = [ln.partition(":")[2] for ln in lines if ln.partition(":")[0] == "data"]
        if data:
            out.append("\n".join(v[1:] if v.startswith(" ") else v for v in data))
    return out


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["data", "event", ":"]), st.text("ab {}", max_size=4),
                       st.sampled_from(["\n", "\r\n", "\r"]), st.booleans()), max_size=12),
    st.lists(st.integers(0, 200), max_size=8),
)
def test_any_split_of_any_stream_gives_the_reference_events(fields, cuts) -> None:
    raw = "".join(f"{f}:{v}{eol}" + (eol if end else "") for f, v, eol, end in fields).encode()
    bounds = sorted({min(c, len(raw)) for c in cuts})
    p, got = SSEParser(), []
    for a, b in zip([0, *bounds], [*bounds, len(raw)], strict=True):
        got += p.feed(raw[a:b])
    assert got == _reference_events(raw)
    # What is pending, fed to a fresh parser with a blank line, ends the last event.
    assert SSEParser().feed(p.pending + b"\n\n") == _reference_events(p.pending + b"\n\n")


def test_many_events_in_one_read_take_linear_time() -> None:
    # The old parser re-normalised the whole buffer after every event: 32k events in one
    # read took ~35 s there (quadratic); linear parsing takes well under a second.
    raw = b"".join(b'data: {"i": %d}\n\n' % i for i in range(32768))
    t = time.process_time()
    events = SSEParser().feed(raw)
    assert len(events) == 32768 and events[-1] == '{"i": 32767}'
    assert time.process_time() - t < 3.0


def test_one_event_over_many_reads_takes_linear_time() -> None:
    p, t = SSEParser(max_event_bytes=4 << 20), time.process_time()  # a 1.5 MB event
    for _ in range(50_000):
        assert p.feed(b"data: xxxxxxxxxxxxxxxxxxxxxxxx\r") == []
    assert p.feed(b"\n\r\n") == ["\n".join(["xxxxxxxxxxxxxxxxxxxxxxxx"] * 50_000)]
    assert time.process_time() - t < 3.0


def test_an_event_that_never_ends_is_bounded():
    # A stream without a blank line was buffered until memory ran out.
    p = SSEParser(max_event_bytes=1000)
    assert p.feed(b"data: {}\n\n" + b"data: " + b"x" * 500) == ["{}"]
    with pytest.raises(ValueError, match="SSE event over 1000 bytes"):
        p.feed(b"x" * 600)


@pytest.mark.parametrize("chunk", [
    {"choices": ["text"]}, {"choices": 5}, {"choices": [{"delta": "hi"}]},
    {"choices": [{"text": ["a"]}]}, {"usage": [1]}, {"usage": {"completion_tokens": {}}},
])
def test_a_chunk_of_another_shape_is_a_value_error_not_a_crash(chunk):
    # An AttributeError or TypeError escaped stream_request (it counts ValueError) and
    # ended run_load with a traceback.
    with pytest.raises(ValueError, match="unexpected shape"):
        parse_openai_chunk(json.dumps(chunk))
