"""The bisection's I/O edge: candidate commits from git, runs in git worktrees, the history.

``run_bisect`` reads which tests recorded KEY (``ReportReads.key_tests``) and its
direction, lists the first-parent commits from good to bad, and hands
``gates.model.bisect.bisect`` a ``measure(commit)`` that checks the commit out once in
a detached git worktree (under a scratch directory) and runs only those tests
with pytest and the gates plugin recording into a scratch history, returning
the run's samples of KEY. The outcome and evidence are saved with
``AfterWrites.save_bisect``. Worktrees are removed at the end, also on failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gates
from gates.model.bisect import BisectResult, bisect

__all__ = ["BisectInputError", "candidates", "render_bisect", "run_bisect"]

PYTEST_TIMEOUT_S = 1800.0  # one execution of the tests behind a key


class BisectInputError(Exception):
    """Bad input to a bisection (unknown commit, key never recorded); one line."""


def _git(repo: Path, *args: str) -> str:
    try:
        out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                             timeout=120, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise BisectInputError(f"git {' '.join(args)}: {exc}; is git installed?") from None
    if out.returncode != 0:
        raise BisectInputError(f"{repo}: git {' '.join(args)} failed: "
                               f"{(out.stderr or out.stdout).strip().splitlines()[-1:]}")
    return out.stdout.strip()


def candidates(repo: Path, good: str, bad: str) -> list[str]:
    """[good, ..., bad] full shas along bad's first-parent line, oldest first."""
    g = _git(repo, "rev-parse", "--verify", f"{good}^{{commit}}")
    b = _git(repo, "rev-parse", "--verify", f"{bad}^{{commit}}")
    if subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", g, b],
                      capture_output=True, timeout=60, check=False).returncode != 0:
        raise BisectInputError(f"--good {good} is not an ancestor of --bad {bad}; swap them "
                               "or pick a good commit on the bad one's history")
    between = _git(repo, "rev-list", "--first-parent", "--reverse", f"{g}..{b}").split()
    if not between:
        raise BisectInputError(f"--good {good} and --bad {bad} are the same commit")
    return [g, *between]


class _Worktrees:
    """Checkouts of candidate commits, one detached worktree each, made on first use."""

    def __init__(self, repo: Path, scratch: Path) -> None:
        self.repo, self.scratch = repo, scratch
        self.paths: dict[str, Path] = {}

    def __call__(self, sha: str) -> Path:
        if sha not in self.paths:
            path = self.scratch / sha[:12]
            _git(self.repo, "worktree", "add", "--detach", "--force", str(path), sha)
            self.paths[sha] = path
        return self.paths[sha]

    def remove(self) -> None:
        for path in self.paths.values():
            subprocess.run(["git", "-C", str(self.repo), "worktree", "remove", "--force",
                            str(path)], capture_output=True, timeout=120, check=False)
        subprocess.run(["git", "-C", str(self.repo), "worktree", "prune"],
                       capture_output=True, timeout=120, check=False)


def run_bisect(repo: Path, history: Any, key: str, good: str, bad: str, *,
               suite: str | None = None, calib: int = 10, reps: int = 3,
               max_reps: int = 15, verify: int = 8, log: Any = None) -> tuple[BisectResult, list[str]]:
    """Bisect KEY between two commits of ``repo``; save and return the result and the
    tests run. ``history``: an open read-write `History` that knows KEY."""
    rows = history.report_reads.key_tests(key, suite)
    if not rows:
        where = f" in suite {suite!r}" if suite else ""
        raise BisectInputError(f"no test recorded {key!r}{where} in {history.path}; check the "
                               "key (gate-report --since 30d lists them)")
    nodeids = sorted({r["nodeid"] for r in rows})
    better = next((r["better"] for r in rows if r.get("better")), None)
    commits = candidates(repo, good, bad)
    with tempfile.TemporaryDirectory(prefix="gates-bisect-") as tmp:
        scratch = Path(tmp)
        trees = _Worktrees(repo, scratch)
        db = scratch / "bisect-history.db"
        env = dict(os.environ)
        here = str(Path(gates.__file__).resolve().parents[1])

        def measure(sha: str) -> list[float]:
            tree = trees(sha)
            rid = uuid.uuid4().hex
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), here,
                                                              os.environ.get("PYTHONPATH")]))
            cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                   "--gates-suite", "bisect", "--gates-run-id", rid, "--gates-history",
                   str(db), *nodeids]
            out = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True,
                                 timeout=PYTEST_TIMEOUT_S, check=False)
            from gates.store.open import open_history  # noqa: PLC0415

            with open_history(db, create=False, readonly=True) as h:
                samples = [x for m in h.report_reads.metrics(rid) if m["key"] == key
                           for x in (m.get("samples") or [])]
            if log is not None:
                print(f"  {sha[:12]}: {len(samples)} sample(s), pytest exit {out.returncode}",
                      file=log, flush=True)
            if not samples:
                tail = (out.stdout + out.stderr).strip().splitlines()[-3:]
                raise BisectInputError(f"{sha[:12]}: the tests behind {key!r} recorded no "
                                       f"sample (pytest exit {out.returncode}: "
                                       f"{' | '.join(tail)}); fix or skip that commit")
            return samples

        try:
            result = bisect(commits, measure, better=better or "lower", calib=calib,
                            reps=reps, max_reps=max_reps, verify=verify)
        finally:
            trees.remove()
    history.after_writes.save_bisect(result.to_row(key, suite, commits[0], commits[-1]))
    return result, nodeids


def render_bisect(result: BisectResult, key: str, tests: Sequence[str], fmt: str = "text") -> str:
    """The bisection's outcome and per-candidate evidence, as text or Markdown."""
    head = ["commit", "class", "runs", "mean", "p worse than good", "p better than bad"]
    rows = [[e["commit"][:12], e["class"], str(e["runs"]), f"{e['mean']:.6g}",
             "-" if e["p_worse_than_good"] is None else f"{e['p_worse_than_good']:.2g}",
             "-" if e["p_better_than_bad"] is None else f"{e['p_better_than_bad']:.2g}"]
            for e in result.evidence]
    title = (f"bisect {key}: {result.outcome}"
             + (f" {result.culprit[:12]}" if result.culprit else "")
             + f" ({result.executions} test executions of {', '.join(tests)})")
    if fmt == "md":
        lines = [f"### {title}", "", result.message, "", "| " + " | ".join(head) + " |",
                 "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines) + "\n"
    widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=True)]
    lines = [title, result.message,
             "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
              for r in rows]
    return "\n".join(lines) + "\n"
