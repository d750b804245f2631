"""Text that tests, files and owners produce stays inert on every surface (issue 55).

One real suite session (`python -m ci_register run`, pytest, the recorder) runs a test file
named with U+202E whose tests fail with secrets in three forms the masker missed, print
workflow commands from a skip reason, an xfail reason, ``pytest.fail(pytrace=False)``,
captured stdout and after a bare CR; then its CI log, JUnit XML, stored rows, ``list``
and Markdown report are read as GitHub's runner, a browser or a reader would.
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ci_register.running import redact
from ci_register.running.redact import clean_text, mask_secrets

REPO = Path(__file__).resolve().parents[1]
RLO = "\u202e"
HOSTILE_FILE = f"test_invoice{RLO}fdp.py"
ENV_SECRET = "EnvS3cretValue-91"
CATALOG = ('[suites.cpu]\nbackend = "cpu"\ndescription = "cpu"\nschedule = "per-commit"\n'
           "shard_budget_s = 600\n")
REG = 'from ci_register import register_cpu_ci\nregister_cpu_ci(est_time=60, suite="cpu")\n'
HOSTILE_TESTS = REG + textwrap.dedent("""
    import os
    import sys
    import pytest

    def test_netrc():
        assert False, "machine db.example login ci password NETRC-S3CRET"

    def test_json():
        assert False, '{"host": "db", "db_pass": "JSON-S3CRET"}'

    def test_dict_repr():
        assert False, repr({'MY_SERVICE_KEY': 'REPR-S3CRET', 'region': 'eu'})

    def test_env_value():
        assert False, "logged in as " + os.environ["INERT_DEPLOY_TOKEN"][::-1][::-1]

    def test_skip_reason():
        pytest.skip("later\\n::error::PWNED-skip")

    @pytest.mark.xfail(reason="flaky\\n::add-mask::PWNED-xfail")
    def test_xfail_reason():
        assert False

    def test_fail_text():
        pytest.fail("::error::PWNED-fail\\n::add-mask::PWNED-fail2", pytrace=False)

    def test_stdout():
        print("::error::PWNED-stdout")
        print("##[error]PWNED-oldform")
        sys.stdout.flush()
        assert False

    def test_bare_cr():
        assert False, "boom\\r::error::PWNED-cr\\r  ::add-mask::PWNED-cr2"
    """)
SECRETS = ("NETRC-S3CRET", "JSON-S3CRET", "REPR-S3CRET", ENV_SECRET)


def runner_commands(log: str) -> list[str]:
    """The workflow commands GitHub's runner would act on in `log`: lines split at LF and
    CR, leading and trailing blanks ignored, ``::stop-commands::T`` holding every command
    until a line ``::T::``. The stop and resume lines themselves are left out."""
    out, stopped = [], None
    for line in re.split(r"\r\n|\n|\r", log):
        body = line.strip()
        if stopped is not None:
            if body == f"::{stopped}::":
                stopped = None
            continue
        if body.startswith("::stop-commands::"):
            stopped = body[len("::stop-commands::"):]
            continue
        if re.match(r"::[A-Za-z-]+(\s[^:]*)?::", body) or body.startswith("##["):
            out.append(body)
    return out


def _env(**extra: str) -> dict[str, str]:
    e = dict(os.environ, PYTHONPATH=str(REPO), CI_REGISTER_FILE_SLACK_S="0", **extra)
    for name in ("GATES_HISTORY", "GITHUB_STEP_SUMMARY", "GITHUB_SERVER_URL",
                 "GITHUB_REPOSITORY", "GITHUB_RUN_ID", "GATES_CI_URL"):
        e.pop(name, None)
    return e


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> dict:
    tree = tmp_path_factory.mktemp("inert")
    (tree / "suites").mkdir()
    (tree / "suites" / "catalog.toml").write_text(CATALOG)
    (tree / "suites" / HOSTILE_FILE).write_text(HOSTILE_TESTS)
    proc = subprocess.run(
        [sys.executable, "-m", "ci_register", "run", "cpu", "--history", str(tree / "h.db"),
         "--gate", "off", "--confirm", "0", "-ra"],
        cwd=tree, env=_env(GITHUB_ACTIONS="true", INERT_DEPLOY_TOKEN=ENV_SECRET),
        capture_output=True, text=True, timeout=300)
    [junit] = (tree / "results").glob("junit-*.xml")
    with sqlite3.connect(tree / "h.db") as conn:
        rows = [str(r) for r in conn.execute("SELECT nodeid, outcome, error, skip_reason "
                                             "FROM tests")]
    return {"tree": tree, "rc": proc.returncode, "log": proc.stdout + proc.stderr,
            "stdout": proc.stdout, "junit": junit.read_text(), "rows": rows}


# ------------------------------------------------------------------- secrets


@pytest.mark.parametrize(("text", "secret"), [
    ("machine db.example login ci password NETRC-S3CRET", "NETRC-S3CRET"),
    ("machine db.example\n  login ci\n  password NETRC-S3CRET\n", "NETRC-S3CRET"),
    ('default login ci password "NETRC S3CRET"', "S3CRET"),
    ('{"host": "db", "db_pass": "JSON-S3CRET"}', "JSON-S3CRET"),
    ("DB_PASS=JSON-S3CRET make test", "JSON-S3CRET"),
    ("{'MY_SERVICE_KEY': 'REPR-S3CRET', 'region': 'eu'}", "REPR-S3CRET"),
    ("MY_SERVICE_KEY=REPR-S3CRET", "REPR-S3CRET"),
    ("{'signing_key': 'REPR-S3CRET'}", "REPR-S3CRET"),
    ("config(pass='REPR-S3CRET')", "REPR-S3CRET"),
])
def test_secret_forms_the_masker_missed_are_masked(text, secret):
    assert secret not in mask_secrets(text)
    assert secret not in clean_text(text)


@pytest.mark.parametrize("text", [
    "metric_key=decode/b32/latency", "register_ci_gate(metric_key='ttft')", "SORT_KEY=abc",
    "for x in y: pass", "the password is wrong", "pad_token=<pad>", "PUBLIC_KEY=abcdef",
    "suites/test_password.py::test_login PASSED",
])
def test_text_that_only_looks_like_a_secret_is_kept(text):
    assert mask_secrets(text) == text


def test_a_secret_named_variables_value_is_masked_wherever_it_appears(monkeypatch):
    monkeypatch.setenv("INERT_DEPLOY_TOKEN", ENV_SECRET)
    monkeypatch.setenv("INERT_FLAG_TOKEN", "1")  # too short to mask alone
    monkeypatch.setenv("INERT_COLOUR", "EnvNotSecret-123")  # not named for a secret
    assert ENV_SECRET in redact.environment_secrets()
    assert mask_secrets(f"logged in as {ENV_SECRET}.") == "logged in as ***."
    assert mask_secrets("1 passed, EnvNotSecret-123") == "1 passed, EnvNotSecret-123"


def test_a_remembered_cell_is_masked_again_once_a_secret_is_set(monkeypatch):
    # Report cells are remembered (a 10,000-metric report repeats most of them); the
    # memory is dropped when the environment's secrets change.
    text = "deploy with Cell-S3cret-77"
    assert redact.masked_shown(text) == text
    monkeypatch.setenv("INERT_CELL_TOKEN", "Cell-S3cret-77")
    assert redact.masked_shown(text) == "deploy with ***"
    assert redact.masked_shown("1.25 ms") == "1.25 ms"


def test_secrets_stay_out_of_the_ci_log_junit_xml_and_rows(session):
    assert session["rc"] == 1, session["log"]
    assert "test_netrc" in session["log"] and "AssertionError" in session["log"]
    assert len(session["rows"]) == 9, session["rows"]
    for surface in ("log", "junit"):
        leaked = [s for s in SECRETS if s in session[surface]]
        assert leaked == [], (surface, leaked)
    assert [s for s in SECRETS if any(s in row for row in session["rows"])] == []
    assert "password ***" in session["junit"]  # the failure is still told


# ---------------------------------------------------------- workflow commands


def test_no_workflow_command_from_what_the_tests_produced_reaches_the_runner(session):
    log = session["log"]
    for marker in ("PWNED-skip", "PWNED-xfail", "PWNED-fail", "PWNED-stdout", "PWNED-cr",
                   "PWNED-oldform"):
        assert marker in log, marker  # shown, as data
    assert runner_commands(log) == []


def test_commands_are_stopped_with_a_fresh_token_and_resumed(session, tmp_path):
    tokens = re.findall(r"^::stop-commands::([0-9a-f]+)$", session["stdout"], re.M)
    assert len(tokens) == 1 and len(tokens[0]) >= 32
    assert f"\n::{tokens[0]}::\n" in session["stdout"]  # resumed, on a line of its own
    again = subprocess.run(
        [sys.executable, "-m", "ci_register", "run", "cpu", "--history", str(tmp_path / "h.db"),
         "--gate", "off", "--confirm", "0", "-k", "test_netrc"],
        cwd=session["tree"], env=_env(GITHUB_ACTIONS="true"), capture_output=True,
        text=True, timeout=300)
    assert re.findall(r"^::stop-commands::([0-9a-f]+)$", again.stdout, re.M) not in ([], tokens)


def test_a_local_run_prints_no_stop_commands(tmp_path):
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "catalog.toml").write_text(CATALOG)
    (tmp_path / "suites" / "test_ok.py").write_text(REG + "def test_ok():\n    print('::x::')\n")
    env = _env()
    env.pop("GITHUB_ACTIONS", None)
    r = subprocess.run([sys.executable, "-m", "ci_register", "run", "cpu", "--history",
                        str(tmp_path / "h.db"), "--gate", "off", "-rA"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "stop-commands" not in r.stdout and "1 passed" in r.stdout
    assert runner_commands(r.stdout + r.stderr) == []


# ------------------------------------------------------ invisible characters


def test_a_right_to_left_override_in_a_file_name_is_shown_as_its_escape(session):
    shown = "test_invoice\\u202efdp.py"
    for surface in ("log", "junit"):
        assert RLO not in session[surface] and shown in session[surface], surface
    listed = subprocess.run([sys.executable, "-m", "ci_register", "list", "--suite", "cpu"],
                            cwd=session["tree"], env=_env(), capture_output=True, text=True,
                            timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert RLO not in listed.stdout + listed.stderr and shown in listed.stdout


def test_the_sessions_reports_show_its_hostile_tests_inert(session):
    # Every report names each failed test and its error: the U+202E file, the secrets and
    # the workflow commands of the session above, in text, Markdown, HTML and JSON.
    tree = session["tree"]
    held = 0
    for fmt in ("text", "md", "html", "json"):
        out = tree / f"report.{fmt}"
        r = subprocess.run([sys.executable, "-m", "gates.commands.cli", "--history",
                            str(tree / "h.db"), "--format", fmt, "--out", str(out)],
                           cwd=tree, env=_env(), capture_output=True, text=True, timeout=120)
        assert r.returncode in (0, 1), r.stderr
        text = out.read_text()
        assert "test_invoice" in text, fmt
        assert RLO not in text and not [s for s in SECRETS if s in text], fmt
        assert runner_commands(text) == [], fmt
        held += 1
    assert held == 4


@pytest.mark.parametrize(("text", "want"), [
    (f"a{RLO}b", "a\\u202eb"), ("a\x1b[2Jb", "a\\u001b[2Jb"), ("a\u2066b\u2069", "a\\u2066b\\u2069"),
    ("a\u200bb", "a\\u200bb"), ("tag\U000e0041", "tag\\udb40\\udc41"), ("a\x00b", "a\\u0000b"),
    ("tab\tand\nline", "tab\tand\nline"), ("plain ✅ ⚠️ text", "plain ✅ ⚠️ text"),
])
def test_invisible_characters_are_shown_as_escapes(text, want):
    assert redact.show_controls(text) == want


# ------------------------------------------------------------- destinations


OWNER = "<!channel> <https://evil.example|Re-authenticate here>"


@pytest.mark.parametrize("text", [OWNER, "<!here>", "<@U012AB3CD>", "<!subteam^S0123>",
                                  "a & b", f"x{RLO}y\nz"])
def test_slack_text_neutralises_mentions_and_links(text):
    out = redact.slack_text(text)
    assert "<" not in out and ">" not in out and "\n" not in out and RLO not in out


def test_a_codeowners_owner_cannot_ping_or_forge_a_link_in_slack():
    from gates.report.notify import Regression, webhook_payload

    regs = [Regression("cpu", "fp", "decode/lat", "c" * 40, "r1", 0.2, OWNER,
                       "https://ci.example/run/1?a=1&b=2")]
    payload = webhook_payload(regs, "cpu @ cccc")
    for text in (payload["text"], payload["blocks"][0]["text"]["text"]):
        assert "<!channel>" not in text and "<https://evil" not in text, text
        assert "owner &lt;!channel&gt; &lt;https://evil.example|Re-authenticate here&gt;" in text
        assert "<https://ci.example/run/1?a=1&amp;b=2|run>" in text  # the run's own link
    assert payload["regressions"][0]["owner"] == OWNER  # data fields stay data


def test_html_text_escapes_markup_and_shows_controls():
    assert redact.html_text(f"<script>x</script>{RLO}") == "&lt;script&gt;x&lt;/script&gt;\\u202e"


# ------------------------------------------------- hostile text on every surface

HOSTILE = {
    "slack-mention": "<!channel> <https://evil.example|Re-authenticate here>",
    "slack-user": "<@U012AB3CD> <!here> <!subteam^S0123|@oncall>",
    "workflow-command": "x\n::error::PWNED\r::add-mask::PWNED\n  ##[error]PWNED",
    "bidi": f"invoice{RLO}fdp.exe \u2066isolate\u2069",
    "invisible": "zero\u200bwidth tag\U000e0041\U000e0042 bom\ufeff",
    "terminal": "\x1b]8;;https://evil.example\x07link\x1b]8;;\x07\x1b[2J\x1b[31mred",
    "html": "<script>alert(1)</script><img src=x onerror=alert(2)>",
    "markdown": "[click](https://evil.example) ![i](https://evil.example/i.png) `x` | *b*",
    "autolink": "log in at https://evil.example/login or www.evil.example",
    "netrc": "machine h login u password S3CRET-netrc",
    "json-secret": '{"db_pass": "S3CRET-json", "MY_SERVICE_KEY": "S3CRET-key"}',
    "url-secret": "postgresql://ci:S3CRET-url@db/h?sslpassword=S3CRET-q",
    "c1-and-nul": "nel\x85nul\x00del\x7f",
}
FIELDS = ("test", "key", "unit", "owner", "suite", "branch", "reason")
_LINK = re.compile(r"(?<!\\)\]\(https://evil")  # a link or image whose ] is not escaped
# What a reader cannot see or that reorders what they see (the sanitizer's own list is
# `redact._INVISIBLE`; this one is written apart from it, by Unicode category).
_INVISIBLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u061c\u180e"
                        "\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\U000e0000-\U000e007f]")
_BARE = re.compile(r"(?i)https?://evil|www\.evil")  # text GitHub would autolink
_CODE_SPAN = re.compile(r"(`+).*?(?<!`)\1(?!`)")


def _hostile_report(field: str, text: str):
    from report_history import FP, HW, commit, started

    from gates.report.build import ReportInput, build_report, series_columns

    rid = "host" + "0" * 28
    suite = text if field == "suite" else "cpu"
    key = text if field == "key" else "decode/lat"
    nodeid = f"suites/test_{text}.py::test_{text}" if field == "test" else "suites/t.py::test"
    unit = text if field == "unit" else "s"
    series = [{"run_id": f"r{i}", "commit": commit(i), "started_at": started(i),
               "trusted": 1, "value": 1.0 if i < 6 else 2.0} for i in range(10)]
    series[-1]["run_id"] = rid
    data = ReportInput(
        runs=[{"run_id": rid, "suite": suite, "status": "complete", "commit_sha": commit(9),
               "branch": text if field == "branch" else "main", "started_at": started(9),
               "finished_at": started(9), "fingerprint": FP, "hardware": HW, "trusted": 1,
               "shard_index": 1, "shard_count": 1, "ci_url": "https://ci.example/run/1"}],
        counts={rid: {"passed": 1, "failed": 1}},
        metrics=[{"run_id": rid, "attempt": 1, "nodeid": nodeid, "key": key, "unit": unit,
                  "better": "lower", "median": 2.0}],
        verdicts=[{"run_id": rid, "attempt": 1, "key": key, "nodeid": nodeid,
                   "verdict": "regression", "baseline": 1.0, "new": 2.0, "rel_change": 1.0,
                   "ci_low": 0.8, "ci_high": 1.2, "statistic": 9.0, "p_value": 1e-5,
                   "q_value": 1e-5, "floor": 0.05, "mode": "enforce"}],
        series={(suite, FP, key): series_columns(series)},
    )
    report = build_report(data)
    if field == "owner":
        for v in report.verdicts:
            v.owner = text
    if field == "reason":  # a skip reason and a flaky test's cause, as CI health shows them
        from gates.report.health import FlakyTest, HealthReport, SkippedTest

        report.health = [HealthReport(
            "cpu", FP, 5, always_skipped=[SkippedTest("suites/t.py::test_s", 5, text)],
            flaky=[FlakyTest("suites/t.py::test_f", 3, 2, 2, [commit(8)], text)])]
    return report


def _surfaces(report) -> dict[str, str]:
    import json

    from gates.report.build import report_to_json
    from gates.report.ghactions import annotations
    from gates.report.notify import Regression, comment_body, webhook_payload
    from gates.report.render_html import render_html
    from gates.report.render_md import render_md
    from gates.report.render_text import render_text

    md = render_md(report)
    regs = [Regression(v.suite, v.fingerprint, v.key, "c" * 40, v.run_id, v.rel_change,
                       v.owner, "https://ci.example/run/1") for v in report.failing]
    slack = webhook_payload(regs, report.title)
    notes = annotations(report, locate=lambda nodeid: (nodeid.split("::")[0], 1))
    return {
        "annotations": "\n".join(notes),  # the one deliberate workflow command, one a line
        "console": clean_text(render_text(report)),  # what gate-report's stdout writes
        "markdown": md,
        "pr-comment": comment_body(md, "https://ci.example/r"),
        "html": render_html(report),
        "json": clean_text(json.dumps(report_to_json(report), ensure_ascii=False)),
        "slack": slack["text"] + "\n" + slack["blocks"][0]["text"]["text"],
    }


def _held(surface: str, out: str, name: str) -> list[str]:
    """What of hostile text `name` leaked on `surface` (empty: it held)."""
    bad = []
    if "S3CRET" in out:
        bad.append("secret")
    if invisible := _INVISIBLE.search(out):
        bad.append(f"invisible {invisible.group()!r}")
    if surface == "console" and runner_commands(out):
        bad.append(f"command {runner_commands(out)}")
    if surface in ("markdown", "pr-comment"):
        out = _CODE_SPAN.sub("", out)  # in a code span every character is literal
    if surface in ("markdown", "pr-comment", "html"):
        if re.search(r"<(script|img|!channel|@U|https://evil)", out):
            bad.append("markup")
    if surface in ("markdown", "pr-comment") and (_LINK.search(out) or _BARE.search(out)):
        bad.append("link")
    if surface == "slack" and re.search(r"<(?!https://ci\.example/run/1\|run>)", out):
        bad.append("slack markup")
    if surface == "json":
        json_loads_ok(out)
    if surface == "annotations" and [c for c in runner_commands(out)
                                     if not c.startswith("::error file=")]:
        bad.append(f"command {runner_commands(out)}")
    return bad


def json_loads_ok(text: str) -> None:
    import json

    json.loads(text)  # the shown escapes keep JSON JSON


def test_hostile_text_in_every_field_holds_on_every_surface():
    # Each text carries a marker, so a case counts as tried only where the surface shows
    # the field (the webhook shows no CI health; annotations no branch).
    tried, leaks = 0, []
    for field in FIELDS:
        for i, (name, text) in enumerate(HOSTILE.items()):
            marker = f"Mk{i}q"
            for surface, out in _surfaces(_hostile_report(field, marker + text)).items():
                if marker not in out:
                    continue
                tried += 1
                if bad := _held(surface, out, name):
                    leaks.append((field, name, surface, bad))
    print(f"hostile cases: {tried} tried, {tried - len(leaks)} held")
    assert leaks == []
    assert tried >= len(FIELDS) * len(HOSTILE) * 4  # every field on most surfaces


def test_a_right_to_left_override_in_a_test_file_shows_escaped_in_markdown():
    from gates.report.render_md import render_md

    md = render_md(_hostile_report("test", f"invoice{RLO}fdp"))
    assert RLO not in md and "invoice\\u202efdp" in md


# ------------------------------------------------------------------- the relay


class _Sink:
    def __init__(self, broken: bool = False) -> None:
        self.parts: list[str] = []
        self.broken = broken

    def write(self, text: str) -> int:
        if self.broken:
            raise BrokenPipeError(32, "Broken pipe")
        self.parts.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def _relayed(code: str, out, err) -> int:
    from ci_register.running.relay import Relay

    relay = Relay(out, err)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    relay.start(proc.stdout, proc.stderr)
    try:
        return proc.wait(timeout=60)
    finally:
        relay.join()


def test_the_relay_sanitises_each_line_and_ends_the_last():
    out, err = _Sink(), _Sink()
    code = ("import sys, os; os.write(1, b'ok\\n::error::x\\r::warning::y\\n\\xff\\xfe '"
            "+ 'caf\\u00e9 \\u202e'.encode() + b' tail'); os.write(2, b'  ##[error]z')")
    assert _relayed(code, out, err) == 0
    text, errs = "".join(out.parts), "".join(err.parts)
    assert runner_commands(text) == [] and runner_commands(errs) == []
    assert text.endswith("\\udcff\\udcfe café \\u202e tail\n") and errs.endswith("z\n")


@pytest.mark.timeout(60)
def test_a_closed_runner_stream_never_blocks_pytest():
    # The relay stops writing but keeps reading: a pipe left full would stop pytest, and
    # one closed early would kill it with EPIPE mid-run.
    from ci_register.running.relay import Relay

    r_out, w_out = os.pipe()
    r_err, w_err = os.pipe()
    relay = Relay(_Sink(broken=True), _Sink(broken=True))
    relay.start(os.fdopen(r_out, "rb"), os.fdopen(r_err, "rb"))
    os.close(w_err)
    written = 0
    try:
        for _ in range(64):  # 4 MiB, far past a pipe's 64 KiB
            written += os.write(w_out, b"x" * 65535 + b"\n")
    finally:
        os.close(w_out)
        relay.join()
    assert written == 64 * 65536


def test_an_acceptance_reason_from_a_pull_request_prints_no_command_from_the_gate(tmp_path):
    # gates-accept.toml travels with the PR; the gate prints the acceptance's reason in its
    # verdict table, outside pytest's output (and its stop-commands).
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "catalog.toml").write_text(CATALOG)
    (tmp_path / "suites" / "test_lat.py").write_text(
        REG + "def test_lat(metrics):\n"
        "    metrics.record('lat', [1.0, 1.1, 1.2], unit='s', better='lower')\n")
    (tmp_path / "gates-accept.toml").write_text(
        '[[accept]]\nkey = "lat"\n'
        'reason = "by design\\n::error::PWNED-accept\\r::add-mask::x \\u202e machine h '
        'login u password S3CRET-acc"\n')
    r = subprocess.run([sys.executable, "-m", "ci_register", "run", "cpu", "--history",
                        str(tmp_path / "h.db"), "--gate", "enforce"],
                       cwd=tmp_path, env=_env(GITHUB_ACTIONS="true"), capture_output=True,
                       text=True, timeout=300)
    log = r.stdout + r.stderr
    assert r.returncode == 0, log
    assert "PWNED-accept" in log  # the gate said it, as data
    assert runner_commands(log) == [] and RLO not in log and "S3CRET" not in log
