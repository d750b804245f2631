"""Telling people: one PR comment kept up to date, and a webhook per regressing change.

- PR comment: the Markdown summary's top (failures first, owners and next steps,
  a link to the full report) in ONE comment per pull request, found again by a
  hidden marker and edited in place on every later run (GitHub's REST API,
  ``/repos/{repo}/issues/{pr}/comments``, with the CI's ``GITHUB_TOKEN``).
- Webhook: a Slack-compatible JSON (``text`` plus ``blocks``) per confirmed
  regression on the main branch, once per regressing change: the change is
  (suite, fingerprint, key, first commit of the run of regressions), claimed in
  the history's ``notifications`` table before sending and released if the
  delivery fails, so a repeated run does not notify twice.

Tokens and webhook URLs never appear in messages or errors (``_redact``); HTTP
uses the standard library with a timeout (no third-party client in the gate's path).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gates.report.ghactions import fit_summary

__all__ = ["COMMENT_CAP", "MARKER", "NotifyError", "Regression", "comment_body",
           "post_webhook", "regressions_on", "upsert_pr_comment", "webhook_payload"]

MARKER = "<!-- gates-report: one comment per PR, edited in place -->"
COMMENT_CAP = 60_000  # GitHub's comment limit is 65,536 characters
TIMEOUT_S = 15.0


class NotifyError(Exception):
    """A notification could not be delivered; the message carries no secret."""


@dataclass(frozen=True)
class Regression:
    suite: str
    fingerprint: str
    key: str
    commit: str | None  # first commit of the run of regressions: the change
    run_id: str
    rel_change: float | None
    owner: str | None
    url: str | None

    @property
    def dedupe(self) -> str:
        return f"{self.suite}|{self.fingerprint}|{self.key}|{self.commit or self.run_id}"


# ---------------------------------------------------------------- pure parts


_FIRST = ("### Verdicts", "### Owners and next steps", "### Where metrics changed")


def comment_body(markdown: str, link: str | None) -> str:
    """The PR comment: marker, headline, verdicts (failures first), owners and next
    steps, where metrics changed, then the runs; CI health left out; the link."""
    head, *sections = markdown.split("\n### ")
    sections = ["### " + x.rstrip() + "\n" for x in sections]
    keep = [x for x in sections if not x.startswith("### CI health")]
    ordered = ([x for f in _FIRST for x in keep if x.startswith(f)]
               + [x for x in keep if not x.startswith(_FIRST)])
    top = "\n".join([head.rstrip() + "\n", *ordered])
    tail = f"\n[Full report]({link})\n" if link else ""
    room = COMMENT_CAP - len(MARKER) - len(tail.encode()) - 2
    return f"{MARKER}\n{fit_summary(top, room)}{tail}"


def regressions_on(report: Any, branch: str,
                   first_commit: Callable[[Any], str | None]) -> list[Regression]:
    """The report's confirmed (enforced) regressions in runs of ``branch``."""
    runs = {r.run_id: r for r in report.runs}
    out = []
    for v in report.failing:
        run = runs.get(v.run_id)
        if v.verdict != "regression" or run is None or run.branch != branch:
            continue
        out.append(Regression(v.suite, v.fingerprint, v.key, first_commit(v) or run.commit,
                              v.run_id, v.rel_change, v.owner, run.ci_url))
    return out


def webhook_payload(regs: Sequence[Regression], title: str) -> dict[str, Any]:
    """Slack-compatible: ``text`` (the fallback every receiver shows) and ``blocks``."""
    lines = []
    for r in regs:
        change = "" if r.rel_change is None else f" {r.rel_change * 100:+.1f}%"
        who = f" owner {r.owner}" if r.owner else ""
        since = f" since {r.commit[:10]}" if r.commit else ""
        link = f" <{r.url}|run>" if r.url else ""
        lines.append(f"• `{r.key}`{change} on {r.suite}/{r.fingerprint}{since}{who}{link}")
    text = f"Regression on main: {title}\n" + "\n".join(lines)
    return {"text": text,
            "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}],
            "regressions": [{"suite": r.suite, "fingerprint": r.fingerprint, "key": r.key,
                             "commit": r.commit, "run_id": r.run_id,
                             "rel_change": r.rel_change, "owner": r.owner} for r in regs]}


def _redact(text: str, secrets: Sequence[str | None]) -> str:
    for s in secrets:
        if s:
            text = text.replace(s, "***")
    return text


# ------------------------------------------------------------------ HTTP edge


def _request(method: str, url: str, *, token: str | None = None,
             body: Mapping[str, Any] | None = None,
             secrets: Sequence[str | None] = ()) -> Any:
    headers = {"Accept": "application/vnd.github+json", "User-Agent": "gpu-ci-gates",
               "X-GitHub-Api-Version": "2022-11-28"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    hidden = [token, *secrets]
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:  # noqa: S310
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        raise NotifyError(_redact(f"{method} {url}: HTTP {exc.code} {exc.reason}; check the "
                                  "token's permissions (pull-requests: write)", hidden)) from None
    except (urllib.error.URLError, OSError) as exc:
        raise NotifyError(_redact(f"{method} {url}: {getattr(exc, 'reason', exc)}; check the "
                                  "URL and the network", hidden)) from None
    return json.loads(raw) if raw.strip() else None


def upsert_pr_comment(body: str, *, api_url: str, repo: str, pr: int, token: str) -> str:
    """Edit this PR's marker comment, or create it; returns "updated" or "created"."""
    base = api_url.rstrip("/")
    issue = f"{base}/repos/{repo}/issues/{pr}/comments"
    page = 1
    while True:
        comments = _request("GET", f"{issue}?per_page=100&page={page}", token=token) or []
        for c in comments:
            if MARKER in (c.get("body") or ""):
                _request("PATCH", f"{base}/repos/{repo}/issues/comments/{c['id']}",
                         token=token, body={"body": body})
                return "updated"
        if len(comments) < 100:
            break
        page += 1
    _request("POST", issue, token=token, body={"body": body})
    return "created"


def post_webhook(url: str, payload: Mapping[str, Any]) -> None:
    """POST the payload; errors name the host only (a webhook URL is a secret)."""
    host = urllib.parse.urlsplit(url).netloc or "webhook"
    try:
        _request("POST", url, body=payload, secrets=[url])
    except NotifyError as exc:
        raise NotifyError(str(exc).replace("***", f"webhook at {host}")) from None
