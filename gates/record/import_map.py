"""Which project files each test file loads at run time: its import map.

Test selection (``ci_register.planning.select``) reads a static import graph; computed imports
(``importlib.import_module(name)`` with a name from a registry or a config) are
invisible to it. A recording run (``--gates-suite``) therefore also records, per test
file, the project files (``*.py`` under the rootdir, outside virtual environments) that
were loaded for it, and the history keeps the newest map per (suite, file)
(``AfterWrites.record_import_maps``). How a file's map is built:

- ``builtins.__import__`` and ``importlib.import_module`` are wrapped for the session.
  Every import *request* is noted, also of a module that is already loaded (a second
  file importing ``pkg.x`` needs ``pkg.x`` as much as the first): the request names the
  importing file (its globals' ``__file__``), which gives a run-time edge
  importer -> loaded file when the importer's body is running (a module-level import,
  run once), and the *owner* active at that moment (any import, also one inside a
  function, which runs again for each caller).
- Owners: the test file while pytest collects it (``pytest_make_collect_report`` of a
  Module) and while each of its tests runs (``pytest_runtest_protocol``); a fixture
  while it sets up (``pytest_fixture_setup``; a session fixture set up for one file
  counts for every file whose tests request it, by name); nobody at start (plugins,
  conftest files): those files count for every file of the session.
- A file's map: the run-time-edge closure of its own requests, the requests of the
  fixtures its tests used, the session's, the conftest files above it and the file
  itself.

Only files at least one of whose tests ran (not skipped, no collection error) get a map:
a file skipped on this machine has not shown what it loads where it runs.

Stdlib and pytest only, and no project imports: the selection benchmark loads this file
by path into old trees of the repository to record their maps.
"""

from __future__ import annotations

import builtins
import importlib
import importlib.util
import sys
import threading
import types
from collections.abc import Iterable
from pathlib import Path

import pytest

__all__ = ["EXECUTED_MAP_PATH", "RUNNER_MAP_PATH", "ImportMapPlugin", "ImportTracker"]

# The runner map's row in import_maps (ci_register.running.runner_map holds the same literal):
# what the nox session, the runner and pytest's plugins loaded, for every test at once.
RUNNER_MAP_PATH = "<runner>"
# What a suite run executed, by function (ci_register.running.executed.EXECUTED_MAP_PATH).
EXECUTED_MAP_PATH = "<executed>"

_SKIP_PARTS = {"site-packages", "dist-packages", "__pycache__", "node_modules"}


class ImportTracker:
    """Notes import requests by owner and importer; :meth:`maps` builds the per-file maps."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()
        self.owners: list[str] = []  # a stack: a fixture set up during a test
        self.owned: dict[str, set[str]] = {}
        self.session: set[str] = set()
        self.startup: set[str] = set()  # loaded before install(): pytest's plugins, initial conftests
        self.edges: dict[str, set[str]] = {}
        self._rel: dict[str, str | None] = {}  # __file__ -> path relative to root (None: not ours)
        self._lock = threading.Lock()
        self._orig_import = None
        self._orig_import_module = None

    # ----------------------------------------------------------------- files

    def rel(self, file: object) -> str | None:
        if not isinstance(file, str) or not file:
            return None
        got = self._rel.get(file, "")
        if got != "":
            return got
        out: str | None = None
        if file.endswith(".py"):
            try:
                p = Path(file).resolve().relative_to(self.root)
            except (ValueError, OSError):
                p = None
            if p is not None and not any(part in _SKIP_PARTS or part.startswith(".") for part in p.parts[:-1]):
                out = p.as_posix()
        self._rel[file] = out
        return out

    def _module_files(self, fullname: str, fromlist: Iterable[str]) -> set[str]:
        out: set[str] = set()
        parts = fullname.split(".")
        for i in range(1, len(parts) + 1):  # a.b.c loads a, a.b and a.b.c
            mod = sys.modules.get(".".join(parts[:i]))
            r = self.rel(getattr(mod, "__file__", None))
            if r:
                out.add(r)
        if fromlist:
            mod = sys.modules.get(fullname)
            for name in fromlist:
                sub = getattr(mod, name, None) if isinstance(name, str) and name != "*" else None
                if isinstance(sub, types.ModuleType):
                    r = self.rel(getattr(sub, "__file__", None))
                    if r:
                        out.add(r)
        return out

    def note(self, fullname: str, fromlist: Iterable[str], importer_globals: object) -> None:
        files = self._module_files(fullname, fromlist or ())
        if not files:
            return
        importer = None
        if isinstance(importer_globals, dict):
            # An edge only while the importer's body runs (its module-level imports, which
            # run once): an import inside a function counts for whoever called it.
            mod = sys.modules.get(importer_globals.get("__name__", ""))
            if getattr(getattr(mod, "__spec__", None), "_initializing", False):
                importer = self.rel(importer_globals.get("__file__"))
        with self._lock:
            if importer:
                self.edges.setdefault(importer, set()).update(files)
            if self.owners:
                self.owned.setdefault(self.owners[-1], set()).update(files)
            else:
                self.session.update(files)

    # ----------------------------------------------------------------- hooks

    def install(self) -> None:
        """Wrap the import functions. Project files loaded before (plugins, the initial
        conftest files and what they import) count for every file of the session."""
        if self._orig_import is not None:
            return
        for mod in list(sys.modules.values()):
            r = self.rel(getattr(mod, "__file__", None))
            if r:
                self.session.add(r)
        self.startup = set(self.session)
        orig_import = self._orig_import = builtins.__import__
        orig_import_module = self._orig_import_module = importlib.import_module
        tracker = self

        def tracked_import(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002 - __import__'s own names
            mod = orig_import(name, globals, locals, fromlist, level)
            try:
                full = name
                if level:
                    g = globals or {}
                    package = g.get("__package__") or (g.get("__name__", "").rpartition(".")[0]
                                                       if "__path__" not in g else g.get("__name__", ""))
                    full = importlib.util.resolve_name("." * level + name, package) if name else \
                        importlib.util.resolve_name("." * level, package)
                tracker.note(full, fromlist, globals)
            except Exception:  # noqa: BLE001 - noting must never break an import
                pass
            return mod

        def tracked_import_module(name, package=None):
            mod = orig_import_module(name, package)
            try:
                tracker.note(mod.__name__, (), sys._getframe(1).f_globals)
            except Exception:  # noqa: BLE001
                pass
            return mod

        builtins.__import__ = tracked_import
        importlib.import_module = tracked_import_module

    def uninstall(self) -> None:
        if self._orig_import is not None:
            builtins.__import__ = self._orig_import
            importlib.import_module = self._orig_import_module
            self._orig_import = self._orig_import_module = None

    # ------------------------------------------------------------------ maps

    def maps(self, files: Iterable[str], fixtures: dict[str, set[str]]) -> dict[str, list[str]]:
        """{test file: sorted project files it loaded} for ``files`` (paths relative to the
        root); ``fixtures``: per file, the fixture names its tests used."""
        with self._lock:
            edges = {k: set(v) for k, v in self.edges.items()}
            owned = {k: set(v) for k, v in self.owned.items()}
            session = set(self.session)
        conftests = {f for f in (*edges, *session, *(x for v in owned.values() for x in v))
                     if Path(f).name == "conftest.py"}
        out: dict[str, list[str]] = {}
        for path in files:
            seeds = {path} | session | owned.get(f"file:{path}", set())
            for name in fixtures.get(path, ()):
                seeds |= owned.get(f"fixture:{name}", set())
            parent = Path(path).parent
            seeds |= {c for c in conftests if parent.is_relative_to(Path(c).parent)}
            seen = set(seeds)
            todo = list(seeds)
            while todo:
                for nxt in edges.get(todo.pop(), ()):
                    if nxt not in seen:
                        seen.add(nxt)
                        todo.append(nxt)
            out[path] = sorted(seen)
        return out


class ImportMapPlugin:
    """pytest hooks that set the tracker's owner and say which files ran and with which
    fixtures. ``rel`` maps a pytest path to the path relative to the rootdir."""

    def __init__(self, tracker: ImportTracker) -> None:
        self.tracker = tracker
        self.fixtures: dict[str, set[str]] = {}
        self.ran: set[str] = set()  # files with a test that ran (not skipped)
        self.broken: set[str] = set()  # files that failed to collect

    def rel(self, path: object) -> str | None:
        return self.tracker.rel(str(path)) if path is not None else None

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(self, collector: pytest.Collector):
        rel = self.rel(getattr(collector, "path", None)) if isinstance(collector, pytest.Module) else None
        if rel is None:
            return (yield)
        self.tracker.owners.append(f"file:{rel}")
        try:
            report = yield
        finally:
            self.tracker.owners.pop()
        if report.failed:
            self.broken.add(rel)
        return report

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None):
        rel = self.rel(getattr(item, "path", None))
        if rel is None:
            return (yield)
        self.fixtures.setdefault(rel, set()).update(getattr(item, "fixturenames", ()) or ())
        self.tracker.owners.append(f"file:{rel}")
        try:
            return (yield)
        finally:
            self.tracker.owners.pop()

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        self.tracker.owners.append(f"fixture:{fixturedef.argname}")
        try:
            return (yield)
        finally:
            self.tracker.owners.pop()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" and not report.skipped and report.nodeid:
            self.ran.add(report.nodeid.split("::", 1)[0])  # relative to the rootdir: the tracker's root

    def maps(self) -> dict[str, list[str]]:
        """The maps of the files that ran a test and collected cleanly."""
        return self.tracker.maps(sorted(self.ran - self.broken), self.fixtures)

    def runner_map(self, runner_files: object) -> list[str] | None:
        """The runner map (``ci_register.running.runner_map``): the files the runner's plan
        says nox and the runner loaded, and those pytest loaded before the tracker was
        installed (its plugins), conftest files left out (the per-file maps scope them to
        their folders). None when no runner wrote the plan's list (pytest run by hand)."""
        if not isinstance(runner_files, list):
            return None
        own = {f for f in self.tracker.startup if Path(f).name != "conftest.py"}
        return sorted(own | {f for f in runner_files if isinstance(f, str) and f and not f.startswith("<")})
