"""A tiny Llama trained on the arithmetic word problems, so an eval meets a real score.

The random ``serving.tiny_model`` answers at chance (0%); this one is trained, offline on
CPU, to answer ``serving.wordproblems``' problems in GSM8K's format, greedy and zero-shot
(``Question: ...\\nAnswer: <steps>\\n#### N``). What makes that learnable in a couple of
CPU minutes:

- every digit is its own token (``Digits(individual_digits=True)`` before a byte-level
  BPE whose vocabulary is the template's words), so a problem is about 45 tokens and a
  sum is written digit by digit rather than as one of hundreds of number tokens;
- the loss is on the answer only (the question is given, not predicted);
- the problems are sampled fresh from the generator (seeded), never from the held set.

The result is cached by a hash of its recipe (:data:`RECIPE` plus the source of this
module and of the generator): a second call returns the cached directory at once. The
cache is ``$GATES_MODEL_CACHE`` or ``~/.cache/gpu-ci-gates/models``; a fresh CI machine
trains once, every later session (and every variant of one session) reuses it.

Twins for the checkpoint-swap story (:func:`write_twin`): ``fp8`` rounds every linear
layer's weight through float8 e4m3 with one scale per output channel and stores it back
as bfloat16 (a format the CPU engine loads, values a channelwise FP8 checkpoint would
hold); ``broken`` adds Gaussian noise to every weight matrix, enough to cost tens of
points.

Needs torch, transformers and tokenizers (the vLLM venv has them), imported inside the
functions only.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = [
        "RECIPE",
    "SCORING_MODEL_NAME",
    "cache_root",
    "ensure_trained_model",
    "held_problems",
    "recipe_hash",
    "train",
    "evaluate_offline",
    "write_twin",
    "main",
]

SCORING_MODEL_NAME = "tiny-arith"
CACHE_ENV = "GATES_MODEL_CACHE"

# Everything that decides the weights. A change here (or in this module's or the
# generator's source) is a new hash, so a new model; the old one stays in the cache.
RECIPE: dict[str, Any] = {
    "format": "v1",
    "train_seed": 7,
    "data_seed": 1001,
    "steps": 400,
    "batch": 64,
    "lr": 3e-3,
    "warmup": 30,
    "weight_decay": 0.0,
    "threads": 1,
    "vocab": 384,
    "hidden": 128,
    "intermediate": 256,
    "layers": 2,
    "heads": 4,
    "kv_heads": 2,
    "max_positions": 512,
}

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|{{ message['role'] }}|>{{ message['content'] }}<|end|>"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<pad>", "<|system|>", "<|user|>", "<|assistant|>",
                  "<|tool|>", "<|end|>"]


def prompt_of(question: str) -> str:
    """The zero-shot prompt, exactly as ``serving.evals.build_prompt([], question)``."""
    return f"Question: {question}\nAnswer:"


def recipe_hash(recipe: dict[str, Any] | None = None) -> str:
    """Hash of what decides the weights (16 hex digits): the recipe, the problem generator's
    source (the training data) and the torch / transformers / tokenizers versions. The
    trainer's code is represented by ``RECIPE["format"]``: bump it when training changes."""
    from importlib.metadata import PackageNotFoundError, version

    from serving import wordproblems

    h = hashlib.sha256(json.dumps(recipe or RECIPE, sort_keys=True).encode())
    h.update(Path(wordproblems.__file__ or "").read_bytes())
    for dist in ("torch", "transformers", "tokenizers"):
        try:
            h.update(f"{dist}=={version(dist)}".encode())
        except PackageNotFoundError:
            h.update(f"{dist} missing".encode())
    return h.hexdigest()[:16]


def cache_root() -> Path:
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "gpu-ci-gates" / "models"


def held_problems() -> list[dict[str, str]]:
    """The held set (``serving/data/arithmetic_short_held.jsonl``): never trained on."""
    from serving.wordproblems import SHORT_HELD_COUNT, SHORT_HELD_SEED, generate_short

    return generate_short(SHORT_HELD_COUNT, seed=SHORT_HELD_SEED)


def _build_tokenizer(recipe: dict[str, Any], corpus: Sequence[str]) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=recipe["vocab"], special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
        pad_token="<pad>", additional_special_tokens=SPECIAL_TOKENS[4:],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.model_max_length = recipe["max_positions"]
    return fast


def _problem_stream(seed: int, held: set[str]) -> Iterator[dict[str, str]]:
    """Endless seeded problems, none of them a held question."""
    from serving.wordproblems import generate_short

    block = 0
    while True:
        for p in generate_short(4096, seed=seed * 100_003 + block):
            if p["question"] not in held:
                yield p
        block += 1


def _encode(tok: Any, problem: dict[str, str]) -> tuple[list[int], int]:
    """Token ids of prompt + answer + EOS, and where the answer starts."""
    prompt = tok(prompt_of(problem["question"]))["input_ids"]
    full = tok(prompt_of(problem["question"]) + " " + problem["answer"])["input_ids"]
    if full[: len(prompt)] != prompt:  # the answer must not re-tokenize the prompt's end
        raise ValueError(f"prompt is not a token prefix of prompt + answer: {problem}")
    return full + [tok.eos_token_id], len(prompt)


def train(out_dir: Path, recipe: dict[str, Any] | None = None, *, log: Any = None) -> dict[str, Any]:
    """Train per ``recipe`` and save model + tokenizer in HF format into ``out_dir``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    recipe = recipe or RECIPE
    t0, c0 = time.monotonic(), time.process_time()
    threads = torch.get_num_threads()
    torch.set_num_threads(min(recipe["threads"], os.cpu_count() or 1))
    try:
        torch.manual_seed(recipe["train_seed"])
        held = {p["question"] for p in held_problems()}
        stream = _problem_stream(recipe["data_seed"], held)
        corpus = [prompt_of(p["question"]) + " " + p["answer"] for p, _ in zip(stream, range(4000), strict=False)]
        tok = _build_tokenizer(recipe, corpus)
        config = LlamaConfig(
            vocab_size=len(tok), hidden_size=recipe["hidden"],
            intermediate_size=recipe["intermediate"], num_hidden_layers=recipe["layers"],
            num_attention_heads=recipe["heads"], num_key_value_heads=recipe["kv_heads"],
            max_position_embeddings=recipe["max_positions"], bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
            tie_word_embeddings=False,
        )
        model = LlamaForCausalLM(config)
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=recipe["lr"], betas=(0.9, 0.98),
                                weight_decay=recipe["weight_decay"])
        steps, warmup = recipe["steps"], recipe["warmup"]
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: min(1.0, (s + 1) / warmup) * max(0.05, 1 - s / steps))
        losses = []
        for step in range(steps):
            batch = [_encode(tok, next(stream)) for _ in range(recipe["batch"])]
            width = max(len(ids) for ids, _ in batch)
            ids = torch.full((len(batch), width), tok.pad_token_id)
            labels = torch.full((len(batch), width), -100)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for i, (seq, start) in enumerate(batch):
                ids[i, : len(seq)] = torch.tensor(seq)
                labels[i, start : len(seq)] = torch.tensor(seq[start:])
                mask[i, : len(seq)] = 1
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(loss.item())
            if log and (step % 50 == 0 or step == steps - 1):
                log(f"step {step} loss {loss.item():.4f} wall {time.monotonic() - t0:.0f} s "
                    f"cpu {time.process_time() - c0:.0f} s")
        train_s = time.monotonic() - t0
        out_dir.mkdir(parents=True, exist_ok=True)
        model.eval()
        model.to(torch.bfloat16).save_pretrained(out_dir, safe_serialization=True)
        tok.save_pretrained(out_dir)
        info = {"name": SCORING_MODEL_NAME, "recipe": recipe, "recipe_hash": recipe_hash(recipe),
                "train_s": round(train_s, 1), "final_loss": round(sum(losses[-20:]) / 20, 4),
                "torch_threads": torch.get_num_threads()}
        (out_dir / "trained_model.json").write_text(json.dumps(info, indent=1, sort_keys=True))
        return info
    finally:
        torch.set_num_threads(threads)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)  # two sessions on one machine train once, not twice
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_trained_model(recipe: dict[str, Any] | None = None, *, root: Path | None = None,
                         log: Any = None) -> Path:
    """The trained model's directory: from the cache, or trained now and cached."""
    recipe = recipe or RECIPE
    root = root or cache_root()
    final = root / f"{SCORING_MODEL_NAME}-{recipe_hash(recipe)}"
    with _locked(root / ".lock"):
        if (final / "trained_model.json").is_file():
            return final
        tmp = Path(tempfile.mkdtemp(prefix=".train-", dir=root))
        try:
            train(tmp, recipe, log=log)
            if final.exists():  # an unfinished earlier copy (no trained_model.json)
                shutil.rmtree(final)
            tmp.rename(final)  # atomic: a reader never sees half a model
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def evaluate_offline(model_dir: Path, problems: Sequence[dict[str, str]], *,
                     max_new_tokens: int = 40, batch: int = 250) -> float:
    """Greedy zero-shot accuracy in transformers (no server): the training's own check."""
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    from serving.evals import extract_answer, parse_gold_answer

    torch.set_num_threads(1)  # see RECIPE["threads"]: two spin on a shared machine
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = LlamaForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    correct = 0
    for lo in range(0, len(problems), batch):
        chunk = problems[lo : lo + batch]
        prompts = [tok(prompt_of(p["question"]))["input_ids"] for p in chunk]
        width = max(map(len, prompts))
        ids = torch.tensor([[tok.pad_token_id] * (width - len(p)) + p for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens,
                                 do_sample=False, pad_token_id=tok.pad_token_id,
                                 eos_token_id=tok.eos_token_id)
        for p, row in zip(chunk, out[:, width:], strict=True):
            got = extract_answer(tok.decode(row, skip_special_tokens=True))
            correct += got is not None and abs(got - parse_gold_answer(p["answer"])) < 1e-6
    return correct / len(problems)


_FP8_LAYER = re.compile(r"\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)\.weight$")


def write_twin(model_dir: Path, out_dir: Path, kind: str, *, seed: int = 0,
               noise: float = 0.5) -> Path:
    """A copy of the model with its weight matrices changed: ``fp8`` (each linear layer's
    weight rounded through float8 e4m3 with one scale per output channel, stored as
    bfloat16; embeddings, LM head and norms unchanged) or ``broken`` (Gaussian noise of
    ``noise`` times each matrix's standard deviation on every matrix)."""
    if kind not in ("fp8", "broken"):
        raise ValueError(f"twin kind must be 'fp8' or 'broken', got {kind!r}")
    import torch
    from safetensors.torch import load_file, save_file

    out_dir.mkdir(parents=True, exist_ok=True)
    for f in model_dir.iterdir():
        if f.is_file() and f.suffix != ".safetensors":
            shutil.copy2(f, out_dir / f.name)
    gen = torch.Generator().manual_seed(seed)
    for f in sorted(model_dir.glob("*.safetensors")):
        tensors = load_file(f)
        for name, w in tensors.items():
            if w.ndim != 2:  # norms stay: FP8 checkpoints keep them in high precision
                continue
            w32 = w.float()
            if kind == "fp8":
                if not _FP8_LAYER.search(name):
                    continue  # embeddings and the LM head stay bf16, as in FP8 checkpoints
                # One scale per output channel (row), as channelwise FP8 checkpoints hold.
                top = w32.abs().amax(dim=1, keepdim=True).clamp(min=1e-12)
                scale = top / torch.finfo(torch.float8_e4m3fn).max
                w32 = (w32 / scale).to(torch.float8_e4m3fn).float() * scale
            else:
                w32 = w32 + noise * w32.std() * torch.randn(w32.shape, generator=gen)
            tensors[name] = w32.to(w.dtype).contiguous()
        save_file(tensors, out_dir / f.name, metadata={"format": "pt"})
    (out_dir / "twin.json").write_text(json.dumps({"kind": kind, "of": str(model_dir),
                                                   "seed": seed, "noise": noise}))
    return out_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=None, help=f"default ${CACHE_ENV} or ~/.cache/...")
    parser.add_argument("--eval", type=int, default=500, metavar="N",
                        help="greedy accuracy on the first N held problems (0: skip)")
    parser.add_argument("--twins", action="store_true", help="also the fp8 and broken twins'")
    args = parser.parse_args(argv)
    t0 = time.monotonic()
    path = ensure_trained_model(root=args.cache, log=lambda m: print(m, flush=True))
    info = json.loads((path / "trained_model.json").read_text())
    print(f"{path} (train {info['train_s']} s, ready after {time.monotonic() - t0:.1f} s)")
    if args.eval:
        problems = held_problems()[: args.eval]
        acc = evaluate_offline(path, problems)
        print(f"held accuracy {acc:.3f} on {len(problems)} problems (transformers, greedy)")
        if args.twins:
            with tempfile.TemporaryDirectory() as tmp:
                for kind in ("fp8", "broken"):
                    twin = write_twin(path, Path(tmp) / kind, kind)
                    print(f"{kind} twin: held accuracy {evaluate_offline(twin, problems):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
