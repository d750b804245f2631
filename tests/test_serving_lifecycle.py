from __future__ import annotations

import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import requests

from serving.fake import FakeServer
from serving.lifecycle import (
    Server,
    ServerConfig,
    ServerConfigError,
    ServerStartError,
    attach,
    start_server,
)

ROOT = Path(__file__).resolve().parents[1]
FAKE = "{python} -m serving.fake --port {port}"


# Polls wait for what takes well under a second when idle; a loaded 2-core machine starts
# and reaps processes seconds late, and only a broken stop waits this out.
WAIT_S = 120.0


def fake_config(extra: str = "", timeout: float = WAIT_S) -> ServerConfig:
    return ServerConfig(
        engine="command",
        command=FAKE + " " + extra,
        env={"PYTHONPATH": str(ROOT)},
        startup_timeout_s=timeout,
        stop_timeout_s=5,
    )


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"  # a zombie has exited; only its parent's reaping is pending




def wait_dead(pid: int, timeout: float = WAIT_S) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def child_pid(log: Path, timeout: float = WAIT_S) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(r"child pid (\d+)", log.read_text())
        if m:
            return int(m.group(1))
        time.sleep(0.05)
    raise AssertionError(f"no child pid in {log}")


def test_start_health_log_and_group_stop(tmp_path: Path) -> None:
    with start_server(fake_config("--spawn-child --healthy-after 0.5"), tmp_path) as srv:
        assert srv.owned and srv.started_s is not None and srv.started_s >= 0.4
        assert requests.get(srv.url + "/v1/models", timeout=5).json()["data"][0]["id"] == "fake"
        assert srv.log_path is not None and srv.log_path.parent == tmp_path
        leader, worker = srv.process.pid, child_pid(srv.log_path)  # type: ignore[union-attr]
        assert alive(leader) and alive(worker)
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL  # stop on CI cancel
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # restored once none is left
    assert "fake server on port" in srv.log_path.read_text()
    assert wait_dead(leader) and wait_dead(worker)  # the whole group, not just the leader
    assert not srv.healthy(timeout_s=0.5)


def test_the_logged_command_line_keeps_an_api_key_out(tmp_path: Path) -> None:
    # The server log (kept, uploaded with the results) began with the command line as
    # run: a --api-key given to the engine was in it.
    with pytest.raises(ServerStartError):
        with start_server(fake_config("--api-key S3CRETKEY", timeout=10), tmp_path):
            pass
    [log] = tmp_path.glob("server-*.log")
    first = log.read_text().splitlines()[0]
    assert first.startswith("$ ") and "--api-key ***" in first and "S3CRET" not in first


def test_never_healthy_fails_with_log_tail_and_cleans_up(tmp_path: Path) -> None:
    t0 = time.monotonic()
    with pytest.raises(
        ServerStartError, match=r"not healthy .* after 1\.5 s(.|\n)*fake server on port"
    ):
        start_server(fake_config("--healthy-after 60", timeout=1.5), tmp_path)
    assert time.monotonic() - t0 < 60  # given up at 1.5 s, not healthy after its own 60 s
    log = next(tmp_path.glob("server-command-*.log")).read_text()
    port = re.search(r"--port (\d+)", log).group(1)  # type: ignore[union-attr]
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://127.0.0.1:{port}/health", timeout=2)


def test_dying_server_fails_with_exit_code_and_log(tmp_path: Path) -> None:
    with pytest.raises(ServerStartError, match=r"exited with code 3(.|\n)*crashing on purpose"):
        start_server(fake_config("--healthy-after 60 --exit-after 0.3"), tmp_path)


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_failure_inside_the_block_stops_the_server(
    tmp_path: Path, exc: type[BaseException]
) -> None:
    with pytest.raises(exc), start_server(fake_config("--spawn-child"), tmp_path) as srv:
        pids = [srv.process.pid, child_pid(srv.log_path)]  # type: ignore[union-attr,arg-type]
        raise exc()
    assert all(wait_dead(p) for p in pids)


def spawn_parent(tmp_path: Path, command: str, *, managed: bool) -> tuple[subprocess.Popen, int]:
    """A Python parent that starts the fake server (in a ``with`` block when ``managed``),
    prints its leader pid and sleeps; returns the parent and the server's pid."""
    start = (f"with start_server(cfg, Path({str(tmp_path)!r})) as srv:" if managed
             else f"if True:\n    srv = start_server(cfg, Path({str(tmp_path)!r}))")
    script = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        sys.path.insert(0, {str(ROOT)!r})
        from serving.lifecycle import ServerConfig, start_server
        cfg = ServerConfig(engine="command", command={command!r},
                           env={{"PYTHONPATH": {str(ROOT)!r}}}, stop_timeout_s=5)
    """) + start + """
    print("leader", srv.process.pid, flush=True)
    time.sleep(60)
"""
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    line = parent.stdout.readline()  # type: ignore[union-attr]
    if not line.startswith("leader"):
        parent.kill()
        raise AssertionError(f"the parent printed {line!r}, not its server's pid")
    return parent, int(line.split()[1])


def test_sigterm_to_the_parent_still_stops_the_group(tmp_path: Path) -> None:
    parent, leader = spawn_parent(tmp_path, FAKE + " --spawn-child", managed=True)
    try:
        worker = child_pid(next(tmp_path.glob("server-command-*.log")))
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(timeout=20) != 0
        assert wait_dead(leader) and wait_dead(worker)
    finally:
        if parent.poll() is None:
            parent.kill()


def test_server_dies_with_a_killed_parent(tmp_path: Path) -> None:
    # SIGKILL (or os._exit) runs no finally block; the server must not outlive us.
    parent, leader = spawn_parent(tmp_path, FAKE, managed=False)
    try:
        parent.kill()
        parent.wait(timeout=10)
        assert wait_dead(leader)
    finally:
        if parent.poll() is None:
            parent.kill()


def test_attach_leaves_the_server_alone() -> None:
    with FakeServer() as fake:
        srv = attach(fake.url, timeout_s=5)
        assert not srv.owned and srv.stop() is None
        assert srv.healthy()
    with pytest.raises(ServerStartError, match="not healthy"):
        attach(fake.url, timeout_s=0.5)


def test_config_validation_and_templates() -> None:
    with pytest.raises(ServerConfigError, match="unknown engine 'tgi'"):
        ServerConfig(engine="tgi", model="m")
    with pytest.raises(ServerConfigError, match="command template"):
        ServerConfig(engine="command")
    with pytest.raises(ServerConfigError, match="needs a model"):
        ServerConfig(engine="vllm")
    with pytest.raises(ServerConfigError, match=r"x\.yaml: unknown field 'args'"):
        ServerConfig.from_mapping({"engine": "vllm", "model": "m", "args": "-x"}, "x.yaml")
    cfg = ServerConfig.from_mapping(
        {"engine": "vllm", "model": "/m", "server_args": "--max-model-len 512 --dtype 'bfloat16'"}
    )
    assert cfg.argv(8000) == [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "/m",
        "--host",
        "127.0.0.1",
        "--port",
        "8000",
        "--max-model-len",
        "512",
        "--dtype",
        "bfloat16",
    ]
    sg = ServerConfig(engine="sglang", model="/m", server_args=["--tp", "2"])
    assert sg.argv(1)[1:4] == ["-m", "sglang.launch_server", "--model-path"] and sg.argv(1)[
        -2:
    ] == ["--tp", "2"]


def test_attached_server_object_is_plain() -> None:
    srv = Server("http://127.0.0.1:9/")
    assert srv.url == "http://127.0.0.1:9" and srv.log_tail() == "(no log)"


def test_a_forked_worker_dies_with_a_killed_parent(tmp_path: Path) -> None:
    parent, leader = spawn_parent(tmp_path, FAKE + " --spawn-child", managed=False)
    try:
        worker = child_pid(next(tmp_path.glob("server-command-*.log")))
        parent.kill()
        parent.wait(timeout=10)
        assert wait_dead(leader) and wait_dead(worker)
    finally:
        if parent.poll() is None:
            parent.kill()


def test_a_server_started_from_a_thread_outlives_the_thread(tmp_path: Path) -> None:
    import threading

    box: list[Server] = []
    thread = threading.Thread(target=lambda: box.append(start_server(fake_config(), tmp_path)))
    thread.start()
    thread.join(timeout=30)
    try:
        time.sleep(0.5)  # PDEATHSIG would have killed it as the thread exited
        assert box and box[0].healthy(timeout_s=2)
    finally:
        if box:
            box[0].stop()


def test_an_explicit_port_already_served_is_refused(tmp_path: Path) -> None:
    with FakeServer() as other:
        port = int(other.url.rsplit(":", 1)[1])
        cfg = ServerConfig(engine="command", command=FAKE, env={"PYTHONPATH": str(ROOT)},
                           port=port, startup_timeout_s=10, stop_timeout_s=5)
        with pytest.raises(ServerStartError, match=f"port {port} .* already in use"):
            start_server(cfg, tmp_path)
        # Refused before any launch (the message): no wall bound, which load stretches.
        assert other.url
