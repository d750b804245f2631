"""Build a tiny random Llama model and a BPE tokenizer with a chat template, offline.

About 4 s and 3 MB: a byte-level BPE (vocab 4096) trained on local text, wrapped as a
``PreTrainedTokenizerFast`` with a chat template, and a 2-layer Llama (hidden 128,
4 heads, 2 KV heads: head dim 32, which vLLM's CPU attention supports) with random
bf16 weights. Needs torch, transformers and tokenizers (the vLLM venv has them); they
are imported inside :func:`build_tiny_model` only.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

__all__ = ["TINY_MODEL_NAME", "CHAT_TEMPLATE", "SPECIAL_TOKENS", "build_tiny_model", "main"]

TINY_MODEL_NAME = "tiny-llama"

SPECIAL_TOKENS = [
    "<unk>",
    "<s>",
    "</s>",
    "<pad>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|tool|>",
    "<|end|>",
]

# Each message renders on its own; earlier turns never change as the conversation grows.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|{{ message['role'] }}|>{{ message['content'] }}<|end|>"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def _corpus() -> list[str]:
    from serving.client import make_prompts
    from serving.wordproblems import generate

    lines = [r["question"] + "\n" + r["answer"] for r in generate(400, seed=1)]
    lines += make_prompts(400, seed=1)
    lines += [" ".join(str(i) for i in range(k, k + 50)) for k in range(0, 2000, 50)]
    return lines


def build_tiny_model(out_dir: str | Path, *, seed: int = 0, vocab_size: int = 4096) -> Path:
    """Write tokenizer and model files into ``out_dir`` (created); return it."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        additional_special_tokens=SPECIAL_TOKENS[4:],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.model_max_length = 512
    fast.save_pretrained(out)

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    (out / "tiny_model.json").write_text(json.dumps({"name": TINY_MODEL_NAME, "seed": seed}))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(build_tiny_model(args.out, seed=args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
