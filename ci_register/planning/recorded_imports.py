"""The import maps a history holds (``python -m gates.store.recorded_imports``), for selection.

``ci_register`` never imports ``gates``: the maps come from a subprocess, like the
durations (:mod:`ci_register.planning.durations`). A missing history means "nothing recorded
yet"; one that cannot be read gives a reason, and selection uses the static graph.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ci_register.planning.durations import history_path
from ci_register.planning.history_value import history_argv

__all__ = ["recorded_maps"]

_READ_TIMEOUT_S = 120.0
_REPO = Path(__file__).resolve().parents[2]  # where gates sits beside ci_register


def recorded_maps(history: str | os.PathLike[str] | None, root: Path | None = None) -> tuple[list[dict], str | None]:
    """(rows, problem): the stored maps, or [] and why none could be read (None: no history)."""
    path = history_path(history, root)
    if not path.exists():
        return [], None
    history_args, history_env = history_argv("--history", str(path))
    env = dict(os.environ, **history_env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_REPO), env.get("PYTHONPATH")) if p)
    try:
        done = subprocess.run([sys.executable, "-m", "gates.store.recorded_imports", *history_args],
                              capture_output=True, text=True, env=env, timeout=_READ_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return [], f"{path}: cannot read import maps ({exc})"
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        return [], lines[-1] if lines else f"{path}: cannot read import maps (exit {done.returncode})"
    try:
        rows = json.loads(done.stdout).get("maps")
    except (ValueError, AttributeError):
        rows = None
    if not isinstance(rows, list):
        return [], f"{path}: cannot read import maps (an unexpected reply)"
    return [r for r in rows if isinstance(r, dict)], None
