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
from ci_register.running.redact import mask_secrets

__all__ = [
    "Provenance",
    "ProvenanceError",
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
    gate_mode: str | None = None  # the session's --gate (enforce, warn, off); None: unknown
    planned_shards: list[int] | None = None  # the suite's shards its plan gave files

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------- pure helpers


class ProvenanceError(ValueError):
    """A CI variable that cannot be a run's commit, branch or URL; the message names it."""


# Longest value each field takes from the environment: a SHA-256 object id is 64 hex
# digits; GitHub refuses branch names past 255 bytes; browsers stop at about 2,000 URL
# characters. A value past these is a mistake (a file's contents in the variable), and
# it would be stored in every run and printed in every report row.
_LIMITS = {"commit": 64, "branch": 255, "ci_url": 2048}


def _from_env(env: Mapping[str, str], field_name: str, *names: str) -> str | None:
    for name in names:
        value = env.get(name)
        if not value:
            continue
        limit = _LIMITS[field_name]
        if len(value) > limit:
            raise ProvenanceError(
                f"{name}: {len(value)} characters; a run's {field_name.replace('_', ' ')} is at "
                f"most {limit}: set {name} to the {_WHAT[field_name]}, or unset it")
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
            raise ProvenanceError(
                f"{name}: holds a control character (a newline?); set {name} to the "
                f"{_WHAT[field_name]} alone, or unset it")
        return value
    return None


_WHAT = {"commit": "commit id", "branch": "branch name", "ci_url": "CI run's URL"}


def ci_from_env(env: Mapping[str, str]) -> dict[str, str | None]:
    """Commit, branch and run URL from the environment: GATES_* overrides, then GitHub Actions.

    Raises `ProvenanceError` for a value no run should store (too long, a control
    character). The URL is stored with any credential in it masked
    (`ci_register.running.redact.mask_secrets`): it reaches reports, PR comments and
    webhooks."""
    url = None
    server, repo, run = (_from_env(env, "ci_url", k) for k in
                         ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    if server and repo and run:
        url = f"{server.rstrip('/')}/{repo}/actions/runs/{run}"
        attempt = _from_env(env, "ci_url", "GITHUB_RUN_ATTEMPT")
        if attempt:
            url += f"/attempts/{attempt}"
    # GATES_COMMIT / GATES_BRANCH / GATES_CI_URL name the revision where there is no
    # git checkout (a copied tree on a GPU host) or another CI system.
    url = _from_env(env, "ci_url", "GATES_CI_URL") or url
    return {
        "commit": _from_env(env, "commit", "GATES_COMMIT", "GITHUB_SHA"),
        "branch": _from_env(env, "branch", "GATES_BRANCH", "GITHUB_HEAD_REF", "GITHUB_REF_NAME"),
        "ci_url": mask_secrets(url) if url else None,
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
