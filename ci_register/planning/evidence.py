"""Function-level evidence for test selection: which changed files changed only function
bodies (:mod:`ci_register.planning.units`), and whether those functions ran in a suite's
recorded run (the ``<executed>`` row, :mod:`ci_register.running.executed`).

The rule (sound at the process level, never per test): a change that only edits bodies of
functions none of which executed anywhere in suite S's recorded run (nox, the runner,
pytest's whole process) cannot change S's outcomes, so for S that file counts as
unchanged. If any changed function ran, or S has no usable record, the file-level rules
decide. A record is usable when it is complete, no older than ``[select] map_max_age_days``,
and its commit R is known to git and is in the base's history (records are placed by the
commit graph, never the clock: a run of another branch does not describe the base).

Records come from post-merge runs of the main branch, so R is often some commits before
the change's base. Then the change judged for S is everything from R to the head
(:class:`Since`, ``git diff R HEAD``), not only the pull request's own paths: what changed
between R and the base counts as changed too, by the same rules (a body that ran at R, a
structural edit, an added file, data or configuration). The record describes the tree at
R, and the head differs from that tree by exactly that diff, so the rule is the one used
for a record made at the base, applied to a longer change. A file changed between R and
the base and changed back by the pull request is, rightly, no change.

Pure functions first; the git reads at the end.
"""

from __future__ import annotations

import fnmatch
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ci_register.planning.record_check import row_problem
from ci_register.planning.units import Change, diff_source

__all__ = ["EXECUTED_MAP_PATH", "Evidence", "ExecutedRecord", "Since", "change_kinds", "change_since",
           "executed_records", "maps_change", "merge_since", "not_executed", "record_problem", "since_record",
           "still_describes"]

EXECUTED_MAP_PATH = "<executed>"  # ci_register.running.executed.EXECUTED_MAP_PATH (planning does not import running)
_GIT_TIMEOUT_S = 120


@dataclass(frozen=True)
class ExecutedRecord:
    suite: str
    entries: frozenset[str]  # "path" loaded, "path::qualname" ran, "path::*" any of it may have run
    commit: str
    recorded_at: str = ""


@dataclass(frozen=True)
class Since:
    """The change from a record's commit to the head: every path that differs (``git diff
    R HEAD``), those whose syntax tree is equal, and the bodies-only ones."""
    commit: str
    changed: tuple[str, ...]
    equal: frozenset[str]
    bodies: Mapping[str, tuple[str, ...]]
    # (status letter, path) from the commit to the base; None when not read
    to_base: tuple[tuple[str, str], ...] | None = None


@dataclass
class Evidence:
    """What selection uses: files whose change leaves the syntax tree equal, bodies-only
    changes (path -> changed units), and each suite's usable record (or why not).
    ``since``: {record commit: the change from it to the head}, for records made before the
    base; a record whose commit has no entry was made at the base (the change is the pull
    request's own)."""
    equal: set[str]
    bodies: dict[str, tuple[str, ...]]
    records: dict[str, ExecutedRecord]
    notes: list[str]
    since: dict[str, Since] = field(default_factory=dict)
    # The change since the commit the import maps and runner map were recorded at, when that
    # is before the base: suites without a usable executed record are judged on it with those
    # maps (None: the maps are taken as describing the base).
    maps_since: Since | None = None


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


def record_problem(record: ExecutedRecord, known: bool, ancestor: bool) -> str | None:
    """Why the record cannot serve the base, else None. ``known``: git knows its commit;
    ``ancestor``: that commit is in the base's history. What changed since it is no reason
    (:class:`Since` carries it into the selection)."""
    if not known:
        return f"its commit {record.commit[:10] or '(none)'} is unknown to git"
    if not ancestor:
        return f"its commit {record.commit[:10]} is not in the base's history (another branch, or later)"
    return None


def since_record(commit: str, status: list[tuple[str, str]], sources: Mapping[str, tuple[str | bytes | None,
                                                                                          str | bytes | None]],
                 to_base: list[tuple[str, str]] | None = None) -> Since:
    """The change from ``commit`` to the head, from ``git diff --name-status`` and the Python
    files' texts on both sides ({path: (at the commit, at the head)}); ``to_base``: the
    name-status from the commit to the base."""
    equal, bodies = change_kinds(sources)
    return Since(commit, tuple(dict.fromkeys(path for _, path in status)), frozenset(equal), bodies,
                 None if to_base is None else tuple(to_base))


def merge_since(items: Iterable[Since]) -> Since | None:
    """One :class:`Since` standing for several record commits: every path any of them
    changed; equal only where equal in each that changed it; bodies only where bodies (or
    equal) in each, with every changed unit; ``to_base`` every path of each."""
    items = list(items)
    if not items:
        return None
    if len(items) == 1:
        return items[0]
    changed = tuple(dict.fromkeys(p for s in items for p in s.changed))
    touched = {p: [s for s in items if p in s.changed] for p in changed}
    equal = frozenset(p for p, ss in touched.items() if all(p in s.equal for s in ss))
    bodies = {p: tuple(sorted({u for s in ss for u in s.bodies.get(p, ())})) for p, ss in touched.items()
              if p not in equal and all(p in s.bodies or p in s.equal for s in ss)}
    to_base = None if any(s.to_base is None for s in items) else tuple(
        dict.fromkeys(x for s in items for x in (s.to_base or ())))
    return Since(",".join(s.commit for s in items), changed, equal, bodies, to_base)


def maps_change(root: Path, commits: Iterable[str], base_rev: str, head_rev: str) -> tuple[Since | None, list[str]]:
    """(the change since the commits the import maps and runner map were recorded at, notes):
    None when every one is the base. A commit unknown to git or outside the base's history
    is named in the notes."""
    base_sha = _git(root, "rev-parse", "--verify", "--end-of-options", f"{base_rev}^{{commit}}").stdout.decode().strip()
    got: list[Since] = []
    notes: list[str] = []
    for commit in sorted(set(commits)):
        if not _known(root, commit) or not _is_ancestor(root, commit, base_rev):
            notes.append(f"import maps recorded at {commit[:10]}, a commit outside the base's history")
            continue
        full = _git(root, "rev-parse", "--verify", "--end-of-options", f"{commit}^{{commit}}").stdout.decode().strip()
        if full == base_sha:
            continue
        one = change_since(root, commit, head_rev, base_rev)
        if isinstance(one, str):
            notes.append(f"import maps recorded at {commit[:10]}: {one}")
            continue
        got.append(one)
    since = merge_since(got)
    if since is not None:
        notes.append(f"import maps recorded before the base (at {since.commit[:40]}): suites without an "
                     f"executed record judge the {len(since.changed)} path(s) changed since")
    return since, notes


def still_describes(loaded: Iterable[str], since: Since, ignore: Iterable[str]) -> bool:
    """Whether a run recorded at ``since.commit`` that loaded ``loaded`` (paths) describes the
    base as well: between the two no Python file it loaded changed, no Python file was added
    (a new conftest loads unseen) and no file outside ``ignore`` changed (data or
    configuration the run read). Then its record judges the pull request's own change as if
    made at the base; else only the whole change since it (:class:`Since`)."""
    if since.to_base is None:
        return False
    seen = {e.split("::", 1)[0] for e in loaded}
    for letter, path in since.to_base:
        if path.endswith(".py"):
            if path in seen or letter.startswith("A"):
                return False
        elif not any(fnmatch.fnmatchcase(path, g) or (g.endswith("/**") and path.startswith(g[:-2])) for g in ignore):
            return False
    return True


# ---------------------------------------------------------------------------- git reads

def _git(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, timeout=_GIT_TIMEOUT_S, check=False)


def _show(root: Path, rev: str, path: str) -> bytes | None:
    r = _git(root, "show", f"{rev}:{path}")
    return r.stdout if r.returncode == 0 else None


def _is_ancestor(root: Path, commit: str, of: str) -> bool:
    return _git(root, "merge-base", "--is-ancestor", "--end-of-options", commit, of).returncode == 0


def _known(root: Path, commit: str) -> bool:
    return bool(commit) and not commit.startswith("-") and \
        _git(root, "cat-file", "-e", f"{commit}^{{commit}}").returncode == 0


def _status(root: Path, frm: str, to: str) -> list[tuple[str, str]] | None:
    r = _git(root, "diff", "--name-status", "--no-renames", "--end-of-options", frm, to)
    if r.returncode != 0:
        return None
    out = []
    for line in r.stdout.decode("utf-8", "replace").splitlines():
        letter, _, path = line.partition("\t")
        if path:
            out.append((letter, path))
    return out


def _sources(root: Path, frm: str, to: str, paths: Iterable[str]) -> dict[str, tuple[bytes | None, bytes | None]]:
    return {p: (_show(root, frm, p), _show(root, to, p)) for p in paths if p.endswith(".py")}


def change_since(root: Path, commit: str, head_rev: str, base_rev: str | None = None) -> Since | str:
    """The change from ``commit`` to ``head_rev`` (:class:`Since`, with the paths changed from
    ``commit`` to ``base_rev``), or why it cannot be read."""
    status = _status(root, commit, head_rev)
    if status is None:
        return f"git cannot diff its commit {commit[:10]} against {head_rev}"
    if len(status) > MAX_SINCE_PATHS:
        return f"{len(status)} paths changed since its commit {commit[:10]}, more than the {MAX_SINCE_PATHS} a selection reads"
    to_base = _status(root, commit, base_rev) if base_rev else None
    return since_record(commit, status, _sources(root, commit, head_rev, (p for _, p in status)), to_base)


# A record further back than this many changed paths is not read (each Python path costs two
# `git show`s); past it selection would run everything anyway (select.MAX_CHANGED_PATHS).
MAX_SINCE_PATHS = 5_000


def gather(root: Path, base_rev: str, head_rev: str, changed: Iterable[str],
           records: Mapping[str, ExecutedRecord]) -> Evidence:
    """The evidence for a change from ``base_rev`` to ``head_rev`` (commits of the git
    repository at ``root``): each suite's record is used when its commit is in
    ``base_rev``'s history, with the change from that commit to ``head_rev`` (:class:`Since`)
    when it was made before ``base_rev``."""
    equal, bodies = change_kinds(_sources(root, base_rev, head_rev, changed))
    usable: dict[str, ExecutedRecord] = {}
    notes: list[str] = []
    since: dict[str, Since] = {}
    base_sha = _git(root, "rev-parse", "--verify", "--end-of-options", f"{base_rev}^{{commit}}").stdout.decode().strip()
    checked: dict[str, str | None] = {}
    for suite, rec in sorted(records.items()):
        if rec.commit not in checked:
            known = _known(root, rec.commit)
            why = record_problem(rec, known, known and _is_ancestor(root, rec.commit, base_rev))
            full = _git(root, "rev-parse", "--verify", "--end-of-options", f"{rec.commit}^{{commit}}").stdout.decode().strip()
            if why is None and full != base_sha:
                got = change_since(root, rec.commit, head_rev, base_rev)
                if isinstance(got, str):
                    why = got
                else:
                    since[rec.commit] = got
                    behind = _git(root, "rev-list", "--count", f"{rec.commit}..{base_rev}").stdout.decode().strip()
                    notes.append(f"suite(s) with the record at {rec.commit[:10]} ({behind} commit(s) before the "
                                 f"base): the {len(got.changed)} path(s) changed since it count as changed")
            checked[rec.commit] = why
        why = checked[rec.commit]
        if why:
            notes.append(f"suite {suite}: executed-functions record not used: {why}")
        else:
            usable[suite] = rec
    return Evidence(equal, bodies, usable, notes, since)
