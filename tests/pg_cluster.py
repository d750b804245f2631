"""A throwaway PostgreSQL cluster for the tests: initdb into a temp dir, pg_ctl start on a
free loopback port (its unix socket in the same dir), stop and delete at the end.

Uses Debian's ``postgresql`` package (``/usr/lib/postgresql/N/bin``, or initdb on PATH).
initdb refuses to run as root, so as root the server runs as ``nobody`` (setpriv).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Cluster", "find_bin", "start_cluster"]

USER = "gates"


def find_bin() -> Path | None:
    """The folder holding initdb and pg_ctl, newest PostgreSQL first, or None."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(os.path.realpath(on_path)).parent
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    bindir: Path
    root: Path
    port: int
    as_user: list[str]

    @property
    def url(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/postgres"

    def schema_url(self, schema: str) -> str:
        """A URL whose tables live in ``schema`` (its own history)."""
        return f"{self.url}?options=-csearch_path%3D{schema}"

    def stop(self) -> None:
        subprocess.run([*self.as_user, str(self.bindir / "pg_ctl"), "-D", str(self.root / "data"),
                        "-m", "immediate", "-w", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(self.root, ignore_errors=True)


def start_cluster() -> Cluster:
    """Start a cluster; raise RuntimeError naming the step that failed."""
    bindir = find_bin()
    if bindir is None:
        raise RuntimeError("PostgreSQL is not installed (no initdb); apt-get install postgresql")
    as_user: list[str] = []
    # As root the server runs as nobody, who must reach its folder: /tmp, not a private TMPDIR.
    base = "/tmp" if os.geteuid() == 0 and os.path.isdir("/tmp") else None
    root = Path(tempfile.mkdtemp(prefix="gates-pg-", dir=base))
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            raise RuntimeError("running as root and no setpriv to drop to nobody for initdb")
        as_user = [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                   "--reset-env"]
        os.chown(root, 65534, 65534)
    port = _free_port()
    steps = [
        [str(bindir / "initdb"), "-D", str(root / "data"), "-U", USER, "-A", "trust",
         "-E", "UTF8", "--locale=C", "--no-sync"],
        [str(bindir / "pg_ctl"), "-D", str(root / "data"), "-l", str(root / "log"), "-w",
         "-t", "60", "-o", f"-p {port} -k {root} -c listen_addresses=127.0.0.1 "
         "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
         "-c max_connections=200", "start"],
    ]
    for cmd in steps:
        done = subprocess.run([*as_user, *cmd], capture_output=True, text=True, timeout=120,
                              cwd=root)
        if done.returncode:
            log = (root / "log").read_text() if (root / "log").exists() else ""
            shutil.rmtree(root, ignore_errors=True)
            raise RuntimeError(f"{Path(cmd[0]).name} failed: {done.stderr.strip()} {log[-500:]}")
    return Cluster(bindir, root, port, as_user)
