"""Start, health-check and stop an inference server, or attach to a running one.

A server runs in its own process group with its output in a log file; ``stop`` signals
the whole group (engines fork workers) with SIGTERM, then SIGKILL after a grace period.
``Server`` is a context manager, so pass, failure, Ctrl-C and pytest-timeout all pass
through ``stop``; an ``atexit`` hook and a SIGTERM handler cover the interpreter
exiting under it.
"""

from __future__ import annotations

import atexit
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import requests

from ci_register.running.redact import mask_secrets
from serving.deadline import fetch

__all__ = [
    "ENGINE_COMMANDS",
    "ServerConfig",
    "ServerConfigError",
    "ServerStartError",
    "Server",
    "free_port",
    "start_server",
    "attach",
    "vllm_cpu_env",
    "VLLM_CPU_ARGS",
    "vllm_cpu_config",
]

# Command templates per engine; fields: {python} {model} {host} {port} {server_args}.
# vLLM's `vllm serve` entry point fails for the vllm-cpu distribution (its metadata is
# named vllm-cpu), while the module entry point works with the same flags.
ENGINE_COMMANDS: dict[str, str] = {
    "vllm": "{python} -m vllm.entrypoints.openai.api_server --model {model} "
    "--host {host} --port {port} {server_args}",
    "sglang": "{python} -m sglang.launch_server --model-path {model} "
    "--host {host} --port {port} {server_args}",
}
_FIELDS = {
    "engine",
    "model",
    "server_args",
    "env",
    "host",
    "port",
    "command",
    "health_path",
    "startup_timeout_s",
    "stop_timeout_s",
}


class ServerConfigError(ValueError):
    """A server config is malformed; the message names the field."""


class ServerStartError(RuntimeError):
    """The server died or never became healthy; the message ends with its last log lines."""


@dataclass
class ServerConfig:
    """How to launch one server. ``engine="command"`` takes ``command`` as the template."""

    engine: str
    model: str = ""
    server_args: Sequence[str] | str = ()
    env: Mapping[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int | None = None  # None: pick a free one
    command: str | None = None
    health_path: str = "/health"
    startup_timeout_s: float = 300.0
    stop_timeout_s: float = 15.0

    def __post_init__(self) -> None:
        if self.engine not in (*ENGINE_COMMANDS, "command"):
            known = ", ".join([*ENGINE_COMMANDS, "command"])
            raise ServerConfigError(f"engine: unknown engine {self.engine!r}; known: {known}")
        if self.engine == "command" and not self.command:
            raise ServerConfigError("command: engine 'command' needs a command template")
        if self.engine != "command" and not self.model:
            raise ServerConfigError(f"model: engine {self.engine!r} needs a model")
        if self.startup_timeout_s <= 0:
            raise ServerConfigError("startup_timeout_s: must be positive")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str = "<config>") -> ServerConfig:
        unknown = sorted(set(data) - _FIELDS)
        if unknown:
            raise ServerConfigError(f"{source}: unknown field {unknown[0]!r}")
        try:
            return cls(**dict(data))
        except ServerConfigError as exc:
            raise ServerConfigError(f"{source}: {exc}") from None
        except TypeError as exc:
            raise ServerConfigError(f"{source}: {exc}") from None

    def args(self) -> list[str]:
        if isinstance(self.server_args, str):
            return shlex.split(self.server_args)
        return [str(a) for a in self.server_args]

    def argv(self, port: int) -> list[str]:
        """The launch command for ``port``, split into arguments (no shell)."""
        template = self.command if self.engine == "command" else ENGINE_COMMANDS[self.engine]
        assert template is not None
        out: list[str] = []
        for word in shlex.split(template):
            if word == "{server_args}":
                out.extend(self.args())
            else:
                out.append(
                    word.format(
                        python=sys.executable,
                        model=self.model,
                        host=self.host,
                        port=port,
                        server_args=shlex.join(self.args()),
                    )
                )
        return out


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def vllm_cpu_env(run_dir: Path) -> dict[str, str]:
    """Environment that keeps a vLLM CPU server offline, on loopback and in ``run_dir``."""
    tmp = run_dir / "tmp"
    cache = run_dir / "vllm-cache"
    tmp.mkdir(parents=True, exist_ok=True)
    cache.mkdir(parents=True, exist_ok=True)
    return {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_HOST_IP": "127.0.0.1",  # else its internal queue binds the network address
        "VLLM_NO_USAGE_STATS": "1",
        "TMPDIR": str(tmp),  # each start leaves IPC sockets and caches behind
        "VLLM_CACHE_ROOT": str(cache),
    }


# Flags for vLLM's CPU build (SERVING-NOTES): eager mode starts in ~20 s instead of
# ~45 s compiled, and the KV cache must be sized or the memory check fails the start.
VLLM_CPU_ARGS: tuple[str, ...] = (
    "--max-model-len", "512", "--dtype", "bfloat16", "--enforce-eager",
    "--kv-cache-memory-bytes", "134217728",
)  # fmt: skip


def vllm_cpu_config(
    model_dir: str | Path,
    run_dir: Path,
    *,
    served_model_name: str | None = None,
    extra_args: Sequence[str] = (),
    startup_timeout_s: float = 600.0,
) -> ServerConfig:
    """A vLLM CPU server for a local model directory, offline and on loopback. The start
    deadline is vLLM's own eval default (600 s): starts took 230-240 s on a 2-core
    machine at load 15 (20 s idle)."""
    args = [*VLLM_CPU_ARGS, *extra_args]
    if served_model_name:
        args += ["--served-model-name", served_model_name]
    return ServerConfig(
        engine="vllm",
        model=str(model_dir),
        server_args=args,
        env=vllm_cpu_env(run_dir),
        startup_timeout_s=startup_timeout_s,
    )


_LIVE: set[Server] = set()
_KEEPER_PIPES: dict[int, int] = {}  # keeper pid -> write end of its pipe (closed at stop)
_LIVE_LOCK = threading.Lock()


def _stop_all() -> None:
    for server in list(_LIVE):
        server.stop()


atexit.register(_stop_all)


class Server:
    """A server reachable at ``url``; owned (we started it) or attached (we did not)."""

    def __init__(
        self,
        url: str,
        *,
        process: subprocess.Popen[bytes] | None = None,
        log_path: Path | None = None,
        health_path: str = "/health",
        stop_timeout_s: float = 15.0,
    ) -> None:
        self.url = url.rstrip("/")
        self.process = process
        self.log_path = log_path
        self.health_path = health_path
        self.stop_timeout_s = stop_timeout_s
        self.started_s: float | None = None  # launch to first healthy answer

    @property
    def owned(self) -> bool:
        return self.process is not None

    def healthy(self, timeout_s: float = 2.0) -> bool:
        """Whether the health path answers 200 within ``timeout_s`` in all: a server that
        trickles its answer is not healthy (and does not hold `wait_healthy` past its end)."""
        try:
            with requests.Session() as session:
                resp = fetch(session, "GET", self.url + self.health_path, timeout=timeout_s,
                             deadline_s=timeout_s, max_bytes=1 << 20)
            return resp.status_code == 200
        except requests.RequestException:
            return False

    def log_tail(self, lines: int = 40) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def wait_healthy(self, timeout_s: float, poll_s: float = 0.25) -> float:
        """Block until health answers 200; return the seconds waited. Raises
        ``ServerStartError`` (with the log tail) if the process exits or time runs out."""
        start = time.monotonic()
        deadline = start + timeout_s
        while True:
            if self.process is not None and self.process.poll() is not None:
                raise ServerStartError(
                    f"server exited with code {self.process.returncode} before it was healthy; "
                    f"log {self.log_path}, last lines:\n{self.log_tail()}"
                )
            if self.healthy(timeout_s=min(2.0, max(0.1, deadline - time.monotonic()))):
                return time.monotonic() - start
            if time.monotonic() >= deadline:
                raise ServerStartError(
                    f"server not healthy at {self.url}{self.health_path} after {timeout_s:g} s; "
                    f"log {self.log_path}, last lines:\n{self.log_tail()}"
                )
            time.sleep(poll_s)

    def stop(self) -> int | None:
        """Stop the whole process group (no-op when attached or already stopped)."""
        proc = self.process
        if proc is None:
            return None
        with _LIVE_LOCK:
            _LIVE.discard(self)
            last = not _LIVE
        if last and threading.current_thread() is threading.main_thread():
            if signal.getsignal(signal.SIGTERM) is _on_sigterm:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)  # ours, and nothing left to stop
        if proc.poll() is None:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                pass
        # Workers may outlive the leader: always sweep the group.
        _signal_group(proc.pid, signal.SIGKILL)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        pipe = _KEEPER_PIPES.pop(proc.pid, None)
        if pipe is not None:
            os.close(pipe)
        return proc.returncode

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # Turn SIGTERM (CI cancel, `timeout`) into an interrupt so `finally` blocks run;
    # pytest stops the session on it and still tears down session fixtures.
    raise KeyboardInterrupt(f"signal {signum}")


def _port_taken(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        # As servers do: a port in TIME_WAIT is free, one with a listener is not.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def start_server(config: ServerConfig, log_dir: Path) -> Server:
    """Launch ``config`` and wait until healthy; on failure nothing is left running."""
    port = config.port or free_port(config.host)
    if config.port and _port_taken(config.host, port):
        # Another server answering there would pass our health check while ours dies
        # with EADDRINUSE.
        raise ServerStartError(f"port {port} on {config.host} is already in use by another "
                               "process; choose another port (or none for a free one), or "
                               f"attach to it (SERVING_URL=http://{config.host}:{port})")
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"server-{config.engine}-{port}.log"
    env = {**os.environ, **{k: str(v) for k, v in config.env.items()}}
    argv = config.argv(port)
    if threading.current_thread() is threading.main_thread():
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
            signal.signal(signal.SIGTERM, _on_sigterm)
    # The keeper (serving.keeper) leads the server's process group and stops all of
    # it when this process goes away by any means: it reads EOF on a pipe only we hold.
    read_end, write_end = os.pipe()
    with open(log_path, "ab") as log:
        # The log is kept and uploaded: an --api-key or a token in the command stays out.
        log.write(f"$ {mask_secrets(shlex.join(argv))}\n".encode())
        log.flush()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "serving.keeper", str(read_end),
                 str(config.stop_timeout_s), "--", *argv],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**env, "PYTHONPATH": os.pathsep.join(
                    filter(None, [str(Path(__file__).resolve().parents[1]),
                                  env.get("PYTHONPATH")]))},
                start_new_session=True,
                pass_fds=(read_end,),
            )
        finally:
            os.close(read_end)
    _KEEPER_PIPES[proc.pid] = write_end
    server = Server(
        f"http://{config.host}:{port}",
        process=proc,
        log_path=log_path,
        health_path=config.health_path,
        stop_timeout_s=config.stop_timeout_s,
    )
    with _LIVE_LOCK:
        _LIVE.add(server)
    try:
        server.started_s = server.wait_healthy(config.startup_timeout_s)
        if proc.poll() is not None:  # healthy, but not ours: ours died (port raced away)
            raise ServerStartError(f"server exited with code {proc.returncode} while "
                                   f"another process answered at {server.url}; log "
                                   f"{log_path}, last lines:\n{server.log_tail()}")
    except BaseException:
        server.stop()
        raise
    return server


def attach(url: str, *, health_path: str = "/health", timeout_s: float = 30.0) -> Server:
    """A ``Server`` for an already running endpoint; ``stop`` leaves it alone."""
    server = Server(url, health_path=health_path)
    server.started_s = server.wait_healthy(timeout_s)
    return server
