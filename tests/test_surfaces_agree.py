"""Every report surface agrees with the session's exit code, on real runner chains.

A suite session (``python -m ci_register run``) trips, reruns the tripped test up to
four times (each rerun ``confirm_of`` the attempt before it) and exits with the last
gate's code. Each surface then reads the stored chain: text, Markdown, HTML, JSON,
the ``gate-report`` exit code, the GitHub step summary and annotations, the PR
comment, the webhook and CI health. Chains of 1 to 4 reruns, held and cleared.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from test_runner import LAT_TEST, SUITES, _baseline, run

from gates.commands.cli import main as gate_report
from gates.report import notify
from gates.report.build import build_report, report_to_json
from gates.report.health import analyse
from gates.report.query import load_health_input, load_report_input, select_runs
from gates.report.render_html import render_html
from gates.report.render_md import render_md
from gates.report.render_text import render_text
from gates.store.open import open_history

# (baseline runs, the attempts' values, the session's exit code, attempts taken)
CHAINS = [
    pytest.param(30, "1.025 1.04", 1, 2, id="held-at-rerun-1"),
    pytest.param(30, "1.025 1.010 1.018", 1, 3, id="held-at-rerun-2"),
    pytest.param(30, "1.025 1.010 1.0", 0, 3, id="cleared-at-rerun-2"),
    pytest.param(45, "1.016 1.012 1.013 1.05", 1, 4, id="held-at-rerun-3"),
    pytest.param(45, "1.016 1.012 1.011 1.013 1.015", 1, 5, id="held-at-rerun-4"),
    pytest.param(45, "1.016 1.012 1.011 1.013 0.998", 0, 5, id="cleared-at-rerun-4"),
]


@pytest.fixture
def make_tree(catalog_tree):
    return lambda files: catalog_tree(SUITES, {f"suites/{rel}": textwrap.dedent(text)
                                               for rel, text in files.items()})


@pytest.mark.parametrize(("n", "values", "rc", "attempts"), CHAINS)
def test_every_surface_says_what_the_session_exited_with(make_tree, tmp_path, capsys,
                                                         monkeypatch, n, values, rc, attempts):
    tree = make_tree({"test_lat.py": LAT_TEST})
    _baseline(tree / "h.db", n=n)
    session = run(tree, "cpu", "--gate", "enforce",
                  env={"LAT_VALUES": values, "LAT_COUNT": str(tmp_path / "count")})
    assert session.returncode == rc, session.stdout + session.stderr
    assert (tmp_path / "count").read_text() == str(attempts)  # a real chain of reruns

    with open_history(tree / "h.db", create=False) as h:
        runs, scope = select_runs(h)
        report = build_report(load_report_input(h, runs, scope=scope))
        health = analyse(load_health_input(h, "cpu"))
        chain_runs = [r for r in load_health_input(h, "cpu")["runs"] if r["confirm_of"]]
    failed = bool(rc)
    assert len(report.runs) == 1 and len(report.runs[0].confirm_runs) == attempts - 1
    lat = [v for v in report.verdicts if v.key == "lat"]
    assert len(lat) == 1 and lat[0].verdict == ("regression" if failed else "pass")
    assert report.exit_code == rc
    # Text, Markdown, HTML, JSON: one report model, one exit code.
    assert render_text(report).split(": ", 1)[1].startswith("FAILED" if failed else "passed")
    assert render_md(report).startswith("## ❌" if failed else "## ✅")
    assert ("badge b-fail" in render_html(report)) == failed
    assert report_to_json(report)["exit_code"] == rc
    # The PR comment and the webhook are built from the same report.
    assert notify.comment_body(render_md(report), None).splitlines()[1].startswith(
        "## ❌" if failed else "## ✅")
    regs = notify.regressions_on(report, report.runs[0].branch, lambda v: None)
    assert [r.key for r in regs] == (["lat"] if failed else [])
    # CI health reads the whole chain: every rerun's tests, not the first rerun's only.
    assert len(chain_runs) == attempts - 1 and health.runs == min(20, n + 1)

    # gate-report itself, on GitHub: its exit code, the step summary and annotations.
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    capsys.readouterr()
    code = gate_report(["--history", str(tree / "h.db"), "--root", str(tree), "--no-health"])
    out, err = capsys.readouterr()
    assert code == rc, out
    assert summary.read_text().startswith("## ❌" if failed else "## ✅")
    assert ("::error" in err) == failed
    code = gate_report(["--history", str(tree / "h.db"), "--root", str(tree), "--no-health",
                        "--format", "json", "--out", str(tmp_path / "r.json")])
    assert code == rc
    assert json.loads((tmp_path / "r.json").read_text())["exit_code"] == rc



def test_a_rerun_far_on_the_good_side_clears_the_trip_and_announces_nothing(
        make_tree, tmp_path):
    tree = make_tree({"test_lat.py": LAT_TEST})
    _baseline(tree / "h.db")
    session = run(tree, "cpu", "--gate", "enforce", "--confirm", "1",
                  env={"LAT_VALUES": "1.03 0.97", "LAT_COUNT": str(tmp_path / "count")})
    assert session.returncode == 0, session.stdout + session.stderr
    with open_history(tree / "h.db", create=False) as h:
        stored = [r[0] for r in h.backend.db.execute(
            "SELECT verdict FROM verdicts WHERE key = 'lat' ORDER BY attempt")]
        runs, scope = select_runs(h)
        report = build_report(load_report_input(h, runs, scope=scope))
    assert stored == ["regression", "pass"]
    assert [(v.verdict, v.cls) for v in report.verdicts] == [("pass", "pass")]
    assert report.exit_code == 0 and "improv" not in render_text(report)


# A confirm rerun that does not finish: it exits early (a crash: exit 1, whatever code
# the test exited with) or the runner is stopped by SIGTERM (143). The reports read the
# stored chain and said 3 and 2.
FAULTY_LAT_TEST = LAT_TEST.replace('    value = float(', '''    if os.environ["LAT_VALUES"].split()[i] == "exit3":
        os._exit(3)
    if os.environ["LAT_VALUES"].split()[i] == "term":
        import signal, time
        os.kill(os.getppid(), signal.SIGTERM)  # pytest's parent: the runner
        time.sleep(60)
    value = float(''')


@pytest.mark.parametrize(("fault", "rc"), [("exit3", 1), ("term", 143)])
def test_a_confirm_rerun_that_does_not_finish_reads_as_the_runner_exited(
        make_tree, tmp_path, capsys, fault, rc):
    tree = make_tree({"test_lat.py": FAULTY_LAT_TEST})
    _baseline(tree / "h.db")
    session = run(tree, "cpu", "--gate", "enforce",
                  env={"LAT_VALUES": f"1.05 {fault}", "LAT_COUNT": str(tmp_path / "count"),
                       "CI_REGISTER_KILL_GRACE_S": "1"})
    assert session.returncode == rc, session.stdout + session.stderr
    assert (tmp_path / "count").read_text() == "2"  # the first attempt, then the rerun
    with open_history(tree / "h.db", create=False) as h:
        runs, scope = select_runs(h)
        report = build_report(load_report_input(h, runs, scope=scope))
    assert len(report.runs[0].confirm_runs) == 1 and report.exit_code == rc
    # The headline said only "FAILED: 1 gate(s) failed": the rerun never confirmed it.
    status = "crashed" if fault == "exit3" else "interrupted"
    assert f"1 confirm rerun(s) {status}, the trip unconfirmed" in render_text(report)
    assert f"1 confirm rerun(s) {status}" in render_md(report).splitlines()[0]
    assert report_to_json(report)["exit_code"] == rc
    capsys.readouterr()
    assert gate_report(["--history", str(tree / "h.db"), "--root", str(tree), "--no-health"]) == rc


# A confirm rerun that collects nothing (pytest exit 5: every tripped test deselected) is
# a failure, exit 1, on every surface: the runner exited 5 while the reports said 1.
DESELECTING_CONFTEST = '''
import os
from pathlib import Path


def pytest_collection_modifyitems(config, items):
    count = Path(os.environ["LAT_COUNT"])
    i = int(count.read_text()) if count.exists() else 0
    if os.environ["LAT_VALUES"].split()[i] == "none":
        config.hook.pytest_deselected(items=list(items))
        items[:] = []
'''


def test_a_confirm_rerun_that_collects_nothing_exits_1_on_every_surface(
        make_tree, tmp_path, capsys):
    tree = make_tree({"test_lat.py": LAT_TEST, "conftest.py": DESELECTING_CONFTEST})
    _baseline(tree / "h.db")
    # Without pytest's terminal plugin, the runner's "a suite that runs nothing fails"
    # check cannot count what ran: the rerun ends as pytest says, exit 5.
    session = run(tree, "cpu", "--gate", "enforce", "-p", "no:terminal",
                  env={"LAT_VALUES": "1.05 none", "LAT_COUNT": str(tmp_path / "count")})
    assert session.returncode == 1, session.stdout + session.stderr
    assert (tmp_path / "count").read_text() == "1"  # the rerun ran no test
    assert "confirm attempt 1 collected none of the 1 tripped test(s)" in session.stderr, session.stdout
    with open_history(tree / "h.db", create=False) as h:
        runs, scope = select_runs(h)
        report = build_report(load_report_input(h, runs, scope=scope))
    assert len(report.runs[0].confirm_runs) == 1 and report.exit_code == 1
    assert report_to_json(report)["exit_code"] == 1
    assert render_md(report).startswith("## ❌")
    capsys.readouterr()
    assert gate_report(["--history", str(tree / "h.db"), "--root", str(tree), "--no-health"]) == 1


@pytest.mark.parametrize(("values", "rc"), [("1.03 0.97", 0), ("1.025 1.04", 1)])
def test_an_adopter_tree_with_its_history_outside_reads_as_its_session(
        catalog_tree, tmp_path, capsys, values, rc):
    # An adopting repository: no pytest ini at its root, the history outside the tree (a
    # CI cache). The first attempt's pytest ran before the history file existed; the
    # rerun's found it, and pytest took the history's folder into its rootdir (option
    # values count as paths there): the rerun's nodeids gained the tree's folder name,
    # its verdict missed the first attempt's, and gate-report read FAILED (exit 1) where
    # the session cleared the trip and exited 0.
    import os  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    from test_runner import REPO  # noqa: PLC0415

    # A declared bound trips the first attempt on an empty history (a fresh CI cache).
    bounded = LAT_TEST.replace('register_cpu_ci(est_time=5, suite="cpu")',
                               'register_cpu_ci(est_time=5, suite="cpu")\n'
                               'from ci_register import register_ci_gate\n'
                               'register_ci_gate(metric_key="lat", max_value=1.02)')
    assert bounded != LAT_TEST
    tree = catalog_tree(SUITES, {"suites/test_lat.py": textwrap.dedent(bounded)},
                        root=tmp_path / "tree")
    assert not any((tree / f).exists() for f in ("pytest.ini", "pyproject.toml", "tox.ini",
                                                  "setup.cfg", "setup.py"))
    db = tmp_path / "ci-cache" / "h.db"
    db.parent.mkdir()
    session = subprocess.run(
        [sys.executable, "-m", "ci_register", "run", "cpu", "--gate", "enforce", "--confirm", "1",
         "--history", str(db)], cwd=tree, capture_output=True, text=True, timeout=600,
        env=dict(os.environ, PYTHONPATH=str(REPO), LAT_VALUES=values,
                 LAT_COUNT=str(tmp_path / "count")))
    assert session.returncode == rc, session.stdout + session.stderr
    assert (tmp_path / "count").read_text() == "2"  # the first attempt and one rerun
    with open_history(db, create=False) as h:
        nodeids = {r[0] for r in h.backend.db.execute("SELECT nodeid FROM tests")}
        runs, scope = select_runs(h)
        report = build_report(load_report_input(h, runs, scope=scope))
    assert nodeids == {"suites/test_lat.py::test_lat"}  # every attempt's, and the baseline's
    capsys.readouterr()
    assert gate_report(["--history", str(db), "--root", str(tree), "--no-health"]) == rc
    out = capsys.readouterr().out
    # One metric held at its rerun is one failed gate, not two (one per attempt).
    assert out.splitlines()[0].split(": ", 1)[1].startswith(
        "FAILED: 1 gate(s) failed" if rc else "passed"), out
    assert report.exit_code == rc
