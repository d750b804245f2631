"""Who owns a metric: ``register_ci_gate(owner=...)``, else CODEOWNERS for its test file.

CODEOWNERS follows GitHub's syntax: the first file of ``.github/CODEOWNERS``,
``CODEOWNERS``, ``docs/CODEOWNERS``; one ``pattern owner...`` per line, ``#``
comments; gitignore-style patterns (``/`` at the start or in the middle anchors
at the root, a trailing ``/`` means everything beneath, ``*`` stays within one
directory, ``**`` crosses them, ``docs/*`` does not reach nested files); the
LAST matching line wins, and a line without owners leaves the path unowned.

Matching is pathspec's gitignore patterns on its RE2 backend (google-re2): linear in the
path whatever the pattern. Python's ``re`` (pathspec's default backend, and the
hand-written translation this replaced) backtracks: the rule ``*a*a*a*a*a*a*a*a*a*a*a*ab``
took 6.5 s against a 30-character path and 316 s against 73 characters; on RE2 both take
30 us, and a 7,000-character path too (pathspec 1.1.1, google-re2 1.1.20251105; the
command is in ``tests/test_owners.py::test_hostile_codeowners_patterns_match_in_linear_time``).
GitHub's CODEOWNERS takes ``[``, ``]`` and a leading ``!`` literally (no ranges, no
negation), so they reach pathspec escaped.

``assign`` fills ``VerdictRow.owner`` and ``VerdictRow.accept_hint`` on a report.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pathspec

from gates.record.accept import HELD_RUNS, accept_command

__all__ = ["CODEOWNERS_PATHS", "Rule", "assign", "owner_of", "parse_codeowners",
           "read_codeowners"]

CODEOWNERS_PATHS = (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS")


@dataclass(frozen=True)
class Rule:
    pattern: str
    owners: tuple[str, ...]
    line: int
    spec: pathspec.PathSpec | None  # None: a line pathspec cannot read matches nothing

    def matches(self, path: str) -> bool:
        return self.spec is not None and self.spec.match_file(path)


MAX_BYTES = 3 * 1024 * 1024  # GitHub ignores a CODEOWNERS file larger than 3 MB
MAX_RULES = 100_000  # a bound on the loop over lines


def _spec(pattern: str) -> pathspec.PathSpec | None:
    text = pattern.replace("[", "\\[").replace("]", "\\]")
    if text.startswith(("!", "#")):
        text = "\\" + text
    try:
        # backend="re2": linear matching (see the module docstring); without google-re2
        # this raises rather than quietly falling back to a backtracking matcher.
        return pathspec.PathSpec.from_lines("gitignore", [text], backend="re2")
    except (ValueError, TypeError):
        return None


def parse_codeowners(text: str) -> list[Rule]:
    """The rules of a CODEOWNERS text, in file order."""
    rules = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = re.split(r"(?<!\\)\s+", line)
        owners = []
        for p in parts[1:]:
            if p.startswith("#"):
                break  # a trailing comment
            owners.append(p)
        pattern = parts[0].replace("\\ ", " ").replace("\\#", "#")
        rules.append(Rule(pattern, tuple(owners), n, _spec(pattern)))
        if len(rules) >= MAX_RULES:
            break
    return rules


def read_codeowners(root: Path) -> list[Rule]:
    """The rules of the repository's CODEOWNERS (GitHub's lookup order), or none."""
    for rel in CODEOWNERS_PATHS:
        path = root / rel
        if path.is_file():  # a regular file: a FIFO or a device is never opened
            with path.open("rb") as handle:
                data = handle.read(MAX_BYTES)  # GitHub ignores a CODEOWNERS above 3 MB
            return parse_codeowners(data.decode("utf-8", errors="replace"))
    return []


def owner_of(path: str | None, rules: Sequence[Rule]) -> tuple[str, ...]:
    """Owners of a repository path by the last matching rule (none when unowned)."""
    if not path:
        return ()
    path = path.lstrip("/")
    for rule in reversed(rules):
        if rule.matches(path):
            return rule.owners
    return ()


def assign(report: Any, declared: Mapping[tuple[str, str], str], rules: Sequence[Rule],
           streaks: Callable[[Any], tuple[int, str | None]] | None = None,
           held: int = HELD_RUNS) -> None:
    """Name each non-passing row's owner and, for a confirmed change that has held
    ``held`` runs, the `gate-report accept` command that makes it the new level.

    ``declared``: (run id, key) -> the ``register_ci_gate(owner=...)`` of that run's plan.
    ``streaks``: row -> (runs in a row with its verdict, commit of the first of them)
    (``gates.record.accept.held_since`` over the history).
    """
    for v in report.verdicts:
        if v.cls == "pass" and v.verdict != "improvement":
            continue
        owner = declared.get((v.run_id, v.key))
        v.owner = owner or " ".join(owner_of(v.path, rules)) or None
        if v.verdict in ("regression", "improvement") and streaks is not None:
            n, commit = streaks(v)
            if n >= held:
                v.accept_hint = accept_command(v.key, v.suite, commit, verdict=v.verdict)
