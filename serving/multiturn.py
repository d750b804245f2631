"""Multi-turn tokenization consistency (pure logic + a thin /tokenize call).

A session or prefix cache can reuse a conversation's tokens only if rendering the
conversation after turn k+1 starts with exactly the tokens of the rendering after
turn k. A chat template that rewrites earlier turns (drops reasoning, moves the system
prompt, renders tool results differently once a reply follows) breaks that; we count
the turns where it happens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import requests

from serving.deadline import DEFAULT_DEADLINE_S, fetch

__all__ = [
    "Message",
    "check_server",
    "CONVERSATIONS",
    "TurnCheck",
    "is_prefix",
    "check_conversation",
    "mismatch_rate",
    "tokenize_chat",
]

Message = dict[str, Any]

# Multi-role conversations, checked turn by turn (system, user, assistant, tool).
CONVERSATIONS: tuple[tuple[Message, ...], ...] = (
    (
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "What is 12 times 7?"},
        {"role": "assistant", "content": "84."},
        {"role": "user", "content": "And divided by 4?"},
        {"role": "assistant", "content": "21."},
    ),
    (
        {"role": "system", "content": "You may call the calculator tool."},
        {"role": "user", "content": "Add 1234 and 4321."},
        {"role": "assistant", "content": "Calling calculator(1234 + 4321)."},
        {"role": "tool", "content": "5555", "tool_call_id": "call0"},
        {"role": "assistant", "content": "The sum is 5555."},
        {"role": "user", "content": "Thanks! Now subtract 555."},
        {"role": "assistant", "content": "Calling calculator(5555 - 555)."},
        {"role": "tool", "content": "5000", "tool_call_id": "call1"},
        {"role": "assistant", "content": "5000."},
    ),
    (
        {"role": "user", "content": "Write one line about rivers."},
        {"role": "assistant", "content": "Rivers carry the mountains to the sea."},
        {"role": "user", "content": "Now one about bridges, with a number in it."},
        {"role": "assistant", "content": "Seven bridges, one river, no shortcuts."},
    ),
)


@dataclass(frozen=True)
class TurnCheck:
    conversation: int
    turn: int  # index of the message added in this step
    role: str
    prefix_ok: bool
    previous_len: int
    new_len: int


def is_prefix(previous: Sequence[int], new: Sequence[int]) -> bool:
    return len(previous) <= len(new) and list(new[: len(previous)]) == list(previous)


def check_conversation(
    index: int, messages: Sequence[Message], tokenize: Callable[[Sequence[Message]], list[int]]
) -> list[TurnCheck]:
    """Tokenize each growing prefix of ``messages``; one check per added message."""
    checks = []
    previous = tokenize(messages[:1])
    for turn in range(1, len(messages)):
        new = tokenize(messages[: turn + 1])
        checks.append(
            TurnCheck(
                index,
                turn,
                str(messages[turn]["role"]),
                is_prefix(previous, new),
                len(previous),
                len(new),
            )
        )
        previous = new
    return checks


def mismatch_rate(checks: Sequence[TurnCheck]) -> float:
    if not checks:
        raise ValueError("no turns were checked")
    return sum(1 for c in checks if not c.prefix_ok) / len(checks)


def tokenize_chat(
    session: requests.Session,
    base_url: str,
    model: str,
    messages: Sequence[Message],
    *,
    timeout_s: float = 30.0,
    deadline_s: float = DEFAULT_DEADLINE_S,
) -> list[int]:
    """Tokens of ``messages`` rendered by the server's chat template (vLLM /tokenize);
    ``timeout_s`` bounds each socket operation, ``deadline_s`` the whole call."""
    resp = fetch(
        session,
        "POST",
        base_url.rstrip("/") + "/tokenize",
        json={"model": model, "messages": list(messages), "add_generation_prompt": False},
        timeout=timeout_s,
        deadline_s=deadline_s,
    )
    resp.raise_for_status()
    return [int(t) for t in resp.json()["tokens"]]


def check_server(base_url: str, model: str, *, timeout_s: float = 30.0) -> list[TurnCheck]:
    """Every turn of every conversation of :data:`CONVERSATIONS`, tokenized by the server."""
    with requests.Session() as session:
        session.trust_env = False  # loopback: no proxy lookup

        def tokenize(messages: Sequence[Message]) -> list[int]:
            return tokenize_chat(session, base_url, model, messages, timeout_s=timeout_s)

        return [c for i, conv in enumerate(CONVERSATIONS) for c in check_conversation(i, conv, tokenize)]
