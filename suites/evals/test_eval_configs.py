"""Accuracy evals from suites/evals/configs/*.yaml against the session's server.

The server serves the trained tiny model (serving.trained_model): on its held set it
scores a real accuracy, recorded with its sample count and gated by the config's floor
and the binomial history gate. Every config can fail (the loader refuses a floor at or
below 0) and can pass: tiny-arith-held.yaml (500 problems), tiny-arith-vllm-shape.yaml
(vLLM's gsm8k config fields and defaults) and tiny-arith-lm-eval.yaml (vLLM's
lm-eval-harness fields: both gsm8k metrics gated, env_vars and max_model_len for the
server it starts)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ci_register import register_cpu_ci
from serving.evals import (
    EvalConfig,
    args_satisfied,
    load_dataset,
    load_eval_config,
    record_eval,
    run_eval,
    split_problems,
)
from serving.lifecycle import start_server, vllm_cpu_config

register_cpu_ci(est_time=150, suite="serving-cpu")

CONFIGS = sorted((Path(__file__).parent / "configs").glob("*.yaml"))


def test_configs_exist_and_parse() -> None:
    assert CONFIGS, "no eval configs found"
    for path in CONFIGS:
        cfg = load_eval_config(path)
        split_problems(load_dataset(cfg.dataset), cfg)  # enough problems for shots + questions


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_eval_config(path: Path, vllm_server, metrics, serving_results, tmp_path_factory) -> None:
    cfg: EvalConfig = load_eval_config(path)
    for note in cfg.notes:  # fields vLLM's configs carry for other tools: read, not used
        print(f"note: {note}")
    assert cfg.model_name == vllm_server.model, (
        f"{path}: model {cfg.model_name!r} is not served here"
    )
    if vllm_server.launch_args and (cfg.env or not args_satisfied(vllm_server.launch_args, cfg.server_args)):
        # The config asks for server args or an environment the session server lacks.
        srv_cfg = vllm_cpu_config(
            vllm_server.model_dir,
            tmp_path_factory.mktemp("vllm-eval"),
            served_model_name=cfg.model_name,
            extra_args=cfg.server_args,
            startup_timeout_s=cfg.startup_max_wait_s,
        )
        srv_cfg = replace(srv_cfg, env={**srv_cfg.env, **dict(cfg.env)})
        with start_server(srv_cfg, serving_results) as srv:
            result = run_eval(srv.url, cfg, model=vllm_server.model)
    else:
        result = run_eval(vllm_server.url, cfg, model=vllm_server.model)
    assert result.errors == 0, f"{result.errors} of {result.n} requests failed"
    assert result.n == cfg.num_questions == len(result.predictions)
    assert result.correct + result.invalid <= result.n
    assert result.invalid == sum(p is None for p in result.predictions)
    print(
        f"{path.name}: accuracy {result.accuracy:.3f} invalid {result.invalid_rate:.3f} n={result.n}"
    )
    record_eval(metrics, f"evals/{path.stem}", result, cfg)
