"""No output of any `gate-report` subcommand (nor `python -m ci_register`) holds a line the
GitHub runner would read as a workflow command (issue 40): history text with ``::error::``,
``::add-mask::`` or ``##[error]`` after a newline or a carriage return is printed with a
space inside its opening. Annotations (``GITHUB_ACTIONS=true``) are the one deliberate
exception, escaped by `gates.report.ghactions`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from report_history import FILE_A, LAT, SUITE, commit, make_history, prov

from ci_register.running.redact import GuardedStream, clean_text, mask_secrets, neutralise_line
from gates.commands.cli import main as cli
from gates.store.history import RunRecord, TestResult
from gates.store.metrics import validate_metric
from gates.store.open import open_history

REPO = Path(__file__).resolve().parents[1]
EVIL = "ok\n::error::pwned\r::add-mask::x\n  ##[error]old form\n\t::set-output name=a::b"
COMMAND_STARTS = ("::", "##[")


def command_lines(text: str, *, allow_annotations: bool = False) -> list[str]:
    """The lines of `text` the runner would parse as commands (split at \\n and \\r, as it
    does, leading blanks ignored)."""
    out = []
    for line in text.replace("\r", "\n").split("\n"):
        body = line.lstrip()
        if body.startswith(COMMAND_STARTS):
            if allow_annotations and body.startswith("::error file=") and "\n" not in body:
                continue
            out.append(line)
    return out


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("hostile") / "history.db"
    ids = make_history(path)
    with open_history(path) as h:
        p = prov(40, run_id="evil" + "0" * 28)
        node = f"{FILE_A}::test_decode[{EVIL}]"
        tests = [TestResult(node, FILE_A, "failed", 1.0, error=EVIL),
                 TestResult(f"{FILE_A}::test_skip", FILE_A, "skipped", 0.0, skip_reason=EVIL)]
        metrics = [(node, validate_metric(LAT, [1.3, 1.31, 1.29], unit="s", better="lower"))]
        h.run_writes.record_run(RunRecord(p, tests, metrics, {"suite": SUITE, "shard": [1, 1],
                                                   "files": [], "gates": []}, 1))
        h.after_writes.add_acceptance(LAT, reason=EVIL, who=EVIL, from_commit=commit(3), suite=SUITE)
        h.run_writes.set_trust([ids[2]], trusted=False, reason=EVIL)
    return path


@pytest.fixture
def hist(template, tmp_path, monkeypatch) -> Path:
    path = tmp_path / "history.db"
    shutil.copy(template, path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GATES_HISTORY", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    return path


def commands(hist: Path, tmp: Path) -> list[list[str]]:
    h = ["--history", str(hist)]
    shard = tmp / "shard.db"
    shutil.copy(hist, shard)
    return [
        ["report", *h], ["report", *h, "--format", "md"], ["report", *h, "--format", "json"],
        ["report", *h, "--format", "html"], ["report", *h, "--run", "evil"],
        ["report", *h, "--suite", EVIL],
        ["health", *h], ["health", *h, "--format", "md"], ["health", *h, "--format", "json"],
        ["trim", *h], ["trim", *h, "--format", "md"],
        ["check", *h],
        ["compare", *h, commit(3), commit(15)], ["compare", *h, commit(3), EVIL],
        ["compare", *h, commit(3), commit(15), "--format", "md"],
        ["accept", *h, "--list"],
        ["accept", *h, LAT, "--from", commit(4), "--reason", EVIL, "--who", EVIL],
        ["accept", *h, EVIL, "--from", commit(4), "--reason", EVIL],
        ["untrust", *h, "--run", "evil" + "0" * 28, "--reason", EVIL],
        ["trust", *h, "--run", EVIL, "--reason", EVIL],
        ["snapshot", *h, "--suite", SUITE, "--out", str(tmp / "snap.db")],
        ["snapshot", *h, "--suite", EVIL, "--out", str(tmp / "snap2.db")],
        ["prune", *h, "--keep-runs", "1"],
        ["merge", str(shard), "--into", str(tmp / "merged.db")],
        ["merge", EVIL, "--into", str(tmp / "merged2.db")],
        ["ingest", str(shard), "--into", str(tmp / "ingested.db")],
        ["notify", *h, "--webhook"],
        ["bisect", *h, EVIL, "--good", EVIL, "--bad", EVIL, "--repo", str(tmp)],
        ["report", "--history", EVIL], [EVIL], ["report", "--format", EVIL],
        *[[name, "--help"] for name in ("report", "health", "trim", "merge", "ingest", "check",
                                        "snapshot", "prune", "compare", "notify", "bisect",
                                        "accept")],
    ]


def _run(argv: list[str], capsys) -> str:
    try:
        cli(argv)
    except SystemExit:  # --help
        pass
    out = capsys.readouterr()
    return out.out + out.err


def test_no_subcommand_prints_a_workflow_command(hist, tmp_path, capsys):
    seen = {}
    for argv in commands(hist, tmp_path):
        text = _run(argv, capsys)
        seen[" ".join(argv[:1])] = True
        assert command_lines(text) == [], (argv, command_lines(text))
    assert len(seen) >= 13  # every subcommand of gate-report ran


def test_hostile_text_still_shows_its_words(hist, capsys):
    text = _run(["accept", "--history", str(hist), "--list"], capsys)
    assert "pwned" in text and ": :error::pwned" in text  # readable, not executable


def test_on_github_only_escaped_annotations_start_with_colons(hist, tmp_path, capsys,
                                                             monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    for argv in commands(hist, tmp_path)[:6]:
        text = _run(argv, capsys)
        assert command_lines(text, allow_annotations=True) == [], argv
    summary = (tmp_path / "summary.md").read_text()
    assert command_lines(summary) == []


def test_the_runner_cli_prints_no_workflow_command_from_a_file_name(tmp_path):
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "catalog.toml").write_text(
        '[suites.cpu]\nbackend = "cpu"\ndescription = "c"\nschedule = "per-commit"\n'
        "shard_budget_s = 600\n")
    bad = tmp_path / "suites" / "test_x.py"
    bad.write_text('from ci_register import register_cpu_ci\nregister_cpu_ci(est_time=5, '
                   'suite="::error::x\\n::add-mask::y")\ndef test_a():\n    pass\n')
    for args in (["list"], ["matrix", "--event", "push"], ["run", "cpu", "--dry-run"]):
        r = subprocess.run([sys.executable, "-m", "ci_register", *args], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60,
                           env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
        assert command_lines(r.stdout + r.stderr) == [], (args, r.stdout + r.stderr)


# ---------------------------------------------------------------- the guard itself


@pytest.mark.parametrize(("line", "want"), [
    ("::error::x", ": :error::x"), ("  ::warning::x", "  : :warning::x"),
    ("##[error]x", "# #[error]x"), ("\t::debug::x", "\t: :debug::x"),
    ("a ::error::x", "a ::error::x"), (":: not a command?", ": : not a command?"),
])
def test_neutralise_line(line, want):
    assert neutralise_line(line) == want


class _Sink:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def test_a_command_split_across_writes_and_flushes_is_still_caught():
    sink = _Sink()
    g = GuardedStream(sink)
    for part in ("  ", ":", ":err", "or::x\n", "ok ", "::fine\n", "\r::", "add-mask::s\n"):
        g.write(part)
        g.flush()
    text = "".join(sink.parts)
    assert command_lines(text) == [] and "ok ::fine" in text


def test_a_secret_split_across_writes_is_masked():
    sink = _Sink()
    g = GuardedStream(sink)
    for part in ("postgresql://u:", "SECRETPW", "@h/db?pass", "word=QSECRET", "\n"):
        g.write(part)
    assert "SECRETPW" not in "".join(sink.parts) and "QSECRET" not in "".join(sink.parts)


@pytest.mark.parametrize("text", [
    "postgresql://alice:S3CRET@db:5432/h", "postgres://:S3CRET@db/h",
    "host=db password=S3CRET dbname=h", "host=db password = 'S3 CRET' dbname=h",
    "postgresql://db/h?sslmode=require&password=S3CRET", "https://x/hook?token=S3CRET",
    "options=-c%20password%3DS3CRET", "PASSWORD=S3CRET", "sslpassword=S3CRET",
    "mysql+driver://u:S3CRET@h/db", "redis://:S3CRET@h:6379/0",
])
def test_mask_secrets_covers_every_credential_form(text):
    assert "S3CRET" not in mask_secrets(text) and "S3 CRET" not in mask_secrets(text)
    assert "S3CRET" not in clean_text("x\n" + text)


@pytest.mark.parametrize("text", [
    # A password with URL-special characters left unencoded: the userinfo ends at the
    # URL's last "@", not at the first "@", "/", "?" or "#".
    "postgresql://ci:p@S3CRET@db/h", "postgresql://ci:pa/S3CRET@db/h",
    "postgresql://ci:pa?S3CRET@db/h", "postgresql://ci:pa#S3CRET@db/h",
    "https://ghp_S3CRETaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa@github.com/o/r.git",  # a git remote
    # Environment dumps and tracebacks: variables named for a secret.
    "PGPASSWORD=S3CRET", "GITHUB_TOKEN=S3CRET", "HF_TOKEN=S3CRET", "DB_PASS=S3CRET",
    "export OPENAI_API_KEY='S3CRET'", "environ({'PGPASSWORD': 'S3CRET'})",
    # JSON, dict reprs, YAML, headers.
    '{"password": "S3CRET"}', "password: S3CRET", "{'api_key': 'S3CRET'}",
    "db_password=S3CRET", "client_secret=S3CRET", "hf_token=S3CRET", "--password=S3CRET",
    "a=password=S3CRET", "Authorization: Bearer S3CRET",
    # A command line's options: vllm serve --api-key, a CLI's --password.
    "vllm serve m --api-key S3CRET --port 8000", "cmd --password S3CRET", "--hf-token S3CRET",
    "{'Authorization': 'Bearer S3CRETabc', 'x-api-key': 'S3CRET'}",
    "curl -H 'Authorization: token S3CRET' https://api.github.com",
    # Tokens by their shape, and webhook URLs whose path is the secret.
    "ghp_S3CRETaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "github_pat_11AAAA0S3CRETbbbbbbbbbbbbbbbb",
    "hf_S3CRETabcdefghijklmnopqrstuvwxyzAB", "sk-proj-S3CRETabcdefghijklmnopqrstuvwx",
    "https://hooks.slack.com/services/T0000/B0000/S3CRETxxxxxxxx",
    "https://discord.com/api/webhooks/1234/S3CRETtoken",
])
def test_mask_secrets_covers_tokens_env_dumps_and_special_characters(text):
    assert "S3CRET" not in mask_secrets(text)
    assert "S3CRET" not in clean_text("Traceback:\n  " + text + "\n")


@pytest.mark.parametrize("text", [
    "pad_token=</s>", "eos_token=2", "max_tokens=128", "MAX_TOKENS=512", "token: 'the'",
    "vllm serve m --max-tokens 128 --token-budget 5 -p no:cacheprovider",
    "postgres://u@h/d", "https://registry.npmjs.org/@types/node", "author=Bob",
    "https://github.com/o/r/actions/runs/1/attempts/2", "user=ci host=db dbname=h",
    "email: a@b.com", "basic tokenization", "FATAL:  password authentication failed",
    # File names, nodeids and lines that hold a secret's word are no key and value.
    "../../etc/passwd: not a test file the catalog collects",
    "suites/test_password_reset.py::test_x failed", "test_api_key.py:42: AssertionError",
])
def test_mask_secrets_leaves_words_that_are_no_credential(text):
    assert mask_secrets(text) == text


def test_mask_secrets_keeps_what_a_reader_needs():
    assert mask_secrets("postgresql://ci:p@ss/w?rd@db:5432/h") == "postgresql://ci:***@db:5432/h"
    assert mask_secrets("Authorization: Bearer abc.def.ghi") == "Authorization: ***"
    assert mask_secrets("GITHUB_TOKEN=x make") == "GITHUB_TOKEN=*** make"


@pytest.mark.timeout(60)
def test_mask_secrets_is_linear_on_hostile_text():
    # A backtracking pattern would take minutes on these; linear ones take well under a
    # second even on a loaded machine (the bound leaves room for a load of 20).
    import time

    for text in ("a://" + "b" * 100_000 + "@", "password=" * 10_000, "x:" * 50_000 + "@",
                 "password='" + "\\'" * 50_000, "a://b:" + "c" * 100_000,
                 "password%3D" * 10_000, "x:" * 50_000, "a://b:" * 20_000 + " @",
                 "x=" * 50_000, "a.a" * 50_000 + "=", "A_PASSWORD" * 10_000,
                 "Bearer " * 20_000, "'a':" * 30_000, "--a " * 30_000,
                 "-" * 100_000 + "a b", "--password " * 20_000):
        began = time.process_time()  # CPU time: load stretches wall time only
        mask_secrets(text)
        assert time.process_time() - began < 5.0, text[:20]
