"""Start-up: `gate-report --help` and a one-run report load no numerical or database
library, and the history loads sqlite-utils (to migrate) without the pandas it would
import (seconds on a GPU image)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_HEAVY = ("numpy", "scipy", "sqlite_utils", "tabulate", "pandas", "yaml", "requests")


def _python(code: str, pythonpath: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": pythonpath, "PATH": "/usr/bin:/bin"})


def test_help_imports_no_numpy_scipy_or_sqlite_utils():
    r = _python(
        "import json, sys\n"
        "from gates.commands.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        f"heavy = {_HEAVY!r}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n",
        str(REPO))
    assert r.returncode == 0, r.stderr
    assert "usage: gate-report" in r.stdout
    assert json.loads(r.stdout.splitlines()[-1]) == []


def test_the_history_loads_sqlite_utils_without_pandas(tmp_path):
    fake = tmp_path / "site" / "pandas"
    fake.mkdir(parents=True)
    marker = tmp_path / "pandas-imported"
    (fake / "__init__.py").write_text(f"open({str(marker)!r}, 'a').write('x')\n")
    r = _python(
        "import sys\n"
        "import gates.store.sqlite_lib\n"  # how the store loads it (to migrate a file)
        "import sqlite_utils.db\n"
        "print(sqlite_utils.db.pd is None, 'pandas' in sys.modules)\n"
        "import pandas\n"  # still importable for anyone who wants it
        "print(pandas.__name__)\n",
        f"{tmp_path / 'site'}:{REPO}")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "False", "pandas"]
    assert marker.read_text() == "x"  # once: by the explicit import, not by sqlite-utils


def test_a_one_run_report_imports_no_numpy_or_sqlite_utils(tmp_path):
    # A report of stored verdicts reads them with the standard library: numpy (and its
    # thread pools: 3 s of CPU on a 16-core host) and sqlite-utils load only to gate
    # or to migrate.
    history = tmp_path / "history.db"
    made = _python(
        "import sys\n"
        f"sys.path.insert(0, {str(REPO / 'benchmarks')!r})\n"
        "from fleet_runs import make_run, write_run\n"
        "from gates.store.open import open_history\n"
        f"with open_history({str(history)!r}) as h:\n"
        "    print(write_run(h, make_run(0)))\n", str(REPO))
    assert made.returncode == 0, made.stderr
    run_id = made.stdout.split()[-1]
    r = _python(
        "import json, sys\n"
        "from gates.commands.cli import main\n"
        f"code = main(['--history', {str(history)!r}, '--run', {run_id!r}])\n"
        f"heavy = {_HEAVY!r}\n"
        "print(json.dumps([code, sorted(m for m in sys.modules if m.split('.')[0] in heavy)]))\n",
        str(REPO))
    assert r.returncode == 0, r.stderr
    assert "no gate failed" in r.stdout
    code, heavy = json.loads(r.stdout.splitlines()[-1])
    assert code in (0, 1) and heavy == []


def test_plan_only_commands_run_on_the_standard_library_alone(tmp_path):
    # README: the plan-only commands install nothing and run in nox's own interpreter,
    # which on a fresh machine holds nox and nothing else (no pytest, no numpy).
    # `python -S` leaves site-packages out: only the standard library and this checkout.
    shutil.copy(REPO / "history.db", tmp_path / "history.db")
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "GATES_HISTORY": str(tmp_path / "history.db")}
    root = ["--root", str(REPO)]
    for args in (["-m", "ci_register", "run", "cpu", "--dry-run", "--partition", "1/2", *root],
                 ["-m", "ci_register", "run", "base-b-1gpu", "--dry-run", *root],
                 ["-m", "ci_register", "rerun", "test_flashinfer_decode.py", *root],
                 ["-m", "ci_register", "plan", *root],
                 ["-m", "ci_register", "matrix", "--event", "pull_request", *root],
                 ["-m", "gates.commands.planner", "matrix", "--event", "pull_request", *root]):
        r = subprocess.run([sys.executable, "-S", *args], capture_output=True, text=True, timeout=120,
                           env=env, cwd=tmp_path)
        assert r.returncode == 0 and "Traceback" not in r.stderr, f"{' '.join(args)}:\n{r.stderr[-2000:]}"
