"""Run every launch variant of a model, even when one fails; raise all failures at once.

The shape of SGLang's per-variant nightlies: one model, several launch variants (each
with its own server args and batch sizes), shared accuracy parameters. One variant's
crash must not hide the others' results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["Variant", "VariantsFailed", "run_variants"]

T = TypeVar("T")


@dataclass(frozen=True)
class Variant:
    name: str
    server_args: tuple[str, ...]
    batch_sizes: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.batch_sizes or any(b < 1 for b in self.batch_sizes):
            raise ValueError(
                f"variant {self.name!r}: batch sizes must be positive, got {self.batch_sizes}"
            )


class VariantsFailed(ExceptionGroup):  # noqa: N818 - reads as a sentence in reports
    """Some variants failed; ``exceptions`` holds one error per failed variant."""


def _stops_everything(exc: BaseException) -> bool:
    """Ctrl-C, exit, and pytest-timeout's own timeout (a ``Failed`` whose message starts
    "Timeout"): the run is over, no further variant may start."""
    if isinstance(exc, KeyboardInterrupt | SystemExit | GeneratorExit):
        return True
    return type(exc).__name__ == "Failed" and str(exc).startswith("Timeout")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:160]}" if text else type(exc).__name__


def run_variants(variants: Sequence[Variant], run: Callable[[Variant], T]) -> dict[str, T]:
    """Call ``run`` for each variant in order; return results by name.

    Any exception in one variant is kept and the next variant runs: an ``Exception``
    (a server that died or never became healthy, a failed assert, a request timeout)
    and pytest's ``pytest.fail`` / ``pytest.skip`` alike (a skipped variant must not
    read as green). Afterwards all of them are raised together as
    :class:`VariantsFailed`, whose message names each failed variant with its error,
    and each error is annotated with its variant's name. Ctrl-C, ``SystemExit`` and
    pytest-timeout's timeout stop at once.
    """
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise ValueError(f"variant names must be unique: {names}")
    results: dict[str, T] = {}
    failures: list[tuple[str, Exception, BaseException]] = []
    for variant in variants:
        try:
            results[variant.name] = run(variant)
        except BaseException as exc:  # noqa: BLE001 - collected and re-raised below
            if _stops_everything(exc):
                raise
            # An ExceptionGroup holds Exceptions only: pytest's outcomes travel wrapped.
            err = exc if isinstance(exc, Exception) else RuntimeError(_one_line(exc))
            if err is not exc:
                err.__cause__ = exc
            err.add_note(f"variant {variant.name!r} ({' '.join(variant.server_args)})")
            failures.append((variant.name, err, exc))
    if failures:
        failed = "; ".join(f"{name} ({_one_line(exc)})" for name, _, exc in failures)
        raise VariantsFailed(
            f"{len(failures)} of {len(variants)} variants failed: {failed}",
            [err for _, err, _ in failures],
        )
    return results
