"""Variant perf matrix: every variant runs, every failure is reported once at the end.

A nightly compares several configurations (a dtype, a kernel, a model shape), each
with its own batch sizes. The usual loop stops at the first exception and hides how
the rest fared; ``run_matrix`` runs every (variant, batch size) cell, records the
metrics of each cell that finished, and returns the errors for one summary failure.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

__all__ = ["Measurement", "Variant", "CellError", "run_matrix", "failure_report"]


@dataclass(frozen=True)
class Measurement:
    """One metric of one cell, in the shape of ``metrics.record``'s arguments."""

    key: str
    values: Sequence[float]
    unit: str
    better: str


@dataclass(frozen=True)
class Variant:
    """A named configuration, its batch sizes, and a function measuring one batch size."""

    name: str
    batch_sizes: tuple[int, ...]
    run: Callable[[int], Iterable[Measurement]]
    notes: str = ""


@dataclass(frozen=True)
class CellError:
    variant: str
    batch_size: int
    error: str  # "TypeName: message"
    where: str = field(default="", compare=False)  # last frame, file:line


def _describe(exc: BaseException) -> tuple[str, str]:
    msg = str(exc).strip().splitlines()
    first = msg[0] if msg else ""
    tb = traceback.extract_tb(exc.__traceback__)
    where = f"{tb[-1].filename}:{tb[-1].lineno}" if tb else ""
    return f"{type(exc).__name__}: {first}"[:300], where


def run_matrix(
    variants: Sequence[Variant],
    record: Callable[[Measurement], None],
    *,
    after_each: Callable[[], None] | None = None,
) -> tuple[list[CellError], int]:
    """Run every cell; return (errors, number of cells).

    Any exception counts, not only assertions: pytest's fail/skip outcomes, CUDA errors,
    a bad metric rejected by ``record``. Only KeyboardInterrupt and SystemExit stop the
    matrix. A cell's measurements are recorded only when the whole cell succeeded, so a
    half-measured cell leaves no misleading point in the history. ``after_each`` (say,
    emptying the CUDA cache) runs after every cell, and its own failure is reported too.
    """
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise ValueError(f"variant names must be unique: {names}")
    errors: list[CellError] = []
    cells = 0
    for v in variants:
        if not v.batch_sizes:
            errors.append(CellError(v.name, 0, "ValueError: variant has no batch sizes"))
            continue
        for bs in v.batch_sizes:
            cells += 1
            try:
                measured = list(v.run(bs))
                for m in measured:
                    record(m)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:  # noqa: B036 - pytest outcomes are BaseExceptions
                errors.append(CellError(v.name, bs, *_describe(exc)))
            if after_each is not None:
                try:
                    after_each()
                except Exception as exc:
                    errors.append(CellError(v.name, bs, "cleanup " + _describe(exc)[0]))
    return errors, cells


def failure_report(errors: Sequence[CellError], cells: int) -> str:
    """One message listing every failed cell, grouped by variant."""
    failed = {e.variant for e in errors}
    lines = [f"{len(errors)} of {cells} matrix cells failed, in {len(failed)} variant(s):"]
    for e in errors:
        at = f" ({e.where})" if e.where else ""
        lines.append(f"  - {e.variant} [batch {e.batch_size}]: {e.error}{at}")
    return "\n".join(lines)
