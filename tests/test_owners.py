"""gates.report.owners: CODEOWNERS matching, register_ci_gate(owner=), owners and accept hints in reports."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from history_seed import level_run

from ci_register.registered.collect import GATE_OPTIONS
from gates.commands.cli import main as cli
from gates.gate import evaluate_run
from gates.record.declarations import OPTIONS, DeclarationError, parse_plan_gates
from gates.report.owners import owner_of, parse_codeowners, read_codeowners
from gates.store.open import open_history

CODEOWNERS = """\
# default owner, then more specific ones: the last match wins
*                       @org/infra
*.md                    @docs-team
/suites/                @org/suites
apps/                   @apps-team
suites/serving/         @org/serving   # a trailing comment
docs/*                  @docs-flat
suites/serving/legacy/
**/kernels/**/test_*.py @org/kernels
suites/[ab].py          @literal-brackets
"""


@pytest.mark.parametrize(("path", "want"), [
    ("setup.py", ("@org/infra",)),
    ("README.md", ("@docs-team",)),
    ("suites/evals/test_gsm8k.py", ("@org/suites",)),
    ("suites/serving/test_ttft.py", ("@org/serving",)),
    ("x/suites/serving/test_ttft.py", ("@org/infra",)),  # anchored (slash in the middle)
    ("a/b/apps/main.py", ("@apps-team",)),  # a trailing-slash name matches anywhere
    ("docs/intro.txt", ("@docs-flat",)),
    ("docs/deep/intro.txt", ("@org/infra",)),  # docs/* does not reach nested files
    ("suites/serving/legacy/test_old.py", ()),  # a line without owners: unowned
    ("suites/kernels/attn/test_fa3.py", ("@org/kernels",)),
    ("suites/[ab].py", ("@literal-brackets",)),  # GitHub's CODEOWNERS has no [ ] ranges
    ("suites/a.py", ("@org/suites",)),
])
def test_codeowners_last_matching_line_wins(path, want):
    assert owner_of(path, parse_codeowners(CODEOWNERS)) == want


def test_codeowners_lookup_order(tmp_path: Path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "CODEOWNERS").write_text("* @third\n")
    (tmp_path / "CODEOWNERS").write_text("* @second\n")
    assert owner_of("a.py", read_codeowners(tmp_path)) == ("@second",)
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github" / "CODEOWNERS").write_text("* @first\n")
    assert owner_of("a.py", read_codeowners(tmp_path)) == ("@first",)
    assert read_codeowners(tmp_path / "nowhere") == []


def test_owner_option_is_validated_and_collected():
    assert "owner" in OPTIONS and "owner" in GATE_OPTIONS
    g = parse_plan_gates([{"path": "t.py", "line": 3, "metric_key": "k",
                           "options": {"owner": "@org/serving a@b.c"}}])["k"]
    assert g.owner == "@org/serving a@b.c"
    with pytest.raises(DeclarationError, match=r"t.py:3: .*owner='serving'; use '@team"):
        parse_plan_gates([{"path": "t.py", "line": 3, "metric_key": "k",
                           "options": {"owner": "serving"}}])


def _history_with_held_regression(path: Path, owner: str | None) -> str:
    rng = np.random.default_rng(1)
    node = "suites/serving/test_ttft.py::test_ttft"
    plan = {"gates": [{"path": "suites/serving/test_ttft.py", "line": 2, "metric_key": "ttft",
                       "options": {"owner": owner} if owner else {}}]}
    with open_history(path) as h:
        for i in range(34):
            rid = level_run(h, i, {"ttft": 1.0 if i < 31 else 1.12}, rng, run_id=f"run-{i:03d}",
                            branch="main", node=node, plan=plan)
            res = evaluate_run(h, rid)
        assert res.verdicts[0].verdict == "regression"
    return rid


@pytest.mark.parametrize(("declared", "want"), [(None, "@org/serving"), ("@alice", "@alice")])
def test_report_names_owner_and_accept_command(tmp_path: Path, capsys, monkeypatch,
                                               declared, want):
    db = tmp_path / "h.db"
    rid = _history_with_held_regression(db, declared)
    (tmp_path / "CODEOWNERS").write_text(CODEOWNERS)
    assert cli(["--history", str(db), "--run", rid, "--format", "md", "--no-health",
                "--root", str(tmp_path)]) == 1
    md = capsys.readouterr().out
    section = md.split("### Owners and next steps", 1)[1]
    assert want in section.split("\n\n")[1]
    assert "gate-report accept ttft --suite s --from 0000031beef" in section
    # The same command, run as printed (with a reason), makes the new level the baseline.
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    cli(["--history", str(db), "--run", rid, "--no-health", "--root", str(tmp_path),
         "--format", "json", "--out", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert "::error " in err and f"owner {want}" in err
    assert json.loads((tmp_path / "r.json").read_text())["verdicts"][0]["owner"] == want


def test_no_hint_before_the_change_held(tmp_path: Path, capsys):
    db = tmp_path / "h.db"
    rng = np.random.default_rng(1)
    with open_history(db) as h:
        for i in range(32):
            level_run(h, i, {"ttft": 1.0 if i < 31 else 1.15}, rng, run_id=f"r{i:03d}",
                      node="t.py::t", test=False)
        assert evaluate_run(h, "r031").verdicts[0].verdict == "regression"
    assert cli(["--history", str(db), "--no-health", "--root", str(tmp_path)]) == 1
    assert "gate-report accept" not in capsys.readouterr().out


def test_report_shows_the_stored_bisection(tmp_path: Path, capsys):
    db = tmp_path / "h.db"
    rid = _history_with_held_regression(db, "@alice")
    with open_history(db) as h:
        h.after_writes.save_bisect({"suite": "s", "key": "ttft", "good": "a" * 40, "bad": "b" * 40,
                       "outcome": "culprit", "culprit": "c0ffee" * 6, "executions": 41,
                       "evidence": {"candidates": []}})
    assert cli(["--history", str(db), "--run", rid, "--no-health", "--root", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "culprit c0ffeec0ffee (41 runs)" in out.split("Owners and next steps", 1)[1]


def test_an_improvement_that_held_gets_its_accept_command(tmp_path: Path, capsys):
    db = tmp_path / "h.db"
    rng = np.random.default_rng(2)
    with open_history(db) as h:
        # An improvement is read on a window (never one run alone): announced from the
        # second or third run at the new level on, and accepted once it held 3 runs.
        said = []
        for i in range(36):
            rid = level_run(h, i, {"ttft": 1.0 if i < 31 else 0.85}, rng, run_id=f"run-{i:03d}",
                            node="t.py::t", test=False)
            said.append(evaluate_run(h, rid).verdicts[0].verdict)
        first = said.index("improvement")
        assert said[31] == "pass" and first in (32, 33) and set(said[first:]) == {"improvement"}
    assert cli(["--history", str(db), "--no-health", "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out.split("Owners and next steps", 1)[1]
    assert f"gate-report accept ttft --suite s --from {first:07d}beef" in out
    assert "faster/better by design" in out


def test_html_carries_what_text_and_markdown_carry_and_a_range_lists_a_metric_once(tmp_path: Path, capsys):
    db = tmp_path / "h.db"
    _history_with_held_regression(db, "@alice")
    (tmp_path / "CODEOWNERS").write_text(CODEOWNERS)
    base = ["--history", str(db), "--suite", "s", "--since", "3650d", "--no-health", "--root", str(tmp_path)]
    pages = {}
    for fmt in ("text", "md", "html"):
        cli([*base, "--format", fmt])
        pages[fmt] = capsys.readouterr().out
    accept = "gate-report accept ttft --suite s --from 0000031beef"
    for fmt, page in pages.items():
        assert "Owners and next steps" in page and "Where metrics changed" in page, fmt
        assert accept in page and "@alice" in page.split("Owners and next steps", 1)[1], fmt
    md = pages["md"]
    # Verdicts before the (long) runs table; the owners table names ttft once, not once a run.
    assert md.index("### Verdicts") < md.index("### Owners and next steps") < md.index("### Runs")
    owners = md.split("### Owners and next steps", 1)[1].split("\n\n")[1]
    assert sum(line.startswith("| `ttft`") for line in owners.splitlines()) == 1, owners


# ------------------------------------------------------------- hostile CODEOWNERS (issue 40)

LONG_PATH = "suites/" + "a" * 4000 + "/" + "b" * 3000 + "/test_x.py"


@pytest.mark.timeout(20)
@pytest.mark.parametrize("pattern", ["*" * 25, "*" * 25 + ".md", "*a" * 12 + "b", "/a*" * 12 + "/b",
                                     "**/" * 30 + "x", "a?" * 40 + "*/" * 10])
def test_hostile_codeowners_patterns_match_in_linear_time(pattern):
    # Each took from seconds to hours on the backtracking regex translation.
    import time

    rules = parse_codeowners(f"{pattern} @evil\n* @default\n{pattern} @evil2\n")
    began = time.process_time()  # CPU time: load stretches wall time only
    for path in (LONG_PATH, "a" * 30, "a" * 7000, LONG_PATH.replace("/", "a")):
        owner_of(path, rules)
    assert time.process_time() - began < 1.0


def test_codeowners_takes_brackets_and_a_leading_bang_literally():
    rules = parse_codeowners("* @all\n!x.py @bang\n\\#y.py @hash\n[ab]*.py @brackets\n")
    assert owner_of("!x.py", rules) == ("@bang",)
    assert owner_of("x.py", rules) == ("@all",)
    assert owner_of("#y.py", rules) == ("@hash",)
    assert owner_of("[ab]q.py", rules) == ("@brackets",)
    assert owner_of("aq.py", rules) == ("@all",)


def test_a_codeowners_fifo_is_never_opened(tmp_path: Path):
    import os

    os.mkfifo(tmp_path / "CODEOWNERS")
    assert read_codeowners(tmp_path) == []  # returns at once: a FIFO open would block


def test_a_host_without_re2_reports_with_a_warning_not_a_traceback(tmp_path: Path):
    # A GPU image's own Python carries what the gate needs, not pathspec and google-re2:
    # the report still comes, owners from register_ci_gate only, and says why.
    import os
    import subprocess
    import sys

    db = tmp_path / "h.db"
    rid = _history_with_held_regression(db, None)
    (tmp_path / "CODEOWNERS").write_text(CODEOWNERS)
    repo = Path(__file__).resolve().parents[1]
    code = ("import sys; sys.modules['re2'] = None; from gates.commands.cli import main; "
            f"sys.exit(main(['--history', {str(db)!r}, '--run', {rid!r}, '--no-health', "
            f"'--root', {str(tmp_path)!r}]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, PYTHONPATH=str(repo)))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "CODEOWNERS not read" in r.stderr and "google-re2" in r.stderr
