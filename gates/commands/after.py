"""`gate-report` commands for after the verdict: accept, compare, notify, bisect.

Kept beside ``gates.commands.cli`` (which registers them: ``COMMANDS``, ``add_parsers``)
so each module stays small. Each command calls one library: ``History.add_acceptance``
(``gates.record.accept``), ``gates.report.compare``, ``gates.report.notify``, ``gates.bisect_git``.
``assign_owners`` fills the report rows' owners, accept hints and stored
bisections for ``gate-report`` and ``notify``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

from gates.commands.common import (
    UsageError,
    add_history,
    add_out,
    check_out,
    count,
    emit,
    now,
    open_history_arg,
    report_anchor,
)
from gates.record.accept import ACCEPT_FILE

__all__ = ["COMMANDS", "add_parsers", "assign_owners"]

_REPO = re.compile(r"[A-Za-z0-9_.-]+/(?!\.\.?$)[A-Za-z0-9_.-]+")


def assign_owners(history, report, root: Path) -> None:
    """Owners (register_ci_gate(owner=), else CODEOWNERS) and accept hints on the rows."""
    if not any(v.cls != "pass" or v.verdict == "improvement" for v in report.verdicts):
        return  # nothing to own (every row passed): no CODEOWNERS read, no matcher loaded
    from gates.record.accept import held_since  # noqa: PLC0415
    from gates.report.owners import assign, read_codeowners  # noqa: PLC0415

    declared: dict[tuple[str, str], str] = {}
    for rid in {v.run_id for v in report.verdicts if v.cls != "pass"}:
        for g in history.plan_gates(rid):
            owner = (g.get("options") or {}).get("owner")
            if owner:
                declared[(rid, g["metric_key"])] = owner
    started = {r.run_id: r.started_at for r in report.runs}

    def streak(v) -> tuple[int, str | None]:
        rows = history.key_verdicts(v.suite, v.key, v.fingerprint, until=started.get(v.run_id))
        return held_since(rows, v.verdict)

    try:
        rules = read_codeowners(root)
    except ImportError as exc:  # a host with the gate's needs only (a GPU image's Python)
        print(f"warning: CODEOWNERS not read ({exc}); pip install pathspec google-re2",
              file=sys.stderr)
        rules = []
    assign(report, declared, rules, streak)
    for v in report.verdicts:
        if v.cls == "pass":
            continue
        done = [b for b in history.bisects(v.key) if b["suite"] in (None, v.suite)]
        if done:
            b = done[0]
            v.bisect = (f"{b['outcome']} {b['culprit'][:12]}" if b.get("culprit")
                        else b["outcome"]) + f" ({b['executions']} runs)"



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


def accept(args: argparse.Namespace) -> int:
    with open_history_arg(args.history, write=not args.list) as history:
        if args.list:
            for a in history.acceptances(args.suite):
                scope = " ".join(f"{k}={a[k]}" for k in ("suite", "test") if a.get(k))
                start = f"from {a['from_commit'][:10]}" if a.get("from_commit") else a["source"]
                print(f"#{a['id']} {a['pattern']} {scope} {start} by {a.get('who') or '-'} "
                      f"at {a['at']}: {a['reason']}".replace("  ", " "))
            return 0
        if not args.key or not args.commit or not args.reason:
            raise UsageError("give KEY-or-glob, --from COMMIT and --reason \"why\" (or --list)")
        import fnmatch  # noqa: PLC0415

        keys = [k for k in history.metric_keys(args.suite) if fnmatch.fnmatchcase(k, args.key)]
        if not keys:
            where = f" in suite {args.suite!r}" if args.suite else ""
            raise UsageError(f"{args.key!r} matches no recorded metric key{where}; check the "
                             "key or glob (gate-report --since 30d lists them)")
        start = history.commit_start(args.commit)
        if start is None and not _git_knows(Path(args.root), args.commit):
            # An acceptance of a commit that never runs never applies: refuse a typo.
            raise UsageError(f"--from {args.commit}: no run in {history.path} is of that "
                             f"commit, and the git checkout at {args.root} does not have it; "
                             "give a commit that exists (git log --oneline), from --root's "
                             "checkout")
        suites = [args.suite] if args.suite else [
            s for s in history.report_reads.suite_names()
            if any(fnmatch.fnmatchcase(k, args.key) for k in history.metric_keys(s))]
        row = history.add_acceptance(args.key, reason=args.reason, who=args.who or who(),
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


def compare(args: argparse.Namespace) -> int:
    from gates.model import stats  # noqa: PLC0415
    from gates.report.compare import compare, load_side, render_compare  # noqa: PLC0415

    a = args.a or os.environ.get("GITHUB_BASE_REF")
    b = args.b or (os.environ.get("GITHUB_SHA") if os.environ.get("GITHUB_BASE_REF") else None)
    if not a or not b:
        raise UsageError("give A and B (commits, branches, run ids or fingerprints); in a "
                         "PR job they default to $GITHUB_BASE_REF and $GITHUB_SHA")
    check_out(args)
    with open_history_arg(args.history) as history:
        kind_b, side_b = load_side(history, b, suite=args.suite, limit=args.runs_b)
        skip = {r["run_id"] for r in history.runs_by_ref(b, suite=args.suite,
                                                         limit=args.runs_b)[1]}
        kind_a, side_a = load_side(history, a, suite=args.suite,
                                   limit=stats.DEFAULTS.window + max(stats.DEFAULTS.windows),
                                   skip=skip, trusted_only=True)
    rows = compare(side_a, side_b, by_fingerprint="fingerprint" not in (kind_a, kind_b))
    emit(render_compare(rows, f"{kind_a} {a}", f"{kind_b} {b}", args.format), args.out)
    return 1 if any(r.verdict == "regression" for r in rows) else 0


def pr_number(explicit: int | None) -> int | None:
    """The PR number: --pr, else the pull_request event's payload."""
    if explicit is not None:
        return explicit
    event = os.environ.get("GITHUB_EVENT_PATH")
    if not event or not Path(event).is_file():
        return None
    try:
        number = json.loads(Path(event).read_text(encoding="utf-8")).get(
            "pull_request", {}).get("number")
    except (OSError, ValueError, AttributeError):
        return None
    # JSON true is a Python int: it named PR "True" (/issues/True/comments); 0 and
    # negatives name no pull request either.
    return number if type(number) is int and number > 0 else None


def notify(args: argparse.Namespace) -> int:
    from gates.record.accept import held_since  # noqa: PLC0415
    from gates.report.build import build_report  # noqa: PLC0415
    from gates.report.notify import (  # noqa: PLC0415
        NotifyError,
        comment_body,
        post_webhook,
        regressions_on,
        upsert_pr_comment,
        webhook_payload,
    )
    from gates.report.query import (  # noqa: PLC0415
        ReportInputError,
        load_report_input,
        select_runs,
    )
    from gates.report.render_md import md_text, render_md  # noqa: PLC0415

    if not args.pr_comment and not args.webhook:
        raise UsageError("give --pr-comment and/or --webhook")
    token = os.environ.get("GITHUB_TOKEN")
    hook = os.environ.get("GATES_WEBHOOK_URL")
    pr = pr_number(args.pr)
    repo = args.repo or os.environ.get("GITHUB_REPOSITORY")
    if args.pr_comment and not (token and pr and repo):
        raise UsageError("--pr-comment needs $GITHUB_TOKEN, the PR number (--pr or a "
                         "pull_request event) and the repository (--repo or "
                         "$GITHUB_REPOSITORY)")
    if args.pr_comment and (not _REPO.fullmatch(str(repo))
                            or str(repo).split("/")[0] in (".", "..")):
        raise UsageError(f"--repo / $GITHUB_REPOSITORY must be OWNER/NAME (letters, digits, "
                         f"'-', '_', '.'), not {str(repo)[:80]!r}")
    if args.webhook and not hook:
        raise UsageError("--webhook needs $GATES_WEBHOOK_URL (keep it in a CI secret)")
    with open_history_arg(args.history, write=args.webhook) as history:
        # The PR comment and the webhook speak of this CI run (else this commit): the newest
        # run in a shared history may be another branch's, or main's restored with it.
        anchor = report_anchor(Path(args.root))
        try:
            runs, scope = select_runs(history, run=args.run, suite=args.suite, anchor=anchor,
                                      fall_back=not anchor["ci_url"])
        except ReportInputError as exc:
            if args.pr_comment and anchor["ci_url"]:
                # Nothing of this CI run was recorded: the comment says so, rather than
                # keep what an earlier push's runs said (it may say passed).
                api = args.api_url or os.environ.get("GITHUB_API_URL") or "https://api.github.com"
                done = upsert_pr_comment(comment_body(f"## ❌ {md_text(str(exc))}\n",
                                                      anchor["ci_url"]), api_url=api,
                                         repo=str(repo), pr=int(pr or 0), token=str(token))
                print(f"PR #{pr}: gate comment {done}")
            raise
        report = build_report(load_report_input(history, runs, scope=scope,
                                                generated_at=now()))
        assign_owners(history, report, Path(args.root))
        link = args.link or next((r.ci_url for r in report.runs if r.ci_url), None)
        try:
            if args.pr_comment:
                api = args.api_url or os.environ.get("GITHUB_API_URL") or "https://api.github.com"
                done = upsert_pr_comment(comment_body(render_md(report), link), api_url=api,
                                         repo=str(repo), pr=int(pr or 0), token=str(token))
                print(f"PR #{pr}: gate comment {done}")
            if args.webhook:
                started = {r.run_id: r.started_at for r in report.runs}

                def first_commit(v) -> str | None:
                    rows = history.key_verdicts(v.suite, v.key, v.fingerprint,
                                                until=started.get(v.run_id))
                    return held_since(rows, "regression")[1]

                regs = regressions_on(report, args.main_branch, first_commit)
                fresh = [r for r in regs
                         if history.claim_notification("webhook", r.dedupe, r.run_id)]
                if fresh:
                    try:
                        post_webhook(str(hook), webhook_payload(fresh, report.title))
                    except BaseException:  # not answered 2xx (or Ctrl-C): the next run retries
                        for r in fresh:
                            history.release_notification("webhook", r.dedupe)
                        raise
                    for r in fresh:  # answered 2xx: only now is it sent
                        history.mark_notified("webhook", r.dedupe, r.run_id)
                print(f"webhook: {len(fresh)} regression(s) sent, "
                      f"{len(regs) - len(fresh)} already notified")
        except NotifyError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    return 0


def bisect(args: argparse.Namespace) -> int:
    from gates.bisect_git import BisectInputError, render_bisect, run_bisect  # noqa: PLC0415

    check_out(args)
    with open_history_arg(args.history, write=True) as history:
        try:
            result, tests = run_bisect(Path(args.repo), history, args.key, args.good, args.bad,
                                       suite=args.suite, calib=args.calib, reps=args.reps,
                                       max_reps=args.max_reps, verify=args.verify,
                                       log=sys.stderr)
        except BisectInputError as exc:
            raise UsageError(str(exc)) from None
    emit(render_bisect(result, args.key, tests, args.format), args.out)
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "accept": accept,
    "compare": compare,
    "notify": notify,
    "bisect": bisect,
}


def add_parsers(sub) -> None:
    """Add the after-the-verdict subcommands to ``gate-report``'s parser."""
    cp = sub.add_parser(
        "compare", help="compare two commits, branches, runs or fingerprints metric by metric",
        description="Judge every metric of B's runs against A's runs with the gate's "
                    "statistics: the change, its 95%% interval, p/q and a verdict per metric "
                    "(regressions first). A and B: a run id, a commit, a branch or a hardware "
                    "fingerprint. In a PR job they default to $GITHUB_BASE_REF and "
                    "$GITHUB_SHA (this PR against its base branch). Exit 1 when something "
                    "regressed.")
    add_history(cp)
    cp.add_argument("a", nargs="?", metavar="A", help="the reference (e.g. main)")
    cp.add_argument("b", nargs="?", metavar="B", help="what is compared with it")
    cp.add_argument("--suite", help="only this suite")
    cp.add_argument("--format", choices=("text", "md", "json"), default="text",
                    help="output format (default text)")
    add_out(cp)
    cp.add_argument("--runs-b", type=count(1), default=10, metavar="N",
                    help="B's newest runs judged together (default 10)")

    nt = sub.add_parser(
        "notify", help="update the PR's gate comment; webhook confirmed regressions on main",
        description="--pr-comment: one comment per pull request (found by a hidden marker "
                    "and edited in place) holding the Markdown summary's top, failures first, "
                    "with a link to the full report, through GitHub's REST API with "
                    "$GITHUB_TOKEN. --webhook: a Slack-compatible JSON to $GATES_WEBHOOK_URL "
                    "for confirmed regressions in runs of the main branch, once per "
                    "regressing change (remembered in the history). Secrets come from the "
                    "environment only and never appear in the output.")
    add_history(nt)
    nt.add_argument("--run", metavar="ID", help="this run (default: the latest)")
    nt.add_argument("--suite", help="only runs of this suite")
    nt.add_argument("--pr-comment", action="store_true", help="create or edit the PR comment")
    nt.add_argument("--webhook", action="store_true",
                    help="POST new confirmed regressions on the main branch")
    nt.add_argument("--pr", type=count(1), metavar="N",
                    help="pull request number (default: from $GITHUB_EVENT_PATH)")
    nt.add_argument("--repo", metavar="OWNER/NAME", help="default: $GITHUB_REPOSITORY")
    nt.add_argument("--api-url", metavar="URL",
                    help="GitHub API (default: $GITHUB_API_URL, else https://api.github.com)")
    nt.add_argument("--link", metavar="URL", help="the full report (default: the run's CI URL)")
    nt.add_argument("--main-branch", default="main", metavar="NAME",
                    help="the branch whose regressions go to the webhook (default main)")
    nt.add_argument("--root", default=".", metavar="PATH",
                    help="repository root, for CODEOWNERS (default .)")

    bs = sub.add_parser(
        "bisect", help="find the commit that moved a metric (git worktrees, repeated runs)",
        description="Check candidate commits between --good and --bad out in git worktrees, "
                    "run only the tests that recorded KEY (known from the history), repeat "
                    "them interleaved with good and bad on this machine and classify each "
                    "candidate like good or like bad with the gate's statistics; stop at one "
                    "commit, or say the change is not isolable (noise, gradual drift). The "
                    "culprit and the evidence go to the history (bisects table) and stdout.")
    add_history(bs)
    bs.add_argument("key", metavar="KEY", help="metric key")
    bs.add_argument("--good", required=True, metavar="COMMIT", help="a commit at the old level")
    bs.add_argument("--bad", required=True, metavar="COMMIT", help="a commit at the new level")
    bs.add_argument("--suite", help="the suite whose tests recorded KEY (default: any)")
    bs.add_argument("--repo", default=".", metavar="PATH", help="git repository (default .)")
    bs.add_argument("--calib", type=count(5), default=10, metavar="N",
                    help="runs of good and of bad before halving (default 10)")
    bs.add_argument("--reps", type=count(1), default=3, metavar="N",
                    help="runs of a candidate per round (default 3)")
    bs.add_argument("--max-reps", type=count(1), default=15, metavar="N",
                    help="runs of a candidate at most (default 15)")
    bs.add_argument("--verify", type=count(5), default=8, metavar="N",
                    help="runs of the last good and first bad candidate compared at the end "
                         "(default 8)")
    bs.add_argument("--format", choices=("text", "md"), default="text",
                    help="output format (default text)")
    add_out(bs)

    ac = sub.add_parser(
        "accept", help="accept a metric's new level from a commit on (re-baseline)",
        description="From COMMIT on, judge the matching metrics only against runs at or "
                    "after it; earlier runs stay in history. Logged with who, why and when. "
                    f"In a PR, prefer an entry in {ACCEPT_FILE} at the repository root: it "
                    "is reviewed with the change and in force in the runs that carry it.")
    add_history(ac)
    ac.add_argument("key", nargs="?", metavar="KEY-or-glob",
                    help="metric key or fnmatch glob (quote it: 'serving/ttft*')")
    ac.add_argument("--from", dest="commit", metavar="COMMIT",
                    help="the commit whose level is right (sha, >= 7 characters)")
    ac.add_argument("--reason", help="why the new level is right (kept in the log)")
    ac.add_argument("--suite", help="only this suite (default: every suite)")
    ac.add_argument("--test", metavar="GLOB", help="only metrics of tests matching this "
                    "nodeid or file glob")
    ac.add_argument("--who", help="who accepts (default: $GITHUB_ACTOR, git user.email, login)")
    ac.add_argument("--list", action="store_true", help="list the acceptances instead")
    ac.add_argument("--root", default=".", metavar="PATH",
                    help="the git checkout a --from commit not yet run must exist in "
                         "(default: .)")
