"""Renderers (text, Markdown, HTML) and the GitHub Actions edge."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from report_history import BW, FILE_A, LAT, hostile_input, make_history

from gates.report import ghactions
from gates.report.build import VerdictRow, build_report
from gates.report.health import analyse
from gates.report.query import load_health_input, load_report_input, select_runs
from gates.report.render_html import render_html, spark_svg
from gates.report.render_md import md_code, md_text, render_md
from gates.report.render_text import FOLD_INDENT, TEXT_WIDTH, grid, render_text, sparkline
from gates.store.open import open_history


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    path = tmp_path_factory.mktemp("render") / "history.db"
    make_history(path)
    with open_history(path, readonly=True) as h:
        runs, scope = select_runs(h)
        rep = build_report(load_report_input(h, runs, scope=scope))
        rep.health = [analyse(load_health_input(h, runs[0]["suite"]))]
    return rep


def test_sparkline():
    assert sparkline([1, 2, 3, 4, 5, 6, 7, 8]) == "▁▂▃▄▅▆▇█"
    assert sparkline([5, 5, 5]) == "▄▄▄"
    assert sparkline([]) == ""
    assert len(sparkline(list(range(100)))) == 24


def folded_row(lines: list[str], i: int) -> str:
    """Line ``i`` of a text table and the indented lines that carry on its row."""
    end = next((j for j in range(i + 1, len(lines)) if not lines[j].startswith(FOLD_INDENT)), len(lines))
    return " ".join(lines[i:end])


def test_text_has_runs_verdicts_trends_and_health(report):
    text = render_text(report)
    assert text.startswith("stage-x @ 0015c0ffee: FAILED: 1 gate(s) failed")
    assert "65 s vs est 60 s (+8%)" in text
    lines = text.splitlines()
    lat = next(i for i, line in enumerate(lines) if LAT in line)
    bw = next(i for i, line in enumerate(lines) if BW in line)
    assert lat < bw and "FAIL regression" in lines[lat]
    row = folded_row(lines, lat)  # a row wider than the terminal goes on over indented lines
    assert "+30.0% [+22.0, +38.0]" in row and "q=2.0e-06" in row
    assert "0009c0ffee..0010c0ffee" in row and "▁▁▁" in row
    for section in ("Stale est_time", "Flaky tests", "Always skipped", "never ran",
                    "Slowest files"):
        assert section in text


def test_markdown_puts_failures_on_top_and_passes_in_a_fold(report):
    md = render_md(report)
    assert md.startswith("## ❌ ")
    assert md.index(LAT) < md.index("<details><summary>1 passing metric(s)") < md.index(BW)
    assert "### Where metrics changed" in md and "`0009c0ffee..0010c0ffee`" in md
    assert md.count("<details>") == md.count("</details>")


def test_markdown_escaping():
    assert md_text("a|b <x> *y* [z](u)") == r"a\|b &lt;x&gt; \*y\* \[z\](u)"
    assert md_code("k|v") == r"`k\|v`"
    assert md_code("a`b") == "`` a`b ``"
    md = render_md(build_report(hostile_input()))
    # Code spans show their content literally; outside them no tag may survive.
    prose = re.sub(r"``.*?``|`[^`]*`", "", md)
    assert "alert(1)" in md and "alert(2)" in md
    assert "<script" not in prose and "<img" not in prose and "<b>" not in prose
    assert "<svg" not in prose and "&lt;svg onload" in prose
    assert "javascript:" not in md  # a non-http CI url is not turned into a link
    row = next(line for line in md.splitlines() if "alert(1)" in line)
    assert row.count(" | ") == 10  # the pipe in the test id did not add a column


def test_html_is_self_contained_and_escaped(report):
    page = render_html(report)
    assert page.startswith("<!doctype html>") and "default-src 'none'" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page)
    assert "<script" not in page and "@import" not in page and "url(" not in page
    assert page.count("<svg") >= 4 and 'class="change"' in page
    assert "<table>" in page and "CI health: stage-x" in page
    hostile = render_html(build_report(hostile_input()))
    assert "<script" not in hostile and "<img" not in hostile and "<b>suite" not in hostile
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in hostile
    assert "javascript:" not in hostile.replace("javascript:alert(3)", "")  # only as text


def test_spark_svg_marks_the_change(report):
    row = report.verdicts[0]
    svg = spark_svg(row.trend)
    assert svg.startswith("<svg") and "stroke=\"#c62828\"" in svg
    assert spark_svg(None) == ""


# ----------------------------------------------------------------- GitHub Actions


def test_fit_summary_cuts_at_a_line_with_a_note_and_closes_details():
    md = "## head\n" + "<details><summary>x</summary>\n\n" + "| row |\n" * 200_000
    cut = ghactions.fit_summary(md, 100_000)
    assert len(cut.encode()) <= 100_000
    assert cut.startswith("## head") and "cut to fit GitHub's 1 MiB" in cut
    assert cut.count("<details>") == cut.count("</details>")
    assert ghactions.fit_summary("small\n", 100) == "small\n"


def test_step_summary_appends_within_the_cap(tmp_path: Path, report):
    target = tmp_path / "summary.md"
    target.write_text("x" * (ghactions.SUMMARY_CAP - 5000))
    note = ghactions.append_step_summary(render_md(report) * 10,
                                         {"GITHUB_STEP_SUMMARY": str(target)})
    assert "cut to fit" in note
    assert ghactions.SUMMARY_CAP - 1000 < target.stat().st_size <= ghactions.SUMMARY_CAP
    assert "not set" in ghactions.append_step_summary("x", {})


def test_annotations_point_at_the_test_function(tmp_path: Path, report):
    test_file = tmp_path / FILE_A
    test_file.parent.mkdir(parents=True)
    test_file.write_text("import x\n\n\nclass TestK:\n    def test_a(self): ...\n\n\n"
                         "def test_decode(metrics):\n    pass\n")
    lines = ghactions.annotations(report, lambda n: ghactions.locate_test(n, tmp_path))
    assert len(lines) == 1
    assert lines[0].startswith(f"::error file={FILE_A},line=8,title=gate regression%3A {LAT}::")
    assert "+30.0%25 [+22.0, +38.0]" in lines[0]  # % is escaped for the runner
    assert ghactions.locate_test(f"{FILE_A}::TestK::test_a[p1]", tmp_path) == (FILE_A, 5)
    assert ghactions.locate_test("missing.py::t", tmp_path) == ("missing.py", 1)


def test_at_most_ten_annotations(report):
    many = [report.verdicts[0]] * 25
    report_many = type(report)(title="t", scope="run", runs=[], verdicts=many, summary={})
    lines = ghactions.annotations(report_many, lambda n: ("f.py", 3))
    assert sum(line.startswith("::error") for line in lines) == 10
    assert lines[-1].startswith("15 more failing gate(s)")


def test_workflow_command_escaping():
    assert ghactions.escape_data("50%\nx\r") == "50%25%0Ax%0D"
    assert ghactions.escape_property("a:b,c") == "a%3Ab%2Cc"


def test_headline_tells_failed_tests_and_incomplete_runs(tmp_path: Path):
    from report_history import prov

    path = tmp_path / "h.db"
    ids = make_history(path, runs=14, verdicts=False)  # run 13: the flaky test failed
    with open_history(path) as h:
        h.run_writes.start_run(prov(20, run_id="crashed" + "0" * 20))  # never recorded: incomplete
        rows, scope = select_runs(h, run=ids[13])
        failed = build_report(load_report_input(h, rows, scope=scope))
        rows, scope = select_runs(h)
        crashed = build_report(load_report_input(h, rows, scope=scope))
    # The session of each exited 1 (a failed test; a run that never finished): the
    # report says FAILED and exits so, never "passed" beside a failure.
    assert render_text(failed).startswith(
        "stage-x @ 0013c0ffee: FAILED (exit 1) (2 info); 1 test(s) failed: test_sometimes\n")
    assert failed.exit_code == 1
    assert "; 1 run(s) incomplete" in render_md(crashed).splitlines()[0]
    assert render_md(crashed).startswith("## ❌")
    assert crashed.runs[0].status == "incomplete" and crashed.exit_code == 1


def test_headline_of_a_run_without_a_commit_says_so(tmp_path: Path):
    from report_history import prov

    path = tmp_path / "h.db"
    with open_history(path) as h:
        p = prov(0, run_id="nocommit" + "0" * 20)
        h.run_writes.start_run(type(p)(**{**p.__dict__, "commit": None}))
        rows, scope = select_runs(h)
        report = build_report(load_report_input(h, rows, scope=scope))
    assert render_text(report).splitlines()[0].startswith(f"{report.runs[0].suite} @ no commit:")


def test_a_wide_table_folds_into_the_width_and_keeps_every_cell():
    head = ["verdict", "metric", "test", "change", "command"]
    rows = [["FAIL regression", "k/" + "x" * 60, "test_" + "y" * 50, "+3.0% [+1.0, +5.0] 99%",
             "gate-report accept " + "k/" + "x" * 60 + " --from abc1234 --reason 'intended: say why'"],
            ["pass", "short", "test_s", "+0.1%", "-"]]
    assert len(grid(rows, head).splitlines()[2]) > 200  # unfolded: one line a row
    lines = grid(rows, head, TEXT_WIDTH).splitlines()
    assert max(map(len, lines)) <= TEXT_WIDTH
    starts = [i for i, line in enumerate(lines) if not line.startswith(" ")]
    assert [lines[i].split("  ")[0] for i in starts] == ["verdict", "-" * 15, "FAIL regression", "pass"]
    for row, i in zip(rows, starts[2:], strict=True):  # every cell of each row, in order, on its lines
        text = folded_row(lines, i).replace(" \\ ", " ")  # a broken command's continuations
        words = [w for cell in row for w in cell.split()]
        assert text.split() == words or "".join(text.split()) == "".join(words), text
    assert grid(rows[1:], head, TEXT_WIDTH) == grid(rows[1:], head)  # a narrow table is as it was


def test_the_committed_historys_reports_fit_120_columns_with_a_ranges_verdicts_first(tmp_path, capsys,
                                                                                     monkeypatch):
    from gates.commands.cli import main  # noqa: PLC0415

    monkeypatch.delenv("GATES_HISTORY", raising=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    shutil.copy(Path(__file__).resolve().parents[1] / "history.db", tmp_path / "history.db")
    texts = []
    for argv in ([], ["--since", "2000-01-01"]):
        assert main(["--history", str(tmp_path / "history.db"), *argv]) in (0, 1)
        texts.append(capsys.readouterr().out)
    one, many = texts
    for text in texts:
        assert len(text.splitlines()) > 50 and max(map(len, text.splitlines())) <= TEXT_WIDTH
    titles = [line for line in many.splitlines() if line == "Runs" or line.startswith("Verdicts (")]
    assert titles[0].startswith("Verdicts (") and titles[1] == "Runs"  # a range: verdicts first
    titles = [line for line in one.splitlines() if line == "Runs" or line.startswith("Verdicts (")]
    assert titles[0] == "Runs"  # one run: its one-row table, then its verdicts


def test_a_command_broken_to_fit_still_runs_as_one(tmp_path):
    command = ("gate-report accept " + "serving/ttft_ms/" + "x" * 60 + " --suite base-b-1gpu --from b16c0cdded03 "
               "--reason 'intended: faster/better by design (say why)'")
    lines = grid([["k", "improvement", command]], ["metric", "verdict", "to accept as the new level"],
                 TEXT_WIDTH).splitlines()
    assert max(map(len, lines)) <= TEXT_WIDTH
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("gate-report accept serving"))
    pasted = "\n".join(lines[start:])
    assert pasted.count(" \\\n") == len(lines) - start - 1 >= 1  # every broken line continues
    script = tmp_path / "paste.sh"
    script.write_text("gate-report() { printf '%s\\n' \"$@\"; }\n" + pasted + "\n")
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=30)
    assert done.stdout.splitlines() == shlex.split(command)[1:], done.stdout + done.stderr


def _row(run: str, key: str, verdict: str, cls: str, **kw) -> VerdictRow:
    return VerdictRow(run_id=run, suite="s", fingerprint="fp", key=key, nodeid=None,
                      verdict=verdict, cls=cls, mode="enforce", baseline=1.0, new=1.1,
                      unit="ms", better="lower", rel_change=0.1, ci_low=None, ci_high=None,
                      statistic=None, p_value=None, q_value=None, floor=0.01, attempt=1, **kw)


def test_next_steps_lists_every_failure_confirmed_regressions_first_once_a_metric():
    from gates.report.build import Change, Report, Trend
    from gates.report.render_text import next_steps, where_changed

    chg = Change(3, float("nan"), 1.0, 1.1, 0.1, "a" * 10, "b" * 10, "r1")
    rows = [_row("r2", "imp", "improvement", "improvement", owner="@bob",
                 accept_hint="gate-report accept imp"),
            _row("r2", "lat", "regression", "fail"),  # no owner: listed all the same
            _row("r3", "lat", "regression", "fail", accept_hint="gate-report accept lat"),
            _row("r2", "ttft", "regression", "fail", confirmed_by="r2b", owner="@alice")]
    trend = Trend("s", "fp", "lat", [1.0] * 4, ["r0", "r1", "r2", "r3"], [None] * 4,
                  [""] * 4, [True] * 4, chg)
    rows[1].trend = rows[2].trend = trend
    report = Report("t", "range", [], rows, {})
    assert next_steps(report) == [
        ["ttft", "regression", "@alice", "-", "-"],
        ["lat", "regression", "-", "-", "gate-report accept lat"],
        ["imp", "improvement", "@bob", "-", "gate-report accept imp"]]
    assert [r[0] for r in where_changed(report)] == ["lat"]  # one row a metric


def test_a_machine_model_new_to_its_suite_is_named_with_its_runs_and_what_was_set_aside(
        tmp_path):
    from gates.gate import evaluate_run
    from gates.report.build import build_report, new_model
    from gates.report.query import load_report_input, select_runs
    from gates.report.render_text import headline
    from gates.store.history import RunRecord, TestResult
    from gates.store.metrics import validate_metric
    from gates.store.open import open_history
    from gates.store.provenance import Provenance

    models = {"h200": (36, []), "h100": (3, ["t1", "t2", "t3"])}
    text = new_model({"suite": "b", "fingerprint": "h100", "started_at": "t2"}, models)
    assert text == ("new machine model h100 in b: run 2 of it (the gate judges it from its "
                    "run 6); runs set aside: 36 on h200")
    assert new_model({"suite": "b", "fingerprint": "h200", "started_at": "t9"}, models) == ""
    assert new_model({"suite": "b", "fingerprint": "h100", "started_at": "t3"},
                     {"h100": (3, ["t1", "t2", "t3"])}) == ""  # the suite's only model
    with open_history(tmp_path / "h.db") as h:
        for i, fp in enumerate(["h200"] * 7 + ["h100"] * 2):
            p = Provenance(run_id=f"run-{i:04d}", suite="b", commit=f"{i:07d}", branch="main",
                           started_at=f"2026-01-01T00:00:{i:02d}+00:00", fingerprint=fp)
            h.run_writes.start_run(p)
            h.run_writes.record_run(RunRecord(p, [TestResult("t.py::t", "t.py", "passed", 1.0)],
                                   [("t.py::t", validate_metric("lat", [1.0], unit="ms",
                                                                better="lower"))], None, 0))
            evaluate_run(h, f"run-{i:04d}")
        runs, scope = select_runs(h, run="run-0008")
        line = headline(build_report(load_report_input(h, runs, scope=scope)))
    assert "passed" in line and "new machine model h100 in b: run 2 of it" in line, line
    assert "runs set aside: 7 on h200" in line


def test_a_still_red_regression_is_listed_with_the_confirmed_ones():
    # Held by an earlier chain and not accepted: before a first attempt's unconfirmed
    # failure (a --confirm 0 session), as a confirmed regression is.
    from gates.report.build import Report
    from gates.report.render_text import next_steps

    rows = [_row("r2", "bw", "regression", "fail"),
            _row("r2", "lat", "regression", "fail", method="still-red")]
    assert [r[0] for r in next_steps(Report("t", "run", [], rows, {}))] == ["lat", "bw"]
