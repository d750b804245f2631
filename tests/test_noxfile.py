"""The nox sessions are generated from the catalog (nox itself lists them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def nox_json(*args: str) -> list[dict]:
    r = subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), *args, "-l", "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_one_session_per_suite_with_description_and_tags():
    from ci_register.registered.catalog import load_catalog

    cat = load_catalog(REPO / "suites" / "catalog.toml")
    # `nox -l --json` lists the selected sessions: select every suite by name.
    sessions = {s["session"]: s for s in nox_json("-s", *cat.suites)}
    for name, suite in cat.suites.items():
        assert name in sessions, name
        assert sessions[name]["description"] == suite.description
        assert set(suite.tags()) <= set(sessions[name]["tags"])


def test_nightly_tag_lists_exactly_the_nightly_suites():
    from ci_register.registered.catalog import load_catalog

    cat = load_catalog(REPO / "suites" / "catalog.toml")
    listed = {s["session"] for s in nox_json("-t", "nightly")}
    assert listed == {n for n, s in cat.suites.items() if s.nightly}


def test_default_sessions_are_cpu_safe():
    r = subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-l"], capture_output=True, text=True, timeout=60)
    selected = [line.split()[1] for line in r.stdout.splitlines() if line.startswith("* ")]
    assert selected and all(not s.startswith(("base-", "stage-", "gb300", "rocm")) for s in selected)


def test_history_browse_names_a_history_that_is_no_path_without_its_password(tmp_path):
    # The session installed datasette first and then printed "no history at host=db
    # password=..." as given: nox prints errors as they are.
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["GATES_HISTORY"] = "host=db password=PWSECRET dbname=gates"
    r = subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s",
                        "history-browse", "--envdir", str(tmp_path / "envs")],
                       capture_output=True, text=True, timeout=240, env=env)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "is a key=value connection string" in out, out[-2000:]
    assert "PWSECRET" not in out and "pip install" not in out


def test_history_browse_opens_what_gate_report_reads(tmp_path, monkeypatch):
    # Outside CI a run records into .gates/local-history.db; the browser opened the
    # committed history.db instead (gate-report reads the local one once it exists).
    sys.path.insert(0, str(REPO))
    try:
        import noxfile
    finally:
        sys.path.pop(0)
    (tmp_path / ".gates").mkdir()
    (tmp_path / ".gates" / "local-history.db").write_text("")
    (tmp_path / "history.db").write_text("")
    monkeypatch.setattr(noxfile, "ROOT", tmp_path)
    monkeypatch.delenv("GATES_HISTORY", raising=False)

    class Opened(Exception):
        pass

    class Session:
        posargs: list[str] = []

        def error(self, msg):
            raise AssertionError(msg)

        def install(self, *args):
            pass

        def run(self, *args, **kwargs):  # the first command names the file it opens
            raise Opened(args[1])

    for ci, want in (("", ".gates/local-history.db"), ("true", "history.db")):
        monkeypatch.setenv("CI", ci)
        with pytest.raises(Opened) as opened:
            noxfile.history_browse(Session())
        assert opened.value.args[0] == str(tmp_path / want)


def test_nox_l_opens_by_saying_what_these_sessions_are():
    # It opened with "The doors: ...", the noxfile docstring's private metaphor.
    r = subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-l"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith("gpu-ci-gates' nox sessions: one per hardware suite"), r.stdout[:300]
