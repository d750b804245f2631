"""The runner map: which project files the processes around a suite's tests load.

Test selection (``ci_register.planning.select``) knows, per registered file, what its
tests load (the static graph and the recorded import maps). The code that *runs* them is
apart: the nox session (``ci_register.running.nox_sessions``, imported by the noxfile),
the runner process (``python -m ci_register run``: collect, plan, partition, timeouts,
pytest's command line) and the plugins pytest loads before it collects (this package's
``ci_register.running.pytest_plugin``, the gates recorder). A change to any file those
processes load can change any test's outcome; a change to the rest of ``ci_register``
(the matrix, selection, the schedule, the SGLang catalog writer) cannot. What they load
is recorded at run time, never guessed from the source: ``cli.py`` imports every
subcommand's module lazily, so a static graph would hold all of them.

How it is recorded:

- the nox session passes the project files loaded in nox's process (the noxfile and what
  it imported) to the runner in ``CI_REGISTER_SESSION_FILES`` (JSON list);
- the runner adds the files loaded in its own process and writes the union into the plan
  (``runner_files``) before it starts pytest (each confirm rerun writes it again);
- the gates recorder (``gates.record.plugin``) stores the plan's list with the files
  loaded in pytest before collection (plugins; ``conftest.py`` files are left out: they
  are scoped to their folders and the per-file maps hold them) as the import map of the
  path ``<runner>`` (:data:`RUNNER_MAP_PATH`), newest per suite, like a test file's map.

Stdlib only (the selection benchmark loads this file by path into old trees).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["RUNNER_MAP_PATH", "SESSION_FILES_ENV", "loaded_files", "runner_files"]

# The map's "file" in the import_maps table: no test file is named so. gates.record.import_map
# holds the same literal (gates never imports ci_register's running modules at record time).
RUNNER_MAP_PATH = "<runner>"
SESSION_FILES_ENV = "CI_REGISTER_SESSION_FILES"
_SKIP_PARTS = {"site-packages", "dist-packages", "__pycache__", "node_modules"}
_MAX_FILES = 20_000  # a bound on what an environment variable may hand over


def loaded_files(root: Path, modules: Mapping[str, object] | None = None) -> list[str]:
    """Project files (``*.py`` under ``root``, outside virtual environments and hidden
    folders, no ``conftest.py``) of the modules loaded in this process, sorted."""
    root = Path(root).resolve()
    out: set[str] = set()
    for mod in list((sys.modules if modules is None else modules).values()):
        f = getattr(mod, "__file__", None)
        if not isinstance(f, str) or not f.endswith(".py"):
            continue
        try:
            rel = Path(f).resolve().relative_to(root)
        except (ValueError, OSError):
            continue
        if rel.name == "conftest.py" or any(p in _SKIP_PARTS or p.startswith(".") for p in rel.parts[:-1]):
            continue
        out.add(rel.as_posix())
    return sorted(out)


def _from_env(env: Mapping[str, str]) -> list[str]:
    raw = env.get(SESSION_FILES_ENV, "")
    if not raw:
        return []
    try:
        got = json.loads(raw)
    except ValueError:
        return []  # not ours to fail a run over; the runner's own files are still recorded
    if not isinstance(got, list):
        return []
    return [f for f in got[:_MAX_FILES] if isinstance(f, str) and f and not f.startswith(("/", "<"))]


def runner_files(root: Path, env: Mapping[str, str] | None = None, extra: Iterable[str] = ()) -> list[str]:
    """What the runner writes into the plan: its process's project files, the nox
    session's (from ``CI_REGISTER_SESSION_FILES``) and ``extra``."""
    env = os.environ if env is None else env
    return sorted({*loaded_files(root), *_from_env(env), *extra})
