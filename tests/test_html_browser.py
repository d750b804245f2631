"""The HTML report in a real browser (headless Chromium, Debian's `chromium`).

Checks that the page renders its tables and SVG charts, loads nothing from the
network (every request would go to a recording proxy, and host names resolve to
nothing), and that a metric named ``<script>alert(1)</script>`` is text, not code.
`.ci/run` installs chromium; without it these tests skip, saying so.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import socketserver
import subprocess
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
from report_history import hostile_input, make_history

from gates.report.build import build_report
from gates.report.query import load_report_input, select_runs
from gates.report.render_html import render_html
from gates.store.open import open_history

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None and os.environ.get("CI"):
    # CI installs chromium (.ci/run); a browser test that skips there is a false green.
    raise RuntimeError("chromium is not installed on this CI machine; .ci/run must apt-get install it")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium; "
                             ".ci/run installs it in CI)")


# Chromium itself calls these even with every background-networking flag (network
# time, the component/extension updater, sign-in). They are exact host names: a page
# loading anything, even from another google host (fonts.googleapis.com), is caught.
BROWSER_OWN_HOSTS = {"clients2.google.com", "update.googleapis.com", "accounts.google.com"}
_QUIET = ["--disable-features=NetworkTimeServiceQuerying,OptimizationHints,MediaRouter,"
          "Translate,AutofillServerCommunication,CertificateTransparencyComponentUpdater",
          "--disable-client-side-phishing-detection", "--disable-domain-reliability",
          "--no-pings", "--disable-default-apps", "--disable-extensions",
          "--metrics-recording-only", "--disable-breakpad", "--no-default-browser-check"]


def _host(request_line: str) -> str:
    # "GET http://host/path HTTP/1.1" or "CONNECT host:443 HTTP/1.1"
    target = request_line.split(" ")[1] if " " in request_line else request_line
    target = target.split("://", 1)[-1]
    return target.split("/", 1)[0].rsplit(":", 1)[0]


def page_requests(requests: list[str]) -> list[str]:
    return [r for r in requests if _host(r) not in BROWSER_OWN_HOSTS]


class _Recorder(socketserver.BaseRequestHandler):
    """A 'proxy' that records the first line of every request and answers 502."""

    requests: list[str]

    def handle(self) -> None:
        data = self.request.recv(4096)
        if not data:  # a connection closed before any request (Chromium preconnects)
            return
        self.server.requests.append(data.split(b"\r\n", 1)[0].decode("latin-1"))  # type: ignore[attr-defined]
        self.request.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")


@pytest.fixture
def proxy() -> Iterator[tuple[int, list[str]]]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Recorder)
    server.daemon_threads = True
    server.requests = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], server.requests  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()


def chromium(page: Path, tmp: Path, port: int, *extra: str) -> subprocess.CompletedProcess:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--no-first-run", f"--user-data-dir={profile}",
           f"--proxy-server=http://127.0.0.1:{port}", "--proxy-bypass-list=<-loopback>",
           "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
           *_QUIET, *extra, page.as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=False)


class _Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: dict[str, int] = {}
        self.handlers: list[tuple[str, str]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] = self.tags.get(tag, 0) + 1
        self.handlers += [(tag, k) for k, _ in attrs if k.startswith("on")]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def dom_of(html_text: str) -> _Dom:
    dom = _Dom()
    dom.feed(html_text)
    return dom


def test_report_page_renders_charts_and_tables_offline(tmp_path: Path, proxy):
    port, requests = proxy
    history = tmp_path / "history.db"
    make_history(history)
    with open_history(history, readonly=True) as h:
        runs, scope = select_runs(h)
        page = tmp_path / "report.html"
        page.write_text(render_html(build_report(load_report_input(h, runs, scope=scope))))
    done = chromium(page, tmp_path, port, "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    dom = dom_of(done.stdout)
    assert dom.tags.get("table", 0) >= 2 and dom.tags.get("svg", 0) >= 4
    assert dom.tags.get("polyline", 0) >= 4 and dom.tags.get("circle", 0) >= 16
    assert "change 0009c0ffee..0010c0ffee" in "".join(dom.text)
    shot = tmp_path / "shot.png"
    done = chromium(page, tmp_path, port, f"--screenshot={shot}", "--window-size=1400,1600",
                    "--hide-scrollbars")
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    assert page_requests(requests) == []


def test_hostile_names_show_as_text_and_nothing_runs(tmp_path: Path, proxy):
    port, requests = proxy
    page = tmp_path / "hostile.html"
    page.write_text(render_html(build_report(hostile_input())))
    done = chromium(page, tmp_path, port, "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    dom = dom_of(done.stdout)
    text = "".join(dom.text)
    assert "<script>alert(1)</script>" in text  # shown, as text
    assert "<img src=x onerror=alert(2)>" in text and "<b>suite</b>" in text
    assert "script" not in dom.tags and "img" not in dom.tags and "b" not in dom.tags
    assert dom.handlers == []  # no on* attribute anywhere, so nothing could fire
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in done.stdout
    assert page_requests(requests) == []


def test_the_proxy_would_see_a_page_that_loads_something(tmp_path: Path, proxy):
    # The control: without it, "no requests" above could mean a deaf proxy.
    port, requests = proxy
    page = tmp_path / "leaky.html"
    page.write_text('<!doctype html><img src="http://example.invalid/pixel.png">')
    done = chromium(page, tmp_path, port, "--dump-dom", "--virtual-time-budget=2000")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "example.invalid" in {_host(r) for r in page_requests(requests)}, requests


_MEASURE = """<script>
const v = document.querySelector("table.verdicts").getBoundingClientRect();
const runs = document.querySelector("details.runs");
document.body.setAttribute("data-layout", JSON.stringify({
  page: document.documentElement.scrollWidth, right: Math.ceil(v.right), top: v.top,
  runs_top: runs.getBoundingClientRect().top, runs_open: runs.open}));
</script></body>"""


def test_range_page_puts_failures_first_and_fits_1400_px(tmp_path: Path, proxy):
    # A range report over 16 runs: the failing verdicts open the page, the runs table
    # is collapsed below them, and the verdict table is no wider than a 1,400 px window.
    port, requests = proxy
    history = tmp_path / "history.db"
    make_history(history)
    with open_history(history, readonly=True) as h:
        runs, scope = select_runs(h, since="2026-01-01")
        text = render_html(build_report(load_report_input(h, runs, scope=scope,
                                                          since="2026-01-01")))
    assert scope == "range" and len(runs) == 16
    # The measuring script needs the page's no-script policy lifted (tested above).
    text = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", text)
    page = tmp_path / "range.html"
    page.write_text(text.replace("</body>", _MEASURE))
    done = chromium(page, tmp_path, port, "--dump-dom", "--window-size=1400,1000")
    assert done.returncode == 0, done.stderr[-2000:]
    layout = json.loads(html.unescape(re.search(r'data-layout="([^"]*)"', done.stdout)[1]))
    assert layout["page"] <= 1400 and layout["right"] <= 1400, layout
    assert layout["top"] < layout["runs_top"] and layout["runs_open"] is False, layout
    assert page_requests(requests) == []
