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

Tokens and webhook URLs never appear in messages or errors (``_redact``). HTTP goes
through requests with a total deadline per request (`_call`), no redirects followed, only
http(s) URLs, and a delivery counts only on a 2xx answer; the caller marks a webhook
notification sent only then (`AfterWrites.claim_notification`, ``mark_notified``).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import requests

from ci_register.running.redact import mask_secrets, slack_code, slack_text
from gates.report.ghactions import fit_summary

__all__ = ["COMMENT_CAP", "MARKER", "NotifyError", "Regression", "comment_body",
           "post_webhook", "regressions_on", "upsert_pr_comment", "webhook_payload"]

MARKER = "<!-- gates-report: one comment per PR, edited in place -->"
COMMENT_CAP = 60_000  # GitHub's comment limit is 65,536 characters
TIMEOUT_S = 15.0  # each connect and each read
DEADLINE_S = 30.0  # one whole request, however slowly the answer arrives
MAX_PAGES = 30  # of 100 comments: a PR with more than 3,000 comments is not ours to page
MAX_ANSWER_BYTES = 8 * 2**20


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
        # The row's own change (new against baseline), as its "change" column says it
        change = v.own_change if v.own_change is not None else v.rel_change
        out.append(Regression(v.suite, v.fingerprint, v.key, first_commit(v) or run.commit,
                              v.run_id, change, v.owner, run.ci_url))
    return out


def webhook_payload(regs: Sequence[Regression], title: str) -> dict[str, Any]:
    """Slack-compatible: ``text`` (the fallback every receiver shows) and ``blocks``."""
    # Every field is untrusted text (a CODEOWNERS line, a metric key, a branch): through
    # `slack_text`, so no mention pings and no link is forged; the run's own link is ours.
    lines = []
    for r in regs:
        change = "" if r.rel_change is None else f" {r.rel_change * 100:+.1f}%"
        who = f" owner {slack_text(r.owner)}" if r.owner else ""
        since = f" since {slack_text(r.commit[:10])}" if r.commit else ""
        link = f" <{_slack_url(r.url)}|run>" if r.url else ""
        lines.append(f"• {slack_code(r.key)}{change} on {slack_text(r.suite)}/"
                     f"{slack_text(r.fingerprint)}{since}{who}{link}")
    text = f"Regression on main: {slack_text(title)}\n" + "\n".join(lines)
    return {"text": text,
            "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}],
            "regressions": [{"suite": r.suite, "fingerprint": r.fingerprint, "key": r.key,
                             "commit": r.commit, "run_id": r.run_id,
                             "rel_change": r.rel_change, "owner": r.owner} for r in regs]}


def _slack_url(url: str) -> str:
    """A URL inside Slack's ``<url|label>``: its ``|``, ``<``, ``>`` and blanks encoded, so
    it cannot end the link early or carry a label of its own."""
    return mask_secrets(url).translate(_URL_IN_LINK)


_URL_IN_LINK = str.maketrans({"|": "%7C", "<": "%3C", ">": "%3E", "&": "&amp;", " ": "%20",
                              "\n": "%0A", "\r": "%0D", "\t": "%09"})


def _redact(text: str, secrets: Sequence[str | None]) -> str:
    for s in secrets:
        if s:
            text = text.replace(s, "***")
    return text


# ------------------------------------------------------------------ HTTP edge


def _check_url(url: str, what: str) -> str:
    """An http(s) URL with a host, or `NotifyError` naming the setting (not the URL: a
    webhook URL is a secret). ``file://``, ``ftp://`` or a malformed URL is never taken."""
    try:
        parts = urllib.parse.urlsplit(url.strip())
        ok = parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        ok = False
    if not ok or any(c in url for c in "\r\n\t "):
        raise NotifyError(f"{what} is not an http(s) URL with a host; give https://...")
    return url


class _Answer:
    def __init__(self, status: int, body: bytes, location: str | None) -> None:
        self.status, self.body, self.location = status, body, location


def _exchange(session: requests.Session, method: str, url: str, headers: dict[str, str],
              body: Mapping[str, Any] | None, deadline: float) -> _Answer:
    """One request read to its end, in this thread (`_call` bounds it by the deadline)."""
    with session.request(method, url, headers=headers,
                         data=None if body is None else json.dumps(body).encode(),
                         timeout=(TIMEOUT_S, TIMEOUT_S), allow_redirects=False,
                         stream=True) as resp:
        data = bytearray()
        for chunk in resp.iter_content(65536):
            data += chunk
            if len(data) > MAX_ANSWER_BYTES:
                raise NotifyError(f"answer above {MAX_ANSWER_BYTES // 2**20} MiB; not read on")
            if time.monotonic() > deadline:
                raise NotifyError("no complete answer within the deadline")
        return _Answer(resp.status_code, bytes(data), resp.headers.get("Location"))


def _call(method: str, url: str, *, shown: str, token: str | None = None,
          body: Mapping[str, Any] | None = None, hidden: Sequence[str | None] = (),
          deadline_s: float | None = None) -> _Answer:
    """``method url`` with a total deadline; a 2xx answer, else `NotifyError`.

    requests' timeouts bound each connect and each read, not the whole exchange: a
    receiver that drips a byte every few seconds never trips them. So the request runs in
    a daemon thread joined with the deadline (abandoned past it: the process exits soon
    after, and nothing was marked sent). Redirects are never followed: the token stays
    with the host it was meant for, and a webhook that moved is a setting to fix.
    """
    headers = {"Accept": "application/vnd.github+json", "User-Agent": "gpu-ci-gates",
               "X-GitHub-Api-Version": "2022-11-28"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if body is not None:
        headers["Content-Type"] = "application/json"
    hidden = [token, *hidden]
    deadline_s = DEADLINE_S if deadline_s is None else deadline_s
    shown = mask_secrets(shown)
    deadline = time.monotonic() + deadline_s
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            with requests.Session() as session:
                box["answer"] = _exchange(session, method, url, headers, body, deadline)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=work, name="gates-notify", daemon=True)
    worker.start()
    worker.join(max(0.0, deadline - time.monotonic()))
    if worker.is_alive():
        raise NotifyError(_redact(f"{method} {shown}: no complete answer within "
                                  f"{deadline_s:g} s; check the receiver", hidden))
    error = box.get("error")
    if isinstance(error, NotifyError):
        raise NotifyError(_redact(f"{method} {shown}: {error}", hidden)) from None
    if error is not None:
        reason = type(error).__name__
        if isinstance(error, requests.Timeout):
            reason = f"no answer within {TIMEOUT_S:g} s"
        elif isinstance(error, requests.ConnectionError):
            reason = "cannot connect"
        raise NotifyError(_redact(f"{method} {shown}: {reason}; check the URL and the "
                                  "network", hidden)) from None
    answer: _Answer = box["answer"]
    if 300 <= answer.status < 400:
        raise NotifyError(_redact(
            f"{method} {shown}: HTTP {answer.status}, a redirect; not followed (a token "
            "never leaves the host it was meant for); give the final URL", hidden))
    if not 200 <= answer.status < 300:
        raise NotifyError(_redact(f"{method} {shown}: HTTP {answer.status}; check the "
                                  "token's permissions (pull-requests: write) and the URL",
                                  hidden))
    return answer


def _json(answer: _Answer, method: str, shown: str) -> Any:
    if not answer.body.strip():
        return None
    try:
        return json.loads(answer.body)
    except ValueError:
        raise NotifyError(f"{method} {shown}: the answer is not JSON; is --api-url the "
                          "GitHub API?") from None


def upsert_pr_comment(body: str, *, api_url: str, repo: str, pr: int, token: str,
                      max_pages: int = MAX_PAGES) -> str:
    """Edit this PR's marker comment, or create it; returns "updated" or "created".

    At most ``max_pages`` pages of 100 comments are listed: an API that keeps answering
    full pages is an error, not a loop."""
    base = _check_url(api_url, "--api-url / $GITHUB_API_URL").rstrip("/")
    issue = f"{base}/repos/{repo}/issues/{pr}/comments"
    shown = f"{base}/repos/{repo}/issues/{pr}/comments"
    for page in range(1, max_pages + 1):
        answer = _call("GET", f"{issue}?per_page=100&page={page}", shown=shown, token=token)
        comments = _json(answer, "GET", shown) or []
        if not isinstance(comments, list):
            raise NotifyError(f"GET {shown}: the answer is not a list of comments")
        for c in comments:
            if isinstance(c, dict) and MARKER in str(c.get("body") or ""):
                cid = c.get("id")
                if not isinstance(cid, int) or isinstance(cid, bool):
                    raise NotifyError(f"GET {shown}: a comment without a numeric id")
                _call("PATCH", f"{base}/repos/{repo}/issues/comments/{cid}",
                      shown=f"{base}/repos/{repo}/issues/comments/{cid}", token=token,
                      body={"body": body})
                return "updated"
        if len(comments) < 100:
            break
    else:
        raise NotifyError(f"GET {shown}: more than {max_pages * 100} comments listed (full "
                          "pages kept coming); stopped without posting")
    _call("POST", issue, shown=shown, token=token, body={"body": body})
    return "created"


def post_webhook(url: str, payload: Mapping[str, Any]) -> None:
    """POST the payload; delivered on any 2xx, whatever the body (Slack answers a plain
    ``ok``). Errors name the host only (a webhook URL is a secret)."""
    _check_url(url, "$GATES_WEBHOOK_URL")
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or "webhook"
    if parts.port:
        host += f":{parts.port}"
    _call("POST", url, shown=f"webhook at {host}", body=payload,
          hidden=[url, *(x for x in (parts.path, parts.query, parts.password) if x and len(x) > 3)])
