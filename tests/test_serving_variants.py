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

    with pytest.raises(VariantsFailed, match=r"2 of 3 variants failed: a \(RuntimeError: server "
                       r"died\); c \(AssertionError: 3 errors\)") as info:
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


def test_pytest_fail_and_skip_in_a_variant_count_as_failures_and_the_next_runs() -> None:
    ran: list[str] = []

    def run(v: Variant) -> None:
        ran.append(v.name)
        if v.name == "a":
            pytest.fail("server answered 500")
        if v.name == "b":
            pytest.skip("no GPU")  # a skipped variant would otherwise read as green

    with pytest.raises(VariantsFailed, match=r"2 of 3 variants failed: a \(Failed: server "
                       r"answered 500\); b \(Skipped: no GPU\)") as info:
        run_variants([A, B, C], run)
    assert ran == ["a", "b", "c"]
    assert [e.__notes__[0] for e in info.value.exceptions] == ["variant 'a' (--x)", "variant 'b' (--y)"]


def test_pytest_timeout_stops_at_once() -> None:
    ran: list[str] = []

    def run(v: Variant) -> None:
        ran.append(v.name)
        pytest.fail("Timeout >600.0s")  # what pytest-timeout's signal method raises

    with pytest.raises(pytest.fail.Exception, match="Timeout"):
        run_variants([A, B], run)
    assert ran == ["a"]
