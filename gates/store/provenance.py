"""Run provenance: who ran what, where, on which hardware.

The hardware a run records, its fingerprint and its machine key come from
`ci_register.registered.machine` (one detection for the suite check, the planner and the
record; re-exported here). This module adds what is only a run's: commit and
branch (`git_info`, `ci_from_env`), ids and times. Every probe is best effort:
a missing tool yields missing fields, never an exception.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import socket
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ci_register.registered.machine import (
    detect_hardware,
    fingerprint_key,
    host_key,
    parse_nvidia_smi,
    run_probe,
    torch_probe,
)

__all__ = [
    "Provenance",
    "ci_from_env",
    "collect_provenance",
    "detect_hardware",
    "fingerprint_key",
    "git_info",
    "host_key",
    "new_run_id",
    "parse_nvidia_smi",
    "torch_probe",
    "untrusted_reason",
    "utc_now",
]

_PROBE_TIMEOUT_S = 10.0


def untrusted_reason(hardware: Mapping[str, Any] | None) -> str | None:
    """Why a run on ``hardware`` must never be a baseline, or None: hardware that came
    from a fake source (``CI_REGISTER_FAKE_HARDWARE``) names a machine the run never
    ran on, so its values say nothing about that machine."""
    if (hardware or {}).get("source") == "fake":
        return ("hardware faked (CI_REGISTER_FAKE_HARDWARE): its values are not the "
                "named machine's; never a baseline")
    return None


def utc_now() -> str:
    """Current UTC time as ISO 8601 with microseconds (sorts as text)."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="microseconds")


def new_run_id() -> str:
    return uuid.uuid4().hex


@dataclass
class Provenance:
    """Everything about a run except its results. `fingerprint` is what baselines match on."""

    run_id: str
    suite: str
    shard_index: int = 1
    shard_count: int = 1
    commit: str | None = None
    branch: str | None = None
    ci_url: str | None = None
    started_at: str = field(default_factory=utc_now)
    finished_at: str | None = None
    host: str = field(default_factory=socket.gethostname)
    python: str = field(default_factory=platform.python_version)
    fingerprint: str = "cpu"
    hardware: dict[str, Any] = field(default_factory=dict)
    confirm_of: str | None = None  # run id re-checked by this confirm-on-trip run

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------- pure helpers


def ci_from_env(env: Mapping[str, str]) -> dict[str, str | None]:
    """Commit, branch and run URL from the environment: GATES_* overrides, then GitHub Actions."""
    url = None
    server, repo, run = (env.get(k) for k in
                         ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    if server and repo and run:
        url = f"{server.rstrip('/')}/{repo}/actions/runs/{run}"
        if env.get("GITHUB_RUN_ATTEMPT"):
            url += f"/attempts/{env['GITHUB_RUN_ATTEMPT']}"
    # GATES_COMMIT / GATES_BRANCH / GATES_CI_URL name the revision where there is no
    # git checkout (a copied tree on a GPU host) or another CI system.
    return {
        "commit": env.get("GATES_COMMIT") or env.get("GITHUB_SHA") or None,
        "branch": env.get("GATES_BRANCH") or env.get("GITHUB_HEAD_REF") or env.get("GITHUB_REF_NAME") or None,
        "ci_url": env.get("GATES_CI_URL") or url,
    }


# ---------------------------------------------------------------------- probes


def _run(cmd: list[str], cwd: Path | None = None) -> str | None:
    return run_probe(cmd, cwd=cwd, timeout=_PROBE_TIMEOUT_S)


def git_info(root: Path) -> dict[str, str | None]:
    """Commit and branch of the checkout at `root` (None when git or a repo is missing)."""
    commit = _run(["git", "rev-parse", "HEAD"], cwd=root)
    branch = _run(["git", "rev-parse", "--abbrev-ref", "HEAD"], cwd=root)
    branch = branch.strip() if branch else None
    return {
        "commit": commit.strip() if commit else None,
        "branch": None if branch in (None, "HEAD") else branch,
    }


def collect_provenance(
    suite: str,
    *,
    run_id: str | None = None,
    shard: tuple[int, int] = (1, 1),
    root: Path | None = None,
    env: Mapping[str, str] | None = None,
    hardware: dict[str, Any] | None = None,
) -> Provenance:
    """Provenance for a run starting now. CI variables win over local git."""
    env = os.environ if env is None else env
    ci = ci_from_env(env)
    local = git_info(root or Path.cwd()) if not (ci["commit"] and ci["branch"]) else {}
    hardware = detect_hardware() if hardware is None else hardware
    return Provenance(
        run_id=run_id or new_run_id(),
        suite=suite,
        shard_index=shard[0],
        shard_count=shard[1],
        commit=ci["commit"] or local.get("commit"),
        branch=ci["branch"] or local.get("branch"),
        ci_url=ci["ci_url"],
        fingerprint=fingerprint_key(hardware),
        hardware=hardware,
    )
