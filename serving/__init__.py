"""Serving CI: server lifecycle, streaming benchmark client, accuracy evals and
multi-turn tokenization checks against OpenAI-compatible servers.

Importing this package starts nothing and reaches no network; the tiny model's heavy
dependencies (torch, transformers) are imported only when it is built.
"""

from __future__ import annotations

from serving.client import LoadResult, RequestResult, make_prompts, run_load, stream_request
from serving.evals import EvalConfig, EvalConfigError, load_eval_config, run_eval
from serving.lifecycle import Server, ServerConfig, ServerStartError, attach, start_server

__all__ = [
    "LoadResult",
    "RequestResult",
    "make_prompts",
    "run_load",
    "stream_request",
    "EvalConfig",
    "EvalConfigError",
    "load_eval_config",
    "run_eval",
    "Server",
    "ServerConfig",
    "ServerStartError",
    "attach",
    "start_server",
]
