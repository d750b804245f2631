"""Checkpoint swap under gates (miles' story): the session's full-precision model is
swapped to its FP8 twin (weights rounded through float8 e4m3, stored as bfloat16), served
as a second variant; its eval accuracy and its multi-turn tokenization mismatch rate must
stay green against the baseline measured in this session (``serving.swap``). A
deliberately broken twin (noise on every weight matrix) runs too and must fail the same
gate, with a verdict naming the metric and the variant: it is the negative control,
declared ``expect="fail"``. The gate flagging it is reported as a warning and the session
passes; a gate that lets it through fails the session (``gates.gate``), and so does this
test where its own judgement lets it through.
"""

from __future__ import annotations

from pathlib import Path

from ci_register import register_ci_gate, register_cpu_ci
from serving.evals import load_eval_config, record_eval, run_eval
from serving.lifecycle import start_server, vllm_cpu_config
from serving.multiturn import check_server, mismatch_rate
from serving.swap import judge_swap
from serving.trained_model import write_twin
from serving.variants import Variant, run_variants

register_cpu_ci(est_time=265, suite="serving-cpu")
register_ci_gate(metric_key="serving/vllm-cpu/tiny-arith/swap/fp8/accuracy", better="higher",
                 mode="enforce")
register_ci_gate(metric_key="serving/vllm-cpu/tiny-arith/swap/fp8/multiturn/prefix_mismatch_rate",
                 better="lower", max_value=0.0, mode="enforce")
register_ci_gate(metric_key="serving/vllm-cpu/tiny-arith/swap/broken/accuracy", better="higher",
                 mode="enforce", expect="fail")
register_ci_gate(metric_key="serving/vllm-cpu/tiny-arith/swap/broken/multiturn/prefix_mismatch_rate",
                 better="lower", max_value=0.0, mode="enforce")

CONFIG = Path(__file__).parents[1] / "evals" / "configs" / "tiny-arith-held.yaml"
TWINS = (
    Variant("fp8", ("--max-num-seqs", "16"), batch_sizes=(16,)),
    Variant("broken", ("--max-num-seqs", "16"), batch_sizes=(16,)),
)


def test_checkpoint_swap(vllm_server, scoring_model_dir, serving_results, tmp_path_factory,
                         metrics) -> None:
    cfg = load_eval_config(CONFIG)
    key = f"serving/vllm-cpu/{cfg.model_name}/swap"
    base = run_eval(vllm_server.url, cfg, model=vllm_server.model, concurrency=16)
    assert base.errors == 0 and base.n == cfg.num_questions
    record_eval(metrics, f"{key}/bf16", base, cfg)
    print(f"baseline bf16: accuracy {base.accuracy:.3f} n={base.n}")

    def run(variant: Variant):
        twin = write_twin(scoring_model_dir, tmp_path_factory.mktemp(f"twin-{variant.name}"),
                          variant.name)
        srv_cfg = vllm_cpu_config(twin, tmp_path_factory.mktemp(f"vllm-{variant.name}"),
                                  served_model_name=cfg.model_name,
                                  extra_args=variant.server_args)
        with start_server(srv_cfg, serving_results) as srv:
            result = run_eval(srv.url, cfg, concurrency=variant.batch_sizes[0])
            checks = check_server(srv.url, cfg.model_name)
        assert result.errors == 0, f"{result.errors} of {result.n} requests failed"
        verdict = judge_swap(f"{key}/{variant.name}/accuracy", variant.name, result.accuracy,
                             base.accuracy, base.n)
        # The floor travels as min_value: the gate plugin's threshold verdict names the key.
        metrics.record(verdict.metric, result.accuracy, unit="ratio", better="higher",
                       n=result.n, min_value=verdict.floor)
        metrics.record(f"{key}/{variant.name}/multiturn/prefix_mismatch_rate",
                       mismatch_rate(checks), unit="ratio", better="lower", n=len(checks),
                       max_value=0.0)
        print(verdict.message)
        return verdict, mismatch_rate(checks)

    out = run_variants(TWINS, run)
    fp8, fp8_mismatch = out["fp8"]
    broken, broken_mismatch = out["broken"]
    assert fp8.passed, fp8.message
    assert fp8_mismatch == 0.0 and broken_mismatch == 0.0  # tokenizer and template are shared
    assert not broken.passed, f"the broken twin was meant to fail: {broken.message}"
    assert base.accuracy - broken.value >= 0.10, broken.message
