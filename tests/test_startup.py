"""Start-up: `gate-report --help` loads no numerical or database library, and the
history loads sqlite-utils without the pandas it would import (seconds on a GPU image)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _python(code: str, pythonpath: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": pythonpath, "PATH": "/usr/bin:/bin"})


def test_help_imports_no_numpy_scipy_or_sqlite_utils():
    r = _python(
        "import json, sys\n"
        "from gates.commands.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = ('numpy', 'scipy', 'sqlite_utils', 'tabulate', 'pandas', 'yaml', 'requests')\n"
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
        "import gates.store.history\n"
        "import sqlite_utils.db\n"
        "print(sqlite_utils.db.pd is None, 'pandas' in sys.modules)\n"
        "import pandas\n"  # still importable for anyone who wants it
        "print(pandas.__name__)\n",
        f"{tmp_path / 'site'}:{REPO}")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "False", "pandas"]
    assert marker.read_text() == "x"  # once: by the explicit import, not by sqlite-utils
