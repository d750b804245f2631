from __future__ import annotations

import random

import pytest

from ci_register.planning.partition import (
    PartitionError,
    lower_bound,
    lpt,
    parse_partition,
    shard_count,
)


def test_lpt_longest_first_onto_lightest():
    shards = lpt([("a", 10), ("b", 7), ("c", 5), ("d", 4), ("e", 3)], 2)
    assert [[p for p, _ in s.items] for s in shards] == [["a", "d"], ["b", "c", "e"]]
    totals = sorted(s.total for s in shards)
    assert totals == [14, 15]  # LPT: a|b, c->b(12), d->a(14), e->b(15)


def test_lpt_is_deterministic_and_complete():
    rng = random.Random(1)
    items = [(f"f{i:03d}.py", float(rng.choice([5, 5, 10, 60]))) for i in range(200)]
    a = lpt(items, 7)
    b = lpt(list(reversed(items)), 7)
    assert [s.items for s in a] == [s.items for s in b]
    assert sorted(p for s in a for p, _ in s.items) == sorted(p for p, _ in items)


def test_lpt_within_graham_bound():
    rng = random.Random(2)
    for _ in range(50):
        items = [(str(i), rng.uniform(1, 100)) for i in range(rng.randint(1, 40))]
        n = rng.randint(1, 8)
        makespan = max(s.total for s in lpt(items, n))
        assert makespan <= (4 / 3) * lower_bound([d for _, d in items], n) + 1e-9


def test_more_shards_than_files_leaves_empty_shards():
    shards = lpt([("a", 1.0)], 3)
    assert [len(s.items) for s in shards] == [1, 0, 0]


@pytest.mark.parametrize("spec", ["0/3", "4/3", "x", "1/0", "", "2-3", "-1/3"])
def test_bad_partition_specs(spec):
    with pytest.raises(PartitionError, match="--partition"):
        parse_partition(spec)


def test_a_zero_shard_count_says_so_not_an_index_range():
    with pytest.raises(PartitionError, match="shard count N must be at least 1") as got:
        parse_partition("1/0")
    assert "between 1 and 1" not in str(got.value)
    with pytest.raises(PartitionError, match="between 1 and 3"):
        parse_partition("4/3")


def test_good_partition_spec():
    assert parse_partition("2/3") == (2, 3)
    assert parse_partition(" 1 / 1 ") == (1, 1)


def test_shard_count_from_budget():
    assert shard_count([600] * 10, 1800) == 5  # 6000 / (0.75 * 1800) = 4.4 -> 5
    assert shard_count([1.0], 1800) == 1
    assert shard_count([600] * 10, 1800, fixed=3) == 3
