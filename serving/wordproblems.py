"""Generate small arithmetic word problems in GSM8K's JSONL format (pure, seeded).

The shipped ``data/arithmetic_word_problems.jsonl`` is ``generate(SHIPPED_COUNT,
seed=SHIPPED_SEED)``; a test checks the file still matches. Regenerate with
``python -m serving.wordproblems serving/data/arithmetic_word_problems.jsonl``.
``generate_short`` makes one-step problems with one-digit operands; their held set
``data/arithmetic_short_held.jsonl`` is ``python -m serving.wordproblems --short -n 500
--seed 4242 serving/data/arithmetic_short_held.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

__all__ = ["SHIPPED_COUNT", "SHIPPED_SEED", "SHORT_HELD", "SHORT_HELD_COUNT", "SHORT_HELD_SEED",
           "generate", "generate_short", "to_jsonl", "main"]

SHIPPED_COUNT = 200
SHIPPED_SEED = 8
# The held set of the short problems: the trained model never sees these questions.
SHORT_HELD = Path(__file__).parent / "data" / "arithmetic_short_held.jsonl"
SHORT_HELD_COUNT = 500
SHORT_HELD_SEED = 4242

_NAMES = ["Ava", "Ben", "Chen", "Dara", "Eli", "Fatima", "Goran", "Hana", "Ivo", "Jun"]
_ITEMS = ["apples", "pencils", "marbles", "books", "stickers", "cookies", "coins", "shells"]


def _problem(rng: random.Random) -> dict[str, str]:
    name, other = rng.sample(_NAMES, 2)
    item = rng.choice(_ITEMS)
    kind = rng.randrange(4)
    a, b, c = rng.randint(2, 40), rng.randint(2, 20), rng.randint(2, 9)
    if kind == 0:
        q = f"{name} has {a} {item}. {other} gives {name} {b} more. How many {item} does {name} have now?"
        steps, ans = f"{name} has {a} + {b} = {a + b} {item}.", a + b
    elif kind == 1:
        a = a + b  # keep the result positive
        q = f"{name} had {a} {item} and gave {b} of them to {other}. How many {item} are left?"
        steps, ans = f"{a} - {b} = {a - b} {item} are left.", a - b
    elif kind == 2:
        q = f"{name} buys {c} boxes with {b} {item} in each box. How many {item} does {name} buy?"
        steps, ans = f"{c} * {b} = {c * b} {item}.", c * b
    else:
        total = b * c
        q = (
            f"{name} shares {total} {item} equally among {c} friends, and then gets {a} more "
            f"{item} from {other}. How many {item} does each friend get, plus {name}'s new {item}?"
        )
        steps = f"Each friend gets {total} / {c} = {b}. Then {b} + {a} = {b + a}."
        ans = b + a
    return {"question": q, "answer": f"{steps}\n#### {ans}"}


def _short_problem(rng: random.Random) -> dict[str, str]:
    name = rng.choice(_NAMES)
    item = rng.choice(_ITEMS)
    kind = rng.randrange(3)
    if kind == 0:
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        q = f"{name} has {a} {item} and gets {b} more. How many {item} now?"
        steps, ans = f"{a} + {b} = {a + b}.", a + b
    elif kind == 1:
        b, ans = rng.randint(1, 9), rng.randint(1, 9)
        a = ans + b
        q = f"{name} has {a} {item} and gives away {b}. How many {item} are left?"
        steps = f"{a} - {b} = {ans}."
    else:
        c, b = rng.randint(2, 5), rng.randint(2, 5)
        q = f"{name} buys {c} bags of {b} {item}. How many {item} in all?"
        steps, ans = f"{c} * {b} = {c * b}.", c * b
    return {"question": q, "answer": f"{steps}\n#### {ans}"}


def generate_short(n: int, *, seed: int = SHORT_HELD_SEED) -> list[dict[str, str]]:
    """Short one-step problems with one-digit operands (about 25 tokens with the answer):
    what a tiny model trained for two CPU minutes can learn (``serving.trained_model``)."""
    rng = random.Random(seed)
    return [_short_problem(rng) for _ in range(n)]


def generate(n: int, *, seed: int = SHIPPED_SEED) -> list[dict[str, str]]:
    rng = random.Random(seed)
    return [_problem(rng) for _ in range(n)]


def to_jsonl(records: list[dict[str, str]]) -> str:
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("-n", type=int, default=SHIPPED_COUNT)
    parser.add_argument("--seed", type=int, default=SHIPPED_SEED)
    parser.add_argument("--short", action="store_true", help="short one-step problems "
                        f"(the held set: -n {SHORT_HELD_COUNT} --seed {SHORT_HELD_SEED})")
    args = parser.parse_args(argv)
    make = generate_short if args.short else generate
    args.out.write_text(to_jsonl(make(args.n, seed=args.seed)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
