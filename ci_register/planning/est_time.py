"""Keep the ``est_time`` literals honest.

``python -m ci_register est-time --check`` lists registrations whose literal is
off from the measured figure (:mod:`ci_register.planning.durations`) by more than 30 s
AND by more than a factor 1.3 either way (both, so neither a 60 s file being
25 s off nor a 2-hour file being 90 s off is churn); :func:`drifted` is the one
rule, `gate-report health` calls it too. ``--write`` rewrites just those literals
in place: each is located with ``ast`` (line and UTF-8 column offsets of the
constant) and replaced byte for byte, so formatting, comments and line endings
are untouched and the result is an ordinary diff to commit.

The literal still matters after history exists: it plans new hardware, a fresh
history, and every file that has fewer than three measured runs.
"""

from __future__ import annotations

import ast
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ci_register.planning.durations import LATEST, Figure, lookup
from ci_register.planning.outfile import OutputError, write_output

if TYPE_CHECKING:  # types only: the report's health section imports this module
    from ci_register.registered.catalog import Catalog
    from ci_register.registered.collect import Collection, Registration

__all__ = [
    "ABS_S",
    "REL",
    "Drift",
    "EstTimeError",
    "drifted",
    "find_drifts",
    "literal_span",
    "rewrite",
    "suggest",
    "write_drifts",
]

ABS_S = 30.0
REL = 0.30


class EstTimeError(ValueError):
    """A literal that cannot be rewritten; the message names file and line."""


@dataclass(frozen=True)
class Drift:
    registration: Registration
    measured: Figure
    fingerprint: str | None
    new: int

    def __str__(self) -> str:
        r, m = self.registration, self.measured
        return (f"{r.path}:{r.line}: est_time {r.est_time:g} s, measured {m.seconds:.0f} s "
                f"(p90 of {m.runs} runs, suite {r.suite} on {self.fingerprint}); set est_time={self.new}")


def drifted(literal: float, measured: float, abs_s: float = ABS_S, rel: float = REL) -> bool:
    """The one staleness rule (``est-time --check`` and ``gate-report health`` both ask it):
    the literal and the measured figure differ by more than ``abs_s`` seconds AND by
    more than a factor ``1 + rel`` either way (an under-estimate overruns a shard's
    budget, an over-estimate wastes its room: the same ratio counts both ways)."""
    lo, hi = sorted((literal, measured))
    return hi - lo > abs_s and (lo <= 0 or hi > (1 + rel) * lo)


def suggest(measured: float) -> int:
    """The new literal: the figure rounded up to 5 s (tidy diffs, never an under-estimate)."""
    return max(5, int(math.ceil(measured / 5.0)) * 5)


def find_drifts(
    catalog: Catalog,
    collection: Collection,
    history: str | os.PathLike[str] | None,
    *,
    suites: Sequence[str] = (),
    fingerprint: str | None = LATEST,
    root: Path | None = None,
) -> tuple[list[Drift], list[str], int]:
    """Drifted registrations (by path, line), why the history could not be read (if it
    could not), and how many registrations had a measured figure at all."""
    drifts: list[Drift] = []
    problems: list[str] = []
    measured = 0
    for name in sorted(catalog.suites):
        if suites and name not in suites:
            continue
        regs = [r for r in collection.registrations if r.suite == name]
        if not regs:
            continue
        found = lookup(regs, catalog.suites[name], history, fingerprint=fingerprint, root=root)
        if found.problem and found.problem not in problems:
            problems.append(found.problem)
        for r in regs:
            fig = found.figures.get(r.path)
            measured += fig is not None
            if fig is not None and drifted(r.est_time, fig.seconds):
                drifts.append(Drift(r, fig, found.fingerprint, suggest(fig.seconds)))
    return sorted(drifts, key=lambda d: (d.registration.path, d.registration.line)), problems, measured


def _marker_call(tree: ast.Module, line: int, marker: str) -> ast.Call | None:
    for stmt in tree.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and stmt.value.lineno == line:
            func = stmt.value.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name == marker:
                return stmt.value
    return None


def literal_span(source: str, line: int, marker: str, path: str = "<file>") -> tuple[int, int, int, int]:
    """(lineno, col, end_lineno, end_col) of the est_time constant of the marker call at ``line``.

    Columns are UTF-8 byte offsets, as ``ast`` reports them.
    """
    tree = ast.parse(source, filename=path)
    call = _marker_call(tree, line, marker)
    if call is None:
        raise EstTimeError(f"{path}:{line}: no top-level {marker}() call on this line any more; rerun est-time --check")
    node: ast.expr | None = call.args[0] if call.args else None
    for kw in call.keywords:
        if kw.arg == "est_time":
            node = kw.value
    if not (isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool)):
        raise EstTimeError(f"{path}:{line}: est_time is not a plain number literal; edit it by hand")
    assert node.end_lineno is not None and node.end_col_offset is not None
    return node.lineno, node.col_offset, node.end_lineno, node.end_col_offset


def rewrite(data: bytes, edits: Iterable[tuple[tuple[int, int, int, int], str]]) -> bytes:
    """Replace byte spans (1-based lines, byte columns) with new text; everything else kept."""
    lines = data.splitlines(keepends=True)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))
    out = data
    # Right to left, so earlier offsets stay valid.
    for (l0, c0, l1, c1), text in sorted(edits, key=lambda e: e[0], reverse=True):
        a, b = starts[l0 - 1] + c0, starts[l1 - 1] + c1
        out = out[:a] + text.encode("utf-8") + out[b:]
    return out


def write_drifts(drifts: Sequence[Drift], root: Path) -> Iterator[str]:
    """Rewrite the drifted literals in place, file by file; yields one line per change as
    soon as its file is written (an error at a later file leaves the lines said true).

    Each file is replaced whole through a temporary file beside it (``os.replace``): a
    full disk or an interrupt mid-write left a truncated test file behind."""
    by_file: dict[str, list[Drift]] = {}
    for d in drifts:
        by_file.setdefault(d.registration.path, []).append(d)
    for path, items in sorted(by_file.items()):
        file = root / path
        data = file.read_bytes()
        source = data.decode("utf-8")
        edits = [(literal_span(source, d.registration.line, d.registration.marker, path), str(d.new)) for d in items]
        new = rewrite(data, edits)
        ast.parse(new.decode("utf-8"), filename=path)  # never leave a broken file behind
        try:
            write_output(file, new.decode("utf-8"), option=path)
        except OutputError as exc:
            reason = getattr(exc.__context__, "strerror", None) or str(exc)
            raise EstTimeError(f"{path}: cannot write ({reason}); the file is unchanged: free "
                               "space or make it writable, then run est-time --write again") from None
        yield from (f"{path}:{d.registration.line}: est_time {d.registration.est_time:g} -> {d.new}" for d in items)
