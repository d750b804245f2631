"""`gate-report accept`: a metric's new level accepted from a commit on (``gates.record.accept``).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from gates.commands.common import (
    UsageError,
    add_history,
    open_history_arg,
)
from gates.record.accept import ACCEPT_FILE

__all__ = ["NAME", "who", "add_parser", "run"]

NAME = "accept"


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``gate-report accept`` to ``sub`` (``gates.commands.cli``)."""
    p = sub.add_parser(
        "accept", help="accept a metric's new level from a commit on (re-baseline)",
        description="From COMMIT on, judge the matching metrics only against runs at or "
                    "after it; earlier runs stay in history. Logged with who, why and when. "
                    f"In a PR, prefer an entry in {ACCEPT_FILE} at the repository root: it "
                    "is reviewed with the change and in force in the runs that carry it.")
    add_history(p)
    p.add_argument("key", nargs="?", metavar="KEY-or-glob",
                   help="metric key or fnmatch glob (quote it: 'serving/ttft*')")
    p.add_argument("--from", dest="commit", metavar="COMMIT",
                   help="the commit whose level is right (sha, >= 7 characters)")
    p.add_argument("--reason", help="why the new level is right (kept in the log)")
    p.add_argument("--suite", help="only this suite (default: every suite)")
    p.add_argument("--test", metavar="GLOB", help="only metrics of tests matching this "
                   "nodeid or file glob")
    p.add_argument("--who", help="who accepts (default: $GITHUB_ACTOR, git user.email, login)")
    p.add_argument("--list", action="store_true", help="list the acceptances instead")
    p.add_argument("--root", default=".", metavar="PATH",
                   help="the git checkout a --from commit not yet run must exist in "
                        "(default: .)")
    return p


def who() -> str:
    """Who accepts: the CI actor, else the git identity, else the login name."""
    import getpass  # noqa: PLC0415
    import subprocess  # noqa: PLC0415

    if os.environ.get("GITHUB_ACTOR"):
        return os.environ["GITHUB_ACTOR"]
    try:
        email = subprocess.run(["git", "config", "user.email"], capture_output=True,
                               text=True, timeout=10, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        email = ""
    return email or getpass.getuser()


def run(args: argparse.Namespace) -> int:
    with open_history_arg(args.history, write=not args.list) as history:
        if args.list:
            for a in history.report_reads.acceptances(args.suite):
                scope = " ".join(f"{k}={a[k]}" for k in ("suite", "test") if a.get(k))
                start = f"from {a['from_commit'][:10]}" if a.get("from_commit") else a["source"]
                print(f"#{a['id']} {a['pattern']} {scope} {start} by {a.get('who') or '-'} "
                      f"at {a['at']}: {a['reason']}".replace("  ", " "))
            return 0
        if not args.key or not args.commit or not args.reason:
            raise UsageError("give KEY-or-glob, --from COMMIT and --reason \"why\" (or --list)")
        import fnmatch  # noqa: PLC0415

        reads = history.report_reads
        keys = [k for k in reads.metric_keys(args.suite) if fnmatch.fnmatchcase(k, args.key)]
        if not keys:
            where = f" in suite {args.suite!r}" if args.suite else ""
            raise UsageError(f"{args.key!r} matches no recorded metric key{where}; check the "
                             "key or glob (gate-report --since 30d lists them)")
        start = reads.commit_start(args.commit)
        if start is None and not _git_knows(Path(args.root), args.commit):
            # An acceptance of a commit that never runs never applies: refuse a typo.
            raise UsageError(f"--from {args.commit}: no run in {history.path} is of that "
                             f"commit, and the git checkout at {args.root} does not have it; "
                             "give a commit that exists (git log --oneline), from --root's "
                             "checkout")
        suites = [args.suite] if args.suite else [
            s for s in reads.suite_names()
            if any(fnmatch.fnmatchcase(k, args.key) for k in reads.metric_keys(s))]
        row = history.after_writes.add_acceptance(args.key, reason=args.reason, who=args.who or who(),
                                     from_commit=args.commit, suite=args.suite, test=args.test)
    note = ("in force from its first run " + start if start
            else "in force once that commit has run")
    shown = ", ".join(keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
    covers = (f"suite {args.suite}" if args.suite else
              f"every suite (no --suite): the keys are recorded in {', '.join(suites)}")
    print(f"accepted #{row['id']} {args.key} from {args.commit} ({note}); covers {covers}; "
          f"earlier runs stay in history, not in its baseline; matches {len(keys)} key(s): "
          f"{shown}")
    return 0


def _git_knows(root: Path, commit: str) -> bool:
    """Whether the git checkout at ``root`` has ``commit`` (a sha or a prefix)."""
    import subprocess  # noqa: PLC0415

    try:
        done = subprocess.run(["git", "-C", str(root), "rev-parse", "--verify", "--quiet",
                               "--end-of-options", f"{commit}^{{commit}}"],
                              capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0
