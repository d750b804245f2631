"""gate-report's command line: commands, help, exit codes, one-line errors."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from doc_commands import REPO, Shell
from report_history import FILE_A, LAT, SUITE, make_history, regression_verdicts, write_run

from ci_register.running import nox_sessions
from gates.commands.cli import COMMANDS, build_parser, main
from gates.commands.common import LOCAL_HISTORY
from gates.store.open import open_history


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "history.db"
    return path, make_history(path)


@pytest.fixture
def hist(template, tmp_path: Path, monkeypatch):
    path = tmp_path / "history.db"
    shutil.copy(template[0], path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GATES_HISTORY", raising=False)
    monkeypatch.chdir(tmp_path)  # --root . has no catalog: health uses plans only
    return path, template[1]


def run(argv, capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# --------------------------------------------------------------------- help


def test_every_command_has_help_text(capsys):
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(sub.choices) == set(COMMANDS) == {"report", "health", "trim", "merge", "ingest",
                                                 "check", "trust",
                                                 "untrust", "accept", "compare", "notify",
                                                 "bisect", "snapshot", "prune"}
    helps = {a.dest: a.help for a in sub._choices_actions}
    for name, sub_parser in sub.choices.items():
        assert helps[name] and sub_parser.description, name
        for action in sub_parser._actions:
            assert action.help, f"{name} {action.option_strings or action.dest} has no help"
        with pytest.raises(SystemExit) as exc:
            main([name, "--help"])
        assert exc.value.code == 0
        assert f"usage: gate-report {name}" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert all(name in out for name in COMMANDS) and "exit codes" in out


def test_console_script_runs_in_a_subprocess(hist):
    path, _ = hist
    exe = shutil.which("gate-report")
    cmd = [exe] if exe else [sys.executable, "-m", "gates.commands.cli"]
    done = subprocess.run([*cmd, "--history", str(path), "--format", "json", "--no-health"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["verdicts"][0]["key"] == LAT


# ------------------------------------------------------------------- report


def test_default_command_is_report_and_exits_1_on_a_failed_gate(hist, capsys):
    path, _ = hist
    code, out, _ = run(["--history", path], capsys)
    assert code == 1
    assert out.startswith(f"{SUITE} @ 0015c0ffee: FAILED") and "CI health" in out
    code2, out2, _ = run(["report", "--history", path], capsys)
    assert (code2, out2) == (code, out)


def test_history_from_the_environment(hist, capsys, monkeypatch):
    path, _ = hist
    monkeypatch.setenv("GATES_HISTORY", str(path))
    assert run(["--no-health"], capsys)[0] == 1


def test_a_passing_run_exits_0(hist, capsys):
    path, ids = hist
    code, out, _ = run(["--history", path, "--run", ids[-2], "--format", "md"], capsys)
    assert code == 0 and out.startswith("## ✅")


def test_suite_since_md(hist, capsys):
    path, _ = hist
    code, out, _ = run(["--history", path, "--suite", SUITE, "--since", "2026-10-01",
                        "--format", "md"], capsys)
    assert code == 1 and "older passing row(s) not listed" in out
    assert out.index("❌") < out.index("passing metric(s)")


def test_html_out_file(hist, capsys, tmp_path):
    path, _ = hist
    target = tmp_path / "site" / "report.html"
    code, out, err = run(["--history", path, "--suite", SUITE, "--format", "html",
                          "--out", target], capsys)
    assert code == 1 and out == "" and f"wrote {target}" in err
    page = target.read_text()
    assert page.startswith("<!doctype html>") and "<svg" in page


def test_out_dash_is_stdout_not_a_file_named_dash(hist, capsys, tmp_path):
    path, _ = hist
    code, out, err = run(["--history", path, "--suite", SUITE, "--format", "json",
                          "--out", "-"], capsys)
    assert code == 1 and json.loads(out)["exit_code"] == 1 and "wrote" not in err
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize(("argv", "message"), [
    (["--history", "missing.db"], "missing.db: no such history; pass --history PATH"),
    (["--suite", "nope"], "no run of suite 'nope'; suites here: stage-x"),
    (["--since", "yesterday"], "use a span like 30d"),
    (["--run", "run0015", "--since", "3d"], "--run and --since exclude each other"),
    (["--format", "pdf"], "invalid choice: 'pdf'"),
    (["--points", "1"], "argument --points: '1': give a whole number from 2 to 1000000"),
    (["--points", "many"], "argument --points: 'many': give a whole number from 2 to 1000000"),
    (["--limit", "0"], "argument --limit: '0': give a whole number from 1 to 1000000"),
    (["--window", "-1"], "argument --window: '-1': give a whole number from 1 to 1000000"),
    (["health", "--window", "0"], "argument --window: '0': give a whole number from 1 to 1000000"),
    (["--window", "100000000000000000000"], "give a whole number from 1 to 1000000"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["untrust", "--run", "x" * 32], "--reason"),
    (["trust", "--reason", "fixed"], "give --run ID (repeatable) or --commit SHA"),
    (["untrust", "--run", "nosuchrun", "--reason", "r"], "no run matches run id(s) nosuchrun"),
    (["merge", "nope.db", "--into", "x.db"], "shard history nope.db does not exist"),
    # `--run "$RUN_ID"` with the variable unset reported the latest run instead.
    (["--run", ""], "--run '': empty (an unset variable?)"),
    (["--run="], "--run '': empty (an unset variable?)"),
    (["--suite", " "], "--suite ' ': empty (an unset variable?)"),
    (["notify", "--run", "", "--pr-comment"], "--run '': empty"),
    (["health", "--suite", ""], "--suite '': empty"),
])
def test_usage_and_input_errors_are_one_line_exit_2(hist, capsys, argv, message):
    path, _ = hist
    if "--history" not in argv and argv[0] not in ("merge", "frobnicate"):
        argv = [*argv, "--history", path] if argv[0] in COMMANDS else \
            ["--history", path, *argv]
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


@pytest.mark.parametrize("into", ["sqlite:///x.db", " ", "x.db\n"])
def test_merge_into_a_value_that_is_no_path_creates_nothing(hist, capsys, tmp_path,
                                                            monkeypatch, into):
    path, _ = hist
    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.iterdir())
    code, out, err = run(["merge", path, "--into", into], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"error: --into {into!r}: ")
    assert sorted(tmp_path.iterdir()) == before  # no "sqlite:" folder, no file " "


def test_a_file_that_is_not_a_history_is_an_input_error(tmp_path, capsys):
    bad = tmp_path / "notes.db"
    bad.write_text("not sqlite")
    code, _, err = run(["--history", bad], capsys)
    assert code == 2 and "not an SQLite database" in err
    # The fix names the option this command takes, not only the pytest plugin's.
    assert "--history PATH" in err and err.count("\n") == 1


def test_unwritable_out_is_an_input_error(hist, capsys, tmp_path):
    path, _ = hist
    (tmp_path / "file").write_text("x")
    code, _, err = run(["--history", path, "--out", tmp_path / "file" / "r.txt"], capsys)
    assert code == 2 and "cannot write" in err


# ------------------------------------------------------------ merge and trust


def test_merge_twice_changes_nothing(tmp_path, capsys):
    shard1, shard2 = tmp_path / "s1.db", tmp_path / "s2.db"
    with open_history(shard1) as h:
        write_run(h, 1, latency=1.0, shard=(1, 2), run_id="a" * 32)
    with open_history(shard2) as h:
        write_run(h, 1, latency=1.0, shard=(2, 2), run_id="b" * 32)
    into = tmp_path / "main.db"
    code, out, _ = run(["merge", shard1, shard2, "--into", into], capsys)
    assert code == 0 and f"merged 2 new run(s) into {into}; 0 already present" in out
    code, out, _ = run(["merge", shard1, shard2, "--into", into], capsys)
    assert code == 0 and "merged 0 new run(s)" in out and "2 already present" in out
    code, out, _ = run(["--history", into, "--no-health"], capsys)
    assert code == 0 and "1/2" in out and "2/2" in out  # both shards of the commit


def test_merge_conflict_is_exit_2(tmp_path, capsys):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    with open_history(a) as h:
        write_run(h, 1, latency=1.0, run_id="c" * 32)
    with open_history(b) as h:
        write_run(h, 1, latency=2.0, run_id="c" * 32)
    code, _, err = run(["merge", a, b, "--into", tmp_path / "m.db"], capsys)
    assert code == 2 and "differs" in err


def test_untrust_and_trust_by_run_and_commit(hist, capsys):
    path, ids = hist
    code, out, _ = run(["untrust", "--history", path, "--run", ids[3], "--reason",
                        "broken runner gpu-17"], capsys)
    assert code == 0 and out.strip() == f"untrusted 1 run(s): {ids[3]}"
    with open_history(path, readonly=True) as h:
        row = h.report_reads.run(ids[3])
        assert row["trusted"] == 0 and row["trust_reason"] == "broken runner gpu-17"
    code, out, _ = run(["--history", path, "--run", ids[3], "--no-health"], capsys)
    assert "(untrusted)" in out
    commit = h_commit(path, ids[3])
    code, out, _ = run(["trust", "--history", path, "--commit", commit[:9]], capsys)
    assert code == 0 and out.startswith("trusted 1 run(s)")
    with open_history(path, readonly=True) as h:
        assert h.report_reads.run(ids[3])["trusted"] == 1
        assert [e["reason"] for e in h.report_reads.trust_log(ids[3])] == [
            "broken runner gpu-17", "trusted again (gate-report trust)"]


def test_an_argument_that_is_not_utf8_is_named_not_blamed_on_the_history(hist, capsys,
                                                                        tmp_path):
    # A byte that is not UTF-8 in an argument reaches Python as a lone surrogate
    # ("bad\udcff"); storing or matching it failed to encode, and the error said "the
    # history holds a row this report cannot read", sending the user to `gate-report
    # check`, which finds every row sound.
    path, ids = hist
    before = path.read_bytes()
    code, _, err = run(["untrust", "--history", path, "--run", ids[3], "--reason",
                        "bad\udcff"], capsys)
    assert code == 2 and err.startswith("error: --reason 'bad\\udcff': not UTF-8 text "
                                        "(byte 0xff); give it as UTF-8"), err
    assert "history holds" not in err and err.count("\n") == 1
    with open_history(path, readonly=True) as h:
        assert h.report_reads.run(ids[3])["trusted"] == 1
    code, _, err = run(["--history", path, "--suite=\udcfe"], capsys)
    assert code == 2 and err.startswith("error: --suite '\\udcfe': not UTF-8 text"), err
    # A file name may hold such bytes: it is opened, and the bad selector is named.
    odd = tmp_path / "h\udcff.db"
    shutil.copy(path, odd)
    code, _, err = run(["--history", odd, "--run", "\udcfe" * 6], capsys)
    assert code == 2 and err.startswith("error: --run "), err
    code, _, err = run(["--history", odd, "--no-health"], capsys)
    assert code in (0, 1), err
    assert path.read_bytes() == before


def h_commit(path: Path, run_id: str) -> str:
    with open_history(path, readonly=True) as h:
        return h.report_reads.run(run_id)["commit_sha"]


# ------------------------------------------------------------------- health


def test_health_command(hist, capsys):
    path, _ = hist
    code, out, _ = run(["health", "--history", path], capsys)
    assert code == 0 and "Flaky tests" in out and "est_time=65" in out
    # Health is about the suite's CI, not one run: no empty runs table, no
    # "no metrics recorded" for a suite whose runs record metrics.
    for fmt in ("text", "md"):
        code, out, _ = run(["health", "--history", path, "--suite", SUITE, "--format", fmt],
                           capsys)
        assert code == 0 and f"CI health of {SUITE}: " in out.splitlines()[0]
        assert "finding(s)" in out.splitlines()[0]
        assert "Verdicts" not in out and "no metrics recorded" not in out.lower()
        assert "\nRuns\n" not in out and "### Runs" not in out and "Stale est" in out
    code, out, _ = run(["health", "--history", path, "--format", "json"], capsys)
    assert json.loads(out)[0]["flaky"][0]["nodeid"].endswith("test_sometimes")
    code, _, err = run(["health", "--history", path, "--suite", "nope"], capsys)
    assert code == 2 and "no run of suite 'nope'" in err


# ------------------------------------------------------------ GitHub Actions


def test_github_actions_summary_and_annotations(hist, capsys, monkeypatch, tmp_path):
    path, ids = hist
    summary = tmp_path / "step_summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    (tmp_path / FILE_A).parent.mkdir(parents=True)
    (tmp_path / FILE_A).write_text("\n\ndef test_decode(metrics):\n    pass\n")
    code, out, err = run(["--history", path, "--format", "json"], capsys)
    assert code == 1 and json.loads(out)["exit_code"] == 1  # stdout stays clean JSON
    assert summary.read_text().startswith("## ❌")
    errors = [line for line in err.splitlines() if line.startswith("::error ")]
    assert errors == [line for line in errors if f"file={FILE_A},line=3," in line]
    assert len(errors) == 1 and "appended" in err
    # More regressions than annotations allowed: still at most 10.
    with open_history(path) as h:
        many = [dict(regression_verdicts(ids[-1])[0], key=f"k{i}") for i in range(14)]
        h.run_writes.save_verdicts(ids[-1], many)
    code, _, err = run(["--history", path, "--no-health"], capsys)
    assert code == 1 and err.count("::error ") == 10 and "4 more failing gate(s)" in err


def test_md_redirected_into_the_step_summary_is_written_once(hist, tmp_path):
    path, _ = hist
    summary = tmp_path / "step_summary.md"
    summary.write_text("# earlier step output\n")
    env = {**os.environ, "GITHUB_ACTIONS": "true",
           "GITHUB_STEP_SUMMARY": str(summary)}
    with summary.open("a") as handle:  # what `>> "$GITHUB_STEP_SUMMARY"` does
        done = subprocess.run([sys.executable, "-m", "gates.commands.cli", "--history", str(path),
                               "--format", "md"], stdout=handle, stderr=subprocess.PIPE,
                              text=True, env=env, timeout=60, check=False)
    text = summary.read_text()
    assert done.returncode == 1, done.stderr
    assert text.startswith("# earlier step output\n## ❌") and text.count("## ❌") == 1
    assert "not appended twice" in done.stderr and "::error " in done.stderr


def test_latest_run_is_every_suite_shard_of_the_newest_commit(tmp_path, capsys):
    path = tmp_path / "h.db"
    with open_history(path) as h:
        write_run(h, 0, latency=1.0, suite="other", run_id="o" * 32)  # older commit
        write_run(h, 1, latency=1.0, shard=(1, 2), run_id="a" * 32)
        write_run(h, 1, latency=1.0, shard=(2, 2), run_id="b" * 32)
        write_run(h, 1, latency=1.0, suite="nightly-x", run_id="n" * 32)
    code, out, _ = run(["--history", path, "--no-health", "--format", "json"], capsys)
    data = json.loads(out)
    assert [(r["suite"], r["shard"]) for r in data["runs"]] == [
        ("nightly-x", "1/1"), ("stage-x", "1/2"), ("stage-x", "2/2")]
    assert data["title"] == "nightly-x, stage-x @ 0001c0ffee"
    code, out, _ = run(["--history", path, "--no-health", "--suite", "other"], capsys)
    assert code == 0 and "oooooooo" in out


# ------------------------------------------------- --help and the default history

COMMITTED = Path(__file__).resolve().parents[1] / "history.db"


def _help_examples() -> list[str]:
    """The commands of ``gate-report --help``'s examples (the prose after them dropped)."""
    block = build_parser().epilog.split("\n\n")[0].splitlines()[1:]
    return [re.split(r"\s{2,}", line.strip())[0] for line in block]


def test_every_help_example_runs_on_the_committed_history(tmp_path):
    examples = _help_examples()
    assert len(examples) >= 10 and all(e.startswith("gate-report") for e in examples)
    for n, example in enumerate(examples):
        work = tmp_path / str(n)
        work.mkdir()
        shutil.copy(COMMITTED, work / "history.db")
        sh = Shell(work, REPO)
        if " merge shard-" in example:  # the shard files CI's suite jobs upload
            made = sh("gate-report snapshot --suite base-b-2gpu --out shard-base-b-2gpu-1-of-1.db")
            assert made.returncode == 0, made.stderr
        done = sh(example, timeout=300)
        # 1 is a report's or a comparison's verdict (the committed range holds regressions);
        # 2 (bad input) is an example that does not run.
        assert done.returncode in (0, 1) and "error:" not in done.stderr, \
            f"`{example}` exited {done.returncode}: {done.stderr[-2000:]}"
        assert done.stdout.strip() or any(p.name != "history.db" for p in work.iterdir()), example


def test_outside_ci_a_plain_report_reads_the_history_this_checkouts_runs_made(tmp_path):
    assert LOCAL_HISTORY == nox_sessions.LOCAL_HISTORY  # where the suite sessions record
    shutil.copy(COMMITTED, tmp_path / "history.db")
    sh = Shell(tmp_path, REPO)
    committed = sh("gate-report --format json --no-health")
    assert committed.returncode in (0, 1) and "note:" not in committed.stderr, committed.stderr
    (tmp_path / ".gates").mkdir()
    made = sh("gate-report snapshot --suite base-b-2gpu --out .gates/local-history.db")
    assert made.returncode == 0, made.stderr
    local = sh("gate-report --format json --no-health")
    assert local.returncode in (0, 1), local.stderr
    suites = {json.loads(r.stdout)["runs"][0]["suite"] for r in (committed, local)}
    assert suites == {"cpu", "base-b-2gpu"}  # the newest run of each file differs
    assert json.loads(local.stdout)["runs"][0]["suite"] == "base-b-2gpu"
    assert local.stderr.startswith("note: reading .gates/local-history.db (this checkout's runs outside CI)")
    # In CI, or with GATES_HISTORY or --history, the default is not consulted.
    for env, argv in (({"CI": "true"}, ""), ({}, " --history history.db"),
                      ({"GATES_HISTORY": "history.db"}, "")):
        again = sh(f"gate-report --format json --no-health{argv}", **env)
        assert json.loads(again.stdout)["runs"][0]["suite"] == "cpu" and "note:" not in again.stderr
