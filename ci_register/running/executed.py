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
cannot be trusted is the one entry ``<incomplete: why>``; any escape makes it so (the rule: a
record is evidence only when complete):

- a child that may run Python without the tracer (:func:`unseen_argv`): a Python with
  ``-I``/``-E``/``-S`` (``-X utf8 -I`` too) or an environment without the folder or the
  sitecustomize path, and the same behind ``env`` (``-i``, ``-u``, assignments), wrappers
  (``timeout``, ``nice``, ``taskset``, ...), ``sudo`` (a fresh environment), a shell's ``-c``
  text or script (its ``export``/``unset`` followed), or a script's ``#!`` line;
- a child whose tracer could not start;
- on <= 3.11, ``sys.settrace`` called by anything but this tracer and ``threading`` handing
  a new thread this tracer (a test's ``sys.settrace(None)``, a debugger, coverage);
- on >= 3.12, a program that sets the events or callbacks of the tracer's tool id, or frees
  it; a program that claims the tracer's tool id gets it (the tracer frees it first).

The tracer leaves the program alone: the program's own ``sitecustomize`` (module or package)
runs as ``sitecustomize`` (``_trace_site/sitecustomize.py`` hands over to it), and a thread
started by ``_thread.start_new_thread`` on <= 3.11 is traced (its function runs as given).
Why this tracer and not coverage.py: ``benchmarks/results/bench_recorder_choice.md``.

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
           "in_nox", "process_tracer", "runner_entries", "start_from_env", "tracing_wanted", "unseen_argv"]

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
        self._own_code: set = set()  # this tracer's functions that call sys.settrace

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
        audit = self._audit

        def hook(event, args):  # called for every audited event: on <= 3.11 each traced call's frame.f_code is one
            if event != "object.__getattr__":
                audit(event, args)

        sys.addaudithook(hook)  # audit hooks cannot be removed: _audit checks self.active
        atexit.register(self.check)  # a process that exits normally checks its tracer was left alone
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
            self._guard_monitoring(mon)
            return
        seen: set = set()

        def on_call(frame, event, arg):  # the global trace function sees only "call" events
            code = frame.f_code
            if code in seen:
                return
            seen.add(code)
            note_code(code)

        self._trace_fn = on_call
        self._own_code.add(sys._getframe().f_code)
        threading.settrace(on_call)
        sys.settrace(on_call)
        self._trace_raw_threads(on_call)

    def _trace_raw_threads(self, fn) -> None:
        """A thread started by ``_thread.start_new_thread`` (not ``threading``) gets no
        trace function from ``threading.settrace``: give it this one, then run it as asked."""
        import _thread  # noqa: PLC0415

        real = _thread.start_new_thread

        def run(function, args, kwargs):
            sys.settrace(fn)
            return function(*args, **kwargs)

        def start_new_thread(function, args, kwargs=None, /):
            if not isinstance(args, tuple) or (kwargs is not None and not isinstance(kwargs, dict)):
                return real(function, args, kwargs)  # its own TypeError, as without the tracer
            return real(run, (function, args, kwargs or {}))

        self._own_code.add(run.__code__)
        _thread.start_new_thread = _thread.start_new = start_new_thread

    def _guard_monitoring(self, mon) -> None:
        """``sys.monitoring`` shared with the program: a program that claims the tracer's
        tool id gets it (the tracer frees it, and its record becomes incomplete); one that
        sets that id's events or callbacks, or frees it, makes the record incomplete."""
        tracer = self

        def guard(name, on_ours):
            real = getattr(mon, name, None)
            if real is None:
                return

            def call(tool_id, *args):
                if tracer._tool is not None and tool_id == tracer._tool:
                    on_ours(real)
                return real(tool_id, *args)

            call.__name__ = call.__qualname__ = name
            call.__doc__ = real.__doc__
            setattr(mon, name, call)

        free = getattr(mon, "free_tool_id", None)

        def give_up(_real):
            tool, tracer._tool = tracer._tool, None
            tracer.note(f"the program claimed sys.monitoring tool id {tool}: the tracer gave its sys.monitoring "
                        "tool id up, so later functions ran unseen")
            if free is not None:
                free(tool)

        def touched(_real):
            tracer.note("the program set the events or callbacks of the tracer's sys.monitoring tool id")

        guard("use_tool_id", give_up)
        for name in ("free_tool_id", "clear_tool_id", "set_events", "set_local_events", "register_callback"):
            guard(name, touched)

    def check(self) -> None:
        """Note it when another tool replaced this tracer or switched it off (its record
        would have gaps)."""
        mon = getattr(sys, "monitoring", None)
        if self._tool is not None and mon is not None:
            if mon.get_tool(self._tool) != _TOOL_NAME:
                self.note("another tool took the sys.monitoring id")
            elif mon.get_events(self._tool) != mon.events.PY_START:
                self.note("the tracer's sys.monitoring events were switched off")
        elif self._trace_fn is not None and sys.gettrace() is not self._trace_fn:
            self.note("another tracer (a debugger, coverage) replaced the call tracer")

    def _audit(self, event: str, args: tuple) -> None:
        if not self.active:
            return
        if event == "sys.settrace":
            if self._trace_fn is not None:
                self._settrace_called()
            return
        if not self.watch_spawns or not event.startswith(("subprocess.Popen", "os.posix_spawn", "os.exec", "os.spawn")):
            return
        try:
            why = _unseen_child(event, args, self.folder)
        except Exception as exc:  # noqa: BLE001 - an audit hook must never break the program
            why = f"{event}: cannot tell what it runs ({type(exc).__name__})"
        if why:
            self.note(why)

    def _settrace_called(self) -> None:
        """``sys.settrace`` from anything but this tracer (or ``threading`` handing a new
        thread this tracer's function) replaces or removes the call tracer of that thread:
        what runs there next is unseen."""
        try:
            caller = sys._getframe(3)  # 0: this, 1: _audit, 2: the hook, 3: the caller of sys.settrace
        except ValueError:
            caller = None
        code = caller.f_code if caller is not None else None
        if code in self._own_code:
            return
        if code is not None and code.co_filename == threading.__file__ and getattr(threading, "_trace_hook", None) is self._trace_fn:
            return
        where = f"{code.co_filename}:{caller.f_lineno}" if code is not None else "native code"
        self.note(f"sys.settrace was called at {where} (a test switching tracing off, a debugger, coverage): "
                  "what ran after it is unseen")


def _free_tool(mon) -> int | None:
    for tool in (4, 3):  # 0-2 and 5 are named for debuggers, coverage, profilers, optimizers
        try:
            mon.use_tool_id(tool, _TOOL_NAME)
        except ValueError:
            continue
        return tool
    return None


def _unseen_child(event: str, args: tuple, folder: str) -> str | None:
    """Why a child process may run Python that no tracer sees, else None (see :func:`unseen_argv`)."""
    if event == "subprocess.Popen":
        executable, argv, env = args[0], args[1], args[3]
    elif event in ("os.posix_spawn", "os.exec"):
        executable, argv, env = args[0], args[1], args[2]
    else:  # os.spawn: mode, path, args, env
        executable, argv, env = args[1], args[2], args[3]
    if isinstance(argv, str | bytes | os.PathLike):
        argv = [argv]
    argv = [os.fsdecode(a) for a in (argv or ())]
    if executable is not None:
        argv = [os.fsdecode(executable), *argv[1:]] if argv else [os.fsdecode(executable)]
    if not argv:
        return None
    env = os.environ if env is None else env  # None: the child inherits this process's (maybe edited) environment
    env = {os.fsdecode(k): os.fsdecode(v) for k, v in env.items()} if isinstance(env, Mapping) else dict(os.environ)
    return unseen_argv(argv, env, folder)


# Programs that run the rest of their command line as a command (their own options first).
_WRAPPERS = {"timeout", "nice", "nohup", "stdbuf", "setsid", "taskset", "numactl", "ionice", "chrt", "time",
             "xargs", "exec", "command", "flock", "unbuffer", "catchsegv", "strace", "ltrace", "valgrind",
             "mpirun", "mpiexec", "torchrun", "srun", "parallel"}
_CLEARS_ENV = {"sudo", "su", "doas", "runuser", "systemd-run"}  # they give the command a fresh environment
_SHELL_NAMES = {"sh", "bash", "dash", "zsh", "ksh", "ash", "busybox"}
_TRACE_VARS = (DIR_ENV, ROOT_ENV, "PYTHONPATH", TRACE_ENV)
_MAX_SCRIPT = 1 << 16  # bytes of a script read to see what it starts
_MAX_DEPTH = 8


def _traced_env(env: Mapping[str, str], folder: str) -> str | None:
    """Why a Python started with ``env`` would not start the tracer, else None."""
    if env.get(DIR_ENV) != folder or not env.get(ROOT_ENV):
        return "an environment that drops the tracer's folder"
    if env.get(TRACE_ENV, "").strip() == "0":
        return "tracing switched off (CI_REGISTER_TRACE=0)"
    if not any(Path(d).name == SITE_DIR.name for d in env.get("PYTHONPATH", "").split(os.pathsep) if d):
        return "a PYTHONPATH without the tracer's sitecustomize"
    return None


def _python_flags(argv: list[str]) -> str | None:
    """The option of a Python command line that skips sitecustomize or PYTHONPATH
    (``-I``, ``-E``, ``-S``, alone or combined, after ``-X``/``-W`` arguments), else None."""
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "--check-hash-based-pycs":
            i += 2
            continue
        if a == "--" or not a.startswith("-") or a == "-" or a.startswith("--"):
            return None
        for j, ch in enumerate(a[1:], 1):
            if ch in "IES":
                return f"-{ch}"
            if ch in "cm":
                return None  # the rest is the command or the module's arguments
            if ch in "XW":
                i += 0 if a[j + 1:] else 1  # `-X utf8` takes the next word; `-Xutf8` does not
                break
        i += 1
    return None


def _shell_commands(text: str) -> list[list[str]] | None:
    """The simple commands of a shell text (split at ; & | ( ) and newlines); None when it
    does not split (then what it runs is unknown)."""
    import shlex  # noqa: PLC0415 - only for a traced process that starts a shell

    lex = shlex.shlex(text.replace("\\\n", " "), posix=True, punctuation_chars=True)
    lex.whitespace = " \t\r"
    lex.commenters = "#"
    out, cur = [], []
    try:
        for tok in lex:
            if tok == "\n" or (tok and set(tok) <= set(";&|()")):
                if cur:
                    out.append(cur)
                cur = []
            elif tok in ("{", "}", "then", "do", "else", "elif", "fi", "done", "if", "while", "until", "!"):
                continue
            else:
                cur.append(tok)
    except ValueError:
        return None
    if cur:
        out.append(cur)
    return out


def _read_script(path: str, env: Mapping[str, str]) -> str | None:
    found = path if os.sep in path else shutil.which(path, path=env.get("PATH"))
    try:
        with open(found or "", "rb") as f:
            return f.read(_MAX_SCRIPT).decode("utf-8", "replace")
    except OSError:
        return None


def _shell_text(text: str, env: dict[str, str], folder: str, depth: int) -> str | None:
    """Why a shell running ``text`` may start Python unseen, else None: each simple command
    with the environment its assignments, ``export`` and ``unset`` leave."""
    cmds = _shell_commands(text)
    if cmds is None:
        return "a shell command that cannot be read"
    for cmd in cmds:
        local = dict(env)
        while cmd and "=" in cmd[0] and cmd[0].split("=", 1)[0].isidentifier():
            k, v = cmd.pop(0).split("=", 1)
            local[k] = _expand(v, env)
        if not cmd:
            env.update(local)  # `X=1` alone sets a shell variable; exported ones matter only through `export`
            continue
        if cmd[0] in ("export", "declare", "typeset", "readonly"):
            for a in cmd[1:]:
                if "=" in a:
                    k, v = a.split("=", 1)
                    env[k] = _expand(v, env)
            continue
        if cmd[0] == "unset":
            for a in cmd[1:]:
                env.pop(a, None)
            continue
        if cmd[0] in ("source", "."):
            continue
        if "$" in cmd[0]:  # `$PYTHON -I x.py`: the program is the variable's value
            cmd = [*_expand(cmd[0], env).split(), *cmd[1:]]
            if not cmd or "$" in cmd[0]:
                return "a shell runs a program named by a variable it does not know"
        why = unseen_argv(cmd, local, folder, depth + 1)
        if why:
            return why
    return None


def _expand(value: str, env: Mapping[str, str]) -> str:
    """``$NAME``/``${NAME}`` of the shell's environment in an assignment's value."""
    return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: env.get(m.group(1), ""), value)


def unseen_argv(argv: list[str], env: dict[str, str], folder: str, depth: int = 0) -> str | None:
    """Why the command ``argv``, started with ``env``, may run Python that no tracer sees,
    else None. A Python: its options and environment. A wrapper (``timeout``, ``nice``, ...,
    ``env`` with its ``-i``, ``-u`` and assignments): the command it runs. A shell: the
    commands of its ``-c`` text or of its script. A script: its ``#!`` line, then as a
    shell's. A native program (git, nvidia-smi) runs no project Python."""
    if depth > _MAX_DEPTH or not argv:
        return "a command nested too deeply to read" if argv else None
    name = Path(argv[0]).name
    shown = " ".join(argv[:4])[:120]
    if _PYTHON.match(name):
        flag = _python_flags(argv)
        if flag:
            return f"started {name} {flag} (no sitecustomize: its code runs unseen): {shown}"
        why = _traced_env(env, folder)
        return f"started {name} with {why}: {shown}" if why else None
    if name == "env":
        env = dict(env)
        i = 1
        while i < len(argv):
            a = argv[i]
            if a in ("-i", "--ignore-environment", "-"):
                env = {}
            elif a in ("-u", "--unset"):
                i += 1
                env.pop(argv[i] if i < len(argv) else "", None)
            elif a.startswith("--unset="):
                env.pop(a.split("=", 1)[1], None)
            elif a.startswith("-u") and len(a) > 2:
                env.pop(a[2:], None)
            elif a in ("-C", "--chdir", "-S", "--split-string"):
                if a in ("-S", "--split-string") and i + 1 < len(argv):
                    return unseen_argv([*argv[i + 1].split(), *argv[i + 2:]], env, folder, depth + 1)
                i += 1
            elif a.startswith("-"):
                pass
            elif "=" in a:
                k, v = a.split("=", 1)
                env[k] = v
            else:
                return unseen_argv(argv[i:], env, folder, depth + 1)
            i += 1
        return None
    if name in _CLEARS_ENV:
        rest = [a for a in argv[1:] if not a.startswith("-")]
        return unseen_argv(rest, {"PATH": env.get("PATH", "")}, folder, depth + 1) if rest else None
    if name in _WRAPPERS:
        for i in range(1, len(argv)):
            a = argv[i]
            if a.startswith("-") or a.replace(".", "").replace(",", "").isdigit() or a[:-1].isdigit():
                continue
            if _PYTHON.match(Path(a).name) or Path(a).name in _SHELL_NAMES | _WRAPPERS | _CLEARS_ENV | {"env"} or (
                    shutil.which(a, path=env.get("PATH")) or os.sep in a):
                return unseen_argv(argv[i:], env, folder, depth + 1)
        return None
    if name in _SHELL_NAMES:
        args = argv[1:]
        if name == "busybox" and args:
            args = args[1:]
        for i, a in enumerate(args):
            if a == "-c" or (a.startswith("-") and not a.startswith("--") and "c" in a[1:] and "o" not in a[1:]):
                return _shell_text(args[i + 1], dict(env), folder, depth) if i + 1 < len(args) else None
            if not a.startswith("-"):
                text = _read_script(a, env)
                return None if text is None else _shell_text(text, dict(env), folder, depth)
        return None  # a shell reading its stdin: what it runs is unknown, but only an interactive one does
    text = _read_script(argv[0], env)
    if text is None or not text.startswith("#!"):
        return None  # not found (it will not start) or a native program
    shebang = text[2:].splitlines()[0].split() if text[2:].strip() else []
    if not shebang:
        return None
    if Path(shebang[0]).name == "env" or _PYTHON.match(Path(shebang[0]).name) or Path(shebang[0]).name in _SHELL_NAMES:
        why = unseen_argv([*shebang, *argv], env, folder, depth + 1)
        if why or Path(shebang[-1]).name not in _SHELL_NAMES:
            return why
    if Path(shebang[-1]).name in _SHELL_NAMES or Path(shebang[0]).name in _SHELL_NAMES:
        return _shell_text("\n".join(text.splitlines()[1:]), dict(env), folder, depth)
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
