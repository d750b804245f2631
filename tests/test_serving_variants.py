from __future__ import annotations

import pytest

from serving.variants import Variant, VariantsFailed, run_variants

A = Variant("a", ("--x",), (1, 2))
B = Variant("b", ("--y",), (4,))
C = Variant("c", (), (8,))


def test_all_variants_run_and_all_failures_are_raised_together() -> None:
    ran: list[str] = []

    def run(v: Variant) -> int:
        ran.append(v.name)
        if v.name == "a":
            raise RuntimeError("server died")
        if v.name == "c":
            raise AssertionError("3 errors")
        return sum(v.batch_sizes)

    with pytest.raises(VariantsFailed, match="2 of 3 variants failed: a, c") as info:
        run_variants([A, B, C], run)
    assert ran == ["a", "b", "c"]
    errors = info.value.exceptions
    assert [type(e) for e in errors] == [RuntimeError, AssertionError]
    assert errors[0].__notes__ == ["variant 'a' (--x)"]


def test_results_by_name_when_all_pass() -> None:
    assert run_variants([A, B], lambda v: v.batch_sizes) == {"a": (1, 2), "b": (4,)}


def test_interrupt_is_not_swallowed() -> None:
    ran: list[str] = []

    def run(v: Variant) -> None:
        ran.append(v.name)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_variants([A, B], run)
    assert ran == ["a"]


def test_bad_variants() -> None:
    with pytest.raises(ValueError, match="unique"):
        run_variants([A, A], lambda v: None)
    with pytest.raises(ValueError, match="batch sizes"):
        Variant("z", (), ())
