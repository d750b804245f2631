"""Accuracy evals from vLLM-style YAML configs over GSM8K-format JSONL datasets.

Config validation, few-shot prompting, answer extraction and scoring are pure; only
:func:`run_eval` talks to a server.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
import yaml

from serving.client import complete, new_session

__all__ = [
    "DEFAULT_DATASET",
    "EvalConfig",
    "EvalConfigError",
    "Problem",
    "EvalResult",
    "record_eval",
    "load_eval_config",
    "parse_eval_config",
    "load_dataset",
    "parse_gold_answer",
    "extract_answer",
    "extract_filtered",
    "LM_EVAL_FILTERS",
    "build_prompt",
    "score",
    "split_problems",
    "args_satisfied",
    "run_eval",
]

DEFAULT_DATASET = Path(__file__).parent / "data" / "arithmetic_word_problems.jsonl"

# Field -> (types accepted, required). Names, meaning and defaults follow vLLM's gsm8k
# eval configs (tests/evals/gsm8k: its loader reads model_name, accuracy_threshold,
# num_questions, num_fewshot, and optionally tolerance, server_args, env and
# startup_max_wait_seconds; its evaluator's max_tokens defaults to 256), so a vLLM
# config loads verbatim. `dataset` is this tool's: a local JSONL.
_SCHEMA: dict[str, tuple[tuple[type, ...], bool]] = {
    "model_name": ((str,), True),
    "accuracy_threshold": ((int, float), True),
    "tolerance": ((int, float), False),
    "num_questions": ((int,), True),
    "num_fewshot": ((int,), True),
    "max_tokens": ((int,), False),
    "server_args": ((str, list), False),
    "env": ((dict,), False),  # environment of the server process
    "startup_max_wait_seconds": ((int, float), False),
    "dataset": ((str,), False),  # local JSONL, relative to the config file
}
DEFAULT_TOLERANCE = 0.08  # vLLM's, when a config gives none
DEFAULT_MAX_TOKENS = 256  # vLLM's evaluator default
DEFAULT_STARTUP_WAIT_S = 600.0  # vLLM's server start-up wait
LM_EVAL_RTOL = 0.08  # vLLM's lm-eval-harness DEFAULT_RTOL, when a config gives no rtol
# lm-eval-harness's two gsm8k scores, both checked by vLLM's test_lm_eval_correctness (every
# metric of every task): "strict-match" takes only an answer written after '####';
# "flexible-extract" takes the last number in the completion.
LM_EVAL_FILTERS = ("strict-match", "flexible-extract")
# Fields vLLM's configs carry for its own launcher or other tools: read without a
# "did you mean" hint (max_model_len is not a typo of model_name).
_VLLM_FIELDS = ("max_model_len", "max_concurrency", "min_acceptance_length", "trust_remote_code",
                "batch_size", "backend", "enforce_eager", "apply_chat_template",
                "fewshot_as_multiturn", "gen_kwargs", "tp_size")

_STOP = ("Question:", "\n\n")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_MARKED = re.compile(r"####\s*\$?\s*(-?\d[\d,]*(?:\.\d+)?)")


class EvalConfigError(ValueError):
    """A malformed eval config or dataset; the message names the file and field."""


@dataclass(frozen=True)
class EvalConfig:
    model_name: str
    accuracy_threshold: float
    tolerance: float
    num_questions: int
    num_fewshot: int
    max_tokens: int
    server_args: tuple[str, ...]
    dataset: Path
    source: str = "<config>"
    env: tuple[tuple[str, str], ...] = ()
    startup_max_wait_s: float = DEFAULT_STARTUP_WAIT_S
    notes: tuple[str, ...] = ()  # fields read but not used here (vLLM's own, or typos)
    # lm-eval-harness configs: (filter, floor) per gsm8k metric, each gated on its own
    checks: tuple[tuple[str, float], ...] = ()

    @property
    def floor(self) -> float:
        """The hard floor ``accuracy_threshold - tolerance`` (vLLM's pass condition)."""
        return self.accuracy_threshold - self.tolerance


@dataclass(frozen=True)
class Problem:
    question: str
    answer: str  # the dataset's full answer text, ending in '#### N'
    value: float


@dataclass(frozen=True)
class EvalResult:
    n: int
    correct: int
    invalid: int
    errors: int
    predictions: tuple[float | None, ...]
    filtered: tuple[tuple[str, int], ...] = ()  # correct answers per lm-eval filter

    @property
    def accuracy(self) -> float:
        return self.correct / self.n if self.n else 0.0

    def accuracy_of(self, name: str) -> float:
        """The accuracy under one of `LM_EVAL_FILTERS`."""
        return dict(self.filtered)[name] / self.n if self.n else 0.0

    @property
    def invalid_rate(self) -> float:
        return self.invalid / self.n if self.n else 0.0


def parse_eval_config(
    data: Any, source: str = "<config>", base_dir: Path | None = None
) -> EvalConfig:
    """Validate a mapping against the schema; every error names ``source`` and the field."""
    if not isinstance(data, Mapping):
        raise EvalConfigError(f"{source}: expected a mapping of fields, got {type(data).__name__}")
    notes: list[str] = []
    lm_checks: list[tuple[str, float]] = []
    if "tasks" in data:  # vLLM's lm-eval-harness format (.buildkite/lm-eval-harness/configs)
        data, notes, lm_checks = _from_lm_eval(data, source)
    # vLLM reads the fields it uses and ignores the rest (its configs carry max_model_len,
    # max_concurrency, min_acceptance_length, ... for other tools): so does this loader,
    # with a note per field, so a typo of a known field is visible rather than silent.
    for key in data:
        if key not in _SCHEMA:
            close = [] if key in _VLLM_FIELDS else difflib.get_close_matches(str(key), _SCHEMA, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else " (vLLM's, for other tools)" \
                if key in _VLLM_FIELDS else ""
            notes.append(f"{source}: field {key!r} is not used here, ignored{hint}")
    data = {k: v for k, v in data.items() if k in _SCHEMA}
    for key, (types, required) in _SCHEMA.items():
        if key not in data:
            if required:
                raise EvalConfigError(f"{source}: missing field {key!r}")
            continue
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, types):
            names = " or ".join(t.__name__ for t in types)
            raise EvalConfigError(
                f"{source}: field {key!r} must be {names}, got {type(value).__name__}"
            )
    data = {"tolerance": DEFAULT_TOLERANCE, "max_tokens": DEFAULT_MAX_TOKENS, "server_args": "",
            "env": {}, "startup_max_wait_seconds": DEFAULT_STARTUP_WAIT_S, **data}
    threshold, tolerance = float(data["accuracy_threshold"]), float(data["tolerance"])
    wait = float(data["startup_max_wait_seconds"])
    checks = [
        ("accuracy_threshold", 0.0 <= threshold <= 1.0, "must be in [0, 1]"),
        ("tolerance", 0.0 <= tolerance <= 1.0 and math.isfinite(tolerance), "must be in [0, 1]"),
        ("num_questions", data["num_questions"] >= 1, "must be at least 1"),
        ("num_fewshot", data["num_fewshot"] >= 0, "must be at least 0"),
        ("max_tokens", data["max_tokens"] >= 1, "must be at least 1"),
        ("model_name", bool(data["model_name"].strip()), "must not be empty"),
        ("startup_max_wait_seconds", math.isfinite(wait) and wait > 0, "must be a positive number of seconds"),
        ("env", all(isinstance(k, str) and isinstance(v, str | int | float) and not isinstance(v, bool)
                    for k, v in data["env"].items()), "must map names to strings or numbers"),
    ]
    for key, ok, why in checks:
        if not ok:
            raise EvalConfigError(f"{source}: field {key!r} {why}, got {data[key]!r}")
    for name, floor in [("accuracy_threshold - tolerance", threshold - tolerance),
                        *((f"{f} floor", fl) for f, fl in lm_checks)]:
        if floor <= 0.0:  # an accuracy is never below 0: such a gate passes whatever happens
            raise EvalConfigError(
                f"{source}: {name} is {floor:.4g}, a floor no accuracy can fail; give a "
                "threshold above its tolerance, measured on a dataset the model can score on")
    args = data["server_args"]
    if isinstance(args, list):
        if not all(isinstance(a, str) for a in args):
            raise EvalConfigError(f"{source}: field 'server_args' must be a list of strings")
        server_args = tuple(args)
    else:
        try:  # vLLM splits the string with shlex: quoted values keep their spaces
            server_args = tuple(shlex.split(args))
        except ValueError as exc:
            raise EvalConfigError(f"{source}: field 'server_args' cannot be split: {exc}") from None
    dataset = Path(data["dataset"]) if "dataset" in data else DEFAULT_DATASET
    if not dataset.is_absolute():
        dataset = (base_dir or Path.cwd()) / dataset
    return EvalConfig(
        model_name=data["model_name"],
        accuracy_threshold=threshold,
        tolerance=tolerance,
        num_questions=data["num_questions"],
        num_fewshot=data["num_fewshot"],
        max_tokens=data["max_tokens"],
        server_args=server_args,
        dataset=dataset,
        source=source,
        env=tuple((k, str(v)) for k, v in data["env"].items()),
        startup_max_wait_s=wait,
        notes=tuple(notes),
        checks=tuple(lm_checks),
    )


def _from_lm_eval(data: Mapping[str, Any], source: str
                  ) -> tuple[dict[str, Any], list[str], list[tuple[str, float]]]:
    """vLLM's lm-eval-harness config (``model_name``, ``tasks: [{name, metrics: [{name,
    value}]}]``, ``limit``, ``num_fewshot``, ``rtol``, ``max_model_len``, ``env_vars``)
    as this loader's fields, and one (filter, floor) check per metric.

    vLLM's test_lm_eval_correctness checks every metric of every task with
    ``np.isclose(value, measured, rtol)``; here each gsm8k metric (``exact_match,strict-match``
    and ``exact_match,flexible-extract``) is a floor ``value - rtol * value`` of its own
    (one-sided: a score above the reference passes). A task or metric this tool cannot
    score is an error, never a note: it would pass unchecked. The threshold and tolerance
    fields are the strict-match metric's (else the first). ``max_model_len`` (vLLM's
    launcher passes it, default 4096) becomes ``--max-model-len`` unless ``server_args``
    sets it; ``env_vars`` is the server's environment, as ``env``."""
    tasks = data["tasks"]
    if not isinstance(tasks, list) or not all(isinstance(t, Mapping) for t in tasks):
        raise EvalConfigError(f"{source}: field 'tasks' must be a list of {{name, metrics}} mappings")
    gsm = [t for t in tasks if str(t.get("name", "")).startswith("gsm8k")]
    if not gsm:
        names = [t.get("name") for t in tasks]
        raise EvalConfigError(f"{source}: field 'tasks' has no gsm8k task (got {names}); "
                              "this tool runs GSM8K-format datasets only")
    others = [t.get("name") for t in tasks if t is not gsm[0]]
    if others:
        raise EvalConfigError(f"{source}: task(s) {others} cannot be run here (one gsm8k task, "
                              "GSM8K-format datasets only) and their metrics would go unchecked; "
                              "give them a config of their own for lm-eval")
    metrics = gsm[0].get("metrics")
    if not isinstance(metrics, list) or not metrics or not all(
            isinstance(m, Mapping) and "name" in m and "value" in m for m in metrics):
        raise EvalConfigError(f"{source}: task {gsm[0].get('name')!r} needs 'metrics': a list "
                              "of {name, value}")
    rtol = data.get("rtol", LM_EVAL_RTOL)
    checks: list[tuple[str, float, float]] = []
    for m in metrics:
        measure, _, flt = str(m["name"]).partition(",")
        value = m["value"]
        if measure != "exact_match" or flt not in LM_EVAL_FILTERS:
            known = ", ".join(f"'exact_match,{f}'" for f in LM_EVAL_FILTERS)
            raise EvalConfigError(f"{source}: metric {m['name']!r} cannot be scored here and would "
                                  f"go unchecked; known: {known}")
        for name, v in (("value", value), ("rtol", rtol)):
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise EvalConfigError(f"{source}: {name} must be a number, got {v!r}")
        if any(f == flt for f, _, _ in checks):
            raise EvalConfigError(f"{source}: metric {m['name']!r} is given twice; give it once")
        checks.append((flt, float(value), float(rtol) * float(value)))
    flt, value, tol = next((c for c in checks if c[0] == "strict-match"), checks[0])
    notes = [f"{source}: lm-eval-harness format: " + "; ".join(
        f"gsm8k exact_match,{f} = {v:g} checked at {v - t:.4g} (rtol {rtol:g})"
        for f, v, t in checks)]
    out = {k: v for k, v in data.items()
           if k not in ("tasks", "limit", "rtol", "max_model_len", "env_vars")}
    out["accuracy_threshold"] = value
    out["tolerance"] = tol
    if "limit" in data:
        out["num_questions"] = data["limit"]
    if "env_vars" in data:
        if "env" in data:
            raise EvalConfigError(f"{source}: give the server's environment as env_vars or env, "
                                  "not both")
        out["env"] = data["env_vars"]
    if "max_model_len" in data:
        length = data["max_model_len"]
        if isinstance(length, bool) or not isinstance(length, int) or length < 1:
            raise EvalConfigError(f"{source}: field 'max_model_len' must be a positive int, got "
                                  f"{length!r}")
        args = out.get("server_args", "")
        try:
            given = shlex.split(args) if isinstance(args, str) else list(args)
        except ValueError as exc:
            raise EvalConfigError(f"{source}: field 'server_args' cannot be split: {exc}") from None
        if not any(a == "--max-model-len" or a.startswith("--max-model-len=") for a in given):
            out["server_args"] = [*given, "--max-model-len", str(length)]
    return out, notes, [(f, v - t) for f, v, t in checks]


def load_eval_config(path: str | Path) -> EvalConfig:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise EvalConfigError(f"{path}: not valid YAML: {exc}") from None
    return parse_eval_config(data, str(path), base_dir=path.parent)


def parse_gold_answer(answer: str) -> float:
    """The number after GSM8K's ``####`` marker."""
    m = _MARKED.search(answer)
    if m is None:
        raise ValueError(f"answer has no '#### N' marker: {answer[-60:]!r}")
    return float(m.group(1).replace(",", ""))


def load_dataset(path: str | Path) -> list[Problem]:
    """Read GSM8K-format JSONL: one ``{"question": ..., "answer": "... #### N"}`` a line."""
    path = Path(path)
    problems = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            problems.append(
                Problem(obj["question"], obj["answer"], parse_gold_answer(obj["answer"]))
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise EvalConfigError(f"{path}:{lineno}: bad GSM8K record: {exc}") from None
    return problems


def _cut(completion: str) -> str:
    for stop in _STOP:
        idx = completion.find(stop)
        if idx > 0:
            completion = completion[:idx]
    return completion


def extract_answer(completion: str) -> float | None:
    """The model's answer: after '####' if it wrote one, else the last number; ``None``
    (invalid) when there is no number. Text after the next few-shot 'Question:' is cut
    off first so a continued prompt does not count."""
    completion = _cut(completion)
    m = _MARKED.search(completion)
    return _value(m.group(1)) if m is not None else extract_filtered(completion,
                                                                      "flexible-extract")


def extract_filtered(completion: str, name: str) -> float | None:
    """The answer as lm-eval-harness's gsm8k filter ``name`` reads it (`LM_EVAL_FILTERS`):
    "strict-match" only a number written after '####', "flexible-extract" the last number
    (both after the cut at the next few-shot block); ``None`` when it finds none."""
    completion = _cut(completion)
    if name == "strict-match":
        m = _MARKED.search(completion)
        return _value(m.group(1)) if m is not None else None
    if name != "flexible-extract":
        raise ValueError(f"unknown filter {name!r}; known: {', '.join(LM_EVAL_FILTERS)}")
    numbers = _NUMBER.findall(completion)
    return _value(numbers[-1]) if numbers else None


def _value(raw: str) -> float | None:
    raw = raw.replace(",", "")
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def build_prompt(shots: Sequence[Problem], question: str) -> str:
    """GSM8K few-shot prompt: solved examples, then the open question."""
    parts = [f"Question: {p.question}\nAnswer: {p.answer}\n\n" for p in shots]
    return "".join(parts) + f"Question: {question}\nAnswer:"


def _correct(predictions: Sequence[float | None], golds: Sequence[float]) -> int:
    if len(predictions) != len(golds):
        raise ValueError(f"{len(predictions)} predictions for {len(golds)} questions")
    return sum(1 for p, g in zip(predictions, golds, strict=True)
               if p is not None and abs(p - g) < 1e-6)


def score(
    predictions: Sequence[float | None], golds: Sequence[float], errors: int = 0,
    filtered: Mapping[str, Sequence[float | None]] | None = None,
) -> EvalResult:
    """Count correct and invalid answers; ``filtered``: each lm-eval filter's answers."""
    correct = _correct(predictions, golds)
    invalid = sum(1 for p in predictions if p is None)
    by_filter = tuple((name, _correct(preds, golds)) for name, preds in (filtered or {}).items())
    return EvalResult(len(golds), correct, invalid, errors, tuple(predictions), by_filter)


def split_problems(
    problems: Sequence[Problem], config: EvalConfig
) -> tuple[list[Problem], list[Problem]]:
    """Few-shot examples first, then the evaluated questions (disjoint)."""
    need = config.num_fewshot + config.num_questions
    if len(problems) < need:
        raise EvalConfigError(
            f"{config.source}: num_fewshot + num_questions = {need} but dataset "
            f"{config.dataset} has {len(problems)} problems"
        )
    return list(problems[: config.num_fewshot]), list(problems[config.num_fewshot : need])


def _flags(args: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for i, arg in enumerate(args):
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if not eq:
                nxt = args[i + 1] if i + 1 < len(args) else "--"
                value = "" if nxt.startswith("--") else nxt
            out[name] = value
    return out


def args_satisfied(launched: Sequence[str], wanted: Sequence[str]) -> bool:
    """Whether a server launched with ``launched`` already has every flag (and value) of
    ``wanted``, so an eval config's ``server_args`` can reuse it instead of a new start."""
    have = _flags(launched)
    return all(have.get(k, None) == v for k, v in _flags(wanted).items())


def run_eval(
    base_url: str,
    config: EvalConfig,
    *,
    model: str | None = None,
    concurrency: int = 8,
    timeout_s: float = 60.0,
    complete_fn: Callable[[str], str] | None = None,
) -> EvalResult:
    """Ask every question once (greedy) and score. A failed request counts as an error
    and an invalid answer, never as a silent drop."""
    shots, questions = split_problems(load_dataset(config.dataset), config)
    model = model or config.model_name

    def ask(problem: Problem) -> tuple[str | None, bool]:
        prompt = build_prompt(shots, problem.question)
        try:
            if complete_fn is not None:
                text = complete_fn(prompt)
            else:
                with new_session() as session:
                    text = complete(
                        session,
                        base_url,
                        model,
                        prompt,
                        max_tokens=config.max_tokens,
                        stop=["Question:"],
                        timeout_s=timeout_s,
                    )
        except (requests.RequestException, KeyError, ValueError):
            return None, True
        return text, False

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        answers = list(pool.map(ask, questions))
    texts = [t for t, _ in answers]
    return score(
        [None if t is None else extract_answer(t) for t in texts],
        [q.value for q in questions],
        errors=sum(1 for _, err in answers if err),
        filtered={f: [None if t is None else extract_filtered(t, f) for t in texts]
                  for f in LM_EVAL_FILTERS},
    )


def record_eval(metrics: Any, key: str, result: EvalResult, config: EvalConfig) -> None:
    """Record ``key/accuracy`` (gated with its binomial noise: N questions, and the
    config's ``accuracy_threshold - tolerance`` floor) and ``key/invalid_rate``; for an
    lm-eval-harness config also ``key/FILTER/accuracy`` per metric it gives (strict-match,
    flexible-extract), each with its own floor, as vLLM checks each.

    ``metrics`` is the gates plugin's ``metrics`` fixture (anything with its ``record``).
    """
    metrics.record(f"{key}/accuracy", result.accuracy, unit="ratio", better="higher",
                   n=result.n, min_value=config.floor)
    metrics.record(f"{key}/invalid_rate", result.invalid_rate, unit="ratio", better="lower",
                   n=result.n)
    for name, floor in config.checks:  # an lm-eval-harness config: each metric vLLM checks
        metrics.record(f"{key}/{name}/accuracy", result.accuracy_of(name), unit="ratio",
                       better="higher", n=result.n, min_value=floor)
