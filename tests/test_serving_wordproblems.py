from __future__ import annotations

import re

from serving.evals import DEFAULT_DATASET, load_dataset
from serving.wordproblems import SHIPPED_COUNT, SHIPPED_SEED, generate, to_jsonl


def test_shipped_dataset_is_the_generator_output() -> None:
    assert DEFAULT_DATASET.read_text() == to_jsonl(generate(SHIPPED_COUNT, seed=SHIPPED_SEED))


def test_every_answer_follows_from_its_worked_steps() -> None:
    problems = load_dataset(DEFAULT_DATASET)
    assert len(problems) == SHIPPED_COUNT
    for p in problems:
        # The last equation in the worked answer computes the gold value.
        lhs, rhs = re.findall(r"(\d+ [-+*/] \d+) = (\d+)", p.answer)[-1]
        assert eval(lhs) == float(rhs) == p.value  # noqa: S307 - digits and one operator
        assert p.value > 0


def test_generator_is_seeded() -> None:
    assert generate(5, seed=1) == generate(5, seed=1)
    assert generate(5, seed=1) != generate(5, seed=2)


def test_short_held_set_is_the_generator_output_and_answers_follow() -> None:
    from serving.wordproblems import SHORT_HELD, SHORT_HELD_COUNT, SHORT_HELD_SEED, generate_short

    assert SHORT_HELD.read_text() == to_jsonl(generate_short(SHORT_HELD_COUNT, seed=SHORT_HELD_SEED))
    problems = load_dataset(SHORT_HELD)
    assert len(problems) == SHORT_HELD_COUNT >= 500
    for p in problems:
        lhs, rhs = re.findall(r"(\d+ [-+*] \d+) = (\d+)", p.answer)[-1]
        assert eval(lhs) == float(rhs) == p.value  # noqa: S307 - digits and one operator
    assert {p.answer.split(" ")[1] for p in problems} == {"+", "-", "*"}
