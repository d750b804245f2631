"""Code that runs without being recorded, and a recorder that changes the program it
records: each escape either shows in the record or makes it incomplete (then the static
graph decides). The rule every test here checks: a complete record holds every unit
that ran."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
from own_runner import write

from ci_register.planning.units import diff_source
from ci_register.running import executed

CORE = "def used():\n    return 1\n\n\ndef in_child():\n    return 3\n"


def traced(root: Path, program: str, **extra_env: str) -> tuple[list[str], subprocess.CompletedProcess]:
    """Run ``program`` as a traced suite run's process runs (sitecustomize on PYTHONPATH);
    (the record, the process)."""
    folder = root / "exec"
    folder.mkdir(exist_ok=True)
    env = {**os.environ, executed.DIR_ENV: str(folder), executed.ROOT_ENV: str(root),
           "PYTHONPATH": os.pathsep.join([str(executed.SITE_DIR), str(root)]), executed.TRACE_ENV: "1", **extra_env}
    r = subprocess.run([sys.executable, "-c", program], cwd=root, env=env, capture_output=True, text=True, timeout=120)
    return executed.collect(folder, root), r


def sound(record: list[str], unit: str) -> bool:
    """A record is sound about ``unit`` when it is incomplete or holds it."""
    return executed.incomplete_reason(record) is not None or unit in record


CHILD = "import os, sys; sys.path.insert(0, os.getcwd()); import pkg.core; pkg.core.in_child()"


@pytest.mark.parametrize("launch", [
    "[sys.executable, '-I', '-c', CHILD]",
    "[sys.executable, '-E', '-c', CHILD]",
    "[sys.executable, '-X', 'utf8', '-I', '-c', CHILD]",
    "[sys.executable, '-Xutf8', '-sE', '-c', CHILD]",
    "['env', '-i', 'PATH=/usr/bin:/bin', 'PYTHONPATH=' + os.getcwd(), sys.executable, '-c', CHILD]",
    "['env', '-u', 'PYTHONPATH', sys.executable, '-c', CHILD]",
    "['timeout', '60', sys.executable, '-I', '-c', CHILD]",
    "['nice', '-n', '1', sys.executable, '-E', '-c', CHILD]",
    "['sh', '-c', shlex.quote(sys.executable) + ' -I -c ' + shlex.quote(CHILD)]",
    "['bash', '-c', 'env -i PYTHONPATH=. ' + shlex.quote(sys.executable) + ' -c ' + shlex.quote(CHILD)]",
    "['sh', '-c', 'PY=' + shlex.quote(sys.executable) + '; $PY -I -c ' + shlex.quote(CHILD)]",
])
def test_a_child_python_that_starts_untraced_makes_the_record_incomplete(tmp_path, launch):
    if ("'bash'" in launch and not shutil.which("bash")) or ("'timeout'" in launch and not shutil.which("timeout")):
        pytest.skip("no such program here")
    write(tmp_path, {"pkg/__init__.py": "", "pkg/core.py": CORE})
    program = (f"import os, shlex, subprocess, sys\nCHILD = {CHILD!r}\n"
               f"r = subprocess.run({launch}, env=None, capture_output=True, text=True)\n"
               "assert r.returncode == 0, r.stderr\n")
    record, r = traced(tmp_path, program)
    assert r.returncode == 0, r.stderr
    assert sound(record, "pkg/core.py::in_child"), record


def test_a_child_python_that_inherits_the_tracer_keeps_the_record_complete(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/core.py": CORE})
    program = (f"import shlex, subprocess, sys\nCHILD = {CHILD!r}\n"
               "subprocess.run(['timeout', '60', sys.executable, '-c', CHILD], check=True)\n"
               "subprocess.run(['sh', '-c', shlex.quote(sys.executable) + ' -X utf8 -c ' + shlex.quote(CHILD)], check=True)\n"
               "subprocess.run(['git', '--version'], check=True, capture_output=True)\n")
    record, r = traced(tmp_path, program)
    assert r.returncode == 0, r.stderr
    assert executed.incomplete_reason(record) is None and "pkg/core.py::in_child" in record, record


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="<= 3.11 traces with sys.settrace")
def test_settrace_none_in_a_test_makes_the_record_incomplete(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/core.py": CORE})
    record, r = traced(tmp_path, "import sys, pkg.core\nsys.settrace(None)\npkg.core.in_child()\n")
    assert r.returncode == 0, r.stderr
    assert sound(record, "pkg/core.py::in_child"), record


def test_threads_started_by_threading_or_thread_are_recorded(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/core.py": CORE})
    program = ("import _thread, threading, time, pkg.core\ndone = threading.Event()\n"
               "def run():\n    pkg.core.in_child()\n    done.set()\n"
               "_thread.start_new_thread(run, ())\nassert done.wait(30)\n"
               "t = threading.Thread(target=pkg.core.used)\nt.start()\nt.join()\n")
    record, r = traced(tmp_path, program)
    assert r.returncode == 0, r.stderr
    assert sound(record, "pkg/core.py::in_child") and sound(record, "pkg/core.py::used"), record


# ------------------------------------------------------------ the recorder leaves the program alone

def test_a_user_sitecustomize_module_stays_the_users(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/core.py": CORE,
                     "site_user/sitecustomize.py": "MARK = 'mine'\nimport os\nos.environ['USER_SITE_RAN'] = '1'\n"})
    program = ("import os, sitecustomize, pkg.core\nassert sitecustomize.MARK == 'mine', vars(sitecustomize).keys()\n"
               "assert os.environ.get('USER_SITE_RAN') == '1'\npkg.core.used()\n")
    record, r = traced(tmp_path, program,
                       PYTHONPATH=os.pathsep.join([str(executed.SITE_DIR), str(tmp_path), str(tmp_path / "site_user")]))
    assert r.returncode == 0, r.stderr
    assert "pkg/core.py::used" in record, record


def test_a_user_sitecustomize_package_runs(tmp_path):
    write(tmp_path, {"site_user/sitecustomize/__init__.py": "import os\nos.environ['USER_PKG_RAN'] = '1'\nMARK = 'pkg'\n"})
    program = "import os, sitecustomize\nassert os.environ.get('USER_PKG_RAN') == '1'\nassert sitecustomize.MARK == 'pkg'\n"
    _, r = traced(tmp_path, program,
                  PYTHONPATH=os.pathsep.join([str(executed.SITE_DIR), str(tmp_path), str(tmp_path / "site_user")]))
    assert r.returncode == 0, r.stderr


def test_two_copies_of_the_tracer_site_on_the_path_start_one_tracer(tmp_path):
    """An older checkout's runner puts its own copy first (the replay of history does):
    one tracer starts, and neither copy hands over to the other (that recursed)."""
    other = tmp_path / "old" / "running"
    shutil.copytree(executed.SITE_DIR, other / "_trace_site")
    shutil.copy(Path(executed.__file__), other / "executed.py")
    write(tmp_path, {"pkg/__init__.py": "", "pkg/core.py": CORE})
    program = "import sys, pkg.core\nassert sys.modules['_ci_register_executed']._PROCESS is not None\npkg.core.used()\n"
    record, r = traced(tmp_path, program, PYTHONPATH=os.pathsep.join(
        [str(other / "_trace_site"), str(executed.SITE_DIR), str(tmp_path)]))
    assert r.returncode == 0, r.stderr
    assert executed.incomplete_reason(record) is None and "pkg/core.py::used" in record, record


class FakeMonitoring:
    """sys.monitoring's calls the tracer makes, for the Python >= 3.12 path on any Python."""
    DISABLE = object()
    events = types.SimpleNamespace(PY_START=1)

    def __init__(self):
        self.tools: dict[int, str] = {}
        self.ev: dict[int, int] = {}

    def use_tool_id(self, tool, name):
        if tool in self.tools:
            raise ValueError(f"tool {tool} is already in use")
        self.tools[tool] = name

    def free_tool_id(self, tool):
        self.tools.pop(tool, None)
        self.ev.pop(tool, None)

    def get_tool(self, tool):
        return self.tools.get(tool)

    def register_callback(self, tool, event, fn):
        pass

    def set_events(self, tool, events):
        self.ev[tool] = events

    def get_events(self, tool):
        return self.ev.get(tool, 0)


def fake_tracer(monkeypatch, tmp_path) -> tuple[FakeMonitoring, executed.Tracer]:
    mon = FakeMonitoring()
    monkeypatch.setattr(sys, "monitoring", mon, raising=False)
    t = executed.Tracer(tmp_path, tmp_path / "sink", watch_spawns=False)
    t.start()
    return mon, t


def test_a_program_that_claims_the_tracers_tool_id_gets_it(monkeypatch, tmp_path):
    mon, t = fake_tracer(monkeypatch, tmp_path)
    taken = t._tool
    sys.monitoring.use_tool_id(taken, "the program's profiler")  # today: ValueError, already in use
    assert mon.get_tool(taken) == "the program's profiler"
    assert "gave its sys.monitoring tool id" in (tmp_path / "sink").read_text()


def test_a_program_that_switches_the_tracers_events_off_makes_it_incomplete(monkeypatch, tmp_path):
    mon, t = fake_tracer(monkeypatch, tmp_path)
    for tool in range(6):
        sys.monitoring.set_events(tool, 0)
    t.check()
    assert "events" in (tmp_path / "sink").read_text()



# The same two escapes against the real sys.monitoring, in a traced process (Python >= 3.12).
TAKE_TOOL = ("import sys, pkg.core\ntool = sys.modules['_ci_register_executed']._PROCESS._tool\n"
             "sys.monitoring.use_tool_id(tool, 'my profiler')\n"
             "assert sys.monitoring.get_tool(tool) == 'my profiler'\npkg.core.used()\n")
EVENTS_OFF = ("import sys, pkg.core\nfor tool in range(6):\n    if sys.monitoring.get_tool(tool):\n"
              "        sys.monitoring.set_events(tool, 0)\npkg.core.used()\n")


@pytest.mark.skipif(sys.version_info < (3, 12), reason="the real sys.monitoring is Python >= 3.12")
@pytest.mark.parametrize("program", [TAKE_TOOL, EVENTS_OFF], ids=["tool id taken", "events off"])
def test_real_sys_monitoring_escapes_make_the_record_incomplete(tmp_path, program):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/core.py": CORE})
    record, r = traced(tmp_path, program)
    assert r.returncode == 0, r.stderr  # the program gets what it asked for
    assert executed.incomplete_reason(record) is not None, record

# ------------------------------------------------------------ source read rather than run

def test_a_body_change_under_a_jit_decorator_is_structural():
    old = "import triton\n\n@triton.jit\ndef kernel(x):\n    return x + 1\n"
    assert diff_source(old, old.replace("x + 1", "x + 2")).kind == "structural"
    called = "kernel = triton.jit(_kernel)\n"
    plain = "import triton\n\ndef _kernel(x):\n    return x + 1\n\n" + called
    assert diff_source(plain, plain.replace("x + 1", "x + 2")).kind == "structural"
    # Decorators known to call the function as Python keep a bodies change a bodies change.
    known = ("import functools, pytest\n\nclass A:\n    @property\n    def p(self):\n        return 1\n\n"
             "    @staticmethod\n    def s():\n        return 1\n\n@functools.lru_cache(maxsize=None)\ndef c():\n    return 1\n\n"
             "@pytest.fixture\ndef fx():\n    return 1\n")
    ch = diff_source(known, known.replace("return 1", "return 2"))
    assert ch.kind == "bodies" and set(ch.units) == {"A.p", "A.s", "c", "fx"}
