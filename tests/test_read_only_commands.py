"""Read-only commands never write the history they read, whatever its schema.

A repository commits a history written by an older gates (here the m002 fixture,
as it is and in WAL mode like the repository's own history.db). Every command
that only reads it (reports in every format, health, trim, accept
--list, check, a dry prune, snapshot, the planner's durations) leaves
``git status`` clean; an older schema is read through a migrated temporary copy.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from gates.commands.cli import main as gate_report
from gates.store.history import SCHEMA_VERSION
from gates.store.open import open_for_reading, open_history

DATA = Path(__file__).parent / "data" / "history-m002.db"
REPO = Path(__file__).resolve().parents[1]


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True).stdout


@pytest.fixture(params=["delete", "wal"])
def committed(request, tmp_path: Path) -> Path:
    """A repository whose committed history.db is at an older schema."""
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy(DATA, root / "history.db")
    if request.param == "wal":
        with sqlite3.connect(root / "history.db") as conn:
            conn.execute("PRAGMA journal_mode = wal")
        conn.close()
    (root / ".gitignore").write_text("/history.db-wal\n/history.db-shm\n")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "old history")
    return root


def _commands(root: Path, tmp: Path) -> list[list[str]]:
    h = ["--history", str(root / "history.db")]
    return [
        [*h, "--no-health"],
        [*h, "--format", "md"],
        [*h, "--format", "json", "--out", str(tmp / "r.json")],
        [*h, "--format", "html", "--out", str(tmp / "r.html")],
        [*h, "--since", "3650d", "--all"],
        ["health", *h, "--suite", "stage-b-1gpu"],
        ["trim", *h, "--suite", "stage-b-1gpu", "--since", "3650d"],
        ["accept", "--list", *h],
        ["check", *h],
        ["prune", *h, "--keep-runs", "1"],
        ["snapshot", *h, "--suite", "stage-b-1gpu", "--out", str(tmp / "snap.db")],
    ]


def test_no_read_only_command_writes_the_committed_history(committed, tmp_path, monkeypatch,
                                                           capsys):
    monkeypatch.chdir(committed)
    before = (committed / "history.db").read_bytes()
    for argv in _commands(committed, tmp_path):
        code = gate_report(argv)
        out, err = capsys.readouterr()
        assert code in (0, 1), (argv, out, err)
        assert git(committed, "status", "--porcelain") == "", argv
        assert (committed / "history.db").read_bytes() == before, argv
    # The planner's read of file durations (the runner's subprocess) too.
    done = subprocess.run([sys.executable, "-m", "gates.store.durations", "--history",
                           str(committed / "history.db"), "--suite", "stage-b-1gpu",
                           "--fingerprint", "latest"], capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert done.returncode == 0 and '"durations"' in done.stdout, done.stdout + done.stderr
    assert "schema is older" not in done.stdout + done.stderr
    assert git(committed, "status", "--porcelain") == ""


def test_check_reads_an_older_history_and_finds_it_sound(committed, capsys):
    assert gate_report(["check", "--history", str(committed / "history.db")]) == 0
    assert "every row is sound" in capsys.readouterr().out


def test_an_older_history_is_read_through_a_copy_that_goes_away(committed):
    with open_for_reading(committed / "history.db") as h:
        assert h.path == committed / "history.db"  # messages name the file, not the copy
        assert h.backend.schema_version == SCHEMA_VERSION and h.merge_reads.run_ids()
        copy = h.folder
        assert copy.exists()
    assert not copy.exists()
    # The first write migrates the file itself.
    with open_history(committed / "history.db") as h:
        assert h.backend.schema_version == SCHEMA_VERSION
    assert git(committed, "status", "--porcelain").strip() == "M history.db"
