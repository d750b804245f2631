from __future__ import annotations

from pathlib import Path

import pytest

from gates.record.plugin import MetricsRecorder
from gates.store.metrics import MetricBook
from serving.evals import (
    DEFAULT_DATASET,
    LM_EVAL_FILTERS,
    EvalConfigError,
    Problem,
    args_satisfied,
    build_prompt,
    extract_answer,
    extract_filtered,
    load_dataset,
    load_eval_config,
    parse_eval_config,
    parse_gold_answer,
    record_eval,
    run_eval,
    score,
    split_problems,
)

GOOD = {
    "model_name": "tiny-llama",
    "accuracy_threshold": 0.5,
    "tolerance": 0.0,
    "num_questions": 10,
    "num_fewshot": 3,
    "max_tokens": 32,
    "server_args": "--max-model-len 512 --enforce-eager",
}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cfg.yaml"
    path.write_text(text)
    return path


def test_vllm_style_yaml_parses(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
model_name: "nvidia/Qwen3.5-397B-A17B-NVFP4"
accuracy_threshold: 0.88
tolerance: 0.03
num_questions: 1319
num_fewshot: 5
max_tokens: 12000
server_args: >-
  --max-model-len 16384 --data-parallel-size 2 --enable-expert-parallel
  --max-num-seqs 256
""",
    )
    cfg = load_eval_config(path)
    assert cfg.floor == pytest.approx(0.85)
    assert cfg.server_args[:2] == ("--max-model-len", "16384")
    assert cfg.server_args[-1] == "256"
    assert cfg.dataset == DEFAULT_DATASET


def test_unknown_field_is_ignored_with_a_note_naming_file_and_field(tmp_path: Path) -> None:
    path = write(tmp_path, "\n".join(f"{k}: {v!r}" for k, v in {**GOOD, "num_fewshots": 5}.items()))
    cfg = load_eval_config(path)
    assert cfg.num_fewshot == 3
    assert cfg.notes == (f"{path}: field 'num_fewshots' is not used here, ignored "
                         "(did you mean 'num_fewshot'?)",)


def test_vllm_gsm8k_configs_with_fields_for_other_tools_load(tmp_path: Path) -> None:
    # The shape of the 4 of vLLM's 12 tests/evals/gsm8k configs that were refused before.
    path = write(tmp_path, """\
model_name: "RedHatAI/Qwen3-30B-A3B-FP8"
accuracy_threshold: 0.84
num_questions: 1319
num_fewshot: 5
max_model_len: 4096
max_concurrency: 64
min_acceptance_length: 2.5
server_args: "--enforce-eager --max-model-len 4096"
""")
    cfg = load_eval_config(path)
    assert cfg.floor == pytest.approx(0.84 - 0.08)
    assert [n.split("field ")[1].split(" ")[0] for n in cfg.notes] == [
        "'max_model_len'", "'max_concurrency'", "'min_acceptance_length'"]


def test_lm_eval_harness_config_reads_tasks_and_metrics(tmp_path: Path) -> None:
    path = write(tmp_path, """\
# bash .buildkite/lm-eval-harness/run-lm-eval-gsm-vllm-baseline.sh -m x -b 32 -l 250 -f 5
model_name: "neuralmagic/Meta-Llama-3-8B-Instruct-FP8"
tasks:
- name: "gsm8k"
  metrics:
  - name: "exact_match,strict-match"
    value: 0.753
  - name: "exact_match,flexible-extract"
    value: 0.758
limit: 1000
num_fewshot: 5
max_model_len: 4096
""")
    cfg = load_eval_config(path)
    assert (cfg.accuracy_threshold, cfg.num_questions, cfg.num_fewshot) == (0.753, 1000, 5)
    assert cfg.tolerance == pytest.approx(0.08 * 0.753)  # vLLM's DEFAULT_RTOL
    # Both metrics vLLM checks, each at its own floor (flexible-extract was a note before).
    assert [f for f, _ in cfg.checks] == ["strict-match", "flexible-extract"]
    assert dict(cfg.checks)["flexible-extract"] == pytest.approx(0.758 * 0.92)
    # max_model_len is vLLM's launch argument: the server gets it, no "did you mean" hint.
    assert cfg.server_args == ("--max-model-len", "4096")
    assert not any("max_model_len" in n for n in cfg.notes), cfg.notes
    rtol = parse_eval_config({"model_name": "m", "num_fewshot": 0, "limit": 5, "rtol": 0.05,
                              "tasks": [{"name": "gsm8k", "metrics": [
                                  {"name": "exact_match,flexible-extract", "value": 0.5}]}]})
    assert rtol.floor == pytest.approx(0.5 - 0.025) and rtol.checks == ((
        "flexible-extract", pytest.approx(0.475)),)


def test_lm_eval_harness_env_vars_reach_the_server_and_args_keep_their_length() -> None:
    base = {"model_name": "m", "num_fewshot": 0, "limit": 5,
            "tasks": [{"name": "gsm8k", "metrics": [
                {"name": "exact_match,strict-match", "value": 0.5}]}]}
    cfg = parse_eval_config({**base, "env_vars": {"VLLM_USE_DEEP_GEMM": "0", "N": 2},
                             "max_model_len": 8192, "server_args": "--max-model-len 2048"})
    assert cfg.env == (("VLLM_USE_DEEP_GEMM", "0"), ("N", "2"))
    assert cfg.server_args == ("--max-model-len", "2048")  # the config's own flag wins
    with pytest.raises(EvalConfigError, match="env_vars or env"):
        parse_eval_config({**base, "env_vars": {"A": "1"}, "env": {"A": "1"}}, "x.yaml")
    with pytest.raises(EvalConfigError, match="'max_model_len' must be a positive int"):
        parse_eval_config({**base, "max_model_len": "4k"}, "x.yaml")


def test_every_lm_eval_metric_is_recorded_with_its_own_floor() -> None:
    cfg = parse_eval_config({"model_name": "m", "num_fewshot": 0, "limit": 4, "tasks": [
        {"name": "gsm8k", "metrics": [{"name": "exact_match,strict-match", "value": 0.5},
                                      {"name": "exact_match,flexible-extract", "value": 1.0}]}]})
    # One completion marks its answer, one writes it bare, one is wrong, one says nothing.
    texts, golds = [" 2 + 2 = 4\n#### 4", " it is 7", " #### 3", " no idea"], [4.0, 7.0, 9.0, 1.0]
    result = score([extract_answer(t) for t in texts], golds, filtered={
        f: [extract_filtered(t, f) for t in texts] for f in LM_EVAL_FILTERS})
    assert (result.accuracy_of("strict-match"), result.accuracy_of("flexible-extract")) == (0.25, 0.5)
    book = MetricBook()
    record_eval(MetricsRecorder(book), "evals/x", result, cfg)
    strict, flexible = (book.metrics[f"evals/x/{f}/accuracy"] for f in LM_EVAL_FILTERS)
    assert strict.samples == (0.25,) and strict.min_value == pytest.approx(0.46)
    # flexible-extract is below its own floor: vLLM's check fails it, and so does the gate.
    assert flexible.samples == (0.5,) and flexible.min_value == pytest.approx(0.92)


@pytest.mark.parametrize(("data", "why"), [
    ({"accuracy_threshold": 0.0, "tolerance": 0.0}, "accuracy_threshold - tolerance is 0"),
    ({"accuracy_threshold": 0.05}, "accuracy_threshold - tolerance is -0.03"),  # vLLM's 0.08
    ({"accuracy_threshold": 0.3, "tolerance": 0.3}, ".* is 0, a floor no accuracy can fail"),
])
def test_a_floor_that_cannot_fail_is_refused(data: dict, why: str) -> None:
    # tiny-arith-vllm-shape shipped with -0.08 and the long forms with 0.0: gates that pass
    # a model scoring 0 on every question.
    cfg = {k: v for k, v in GOOD.items() if k != "tolerance"}
    with pytest.raises(EvalConfigError, match=rf"^x\.yaml: {why}"):
        parse_eval_config({**cfg, **data}, "x.yaml")
    lm = {"model_name": "m", "num_fewshot": 0, "limit": 5, "tasks": [{"name": "gsm8k", "metrics": [
        {"name": "exact_match,strict-match", "value": 0.5},
        {"name": "exact_match,flexible-extract", "value": 0.0}]}]}
    with pytest.raises(EvalConfigError, match="flexible-extract floor is 0"):
        parse_eval_config(lm, "x.yaml")


@pytest.mark.parametrize(("tasks", "why"), [
    ([{"name": "mmlu", "metrics": [{"name": "acc", "value": 0.5}]}], "no gsm8k task"),
    ([{"name": "gsm8k", "metrics": [{"name": "exact_match,strict-match", "value": 0.5}]},
      {"name": "mmlu", "metrics": [{"name": "acc", "value": 0.5}]}], "would go unchecked"),
    ([{"name": "gsm8k", "metrics": [{"name": "acc", "value": 0.5}]}], "'acc' cannot be scored"),
    ([{"name": "gsm8k", "metrics": []}], "needs 'metrics'"),
    ("gsm8k", "must be a list"),
])
def test_lm_eval_harness_config_errors_name_file(tasks: object, why: str) -> None:
    with pytest.raises(EvalConfigError, match=rf"^x\.yaml: .*{why}"):
        parse_eval_config({"model_name": "m", "num_fewshot": 0, "limit": 5, "tasks": tasks}, "x.yaml")


@pytest.mark.parametrize("field", ["accuracy_threshold", "model_name", "num_fewshot", "num_questions"])
def test_each_missing_field_is_named(field: str) -> None:
    data = {k: v for k, v in GOOD.items() if k != field}
    with pytest.raises(EvalConfigError, match=rf"x\.yaml: missing field '{field}'"):
        parse_eval_config(data, "x.yaml")


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("num_questions", "10", "must be int"),
        ("num_questions", True, "must be int"),
        ("num_questions", 0, "must be at least 1"),
        ("accuracy_threshold", 1.5, r"must be in \[0, 1\]"),
        ("tolerance", -0.1, r"must be in \[0, 1\]"),
        ("max_tokens", 2.5, "must be int"),
        ("model_name", " ", "must not be empty"),
    ],
)
def test_bad_values_are_named(field: str, value: object, why: str) -> None:
    with pytest.raises(EvalConfigError, match=rf"x\.yaml: field '{field}' {why}"):
        parse_eval_config({**GOOD, field: value}, "x.yaml")


def test_not_a_mapping_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(EvalConfigError, match="expected a mapping"):
        load_eval_config(write(tmp_path, "- a\n- b\n"))
    with pytest.raises(EvalConfigError, match="not valid YAML"):
        load_eval_config(write(tmp_path, "a: [1\n"))


def test_relative_dataset_resolves_next_to_config(tmp_path: Path) -> None:
    cfg = parse_eval_config({**GOOD, "dataset": "d.jsonl"}, "x.yaml", base_dir=tmp_path)
    assert cfg.dataset == tmp_path / "d.jsonl"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (" She has 12 + 30 = 42 apples.\n#### 42", 42.0),
        ("The answer is 1,234.", 1234.0),
        ("#### -7", -7.0),
        ("It costs $3.50 in total", 3.5),
        (" 5 then 6\n\nQuestion: 99 apples", 6.0),  # stop at the next few-shot block
        ("Answer: 8 #### 9 and more 10", 9.0),  # the marked answer wins over later numbers
        ("no digits here", None),
        ("", None),
    ],
)
def test_extract_answer(text: str, value: float | None) -> None:
    assert extract_answer(text) == value


def test_gold_answer_needs_marker() -> None:
    assert parse_gold_answer("2 + 2 = 4\n#### 4") == 4.0
    with pytest.raises(ValueError, match="####"):
        parse_gold_answer("2 + 2 = 4")


def test_fewshot_prompt_shape() -> None:
    shots = [Problem("Q1?", "A1\n#### 1", 1.0), Problem("Q2?", "A2\n#### 2", 2.0)]
    prompt = build_prompt(shots, "Q3?")
    assert (
        prompt
        == "Question: Q1?\nAnswer: A1\n#### 1\n\nQuestion: Q2?\nAnswer: A2\n#### 2\n\nQuestion: Q3?\nAnswer:"
    )
    assert build_prompt([], "Q?") == "Question: Q?\nAnswer:"


def test_score_counts_correct_and_invalid() -> None:
    result = score([1.0, None, 3.0, 5.0], [1.0, 2.0, 4.0, 5.0], errors=1)
    assert (result.n, result.correct, result.invalid, result.errors) == (4, 2, 1, 1)
    assert result.accuracy == 0.5 and result.invalid_rate == 0.25
    with pytest.raises(ValueError):
        score([1.0], [1.0, 2.0])


def test_bad_dataset_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"question": "q", "answer": "#### 1"}\n{"question": "q", "answer": "none"}\n')
    with pytest.raises(EvalConfigError, match=r"d\.jsonl:2: bad GSM8K record"):
        load_dataset(path)


def test_run_eval_uses_disjoint_shots_and_counts_errors() -> None:
    cfg = parse_eval_config({**GOOD, "num_questions": 6, "num_fewshot": 2}, "x.yaml")
    problems = load_dataset(cfg.dataset)
    golds = {p.question: p.value for p in problems[2:8]}
    seen: list[str] = []

    def oracle(prompt: str) -> str:
        question = prompt.rsplit("Question: ", 1)[1].removesuffix("\nAnswer:")
        seen.append(question)
        assert prompt.count("Question: ") == 3  # two shots + the question
        if question == problems[2].question:
            raise ValueError("server said no")  # counted as an error, not dropped
        if question == problems[3].question:
            return " I do not know"
        return f" so #### {golds[question]:g}"

    result = run_eval("http://127.0.0.1:9", cfg, complete_fn=oracle, concurrency=2)
    assert sorted(seen) == sorted(golds)
    assert (result.n, result.correct, result.invalid, result.errors) == (6, 4, 2, 1)


def test_too_few_problems_is_an_error() -> None:
    cfg = parse_eval_config({**GOOD, "num_questions": 10_000}, "x.yaml")
    with pytest.raises(EvalConfigError, match="has 200 problems"):
        run_eval("http://127.0.0.1:9", cfg, complete_fn=lambda p: "1")


def test_args_satisfied_compares_flags_and_values() -> None:
    launched = ["--max-model-len", "512", "--enforce-eager", "--dtype=bfloat16", "--seed", "1"]
    assert args_satisfied(launched, ["--enforce-eager", "--max-model-len", "512"])
    assert args_satisfied(launched, ["--dtype", "bfloat16"])
    assert args_satisfied(launched, [])
    assert not args_satisfied(launched, ["--max-model-len", "1024"])
    assert not args_satisfied(launched, ["--max-num-seqs", "4"])
    assert not args_satisfied(["--enforce-eager"], ["--enforce-eager", "--tp", "2"])


def test_record_eval_gates_accuracy_with_its_questions_and_floor() -> None:
    cfg = parse_eval_config({**GOOD, "accuracy_threshold": 0.6, "tolerance": 0.05})
    book = MetricBook()
    record_eval(MetricsRecorder(book), "evals/x", score([1.0, None, 3.0, 5.0],
                                                        [1.0, 2.0, 4.0, 5.0]), cfg)
    acc, inv = book.metrics["evals/x/accuracy"], book.metrics["evals/x/invalid_rate"]
    assert (acc.samples, acc.better, acc.n, acc.unit) == ((0.5,), "higher", 4, "ratio")
    assert acc.min_value == pytest.approx(0.55)
    assert (inv.samples, inv.better, inv.n, inv.min_value) == ((0.25,), "lower", 4, None)


# Field sets of vLLM's tests/evals/gsm8k configs (written here, not copied): the loader
# reads model_name, accuracy_threshold, num_questions, num_fewshot, and optionally
# tolerance (0.08), server_args (shlex-split), env and startup_max_wait_seconds (600).
VLLM_SHAPES = {
    "bare": """\
model_name: org/Some-Model-30B
accuracy_threshold: 0.88
num_questions: 1319
num_fewshot: 5
server_args: >-
  --max-model-len 4096
  --tensor-parallel-size 4
  --enable-expert-parallel
""",
    "wait": """\
model_name: "org/Big-Model"
accuracy_threshold: 0.95
num_questions: 1319
num_fewshot: 5
startup_max_wait_seconds: 1200
server_args: >-
  --data-parallel-size 8 --enable-expert-parallel
""",
    "env_tol": """\
model_name: "org/Quant-Model"
accuracy_threshold: 0.7
tolerance: 0.03
num_questions: 1319
num_fewshot: 5
server_args: "--max-model-len 8192 --kv-cache-dtype fp8 --speculative-config '{\\"method\\": \\"mtp\\", \\"num_speculative_tokens\\": 1}'"
env:
  VLLM_USE_DEEP_GEMM: "1"
  VLLM_ALL2ALL_BACKEND: deepep_low_latency
  SOME_COUNT: 4
""",
    "no_args": """\
model_name: org/Small
accuracy_threshold: 0.3
num_questions: 100
num_fewshot: 0
""",
}


@pytest.mark.parametrize("shape", sorted(VLLM_SHAPES))
def test_vllm_config_shapes_load_verbatim(tmp_path: Path, shape: str) -> None:
    cfg = load_eval_config(write(tmp_path, VLLM_SHAPES[shape]))
    assert cfg.max_tokens == 256
    if shape == "bare":
        assert cfg.tolerance == 0.08 and cfg.floor == pytest.approx(0.80)
        assert cfg.server_args == ("--max-model-len", "4096", "--tensor-parallel-size", "4", "--enable-expert-parallel")
        assert cfg.env == () and cfg.startup_max_wait_s == 600
    elif shape == "wait":
        assert cfg.startup_max_wait_s == 1200
    elif shape == "env_tol":
        assert cfg.tolerance == 0.03
        assert dict(cfg.env) == {"VLLM_USE_DEEP_GEMM": "1", "VLLM_ALL2ALL_BACKEND": "deepep_low_latency", "SOME_COUNT": "4"}
        assert cfg.server_args[-2:] == ("--speculative-config", '{"method": "mtp", "num_speculative_tokens": 1}')
    else:
        assert cfg.server_args == ()


@pytest.mark.parametrize(("extra", "why"), [
    ({"env": {"A": True}}, "'env' must map names"),
    ({"env": ["A=1"]}, "'env' must be dict"),
    ({"startup_max_wait_seconds": 0}, "must be a positive number"),
    ({"server_args": "--x 'unclosed"}, "cannot be split"),
])
def test_vllm_optional_fields_are_checked(extra: dict, why: str) -> None:
    with pytest.raises(EvalConfigError, match=why):
        parse_eval_config({**GOOD, **extra}, "x.yaml")


def test_every_shipped_config_can_fail_and_has_its_questions() -> None:
    # The long forms (floor 0.0) and tiny-arith-vllm-shape (floor -0.08) shipped as gates
    # no accuracy could fail, on problems the trained model scores 0 on.
    configs = sorted((Path(__file__).resolve().parents[1] / "suites" / "evals" / "configs")
                     .glob("*.yaml"))
    assert configs
    for path in configs:
        cfg = load_eval_config(path)  # refuses a floor at or below 0
        assert cfg.floor > 0 and all(floor > 0 for _, floor in cfg.checks), path
        assert cfg.dataset.name == "arithmetic_short_held.jsonl", (
            f"{path}: the trained model scores about 0 on any other shipped problems")
        split_problems(load_dataset(cfg.dataset), cfg)
