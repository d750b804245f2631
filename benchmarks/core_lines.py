"""Size of the statistics core: executable lines, not docstrings, comments or blanks.

    python benchmarks/core_lines.py [--root .]

The core is the model the gate judges with (``gates/model``: judge, robust, stats,
decisions, machines, summaries) and the confirm protocol over it
(``gates/attempts.py``), the files issue 31 counted. A line counts when a token of
code starts or continues on it (``tokenize``), less the lines of docstrings (a
string constant that is a module's, class's or function's first statement).
Issue 51's target: at most 1,400.
"""

from __future__ import annotations

import argparse
import ast
import io
import sys
import tokenize
from collections.abc import Sequence
from pathlib import Path

__all__ = ["CORE", "TARGET", "executable_lines", "main"]

CORE = ("gates/model/judge.py", "gates/model/robust.py", "gates/model/stats.py",
        "gates/model/decisions.py", "gates/model/machines.py", "gates/model/summaries.py",
        "gates/attempts.py")
TARGET = 1400
_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
         tokenize.ENCODING, tokenize.ENDMARKER}


def _docstring_lines(tree: ast.AST) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                out.update(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    return out


def executable_lines(source: str) -> int:
    """Lines of ``source`` that hold code (not a docstring, comment or blank)."""
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in _SKIP:
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines - _docstring_lines(ast.parse(source)))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[1]))
    a = ap.parse_args(argv)
    total = 0
    for rel in CORE:
        text = (Path(a.root) / rel).read_text(encoding="utf-8")
        n = executable_lines(text)
        total += n
        print(f"{n:6d} {len(text.splitlines()):6d}  {rel}")
    print(f"{total:6d}  executable lines in the statistics core (target <= {TARGET}: "
          f"{'met' if total <= TARGET else 'not met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
