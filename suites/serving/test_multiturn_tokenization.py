"""Multi-turn session check: tokenize each growing multi-role conversation through the
server's chat template and count turns whose previous tokens are not a prefix of the
new ones (they break session and prefix-cache reuse)."""

from __future__ import annotations

import requests

from ci_register import register_ci_gate, register_cpu_ci
from serving.multiturn import CONVERSATIONS, check_conversation, mismatch_rate, tokenize_chat

register_cpu_ci(est_time=5, suite="serving-cpu")
register_ci_gate(
    metric_key="serving/vllm-cpu/tiny-arith/multiturn/prefix_mismatch_rate",
    better="lower",
    max_value=0.0,
    mode="enforce",
)


def test_multiturn_prefix_stability(vllm_server, metrics) -> None:
    with requests.Session() as session:

        def tokenize(messages):
            return tokenize_chat(session, vllm_server.url, vllm_server.model, messages)

        checks = [
            c for i, conv in enumerate(CONVERSATIONS) for c in check_conversation(i, conv, tokenize)
        ]
    assert len(checks) == sum(len(conv) - 1 for conv in CONVERSATIONS)
    assert all(c.new_len > c.previous_len for c in checks), "a turn added no tokens"
    rate = mismatch_rate(checks)
    metrics.record(
        f"serving/vllm-cpu/{vllm_server.model}/multiturn/prefix_mismatch_rate",
        rate,
        unit="ratio",
        better="lower",
        n=len(checks),
        max_value=0.0,
    )
    broken = [(c.conversation, c.turn, c.role) for c in checks if not c.prefix_ok]
    assert not broken, f"turns (conversation, turn, role) that re-tokenize history: {broken}"
