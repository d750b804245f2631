"""suitelib.matrix: every cell runs whatever an earlier one raised; one report lists all."""

from __future__ import annotations

import pytest

from suitelib.matrix import Measurement, Variant, failure_report, run_matrix


def _ok(name: str):
    def run(bs: int) -> list[Measurement]:
        return [Measurement(f"m/{name}/bs{bs}/tput", [float(bs), float(bs) + 1], "tok/s", "higher")]

    return run


def _raise(exc: BaseException):
    def run(bs: int) -> list[Measurement]:
        raise exc

    return run


def test_every_variant_runs_and_every_error_is_reported() -> None:
    variants = [
        Variant("fails_value", (1, 4), _raise(ValueError("bad shape"))),
        Variant("good_a", (1, 4), _ok("good_a")),
        Variant("fails_cuda", (16,), _raise(RuntimeError("CUDA error: an illegal memory access"))),
        Variant("fails_pytest", (2,), lambda bs: pytest.fail("threshold missed")),
        Variant("fails_skip", (3,), lambda bs: pytest.skip("not here")),
        Variant("fails_assert", (8,), _raise(AssertionError("too slow"))),
        Variant("good_b", (16,), _ok("good_b")),
    ]
    recorded: list[Measurement] = []
    errors, cells = run_matrix(variants, recorded.append)
    assert cells == 9
    assert [k.key for k in recorded] == [
        "m/good_a/bs1/tput",
        "m/good_a/bs4/tput",
        "m/good_b/bs16/tput",
    ]
    assert [(e.variant, e.batch_size) for e in errors] == [
        ("fails_value", 1),
        ("fails_value", 4),
        ("fails_cuda", 16),
        ("fails_pytest", 2),
        ("fails_skip", 3),
        ("fails_assert", 8),
    ]
    report = failure_report(errors, cells)
    assert report.startswith("6 of 9 matrix cells failed, in 5 variant(s):")
    for text in (
        "ValueError: bad shape",
        "RuntimeError: CUDA error",
        "Failed: threshold missed",
        "Skipped: not here",
        "AssertionError: too slow",
        "fails_cuda [batch 16]",
    ):
        assert text in report


def test_interrupt_stops_the_matrix() -> None:
    variants = [
        Variant("stop", (1,), _raise(KeyboardInterrupt())),
        Variant("after", (1,), _ok("x")),
    ]
    with pytest.raises(KeyboardInterrupt):
        run_matrix(variants, lambda m: None)


def test_rejected_metric_fails_its_cell_only() -> None:
    def record(m: Measurement) -> None:
        if "bs4" in m.key:
            raise ValueError("metric 'x': NaN sample")

    errors, cells = run_matrix([Variant("v", (1, 4, 8), _ok("v"))], record)
    assert cells == 3 and [e.batch_size for e in errors] == [4]


def test_cleanup_runs_after_each_cell_and_its_failure_is_reported() -> None:
    calls: list[int] = []

    def cleanup() -> None:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("empty_cache failed")

    errors, cells = run_matrix(
        [Variant("v", (1, 2, 3), _raise(ValueError("x")))], lambda m: None, after_each=cleanup
    )
    assert len(calls) == 3 and cells == 3
    assert sum(e.error.startswith("cleanup RuntimeError") for e in errors) == 1


def test_duplicate_names_and_empty_batches_are_errors() -> None:
    with pytest.raises(ValueError, match="unique"):
        run_matrix([Variant("a", (1,), _ok("a")), Variant("a", (2,), _ok("a"))], lambda m: None)
    errors, cells = run_matrix([Variant("empty", (), _ok("e"))], lambda m: None)
    assert cells == 0 and "no batch sizes" in errors[0].error
