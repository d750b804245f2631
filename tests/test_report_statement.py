"""One statement a verdict row, on every surface, through real confirm chains (issue 52).

A suite session (``python -m ci_register run``) trips, reruns the tripped test and
stores the chain in its history; the console's verdict tables, ``gate-report``'s text,
Markdown, HTML and JSON and the GitHub annotations then state each row once: the test
that decided, its p against the level that decided, its change and interval there.
The row's change column is its own new value against its own baseline. The figures
are checked against the session's own outcome and against the deciding test computed
here from the runs themselves (the quantile test: an exact rank test of the least bad
of the last 7 runs, ``robust.quantile_p``).
"""

from __future__ import annotations

import html
import json
import math
import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest
from test_runner import LAT_TEST, SUITES, _baseline, run

from gates.commands.cli import main as gate_report
from gates.report import notify
from gates.report.build import build_report
from gates.report.query import load_report_input, select_runs
from gates.report.render_md import md_text
from gates.store.open import open_history

REPO = Path(__file__).resolve().parents[1]
NODE = "suites/test_lat.py::test_lat"

# Two metrics of one test: lat (lower is better) and tp (higher is better).
TWO_METRICS = '''
import os
from pathlib import Path

from ci_register import register_cpu_ci
register_cpu_ci(est_time=5, suite="cpu")


def test_lat(metrics):
    count = Path(os.environ["LAT_COUNT"])
    i = int(count.read_text()) if count.exists() else 0
    count.write_text(str(i + 1))
    metrics.record("lat", [float(os.environ["LAT_VALUES"].split()[i])] * 5, unit="ms",
                   better="lower")
    metrics.record("tp", [float(os.environ["TP_VALUE"])] * 5, unit="tok/s", better="higher")
'''


def _two_mode_history(db: Path) -> tuple[list[float], list[float]]:
    """40 runs of a two-mode lat (a third of them 10% slow), then 6 runs of a +4% change
    the gate never judged; tp flat at 1000, its last 2 runs 6% up. Returns the lat and
    tp run values, oldest first (5 equal samples a run: each run's summary is its value)."""
    from gates.store.history import RunRecord, TestResult
    from gates.store.metrics import validate_metric
    from gates.store.provenance import Provenance, detect_hardware, fingerprint_key

    rng = np.random.default_rng(7)
    lat = 1.0 + rng.normal(0, 0.003, 40)
    lat[rng.choice(40, 12, replace=False)] += 0.10
    lat = [*lat.tolist(), *(1.04 + rng.normal(0, 0.003, 6)).tolist()]
    tp = [*(1000 * (1 + rng.normal(0, 0.003, 44))).tolist(), 1060.0, 1061.0]
    fp = fingerprint_key(detect_hardware())
    with open_history(db) as h:
        for i, (x, y) in enumerate(zip(lat, tp, strict=True)):
            p = Provenance(run_id=f"base{i:02d}", suite="cpu", commit=f"{i:07d}", branch="main",
                           started_at=f"2026-01-01T00:00:{i:02d}+00:00", fingerprint=fp)
            h.run_writes.start_run(p)
            ms = [(NODE, validate_metric("lat", [x] * 5, unit="ms", better="lower")),
                  (NODE, validate_metric("tp", [y] * 5, unit="tok/s", better="higher"))]
            h.run_writes.record_run(RunRecord(
                p, [TestResult(NODE, "suites/test_lat.py", "passed", 1.0)], ms, None, 0))
    return lat, tp


def _quantile(runs: list[float], value: float, alpha: float) -> tuple[float, float, float]:
    """The 7-run quantile test of ``value`` after ``runs`` (lower is better), computed
    from the runs: (its p, unweighted; the least bad run's change; the least change it
    still finds at one-sided ``alpha``, by inverting it). Its baseline is the 40 runs
    before the last 10 (``GateParams.window``, the longest evidence window)."""
    full = [*runs, value]
    base = np.asarray(full[max(0, len(full) - 50): len(full) - 10])
    c = float(np.median(base))
    least = min(full[-7:])
    m = int(np.sum(base - c >= least - c))
    n = base.size
    p = math.comb(m + 7, 7) / math.comb(n + 7, 7)
    # Shifted back by d, the test still rejects while at most m* runs lie at or beyond
    # the least one (and it is beyond the centre): d < least - max(that run, centre).
    m_star = max(i for i in range(n + 1) if math.comb(i + 7, 7) <= alpha * math.comb(n + 7, 7))
    at = sorted(base, reverse=True)[m_star]
    return p, (least - c) / abs(c), (least - max(at, c)) / abs(c)


def _interval(row) -> str:
    """A stored row's interval as a row states it: "[+0.9, +inf] 97%" (one end None: one-
    sided), "[no interval]" with none (a rank rule: its p is the statement)."""
    lo, hi, conf = row["ci_low"], row["ci_high"], row["ci_conf"]
    if lo is None and hi is None:
        return "[unbounded]" if conf is not None else "[no interval]"
    pct = 100 * conf
    digits = next((d for d in range(4) if float(f"{pct:.{d}f}") < 100), 4)
    return (f"[{'-inf' if lo is None else f'{100 * lo:+.1f}'}, "
            f"{'+inf' if hi is None else f'{100 * hi:+.1f}'}] {pct:.{digits}f}%")


def _p(x: float) -> str:
    return f"{x:.2g}" if x >= 0.001 else f"{x:.1e}"


def _surfaces(tree: Path, tmp_path: Path, monkeypatch, capsys) -> dict[str, str]:
    """gate-report's text, Markdown, HTML and JSON of the newest run, and its GitHub
    annotations (stderr on GitHub)."""
    out = {}
    for fmt in ("text", "md", "html", "json"):
        code = gate_report(["--history", str(tree / "h.db"), "--root", str(tree),
                            "--no-health", "--format", fmt, "--out", str(tmp_path / f"r.{fmt}")])
        out[f"rc-{fmt}"] = str(code)
        out[fmt] = (tmp_path / f"r.{fmt}").read_text()
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    capsys.readouterr()
    gate_report(["--history", str(tree / "h.db"), "--root", str(tree), "--no-health"])
    out["annotations"] = capsys.readouterr().err
    monkeypatch.delenv("GITHUB_ACTIONS")
    return out


def _rows(text: str) -> list[str]:
    """The lines of ``text``, a text table's folded rows joined back (a row wider than the
    terminal goes on over indented lines)."""
    lines: list[str] = []
    for ln in text.splitlines():
        if ln.startswith("    ") and lines:
            lines[-1] += " " + ln.strip()
        else:
            lines.append(ln)
    return lines


def _line(text: str, *needles: str) -> str:
    """The (joined) line of ``text`` holding every needle."""
    hits = [ln for ln in _rows(text) if all(n in ln for n in needles)]
    assert len(hits) == 1, (needles, text)
    return hits[0]


def _section(text: str, title: str) -> list[str]:
    """The rows of a text report's table under ``title`` (after its dashes)."""
    lines = _rows(text.split(f"\n{title}\n", 1)[1].split("\n\n", 1)[0])
    return lines[next(i for i, ln in enumerate(lines) if ln.startswith("---")) + 1:]


@pytest.fixture
def make_tree(catalog_tree):
    return lambda files: catalog_tree(SUITES, {f"suites/{rel}": textwrap.dedent(text)
                                               for rel, text in files.items()})


def test_a_quantile_trip_and_its_confirm_state_the_quantile_test_on_every_surface(
        make_tree, tmp_path, capsys, monkeypatch):
    tree = make_tree({"test_lat.py": TWO_METRICS})
    (tree / "CODEOWNERS").write_text("suites/ @perf-team\n")
    lat, _ = _two_mode_history(tree / "h.db")
    first, reruns = 1.040, [1.041, 1.039, 1.042, 1.040]
    session = run(tree, "cpu", "--gate", "enforce", env={
        "LAT_VALUES": " ".join(map(str, [first, *reruns])), "TP_VALUE": "1060",
        "LAT_COUNT": str(tmp_path / "n")})
    assert session.returncode == 1, session.stdout + session.stderr
    attempts = int((tmp_path / "n").read_text())
    assert attempts >= 2  # the first attempt and its confirm rerun(s)

    with open_history(tree / "h.db", create=False) as h:
        of = dict(h.backend.db.execute(
            "SELECT confirm_of, run_id FROM runs WHERE confirm_of IS NOT NULL").fetchall())
        [a] = [r["run_id"] for r in h.report_reads.runs("cpu", limit=200)
               if r["confirm_of"] is None and not r["run_id"].startswith("base")]
        chain = [a]
        while chain[-1] in of:
            chain.append(of[chain[-1]])
        [stored1] = [r for r in h.report_reads.verdicts(a) if r["key"] == "lat"]
        [stored] = [r for r in h.report_reads.verdicts(chain[-1]) if r["key"] == "lat"]  # it decided
    assert len(chain) == attempts
    d1, d = stored1["detail"], stored["detail"]

    # The first attempt: its quantile test, computed from the runs (its share of the
    # level: 0.25; held at 0.02).
    p1, change1, _ = _quantile(lat, first, 0.02)
    p1 /= 0.25
    assert d1["method"] == "robust-t/quantile-7" and d1["level"] == 0.02
    assert stored1["p_value"] == pytest.approx(p1) and stored1["rel_change"] == pytest.approx(change1)
    # The row that decided the chain: what held it, at the level that held it. Under this
    # commit's confirm rule, the rerun's own quantile-7 test, computed from the runs (the
    # first attempt out of them; its family p x 1.5, held at 0.05), with its interval
    # by inversion; under any rule, its p at or below the level it states.
    assert stored["verdict"] == "regression" and stored["p_value"] <= d["level"]
    if d["method"] == "rerun/quantile-7":
        alpha = 0.05 * 0.25 / 0.375
        p2, change2, bound2 = _quantile(lat, reruns[0], alpha)
        assert stored["p_value"] == pytest.approx(p2 * 1.5) and d["level"] == 0.05
        assert stored["rel_change"] == pytest.approx(change2)
        assert stored["ci_low"] == pytest.approx(bound2) and bound2 > 0
        assert stored["ci_high"] is None and stored["ci_conf"] == pytest.approx(1 - alpha)
    baseline, new = stored["baseline"], stored["new"]
    own = f"{(new - baseline) / abs(baseline) * 100:+.1f}%"
    assert own != f"{stored['rel_change'] * 100:+.1f}%"  # the row's own change is not the test's
    test = d["method"].rpartition("/")[2]
    statement = f"{test} {stored['rel_change'] * 100:+.1f}% {_interval(stored)}"
    pq = f"p={_p(stored['p_value'])} <= {_p(d['level'])}"

    # The console: each attempt's verdict table states its own deciding test.
    tables = session.stdout.split("gate: run ")[1:]
    assert len(tables) == attempts, session.stdout
    row1 = _line(tables[0], "lat ", "regression")
    assert f"quantile-7 {change1 * 100:+.1f}%" in row1 and f"p={_p(p1)}" in row1
    assert "<= 0.02" in row1 and "+inf]" in row1  # its one-sided interval
    row2 = _line(tables[-1], "lat ", "regression")
    assert statement in row2 and pq in row2 and own in row2, row2
    assert f"p={_p(p1)}" not in row2

    s = _surfaces(tree, tmp_path, monkeypatch, capsys)
    assert {s[f"rc-{f}"] for f in ("text", "md", "html", "json")} == {"1"}
    text_row = _line(s["text"], "FAIL regression (confirmed)", " lat ")
    md_row = _line(s["md"], "FAIL regression (confirmed)", "`lat`")
    [html_row] = [r for r in s["html"].split("<tr") if "<code>lat</code>" in r
                  and "confirmed" in r]
    ann = _line(s["annotations"], "::error", "lat")
    for name, row, esc in (("text", text_row, str), ("md", md_row, md_text),
                           ("html", html_row, lambda x: html.escape(x, quote=False)),
                           ("annotation", ann, lambda x: x.replace("%", "%25"))):
        # one statement: its own change, then the deciding test's change, p and level;
        # the first attempt's p is not the row's
        if name == "html":  # the level on a second line of the p / q cell
            row = row.replace('<span class="sub">', " ")
        assert esc(own) in row and esc(statement) in row and esc(pq) in row, (name, row)
        assert f"p={_p(p1)}" not in row and "p=1 " not in row, (name, row)
    [j] = [v for v in json.loads(s["json"])["verdicts"] if v["key"] == "lat"]
    assert (j["test"], j["method"], j["level"]) == (test, d["method"], d["level"])
    assert j["p_value"] == pytest.approx(stored["p_value"]) and j["q_value"] is None
    assert j["rel_change"] == pytest.approx(stored["rel_change"])
    assert j["own_change"] == pytest.approx((new - baseline) / abs(baseline))
    assert (j["ci_low"], j["ci_high"], j["ci_conf"]) == (
        stored["ci_low"], stored["ci_high"], stored["ci_conf"])

    # The webhook's one figure is the row's own change too.
    with open_history(tree / "h.db", create=False) as h:
        runs, scope = select_runs(h)
        report = build_report(load_report_input(h, runs, scope=scope))
    [reg] = notify.regressions_on(report, report.runs[0].branch, lambda v: None)
    assert reg.key == "lat" and reg.rel_change == pytest.approx((new - baseline) / abs(baseline))
    assert f"`lat` {own}" in notify.webhook_payload([reg], report.title)["text"]

    # The improvement states its own evidence (the good side's p, at level x confirm
    # level), never the bad side's p=1 q=1.
    tp_row = _line(s["text"], "better improvement", " tp ")
    assert "huber-3" in tp_row and "<= 0.001" in tp_row and "p=1 " not in tp_row, tp_row
    [jt] = [v for v in json.loads(s["json"])["verdicts"] if v["key"] == "tp"]
    assert jt["p_value"] < 0.001 and jt["level"] == pytest.approx(0.001)

    # Owners and next steps: the confirmed regression first; where metrics changed: one
    # row a metric, and lat's change rises as its row does, with no change-point p of 1.
    steps = _section(s["text"], "Owners and next steps")
    assert [ln.split()[0] for ln in steps] == ["lat", "tp"], steps
    where = _section(s["text"], "Where metrics changed")
    assert sorted(ln.split()[0] for ln in where) == ["lat", "tp"], where
    lat_where = next(ln.split() for ln in where if ln.startswith("lat "))
    assert lat_where[5].startswith("+") and lat_where[6] != "1", lat_where

    # The next run of the same code: still red, and its row says that and only that.
    (tmp_path / "n").unlink()
    again = run(tree, "cpu", "--gate", "enforce", env={
        "LAT_VALUES": "1.042", "TP_VALUE": "1060", "LAT_COUNT": str(tmp_path / "n")})
    assert again.returncode == 1, again.stdout + again.stderr
    s = _surfaces(tree, tmp_path, monkeypatch, capsys)
    [j] = [v for v in json.loads(s["json"])["verdicts"] if v["key"] == "lat"]
    assert j["method"] == "still-red" and j["p_value"] is None and j["level"] is None
    assert j["rel_change"] == pytest.approx(j["own_change"])
    row = _line(s["text"], "FAIL regression", " lat ")
    assert f"{j['own_change'] * 100:+.1f}%" in row and f"still-red since {stored1['run_id'][:12]}" in row
    assert "quantile" not in row, row

    # Both sessions in one range report: one row a metric where metrics changed, and the
    # held regression first in next steps.
    for fmt in ("text", "json"):
        assert gate_report(["--history", str(tree / "h.db"), "--root", str(tree), "--since",
                            "3650d", "--no-health", "--format", fmt,
                            "--out", str(tmp_path / f"range.{fmt}")]) == 1
    text = (tmp_path / "range.text").read_text()
    assert len([v for v in json.loads((tmp_path / "range.json").read_text())["verdicts"]
                if v["key"] == "lat" and v["verdict"] == "regression"]) == 2
    where = [ln.split()[0] for ln in _section(text, "Where metrics changed")]
    assert sorted(where) == ["lat", "tp"], where
    assert [ln.split()[0] for ln in _section(text, "Owners and next steps")] == ["lat", "tp"]


def test_a_change_the_gate_placed_at_the_run_reads_as_the_row_in_where_metrics_changed(
        make_tree, tmp_path, capsys, monkeypatch):
    # An iid baseline, a first attempt at +2.5% and a rerun at +4% that holds: no split
    # in the history before the run, so the gate places the change at the run itself.
    # "Where metrics changed" said the first attempt's value beside the rerun's row.
    tree = make_tree({"test_lat.py": LAT_TEST})
    _baseline(tree / "h.db", n=30)
    session = run(tree, "cpu", "--gate", "enforce",
                  env={"LAT_VALUES": "1.025 1.04", "LAT_COUNT": str(tmp_path / "n")})
    assert session.returncode == 1, session.stdout + session.stderr
    s = _surfaces(tree, tmp_path, monkeypatch, capsys)
    [j] = [v for v in json.loads(s["json"])["verdicts"] if v["key"] == "lat"]
    assert j["verdict"] == "regression" and j["new"] == pytest.approx(1.04)
    assert j["change_point"]["runs_ago"] == 0
    assert (j["change"]["before"], j["change"]["after"]) == pytest.approx((j["baseline"], j["new"]))
    [line] = _section(s["text"], "Where metrics changed")
    assert f"{j['baseline']:.4g} -> {j['new']:.4g}" in line, line
    assert f"{j['own_change'] * 100:+.1f}%" in line and " 1 " not in line, line


def test_improvements_stored_with_the_bad_sides_p_do_not_print_it(tmp_path, capsys):
    # The committed history holds improvements stored before an improvement kept its
    # own p: p=1 q=1 (the bad side's). A report states their interval, not that p.
    db = tmp_path / "history.db"
    shutil.copy(REPO / "history.db", db)
    with open_history(db, create=False) as h:
        n = h.backend.db.execute("SELECT count(*) FROM verdicts WHERE verdict = "
                                 "'improvement' AND p_value = 1").fetchone()[0]
    assert n > 0
    for fmt in ("text", "json"):
        gate_report(["--history", str(db), "--since", "3650d", "--all", "--no-health",
                     "--format", fmt, "--out", str(tmp_path / f"r.{fmt}")])
    text = (tmp_path / "r.text").read_text()
    improved = [ln for ln in _rows(text) if "better improvement" in ln]
    assert improved and not any("p=1 q=1" in ln for ln in improved), improved[:3]
    rows = [v for v in json.loads((tmp_path / "r.json").read_text())["verdicts"]
            if v["verdict"] == "improvement"]
    assert rows and all(v["p_value"] is None or v["p_value"] < 0.5 for v in rows)


def test_a_machine_model_new_to_its_suite_is_named_on_the_console_and_every_report(
        make_tree, tmp_path, capsys, monkeypatch):
    # 12 runs on another model (an H200), none on this machine's: the session is the
    # first run of a new model, insufficient-history, exit 0; every surface says so.
    from gates.store.history import RunRecord, TestResult
    from gates.store.metrics import validate_metric
    from gates.store.provenance import Provenance, detect_hardware, fingerprint_key

    tree = make_tree({"test_lat.py": LAT_TEST})
    with open_history(tree / "h.db") as h:
        for i in range(12):
            p = Provenance(run_id=f"base{i:02d}", suite="cpu", commit=f"{i:07d}", branch="main",
                           started_at=f"2026-01-01T00:00:{i:02d}+00:00",
                           fingerprint="nvidia-h200-x1-sm90")
            h.run_writes.start_run(p)
            h.run_writes.record_run(RunRecord(
                p, [TestResult(NODE, "suites/test_lat.py", "passed", 1.0)],
                [(NODE, validate_metric("lat", [1.0] * 5, unit="ms", better="lower"))], None, 0))
    session = run(tree, "cpu", "--gate", "enforce",
                  env={"LAT_VALUES": "1.0", "LAT_COUNT": str(tmp_path / "n")})
    assert session.returncode == 0, session.stdout + session.stderr
    fp = fingerprint_key(detect_hardware())
    said = (f"new machine model {fp} in cpu: run 1 of it (the gate judges it from its run 6); "
            "runs set aside: 12 on nvidia-h200-x1-sm90")
    assert f"note: {said}" in session.stdout, session.stdout
    s = _surfaces(tree, tmp_path, monkeypatch, capsys)
    joined = {name: " ".join(s[name].split()) for name in ("text", "md", "html")}
    assert said in joined["text"].split(" Runs ")[0]  # the headline, before the runs
    assert md_text(said) in joined["md"].splitlines()[0]
    assert html.escape(said, quote=False) in joined["html"].split("</h1>")[0]
    assert json.loads(s["json"])["runs"][0]["new_model"] == said
