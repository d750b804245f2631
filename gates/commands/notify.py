"""`gate-report notify`: the PR's gate comment, and a webhook for confirmed regressions on main.

Library: ``gates.report.notify``; the report is ``gate-report``'s (``gates.report.build``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

from gates.commands.common import (
    UsageError,
    add_history,
    assign_owners,
    count,
    now,
    open_history_arg,
    report_anchor,
)

__all__ = ["NAME", "pr_number", "add_parser", "run"]

NAME = "notify"


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``gate-report notify`` to ``sub`` (``gates.commands.cli``)."""
    p = sub.add_parser(
        "notify", help="update the PR's gate comment; webhook confirmed regressions on main",
        description="--pr-comment: one comment per pull request (found by a hidden marker "
                    "and edited in place) holding the Markdown summary's top, failures first, "
                    "with a link to the full report, through GitHub's REST API with "
                    "$GITHUB_TOKEN. --webhook: a Slack-compatible JSON to $GATES_WEBHOOK_URL "
                    "for confirmed regressions in runs of the main branch, once per "
                    "regressing change (remembered in the history). Secrets come from the "
                    "environment only and never appear in the output.")
    add_history(p)
    p.add_argument("--run", metavar="ID", help="this run (default: the latest)")
    p.add_argument("--suite", help="only runs of this suite")
    p.add_argument("--pr-comment", action="store_true", help="create or edit the PR comment")
    p.add_argument("--webhook", action="store_true",
                   help="POST new confirmed regressions on the main branch")
    p.add_argument("--pr", type=count(1), metavar="N",
                   help="pull request number (default: from $GITHUB_EVENT_PATH)")
    p.add_argument("--repo", metavar="OWNER/NAME", help="default: $GITHUB_REPOSITORY")
    p.add_argument("--api-url", metavar="URL",
                   help="GitHub API (default: $GITHUB_API_URL, else https://api.github.com)")
    p.add_argument("--link", metavar="URL", help="the full report (default: the run's CI URL)")
    p.add_argument("--main-branch", default="main", metavar="NAME",
                   help="the branch whose regressions go to the webhook (default main)")
    p.add_argument("--root", default=".", metavar="PATH",
                   help="repository root, for CODEOWNERS (default .)")
    return p


_REPO = re.compile(r"[A-Za-z0-9_.-]+/(?!\.\.?$)[A-Za-z0-9_.-]+")


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


def run(args: argparse.Namespace) -> int:
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
                    rows = history.report_reads.key_verdicts(v.suite, v.key, v.fingerprint,
                                                until=started.get(v.run_id))
                    return held_since(rows, "regression")[1]

                regs = regressions_on(report, args.main_branch, first_commit)
                fresh = [r for r in regs
                         if history.after_writes.claim_notification("webhook", r.dedupe, r.run_id)]
                if fresh:
                    try:
                        post_webhook(str(hook), webhook_payload(fresh, report.title))
                    except BaseException:  # not answered 2xx (or Ctrl-C): the next run retries
                        for r in fresh:
                            history.after_writes.release_notification("webhook", r.dedupe)
                        raise
                    for r in fresh:  # answered 2xx: only now is it sent
                        history.after_writes.mark_notified("webhook", r.dedupe, r.run_id)
                print(f"webhook: {len(fresh)} regression(s) sent, "
                      f"{len(regs) - len(fresh)} already notified")
        except NotifyError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    return 0
