from __future__ import annotations

from collections.abc import Sequence

import pytest
import requests

from serving.fake import FakeServer
from serving.multiturn import (
    CONVERSATIONS,
    Message,
    check_conversation,
    is_prefix,
    mismatch_rate,
    tokenize_chat,
)


def test_is_prefix() -> None:
    assert is_prefix([1, 2], [1, 2, 3])
    assert is_prefix([], [1])
    assert not is_prefix([1, 2], [1, 3, 2])
    assert not is_prefix([1, 2, 3], [1, 2])


def render_stable(msgs: Sequence[Message]) -> list[int]:
    return [t for m in msgs for t in (hash(m["role"]) % 97, len(m["content"]), 0)]


def render_drops_old_assistant_turns(msgs: Sequence[Message]) -> list[int]:
    # Like templates that strip earlier assistant reasoning once a new user turn follows.
    last = len(msgs) - 1
    return [
        t
        for i, m in enumerate(msgs)
        if m["role"] != "assistant" or i == last
        for t in (hash(m["role"]) % 97, len(m["content"]))
    ]


def test_stable_template_has_no_mismatch() -> None:
    checks = [
        c
        for i, conv in enumerate(CONVERSATIONS)
        for c in check_conversation(i, conv, render_stable)
    ]
    assert len(checks) == sum(len(c) - 1 for c in CONVERSATIONS)
    assert mismatch_rate(checks) == 0.0


def test_rewriting_template_is_caught() -> None:
    conv = CONVERSATIONS[0]
    checks = check_conversation(0, conv, render_drops_old_assistant_turns)
    bad = [c.turn for c in checks if not c.prefix_ok]
    assert bad == [3]  # the user turn after the first assistant reply
    assert mismatch_rate(checks) == pytest.approx(1 / 4)
    with pytest.raises(ValueError):
        mismatch_rate([])


def test_conversations_cover_all_roles() -> None:
    roles = {m["role"] for conv in CONVERSATIONS for m in conv}
    assert roles == {"system", "user", "assistant", "tool"}


def test_tokenize_chat_posts_messages() -> None:
    with FakeServer() as fake, requests.Session() as s:
        tokens = tokenize_chat(s, fake.url, "m", [{"role": "user", "content": "hi"}])
    assert tokens == list(b'[{"role": "user", "content": "hi"}]')
