"""What a suite run executed: the units (functions, by ``path::qualname``) that ran.

Test selection keeps a registered file when a change can reach it. For a change that only
edits function bodies (:func:`ci_register.planning.units.diff_source`), a finer question
decides: did any of those functions run anywhere in the suite's recorded run? If none did,
the change cannot alter that suite's outcomes. The answer is per *process*, never per test:
a session fixture or an ``lru_cache`` runs once for many files, so only "it ran somewhere
in the run" is sound.

How a run is traced. The first process of the run (the nox session when the noxfile
imports :mod:`ci_register.running.nox_sessions`, else ``python -m ci_register run``) calls
:func:`begin`: it makes a folder (``CI_REGISTER_EXECUTED_DIR``) and traces itself into it.
Every Python process it starts inherits the folder and, through ``PYTHONPATH``, this
package's ``_trace_site/sitecustomize.py``, which starts a tracer at interpreter start-up
(before pytest, a conftest or a test's server loads): the runner, pytest, the gate process,
a test's server and its workers. Each process appends one line per function that starts
running, as it happens (a process killed at any moment has written all it ran). At the end
of the pytest session the gates recorder maps the folder's lines to units
(:func:`collect`) and stores them as the import map of the path ``<executed>``
(:data:`EXECUTED_MAP_PATH`), newest per suite, for a run of the whole suite only (one
shard, no ``--file``, nothing deselected, not stopped early, not a confirm rerun).

Entries of a record: ``path`` for each project file that ran code (its import counts), and
``path::qualname`` for each unit that ran; ``path::*`` when any function of a file may have
run unseen (loaded before the tracer started, or unparsable at the end). A record that
cannot be trusted is the one entry ``<incomplete: why>``: a traced process started a Python
with ``-I``/``-E``/``-S`` or an environment without the folder, a child could not start its
tracer, or the tracer was replaced (a debugger or coverage's tracer on Python <= 3.11).

How functions are seen: on Python >= 3.12, ``sys.monitoring``'s PY_START event, once per
code object (the callback returns DISABLE: a function costs one event in the whole run). On
<= 3.11, ``sys.settrace``/``threading.settrace`` with a function that notes the code of each
call and returns None (no line events); threads started before the tracer are not seen.
Tracing is on by default on Python >= 3.12 and off on <= 3.11 (its cost would skew timing
metrics); ``CI_REGISTER_TRACE=1`` turns it on, ``CI_REGISTER_TRACE=0`` off (selection then
uses the file-level rules).

Stdlib only: ``sitecustomize`` and the selection benchmark load this file by path.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

__all__ = ["DIR_ENV", "EXECUTED_MAP_PATH", "MAX_ENTRIES", "TRACE_ENV", "Tracer", "argv_root", "begin", "collect",
           "in_nox", "process_tracer", "runner_entries", "start_from_env", "tracing_wanted"]

# The record's "file" in the import_maps table; gates.record.import_map holds the same literal.
EXECUTED_MAP_PATH = "<executed>"
DIR_ENV = "CI_REGISTER_EXECUTED_DIR"
ROOT_ENV = "CI_REGISTER_EXECUTED_ROOT"
TRACE_ENV = "CI_REGISTER_TRACE"  # "0": trace nothing; "1": trace on Python <= 3.11 too
SITE_DIR = Path(__file__).resolve().parent / "_trace_site"
MAX_ENTRIES = 100_000  # a bound on a stored record; a bigger one is stored as incomplete
_MAX_FILES = 10_000  # processes' files read from one folder
_MAX_BYTES = 64 << 20  # bytes read from one process's file
_TOOL_NAME = "ci_register.executed"
_SKIP_PARTS = {"site-packages", "dist-packages", "__pycache__", "node_modules"}
_PYTHON = re.compile(r"(python|pypy)[0-9.]*[a-z]?(\.exe)?$")
_SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "env", "xargs"}


def tracing_wanted(env: Mapping[str, str] | None = None) -> bool:
    """``CI_REGISTER_TRACE`` when it is 0 or 1, else whether Python is >= 3.12: there
    ``sys.monitoring`` costs next to nothing; on <= 3.11 the call tracer slows call-heavy
    code several times (benchmarks/results/bench_trace_overhead.md), which would skew the
    timings a suite records, so it runs only where asked for (a record-only job)."""
    env = os.environ if env is None else env
    got = env.get(TRACE_ENV, "").strip()
    if got in ("0", "1"):
        return got == "1"
    return sys.version_info >= (3, 12)


class Tracer:
    """Appends ``file<TAB>first line`` for each code object that starts running under
    ``root`` to ``sink`` (one file per process); line 0 is a module's own code, ``*`` a
    file loaded before the tracer started, and ``!<TAB>why`` makes the record incomplete."""

    def __init__(self, root: Path, sink: Path, *, watch_spawns: bool = True, folder: str = "") -> None:
        self.root = str(Path(root).resolve())
        self.prefix = self.root.rstrip(os.sep) + os.sep
        self.sink = Path(sink)
        self.folder = folder  # what a child's environment must hold to be traced too
        self.watch_spawns = watch_spawns
        self.active = False
        self._fd = -1
        self._tool: int | None = None
        self._trace_fn = None

    def _write(self, text: str) -> None:
        try:
            os.write(self._fd, text.encode("utf-8", "surrogateescape"))
        except OSError:
            pass  # a full disk fails the run's own files too

    def note(self, why: str) -> None:
        self._write(f"!\t{why.replace(chr(10), ' ')}\n")

    def start(self) -> None:
        self._fd = os.open(self.sink, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        before = [getattr(m, "__file__", None) for m in list(sys.modules.values())]
        self._write("".join(f"{f}\t*\n" for f in before if isinstance(f, str) and f.startswith(self.prefix)))
        self.active = True
        if self.watch_spawns:
            sys.addaudithook(self._audit)  # audit hooks cannot be removed: it checks self.active
        prefix, fd, write = self.prefix, self._fd, os.write

        def note_code(code):  # a project code object: its file and first line, one line
            f = code.co_filename
            if f.startswith(prefix):
                line = 0 if code.co_name == "<module>" else code.co_firstlineno
                try:
                    write(fd, f"{f}\t{line}\n".encode("utf-8", "surrogateescape"))
                except OSError:
                    pass

        mon = getattr(sys, "monitoring", None)
        if mon is not None:
            self._tool = _free_tool(mon)
            if self._tool is None:
                self.note("no free sys.monitoring tool id")
                return
            disable = mon.DISABLE

            def started(code, offset):
                note_code(code)
                return disable  # once per code object: the event is off for it from now on

            mon.register_callback(self._tool, mon.events.PY_START, started)
            mon.set_events(self._tool, mon.events.PY_START)
            return
        seen: set = set()

        def on_call(frame, event, arg):  # the global trace function sees only "call" events
            code = frame.f_code
            if code in seen:
                return
            seen.add(code)
            note_code(code)

        self._trace_fn = on_call
        threading.settrace(on_call)
        sys.settrace(on_call)

    def check(self) -> None:
        """Note it when another tool replaced this tracer (its record would have gaps)."""
        mon = getattr(sys, "monitoring", None)
        if self._tool is not None and mon is not None and mon.get_tool(self._tool) != _TOOL_NAME:
            self.note("another tool took the sys.monitoring id")
        elif self._trace_fn is not None and sys.gettrace() is not self._trace_fn:
            self.note("another tracer (a debugger, coverage) replaced the call tracer")

    def _audit(self, event: str, args: tuple) -> None:
        if not self.active or not event.startswith(("subprocess.Popen", "os.posix_spawn", "os.exec", "os.spawn")):
            return
        try:
            why = _unseen_child(event, args, self.folder)
        except Exception as exc:  # noqa: BLE001 - an audit hook must never break the program
            why = f"{event}: cannot tell what it runs ({type(exc).__name__})"
        if why:
            self.note(why)


def _free_tool(mon) -> int | None:
    for tool in (4, 3):  # 0-2 and 5 are named for debuggers, coverage, profilers, optimizers
        try:
            mon.use_tool_id(tool, _TOOL_NAME)
        except ValueError:
            continue
        return tool
    return None


def _unseen_child(event: str, args: tuple, folder: str) -> str | None:
    """Why a child process may run Python that no tracer sees, else None: a Python (or a
    script or shell that may start one) with an environment that drops the folder or
    ``PYTHONPATH``'s tracer, or with ``-I``/``-E``/``-S``. A native program (git,
    nvidia-smi) runs no project Python."""
    if event == "subprocess.Popen":
        executable, argv, env = args[0], args[1], args[3]
    elif event in ("os.posix_spawn", "os.exec"):
        executable, argv, env = args[0], args[1], args[2]
    else:  # os.spawn: mode, path, args, env
        executable, argv, env = args[1], args[2], args[3]
    if isinstance(argv, str | bytes | os.PathLike):
        argv = [argv]
    argv = [os.fsdecode(a) for a in (argv or ())]
    first = os.fsdecode(executable) if executable is not None else (argv[0] if argv else "")
    name = Path(first).name
    pythonish = bool(_PYTHON.match(name)) or name in _SHELLS
    if not pythonish:
        path = first if os.sep in first else shutil.which(first, path=(env or {}).get("PATH") if isinstance(env, Mapping) else None)
        try:
            with open(path or "", "rb") as f:
                pythonish = f.read(2) == b"#!"  # a script: its interpreter may be Python
        except OSError:
            return None  # not found or unreadable: it will not start
    if not pythonish:
        return None
    if isinstance(env, Mapping):
        env = {os.fsdecode(k): os.fsdecode(v) for k, v in env.items()}
        if env.get(DIR_ENV) != folder or str(SITE_DIR) not in env.get("PYTHONPATH", "").split(os.pathsep):
            return f"started {name} with an environment that drops the tracer"
    if _PYTHON.match(name):
        for a in argv[1:]:
            if not a.startswith("-") or a.startswith("--") or a in ("-m", "-c"):
                break
            if set(a[1:]) & set("IES") and not a.startswith(("-X", "-W")):
                return f"started {name} {a} (no sitecustomize: its code runs unseen)"
    return None


# ---------------------------------------------------------------------- the process tracer

_PROCESS: Tracer | None = None


def process_tracer() -> Tracer | None:
    """This process's tracer: this module's, or the one sitecustomize started from its own
    copy of this file (loaded by path as ``_ci_register_executed``)."""
    other = sys.modules.get("_ci_register_executed")
    return _PROCESS or (getattr(other, "_PROCESS", None) if other is not None and other is not sys.modules.get(__name__) else None)


def _start(root: Path, folder: str, *, watch_spawns: bool) -> Tracer:
    global _PROCESS
    sink = Path(folder) / f"{os.getpid()}-{os.urandom(4).hex()}"
    _PROCESS = Tracer(root, sink, watch_spawns=watch_spawns, folder=folder)
    _PROCESS.start()
    return _PROCESS


def start_from_env(env: Mapping[str, str] | None = None) -> Tracer | None:
    """sitecustomize's call: trace this process into the inherited folder, if any."""
    env = os.environ if env is None else env
    folder, root = env.get(DIR_ENV), env.get(ROOT_ENV)
    if process_tracer() is not None or not folder or not root or not tracing_wanted(env):
        return _PROCESS
    return _start(Path(root), folder, watch_spawns=True)


def begin(root: Path, *, watch_spawns: bool = True, set_environ: bool = True) -> dict[str, str]:
    """Trace this process and what it starts: the folder (inherited, else a new one removed
    at exit) and this process's tracer. Returns the environment a child needs (set in
    ``os.environ`` too unless ``set_environ`` is false); {} when tracing is off."""
    if not tracing_wanted():
        return {}
    folder, own_root = os.environ.get(DIR_ENV), os.environ.get(ROOT_ENV)
    if not folder or not own_root or not Path(folder).is_dir():
        folder = tempfile.mkdtemp(prefix="ci-register-executed-")
        own_root = str(Path(root).resolve())
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
    if process_tracer() is None:
        _start(Path(own_root), folder, watch_spawns=watch_spawns)
    env = {DIR_ENV: folder, ROOT_ENV: own_root,
           "PYTHONPATH": os.pathsep.join(dict.fromkeys([str(SITE_DIR), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]))}
    if set_environ:
        os.environ.update(env)
    return env


def argv_root(argv: list[str], default: Path) -> Path:
    """The ``--root`` of a command line (before argparse runs), else ``default``."""
    for i, a in enumerate(argv):
        if a == "--root" and i + 1 < len(argv):
            return Path(argv[i + 1])
        if a.startswith("--root="):
            return Path(a.split("=", 1)[1])
    return default


def in_nox(argv: list[str]) -> bool:
    """Whether this process is nox (``nox``, ``python -m nox``)."""
    first = Path(argv[0]) if argv else Path()
    return first.name in ("nox", "nox.exe") or (first.name == "__main__.py" and first.parent.name == "nox")


def runner_entries() -> bool | None:
    """``True`` when this run is traced (the runner writes ``executed: true`` into the plan),
    else None."""
    return True if process_tracer() is not None else None


# ------------------------------------------------------------------------- the record

def collect(folder: str | os.PathLike[str], root: Path, units_in_source: Callable | None = None,
            unit_at: Callable | None = None, need_pid: int | None = None) -> list[str]:
    """The record of a traced run: the folder's lines mapped to units (see the module
    docstring); ``need_pid``: a process whose own tracer must have written (pytest's)."""
    if units_in_source is None or unit_at is None:
        from ci_register.planning.units import unit_at, units_in_source  # noqa: PLC0415 - the benchmark passes its own
    root = Path(root).resolve()
    prefix = str(root).rstrip(os.sep) + os.sep
    by_file: dict[str, set[int]] = {}
    whole: set[str] = set()
    try:
        names = sorted(os.listdir(folder))[:_MAX_FILES + 1]
    except OSError as exc:
        return [f"<incomplete: cannot read {folder} ({exc.strerror})>"]
    if len(names) > _MAX_FILES:
        return [f"<incomplete: more than {_MAX_FILES} traced processes>"]
    if need_pid is not None and not any(n.startswith(f"{need_pid}-") for n in names):
        return ["<incomplete: pytest's process was not traced (python -S/-I, or tracing off)>"]
    for name in names:
        try:
            with open(os.path.join(folder, name), "rb") as f:
                data = f.read(_MAX_BYTES + 1)
        except OSError:
            continue
        if len(data) > _MAX_BYTES:
            return [f"<incomplete: a process's trace is over {_MAX_BYTES} bytes>"]
        for raw in data.decode("utf-8", "surrogateescape").splitlines():
            file, _, line = raw.partition("\t")
            if file == "!":
                return [f"<incomplete: {line}>"]
            if not file.startswith(prefix) or not file.endswith(".py"):
                continue
            rel = file[len(prefix):].replace(os.sep, "/")
            if any(p in _SKIP_PARTS or p.startswith(".") for p in rel.split("/")[:-1]):
                continue
            if line == "*":
                whole.add(rel)
            elif line.isdigit():
                by_file.setdefault(rel, set()).add(int(line))
    out = {*by_file, *whole, *(f"{f}::*" for f in whole)}
    for rel, lines in by_file.items():
        if rel in whole:
            continue
        try:
            units = units_in_source((root / rel).read_bytes())
        except OSError:
            units = None
        if units is None:  # gone or unparsable now: any function of it may have run
            out.add(f"{rel}::*")
            continue
        out.update(f"{rel}::{q}" for line in lines if line and (q := unit_at(units, line)))
    if len(out) > MAX_ENTRIES:
        return [f"<incomplete: more than {MAX_ENTRIES} entries>"]
    return sorted(out)


def incomplete_reason(entries: Iterable[str]) -> str | None:
    for e in entries:
        if e.startswith("<incomplete"):
            return e[1:-1]
    return None
