"""Function-level evidence for test selection: which changed files changed only function
bodies (:mod:`ci_register.planning.units`), and whether those functions ran in a suite's
recorded run (the ``<executed>`` row, :mod:`ci_register.running.executed`).

The rule (sound at the process level, never per test): a change that only edits bodies of
functions none of which executed anywhere in suite S's recorded run (nox, the runner,
pytest's whole process) cannot change S's outcomes, so for S that file counts as
unchanged. If any changed function ran, or S has no usable record, the file-level rules
decide. A record is usable when it is complete, no older than ``[select] map_max_age_days``,
its commit is known to git, and between that commit and the selection's base no project
Python file it loaded changed, no Python file was added (a new conftest loads unseen) and
no file outside ``[select] ignore`` changed (data or configuration the run read).

Pure functions first; the git reads at the end.
"""

from __future__ import annotations

import fnmatch
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ci_register.planning.record_check import row_problem
from ci_register.planning.units import Change, diff_source

__all__ = ["EXECUTED_MAP_PATH", "Evidence", "ExecutedRecord", "change_kinds", "executed_records", "not_executed",
           "record_problem"]

EXECUTED_MAP_PATH = "<executed>"  # ci_register.running.executed.EXECUTED_MAP_PATH (planning does not import running)
_GIT_TIMEOUT_S = 120


@dataclass(frozen=True)
class ExecutedRecord:
    suite: str
    entries: frozenset[str]  # "path" loaded, "path::qualname" ran, "path::*" any of it may have run
    commit: str
    recorded_at: str = ""


@dataclass
class Evidence:
    """What selection uses: files whose change leaves the syntax tree equal, bodies-only
    changes (path -> changed units), and each suite's usable record (or why not)."""
    equal: set[str]
    bodies: dict[str, tuple[str, ...]]
    records: dict[str, ExecutedRecord]
    notes: list[str]


def _when(at: object) -> datetime | None:
    try:
        when = datetime.fromisoformat(str(at).replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def executed_records(rows: Iterable[Mapping], now: datetime, max_age_days: float) -> tuple[dict[str, ExecutedRecord], list[str]]:
    """({suite: its record}, notes) from stored map rows: the ``<executed>`` row of each suite
    (the store keeps the newest), when sound (:mod:`ci_register.planning.record_check`),
    complete and fresh."""
    out: dict[str, ExecutedRecord] = {}
    notes = []
    for r in rows:
        if r.get("path") != EXECUTED_MAP_PATH:
            continue
        suite, files, when = str(r.get("suite") or ""), r.get("files"), _when(r.get("recorded_at"))
        if refused := row_problem(r, now):
            notes.append(f"suite {suite}: its executed-functions record is refused: {refused}")
            continue
        if not isinstance(files, list) or when is None:
            notes.append(f"suite {suite}: its executed-functions record is unreadable")
            continue
        bad = next((f for f in files if isinstance(f, str) and f.startswith("<incomplete")), None)
        if bad:
            notes.append(f"suite {suite}: its newest run recorded no usable executed-functions record ({bad[1:-1]})")
            continue
        if (now - when).total_seconds() > max_age_days * 86400:
            notes.append(f"suite {suite}: its executed-functions record is older than {max_age_days:g} days")
            continue
        commit = str(r.get("commit_sha") or "")
        out[suite] = ExecutedRecord(suite, frozenset(f for f in files if isinstance(f, str)), commit, str(r.get("recorded_at")))
    return out, notes


def change_kinds(sources: Mapping[str, tuple[str | bytes | None, str | bytes | None]]) -> tuple[set[str], dict[str, tuple[str, ...]]]:
    """(files whose syntax tree is equal, {file: units whose bodies alone changed}) from
    {path: (old text, new text)}; a file missing on either side is neither."""
    equal: set[str] = set()
    bodies: dict[str, tuple[str, ...]] = {}
    for path, (old, new) in sources.items():
        if old is None or new is None:
            continue
        ch: Change = diff_source(old, new)
        if ch.kind == "equal":
            equal.add(path)
        elif ch.kind == "bodies":
            bodies[path] = ch.units
    return equal, bodies


def not_executed(bodies: Mapping[str, tuple[str, ...]], record: ExecutedRecord) -> dict[str, str]:
    """{changed file: why it cannot affect the record's suite}: bodies-only changes none of
    whose changed units ran in the recorded run."""
    out = {}
    for path, units in bodies.items():
        if f"{path}::*" in record.entries or any(f"{path}::{u}" in record.entries for u in units):
            continue
        names = ", ".join(units[:3]) + (f" (+{len(units) - 3})" if len(units) > 3 else "")
        out[path] = (f"bodies of {names} changed; not executed in suite {record.suite}'s run at "
                     f"{record.commit[:10] or 'an unknown commit'}")
    return out


def _match(path: str, globs: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(path, g) or (g.endswith("/**") and path.startswith(g[:-2])) for g in globs)


def record_problem(record: ExecutedRecord, status: list[tuple[str, str]] | None, ignore: Iterable[str],
                   ancestor: bool = True) -> str | None:
    """Why the record does not describe the base's tree, else None. ``status``: ``git diff
    --name-status`` (status letter, path) from the record's commit to the base; None when
    git does not know the commit. ``ancestor``: whether the record's commit is in the
    base's history (records are ordered by the commit graph, never by their clock: a run
    of another branch, or of a later commit, does not describe the base)."""
    if status is None:
        return f"its commit {record.commit[:10] or '(none)'} is unknown to git"
    if not ancestor:
        return f"its commit {record.commit[:10]} is not in the base's history (another branch, or later)"
    for letter, path in status:
        if path.endswith(".py"):
            if path in record.entries:
                return f"{path}, which it loaded, changed since {record.commit[:10]}"
            if letter.startswith("A"):
                return f"{path} was added since {record.commit[:10]} (it may load unseen)"
        elif not _match(path, ignore):
            return f"{path} changed since {record.commit[:10]} (a run may read it)"
    return None


# ---------------------------------------------------------------------------- git reads

def _git(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, timeout=_GIT_TIMEOUT_S, check=False)


def _show(root: Path, rev: str, path: str) -> bytes | None:
    r = _git(root, "show", f"{rev}:{path}")
    return r.stdout if r.returncode == 0 else None


def _is_ancestor(root: Path, commit: str, of: str) -> bool:
    return _git(root, "merge-base", "--is-ancestor", "--end-of-options", commit, of).returncode == 0


def _status(root: Path, frm: str, to: str) -> list[tuple[str, str]] | None:
    if not frm or frm.startswith("-") or _git(root, "cat-file", "-e", f"{frm}^{{commit}}").returncode != 0:
        return None
    r = _git(root, "diff", "--name-status", "--no-renames", "--end-of-options", frm, to)
    if r.returncode != 0:
        return None
    out = []
    for line in r.stdout.decode("utf-8", "replace").splitlines():
        letter, _, path = line.partition("\t")
        if path:
            out.append((letter, path))
    return out


def gather(root: Path, base_rev: str, head_rev: str, changed: Iterable[str], records: Mapping[str, ExecutedRecord],
           ignore: Iterable[str]) -> Evidence:
    """The evidence for a change from ``base_rev`` to ``head_rev`` (commits of the git
    repository at ``root``), with each suite's record checked against ``base_rev``."""
    sources = {p: (_show(root, base_rev, p), _show(root, head_rev, p)) for p in changed if p.endswith(".py")}
    equal, bodies = change_kinds(sources)
    usable: dict[str, ExecutedRecord] = {}
    notes: list[str] = []
    status_of: dict[str, list[tuple[str, str]] | None] = {}
    for suite, rec in sorted(records.items()):
        if rec.commit not in status_of:
            status_of[rec.commit] = _status(root, rec.commit, base_rev)
        status = status_of[rec.commit]
        why = record_problem(rec, status, ignore, status is None or _is_ancestor(root, rec.commit, base_rev))
        if why:
            notes.append(f"suite {suite}: executed-functions record not used: {why}")
        else:
            usable[suite] = rec
    return Evidence(equal, bodies, usable, notes)
