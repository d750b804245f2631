"""Per-variant nightly: two launch variants of the tiny model, each with its own batch
sizes and shared accuracy parameters. Every variant runs even if one fails; all
failures are raised together at the end."""

from __future__ import annotations

from pathlib import Path

from ci_register import register_cpu_ci
from serving.client import run_load
from serving.evals import load_eval_config, record_eval, run_eval
from serving.lifecycle import start_server, vllm_cpu_config
from serving.variants import Variant, run_variants

register_cpu_ci(est_time=240, suite="serving-cpu")

VARIANTS = (
    Variant("seqs8", ("--max-num-seqs", "8"), batch_sizes=(1, 4)),
    Variant(
        "seqs16-no-prefix-cache",
        ("--max-num-seqs", "16", "--no-enable-prefix-caching"),
        batch_sizes=(2, 8),
    ),
)
# Shared accuracy parameters for every variant.
ACCURACY = Path(__file__).parents[1] / "evals" / "configs" / "tiny-llama-arith.yaml"
MAX_TOKENS = 32


def test_variants(
    vllm_installed, tiny_model_dir, serving_results, tmp_path_factory, metrics
) -> None:
    acc = load_eval_config(ACCURACY)

    def run(variant: Variant) -> None:
        cfg = vllm_cpu_config(
            tiny_model_dir,
            tmp_path_factory.mktemp(f"vllm-{variant.name}"),
            served_model_name=acc.model_name,
            extra_args=variant.server_args,
        )
        key = f"serving/vllm-cpu/{acc.model_name}/nightly/{variant.name}"
        with start_server(cfg, serving_results) as srv:
            metrics.record(f"{key}/start_s", srv.started_s, unit="s", better="lower")
            for bs in variant.batch_sizes:
                load = run_load(
                    srv.url,
                    acc.model_name,
                    concurrency=bs,
                    num_requests=2 * bs,
                    max_tokens=MAX_TOKENS,
                    seed=bs,
                    timeout_s=60,
                )
                assert not load.errors, (
                    f"batch size {bs}: {len(load.errors)} errors: {load.errors[:3]}"
                )
                assert load.output_tokens == 2 * bs * MAX_TOKENS
                metrics.record(f"{key}/bs{bs}/ttft_s", load.ttft_s, unit="s", better="lower")
                metrics.record(f"{key}/bs{bs}/e2e_s", load.e2e_s, unit="s", better="lower")
                metrics.record(
                    f"{key}/bs{bs}/output_tok_per_s",
                    load.output_tokens_per_s,
                    unit="tok/s",
                    better="higher",
                )
            result = run_eval(srv.url, acc, model=acc.model_name)
            assert result.errors == 0 and result.n == acc.num_questions
            record_eval(metrics, key, result, acc)

    run_variants(VARIANTS, run)
