"""Who owns a metric: ``register_ci_gate(owner=...)``, else CODEOWNERS for its test file.

CODEOWNERS follows GitHub's syntax: the first file of ``.github/CODEOWNERS``,
``CODEOWNERS``, ``docs/CODEOWNERS``; one ``pattern owner...`` per line, ``#``
comments; gitignore-style patterns (``/`` at the start or in the middle anchors
at the root, a trailing ``/`` means everything beneath, ``*`` stays within one
directory, ``**`` crosses them, ``docs/*`` does not reach nested files); the
LAST matching line wins, and a line without owners leaves the path unowned.

``assign`` fills ``VerdictRow.owner`` and ``VerdictRow.accept_hint`` on a report.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ci_register.registered.paths import glob_regex
from gates.record.accept import HELD_RUNS, accept_command

__all__ = ["CODEOWNERS_PATHS", "Rule", "assign", "owner_of", "parse_codeowners",
           "read_codeowners"]

CODEOWNERS_PATHS = (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS")


@dataclass(frozen=True)
class Rule:
    pattern: str
    owners: tuple[str, ...]
    line: int
    regex: re.Pattern[str]


def _compile(pattern: str) -> re.Pattern[str]:
    dir_only = pattern.endswith("/")
    body = pattern.strip("/") if pattern != "/" else ""
    anchored = pattern.startswith("/") or "/" in body
    if body.startswith("**/"):
        anchored = False
        body = body[3:]
    head = "^" if anchored else "^(?:.*/)?"
    if dir_only:
        tail = "/.*$"
    elif body.endswith("/*"):
        tail = "$"  # docs/* : the files directly in docs/ only
    else:
        tail = "(?:/.*)?$"  # a name matches the file, or the directory and all beneath
    return re.compile(head + glob_regex(body, classes=False) + tail)


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
        rules.append(Rule(pattern, tuple(owners), n, _compile(pattern)))
    return rules


def read_codeowners(root: Path) -> list[Rule]:
    """The rules of the repository's CODEOWNERS (GitHub's lookup order), or none."""
    for rel in CODEOWNERS_PATHS:
        path = root / rel
        if path.is_file():
            return parse_codeowners(path.read_text(encoding="utf-8", errors="replace"))
    return []


def owner_of(path: str | None, rules: Sequence[Rule]) -> tuple[str, ...]:
    """Owners of a repository path by the last matching rule (none when unowned)."""
    if not path:
        return ()
    path = path.lstrip("/")
    for rule in reversed(rules):
        if rule.regex.match(path):
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
