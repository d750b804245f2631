"""Per-variant nightly (SGLang's story): two launch variants of the trained tiny model,
each with its own batch sizes and the shared accuracy config. Every variant runs even if
one fails; all failures, of any exception type (a server that dies at start, one that
never becomes healthy), are raised together at the end, each named with its variant."""

from __future__ import annotations

from pathlib import Path

from ci_register import register_cpu_ci
from serving.client import run_load
from serving.evals import load_eval_config, record_eval, run_eval
from serving.lifecycle import ServerConfig, ServerStartError, start_server, vllm_cpu_config
from serving.variants import Variant, VariantsFailed, run_variants

register_cpu_ci(est_time=475, suite="serving-cpu")

# Batch sizes trimmed to one a variant (were (1, 4) and (2, 8)): the streaming benchmark
# covers concurrency 1, 4 and 16 on the session server already.
VARIANTS = (
    Variant("seqs8", ("--max-num-seqs", "8"), batch_sizes=(4,)),
    Variant(
        "seqs16-no-prefix-cache",
        ("--max-num-seqs", "16", "--no-enable-prefix-caching"),
        batch_sizes=(8,),
    ),
)
# Shared accuracy parameters for every variant.
ACCURACY = Path(__file__).parents[1] / "evals" / "configs" / "tiny-arith-held.yaml"
MAX_TOKENS = 32


def test_variants(
    vllm_installed, scoring_model_dir, serving_results, tmp_path_factory, metrics
) -> None:
    acc = load_eval_config(ACCURACY)

    def run(variant: Variant) -> None:
        cfg = vllm_cpu_config(
            scoring_model_dir,
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
            result = run_eval(srv.url, acc, model=acc.model_name, concurrency=max(variant.batch_sizes))
            assert result.errors == 0 and result.n == acc.num_questions
            record_eval(metrics, key, result, acc)

    run_variants(VARIANTS, run)


def test_failing_variants_do_not_hide_the_others(vllm_installed, scoring_model_dir, serving_results,
                                                tmp_path_factory) -> None:
    """A real vLLM that dies at start (a flag it refuses) and a server that never becomes
    healthy (a 3 s start deadline) fail; the variant after them still runs (a stdlib
    OpenAI-compatible server, no model load); the raised group names both failures with
    their variants."""
    ran: list[str] = []

    def run(variant: Variant) -> None:
        if variant.name == "dies-at-start":
            cfg = vllm_cpu_config(scoring_model_dir, tmp_path_factory.mktemp("vllm-dies"),
                                  extra_args=variant.server_args, startup_timeout_s=120)
        elif variant.name == "never-healthy":
            cfg = ServerConfig(engine="command", command="{python} -c 'import time; time.sleep(60)'",
                               startup_timeout_s=3)
        else:
            cfg = ServerConfig(engine="command", command="{python} -m serving.fake --port {port}",
                               startup_timeout_s=60)
        with start_server(cfg, serving_results) as srv:
            load = run_load(srv.url, "fake", concurrency=variant.batch_sizes[0], num_requests=2,
                            max_tokens=8, seed=7, timeout_s=30)
            assert not load.errors, load.errors
            ran.append(variant.name)

    variants = (
        Variant("dies-at-start", ("--no-such-flag",), batch_sizes=(1,)),
        Variant("never-healthy", (), batch_sizes=(1,)),
        Variant("healthy", (), batch_sizes=(2,)),
    )
    try:
        run_variants(variants, run)
    except VariantsFailed as group:
        failed = group
    else:
        raise AssertionError("two variants were meant to fail")
    assert ran == ["healthy"]
    assert str(failed).startswith("2 of 3 variants failed: dies-at-start (ServerStartError: ")
    assert "; never-healthy (ServerStartError: " in str(failed)
    assert all(isinstance(e, ServerStartError) for e in failed.exceptions)
    notes = [e.__notes__[-1] for e in failed.exceptions]
    assert notes[0].startswith("variant 'dies-at-start'") and notes[1].startswith("variant 'never-healthy'")
