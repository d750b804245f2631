"""gates.report.notify and `gate-report notify`: against a fake GitHub API and a webhook receiver
on localhost (never the network); no secret in any output."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from history_seed import level_run

from gates.commands.cli import main as cli
from gates.gate import evaluate_run
from gates.report.notify import MARKER, NotifyError, post_webhook
from gates.store.open import open_history

TOKEN = "ghs_SECRETtoken1234567890"
NODE = "suites/serving/test_ttft.py::test_ttft"


class Fake:
    """A fake GitHub issue-comments API and a webhook receiver; records every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str | None, dict | None]] = []
        self.comments: dict[int, dict] = {7: {"id": 7, "body": "someone else's comment"}}
        self.fail = False

    def handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a) -> None:  # keep the test output clean
                pass

            def _body(self) -> dict | None:
                n = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(n)) if n else None

            def _send(self, code: int, obj) -> None:
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self, method: str) -> None:
                body = self._body()
                fake.calls.append((method, self.path, self.headers.get("Authorization"), body))
                if fake.fail:
                    return self._send(500, {"message": "boom"})
                if self.path.startswith("/hook/"):
                    return self._send(200, {"ok": True})
                if method == "GET" and self.path.startswith("/repos/o/r/issues/5/comments"):
                    return self._send(200, list(fake.comments.values()))
                if method == "POST" and self.path == "/repos/o/r/issues/5/comments":
                    cid = max(fake.comments) + 1
                    fake.comments[cid] = {"id": cid, "body": body["body"]}
                    return self._send(201, fake.comments[cid])
                if method == "PATCH" and self.path.startswith("/repos/o/r/issues/comments/"):
                    cid = int(self.path.rsplit("/", 1)[1])
                    fake.comments[cid]["body"] = body["body"]
                    return self._send(200, fake.comments[cid])
                return self._send(404, {"message": "not found"})

            def do_GET(self) -> None:  # noqa: N802
                self._handle("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._handle("POST")

            def do_PATCH(self) -> None:  # noqa: N802
                self._handle("PATCH")

        return H


@pytest.fixture
def fake() -> Iterator[tuple[Fake, str]]:
    f = Fake()
    server = ThreadingHTTPServer(("127.0.0.1", 0), f.handler())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _history(path: Path, *, branch: str, steps: int, start: int = 0,
             rng=None, url: str = "https://ci.example/{i}") -> np.random.Generator:
    rng = rng or np.random.default_rng(5)
    with open_history(path) as h:
        for i in range(start, start + steps):
            rid = level_run(h, i, {"ttft": 1.0 if i < 30 else 1.15}, rng, commit=f"{i:07d}cafe",
                            branch=branch, node=NODE, ci_url=url.format(i=i))
            evaluate_run(h, rid)
    return rng


def test_pr_comment_is_created_once_then_edited_in_place(tmp_path, fake, capsys,
                                                          monkeypatch):
    f, url = fake
    db = tmp_path / "h.db"
    rng = _history(db, branch="feat", steps=31)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 5}}))
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
    (tmp_path / "CODEOWNERS").write_text("suites/serving/ @org/serving\n")
    args = ["notify", "--pr-comment", "--history", str(db), "--repo", "o/r",
            "--api-url", url, "--root", str(tmp_path)]
    assert cli(args) == 0
    assert "PR #5: gate comment created" in capsys.readouterr().out
    ours = [c for c in f.comments.values() if MARKER in c["body"]]
    assert len(ours) == 1
    body = ours[0]["body"]
    assert body.index("FAIL regression") < body.index("### Owners") < body.index("### Runs")
    assert "@org/serving" in body and "[Full report](https://ci.example/30)" in body
    assert "### CI health" not in body
    _history(db, branch="feat", steps=1, start=31, rng=rng)  # a later run of the PR
    assert cli(args) == 0
    assert "PR #5: gate comment updated" in capsys.readouterr().out
    assert len([c for c in f.comments.values() if MARKER in c["body"]]) == 1
    assert "run-0031" in [c for c in f.comments.values() if MARKER in c["body"]][0]["body"]
    methods = [c[0] for c in f.calls]
    assert methods == ["GET", "POST", "GET", "PATCH"]
    assert all(c[2] == f"Bearer {TOKEN}" for c in f.calls)


def test_webhook_once_per_regressing_change(tmp_path, fake, capsys, monkeypatch):
    f, url = fake
    db = tmp_path / "h.db"
    rng = _history(db, branch="main", steps=31)
    monkeypatch.setenv("GATES_WEBHOOK_URL", f"{url}/hook/T0/SECRETPATH")
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    args = ["notify", "--webhook", "--history", str(db)]
    assert cli(args) == 0
    assert "1 regression(s) sent" in capsys.readouterr().out
    for i in (31, 32):  # the same change, later runs: nobody is told again
        rng = _history(db, branch="main", steps=1, start=i, rng=rng)
        assert cli(args) == 0
        assert "0 regression(s) sent, 1 already notified" in capsys.readouterr().out
    hooks = [c for c in f.calls if c[1].startswith("/hook/")]
    assert len(hooks) == 1
    payload = hooks[0][3]
    assert payload["text"].startswith("Regression on main") and payload["blocks"]
    assert payload["regressions"][0]["key"] == "ttft"
    assert payload["regressions"][0]["commit"] == "0000030cafe"
    assert hooks[0][2] is None  # the GitHub token never goes to a webhook


def test_a_credential_stored_in_a_run_url_goes_to_no_comment_or_webhook(tmp_path, fake, capsys,
                                                                         monkeypatch):
    # Runs stored before the URL was masked on the way in (or merged from such a shard)
    # still hold the credential; the report masks it for every surface it feeds.
    f, url = fake
    db = tmp_path / "h.db"
    _history(db, branch="main", steps=31, url="https://bot:hunter2@ci.example/{i}?token=tok9")
    monkeypatch.setenv("GATES_WEBHOOK_URL", f"{url}/hook/x")
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 5}}))
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
    assert cli(["notify", "--webhook", "--history", str(db)]) == 0
    assert cli(["notify", "--pr-comment", "--history", str(db), "--repo", "o/r",
                "--api-url", url, "--root", str(tmp_path)]) == 0
    sent = json.dumps([c[3] for c in f.calls])
    assert len(f.calls) == 3 and "ci.example/30" in sent  # the link itself still goes
    assert "hunter2" not in sent and "tok9" not in sent
    assert cli(["--history", str(db), "--format", "json"]) in (0, 1)
    assert "hunter2" not in capsys.readouterr().out


def test_pr_branch_regressions_do_not_go_to_the_webhook(tmp_path, fake, capsys, monkeypatch):
    f, url = fake
    db = tmp_path / "h.db"
    _history(db, branch="feat", steps=31)
    monkeypatch.setenv("GATES_WEBHOOK_URL", f"{url}/hook/x")
    assert cli(["notify", "--webhook", "--history", str(db)]) == 0
    assert "0 regression(s) sent, 0 already notified" in capsys.readouterr().out
    assert f.calls == []


def test_failed_delivery_says_why_without_secrets_and_retries(tmp_path, fake, capsys,
                                                              monkeypatch):
    f, url = fake
    db = tmp_path / "h.db"
    _history(db, branch="main", steps=31)
    hook = f"{url}/hook/T0/SECRETPATH"
    monkeypatch.setenv("GATES_WEBHOOK_URL", hook)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    f.fail = True
    assert cli(["notify", "--webhook", "--pr-comment", "--pr", "5", "--repo", "o/r",
                "--api-url", url, "--history", str(db)]) == 2
    out = capsys.readouterr()
    assert "HTTP 500" in out.err
    f.calls.clear()
    assert cli(["notify", "--webhook", "--history", str(db)]) == 2
    out2 = capsys.readouterr()
    assert "webhook at 127.0.0.1" in out2.err and "HTTP 500" in out2.err
    for text in (out.out, out.err, out2.out, out2.err):
        assert TOKEN not in text and "SECRETPATH" not in text
    f.fail = False  # the claim was released: the next run delivers it
    assert cli(["notify", "--webhook", "--history", str(db)]) == 0
    assert "1 regression(s) sent" in capsys.readouterr().out


def test_unreachable_webhook_and_missing_settings(tmp_path, capsys, monkeypatch):
    with pytest.raises(NotifyError, match=r"webhook at 127.0.0.1:9") as e:
        post_webhook("http://127.0.0.1:9/hook/SECRETPATH", {"text": "x"})
    assert "SECRETPATH" not in str(e.value)
    db = tmp_path / "h.db"
    _history(db, branch="main", steps=2)
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("GATES_WEBHOOK_URL", raising=False)
    assert cli(["notify", "--pr-comment", "--pr", "5", "--repo", "o/r",
                "--history", str(db)]) == 2
    assert "needs $GITHUB_TOKEN" in capsys.readouterr().err
    assert cli(["notify", "--webhook", "--history", str(db)]) == 2
    assert "needs $GATES_WEBHOOK_URL" in capsys.readouterr().err


@pytest.mark.parametrize(("payload", "number"), [
    ({"pull_request": {"number": 5}}, 5),
    ({"pull_request": {"number": True}}, None),  # JSON true named PR "True"
    ({"pull_request": {"number": 0}}, None),
    ({"pull_request": {"number": -3}}, None),
    ({"pull_request": "x"}, None),
    ([], None),
])
def test_the_pr_number_from_the_event_is_a_positive_whole_number(tmp_path, monkeypatch,
                                                                  payload, number):
    from gates.commands.notify import pr_number  # noqa: PLC0415

    event = tmp_path / "event.json"
    event.write_text(json.dumps(payload))
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
    assert pr_number(None) == number


def _ci(monkeypatch, tmp_path, run: str, sha: str) -> None:
    """This process as a GitHub Actions job of CI run ``run`` on commit ``sha``, PR 5."""
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.example")
    monkeypatch.setenv("GITHUB_REPOSITORY", "o/r")
    monkeypatch.setenv("GITHUB_RUN_ID", run)
    monkeypatch.setenv("GITHUB_RUN_ATTEMPT", "1")
    monkeypatch.setenv("GITHUB_SHA", sha)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 5}}))
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))


def test_the_pr_comment_speaks_of_this_ci_runs_runs_not_the_newest(tmp_path, fake, capsys,
                                                                   monkeypatch):
    # It took the newest run of the history: main's (restored with it), or another PR's in
    # a shared one, and said "passed" of a PR whose own run had regressed.
    f, url = fake
    db = tmp_path / "h.db"
    rng = _history(db, branch="main", steps=30, url="https://github.example/o/r/actions/"
                   "runs/{i}/attempts/1")
    rng = _history(db, branch="feat", steps=1, start=30, rng=rng,
                   url="https://github.example/o/r/actions/runs/{i}/attempts/1")
    with open_history(db) as h:  # main moves on after the PR's run: a clean run, newer
        evaluate_run(h, level_run(h, 31, {"ttft": 1.0}, rng, commit="0000031cafe",
                                  branch="main", node=NODE, ci_url="https://github.example/"
                                  "o/r/actions/runs/31/attempts/1"))
    _ci(monkeypatch, tmp_path, "30", "0000030cafe")
    args = ["notify", "--pr-comment", "--history", str(db), "--api-url", url,
            "--root", str(tmp_path)]
    assert cli(args) == 0
    body = next(c["body"] for c in f.comments.values() if MARKER in c["body"])
    assert body.splitlines()[1].startswith("## ❌") and "0000030caf" in body, body
    # A CI run that recorded no run at all (every shard failed its hardware check):
    # the comment says so, where it kept the earlier push's, and nothing reads passed.
    _ci(monkeypatch, tmp_path, "32", "0000032cafe")
    capsys.readouterr()
    assert cli(args) == 2
    out, err = capsys.readouterr()
    assert "no run of CI run https://github.example/o/r/actions/runs/32" in err, err
    body = next(c["body"] for c in f.comments.values() if MARKER in c["body"])
    assert body.splitlines()[1].startswith("## ❌ ") and "no run of CI run" in body, body
    assert cli(["--history", str(db), "--no-health", "--root", str(tmp_path)]) == 2


def test_a_hostile_codeowners_owner_pings_nobody_and_links_nowhere(tmp_path, fake, capsys,
                                                                   monkeypatch):
    # Issue 55: the owner went into the webhook's mrkdwn as written: an @channel ping and
    # a forged "Re-authenticate here" link in the team's channel.
    f, url = fake
    db = tmp_path / "h.db"
    _history(db, branch="main", steps=31)
    (tmp_path / "CODEOWNERS").write_text(
        "* <!channel> <https://evil.example|Re-authenticate here> <@U012AB3CD>\n")
    monkeypatch.setenv("GATES_WEBHOOK_URL", f"{url}/hook/x")
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 5}}))
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
    assert cli(["notify", "--webhook", "--history", str(db), "--root", str(tmp_path)]) == 0
    assert cli(["notify", "--pr-comment", "--history", str(db), "--repo", "o/r",
                "--api-url", url, "--root", str(tmp_path)]) == 0
    [hook] = [c[3] for c in f.calls if c[1].startswith("/hook/")]
    for text in (hook["text"], hook["blocks"][0]["text"]["text"]):
        assert "&lt;!channel&gt;" in text, text  # the owner is still named
        assert "<!channel>" not in text and "<https://evil" not in text and "<@U" not in text
    [comment] = [c[3]["body"] for c in f.calls if c[0] == "POST" and "/comments" in c[1]]
    assert "&lt;!channel&gt;" in comment and "<https://evil" not in comment
