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


def run_variants(variants: Sequence[Variant], run: Callable[[Variant], T]) -> dict[str, T]:
    """Call ``run`` for each variant in order; return results by name.

    An ``Exception`` in one variant is kept and the next variant runs; afterwards all
    of them are raised together as :class:`VariantsFailed`, each annotated with its
    variant's name. ``KeyboardInterrupt`` and ``SystemExit`` stop at once.
    """
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise ValueError(f"variant names must be unique: {names}")
    results: dict[str, T] = {}
    failures: list[Exception] = []
    for variant in variants:
        try:
            results[variant.name] = run(variant)
        except Exception as exc:  # noqa: BLE001 - collected and re-raised below
            exc.add_note(f"variant {variant.name!r} ({' '.join(variant.server_args)})")
            failures.append(exc)
    if failures:
        failed = ", ".join(n for n in names if n not in results)
        raise VariantsFailed(
            f"{len(failures)} of {len(variants)} variants failed: {failed}", failures
        )
    return results
