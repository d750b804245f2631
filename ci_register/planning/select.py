"""Test selection from a change: run the registered files that can load a changed file.

A registered test file is *affected* by a change when its transitive static
imports (:mod:`ci_register.planning.imports`, conftest files above it included) reach a
changed file, or when it reaches a file that imports modules by a computed name
(that file may load anything). A change runs everything when it touches a path
the catalog declares (``[select] always``; CI config, build files and the
catalog by default), a Python file that does not parse or imports by a computed
name itself, or any file the graph cannot see and the catalog does not declare
(``ignore`` for docs, ``data`` for files that stand for Python files, such as
kernel sources compiled by a module). Suites in ``always_suites`` run in full.

Pure: a :class:`~ci_register.planning.imports.Graph`, the test paths and the changed
paths in, a :class:`Selection` out. ``[select]`` in the catalog::

    [select]
    package_roots = ["python", "src"]      # where top-level packages live ("." too)
    always = ["docker/**"]                 # added to the defaults below
    ignore = ["benchmark/**"]              # added to the defaults; wins over the default `always`
    always_suites = ["cpu"]
    runner = ["tools/ci/**"]               # code of the suite runner itself (see below)
    [select.data]
    "csrc/**" = ["python/pkg/ops/**"]      # a change here is a change to those files
    [select.dynamic]
    "python/pkg/plugins.py" = ["python/pkg/ext/*.py"]   # what its computed imports may load

``runner``: files the suite runner's processes may load (the nox session, ``python -m
ci_register run``, pytest's plugins), when they live in the tree (this repository's own
``ci_register/**``). A change to one runs everything unless a fresh runner map is
recorded (:mod:`ci_register.running.runner_map`, the ``<runner>`` row of the import maps):
then only a changed file the map holds runs everything, and the others are judged like
any module (by the static graph and the per-file maps). A changed file the runner map
holds runs everything whether declared or not.

Function-level evidence (:func:`select_by_suite`, :mod:`ci_register.planning.evidence`):
with a base revision, a changed Python file whose syntax tree is equal affects nothing,
and a change to function bodies only counts, per suite, only when one of those functions
ran in that suite's recorded run (the ``<executed>`` row); else the rules above decide. A
record made at a commit before the base (a post-merge run of main) is judged on the whole
change since that commit: what changed between it and the base counts as changed too.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ci_register.planning.evidence import Evidence, not_executed, still_describes
from ci_register.planning.imports import Graph, module_names, skipped_by_scan
from ci_register.planning.record_check import row_problem

__all__ = [
    "DEFAULT_ALWAYS",
    "DEFAULT_IGNORE",
    "RunnerMap",
    "SelectConfig",
    "SelectError",
    "Selection",
    "parse_select",
    "fresh_maps",
    "fresh_runner_map",
    "select_by_suite",
    "select_in_tree",
    "select_tests",
]

# Paths whose change can affect any test in ways an import graph cannot see.
DEFAULT_ALWAYS = (
    ".github/**", ".ci/**", ".gitlab-ci.yml", "noxfile.py", "pyproject.toml", "setup.py", "setup.cfg",
    "requirements*.txt", "**/requirements*.txt", "uv.lock", "poetry.lock", "pytest.ini", "tox.ini",
    "sitecustomize.py",
)
DEFAULT_IGNORE = ("**/*.md", "*.md", "docs/**", "LICENSE*", ".gitignore", "**/*.rst", "*.rst")
_KEYS = {"package_roots", "always", "ignore", "always_suites", "data", "dynamic", "map_max_age_days", "runner"}
RUNNER_MAP_PATH = "<runner>"  # ci_register.running.runner_map.RUNNER_MAP_PATH (planning does not import running)
DEFAULT_MAP_MAX_AGE_DAYS = 30.0


# The most changed paths a selection reads. Each changed Python file the tree lacks costs
# a pass over every file's imports (~11 ms on a 300-file tree, shared 2-core machine): a
# change past this many (a vendored tree, a generated diff) runs everything, and says so,
# instead of taking minutes to hours to find out.
MAX_CHANGED_PATHS = 5_000


def _too_many(changed: Sequence[str], always_suites: tuple[str, ...] = ()) -> Selection | None:
    """Everything, with the reason, for a change of more than `MAX_CHANGED_PATHS` paths."""
    if len(changed) <= MAX_CHANGED_PATHS:
        return None
    return Selection(tuple(changed), always_suites=always_suites,
                     everything=f"{len(changed)} paths changed, more than the {MAX_CHANGED_PATHS} a "
                                "selection reads; everything runs")


class SelectError(ValueError):
    """A ``[select]`` table that cannot be used; the message names the field and the fix."""


@dataclass(frozen=True)
class SelectConfig:
    package_roots: tuple[str, ...] = (".",)
    always: tuple[str, ...] = DEFAULT_ALWAYS  # the defaults, then the catalog's own
    ignore: tuple[str, ...] = DEFAULT_IGNORE
    declared_always: tuple[str, ...] = ()  # the catalog's own `always`: nothing overrides them
    always_suites: tuple[str, ...] = ()
    data: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (glob, python file globs it stands for)
    dynamic: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (file, globs its computed imports may load)
    map_max_age_days: float = DEFAULT_MAP_MAX_AGE_DAYS  # a recorded import map older than this is not used
    runner: tuple[str, ...] = ()  # the runner's own code: everything runs unless a runner map says otherwise


def _strs(raw: Mapping, key: str, where: str) -> tuple[str, ...]:
    v = raw.get(key, [])
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise SelectError(f"{where}: [select] {key} must be a list of non-empty strings, got {v!r}")
    return tuple(v)


def parse_select(raw: Mapping | None, where: str, *, catalog_path: str = "", suites: Iterable[str] = ()) -> SelectConfig:
    """The ``[select]`` table (defaults where absent); the catalog itself always runs everything."""
    raw = raw or {}
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise SelectError(f"{where}: unknown field {unknown[0]!r} in [select]; known: {', '.join(sorted(_KEYS))}")
    roots = _strs(raw, "package_roots", where) or (".",)
    always_suites = _strs(raw, "always_suites", where)
    known = set(suites)
    bad = [s for s in always_suites if known and s not in known]
    if bad:
        raise SelectError(f"{where}: [select] always_suites names unknown suite {bad[0]!r}; known: {', '.join(sorted(known))}")
    data_raw = raw.get("data", {})
    if not isinstance(data_raw, dict):
        raise SelectError(f"{where}: [select.data] must be a table of \"glob\" = [\"python file glob\", ...]")
    data = tuple((g, _strs({g: v}, g, where)) for g, v in data_raw.items())
    dyn_raw = raw.get("dynamic", {})
    if not isinstance(dyn_raw, dict):
        raise SelectError(f"{where}: [select.dynamic] must be a table of \"file.py\" = [\"glob it may load\", ...]")
    dynamic = tuple((f, tuple(v)) for f, v in dyn_raw.items()
                    if isinstance(v, list) and all(isinstance(x, str) and x for x in v))
    if len(dynamic) != len(dyn_raw):
        raise SelectError(f"{where}: [select.dynamic] values must be lists of globs ([] when nothing in the tree)")
    age = raw.get("map_max_age_days", DEFAULT_MAP_MAX_AGE_DAYS)
    if isinstance(age, bool) or not isinstance(age, int | float) or not 0 <= age <= 3650:
        raise SelectError(f"{where}: [select] map_max_age_days must be a number of days (0-3650), got {age!r}")
    extra_always = (catalog_path,) if catalog_path else ()
    return SelectConfig(
        package_roots=tuple(r.strip("/") or "." for r in roots),
        always=DEFAULT_ALWAYS + extra_always + _strs(raw, "always", where),
        declared_always=extra_always + _strs(raw, "always", where),
        ignore=DEFAULT_IGNORE + _strs(raw, "ignore", where),
        always_suites=always_suites,
        data=data,
        dynamic=dynamic,
        map_max_age_days=float(age),
        runner=_strs(raw, "runner", where),
    )


def _match(path: str, globs: Iterable[str]) -> str | None:
    for g in globs:
        if fnmatch.fnmatchcase(path, g) or (g.endswith("/**") and path.startswith(g[:-2])):
            return g
    return None


@dataclass(frozen=True)
class RunnerMap:
    """The files the suite runner's processes loaded in recorded runs (fresh ones, every
    suite's united); ``source`` says which runs, for the selection's reason."""
    files: frozenset[str]
    source: str = "recorded runner map"


@dataclass
class Selection:
    changed: tuple[str, ...]
    everything: str = ""  # why everything runs ("" when the selection applies)
    files: dict[str, str] = field(default_factory=dict)  # test path -> why it runs
    always_suites: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)  # changed paths that affect no test, and why
    maps: str = ""  # which recorded import maps the selection used (or why none)
    # Per suite, where function-level evidence (ci_register.planning.evidence) made suites
    # differ: then every registered suite has its own selection here.
    by_suite: dict[str, Selection] = field(default_factory=dict)

    def keeps(self, suite: str, path: str) -> bool:
        if suite in self.always_suites:
            return True
        if suite in self.by_suite:
            return self.by_suite[suite].keeps(suite, path)
        return bool(self.everything) or path in self.files

    def summary(self) -> str:
        """One line for stderr beside the matrix."""
        if self.by_suite:
            parts = [f"{s}: " + (f"everything ({sel.everything[:80]})" if sel.everything else f"{len(sel.files)} file(s)")
                     for s, sel in sorted(self.by_suite.items())]
            maps = f"; {self.maps}" if self.maps else ""
            return f"selection by suite (function-level evidence): {'; '.join(parts)}{maps}"
        if self.everything:
            return f"selection: everything runs: {self.everything}"
        more = f"; {len(self.notes)} changed path(s) affect no test" if self.notes else ""
        suites = f" (+ suites always run: {', '.join(self.always_suites)})" if self.always_suites else ""
        maps = f"; {self.maps}" if self.maps else ""
        return f"selection: {len(self.files)} registered file(s) can reach the {len(self.changed)} changed path(s){suites}{more}{maps}"

    def why(self, suite: str, path: str) -> str:
        if suite in self.by_suite and suite not in self.always_suites:
            return self.by_suite[suite].why(suite, path)
        if self.everything:
            return f"everything runs: {self.everything}"
        if suite in self.always_suites:
            return f"suite {suite} always runs ([select] always_suites)"
        return self.files.get(path, "")


def _chain(tree: Mapping[str, str | None], target: str, conftests: Mapping[str, list[str]]) -> list[str]:
    out = [target]
    while (prev := tree[out[-1]]) is not None:
        out.append(prev)
    return out[::-1]


def _say(chain: Sequence[str], conftests: Mapping[str, list[str]], what: str,
         recorded: Iterable[str] = (), plugins: Iterable[str] = ()) -> str:
    words = [chain[0]]
    recorded, plugins = set(recorded), set(plugins)
    for i, (prev, cur) in enumerate(zip(chain, chain[1:], strict=False)):
        if cur in conftests.get(prev, ()):
            verb = "uses"
        elif i == 0 and cur in plugins:
            verb = "runs under the pytest plugin"
        elif i == 0 and cur in recorded:
            verb = "loaded (recorded run)"
        else:
            verb = "imports"
        words.append(f"{verb} {cur}")
    return " ".join(words) + f" ({what})"


def _is_test_file(path: str) -> bool:
    name = Path(path).name
    return name == "conftest.py" or (name.startswith("test_") or name.endswith("_test.py"))


def select_tests(graph: Graph, tests: Iterable[str], changed: Sequence[str], config: SelectConfig,
                 maps: Mapping[str, Iterable[str]] | None = None, runner: RunnerMap | None = None) -> Selection:
    """Which of ``tests`` (registered paths) a change to ``changed`` paths can affect.

    ``maps``: per registered file, the files a recorded run of it loaded (fresh ones
    only; see :func:`fresh_maps`). A file with a map is affected when its static closure
    or its recorded files reach a change; the computed imports in its closure are
    covered by the record. A file without one falls back to the static graph, where a
    computed import in its closure makes any Python change reach it.

    ``runner``: the recorded runner map (:func:`fresh_runner_map`; None when none is
    fresh). A changed file it holds runs everything; a changed file of ``[select] runner``
    runs everything when there is no runner map, else it is judged like any module.
    """
    changed = tuple(dict.fromkeys(Path(c).as_posix().removeprefix("./") for c in changed))
    if too_many := _too_many(changed, config.always_suites):
        return too_many
    maps = {t: frozenset(fs) for t, fs in (maps or {}).items()}
    recorded = frozenset().union(*maps.values()) if maps else frozenset()
    sel = Selection(changed, always_suites=config.always_suites)
    refused = contradicted_declarations(graph, config, maps)
    declare_dynamic(graph, config, refused)
    sel.notes += [f"[select.dynamic] {p}: declaration refused: {why}; its computed imports count as open"
                  for p, why in sorted(refused.items())]
    test_set = set(tests)
    importers: set[str] | None = None  # files some file loads (built on first need)
    hit: dict[str, str] = {}  # graph file -> what happened to it
    deleted: set[str] = set()
    for path in changed:
        # A catalog's `ignore` may carve a path out of the built-in defaults (a release
        # workflow under .github/), never out of its own `always`.
        g = _match(path, config.declared_always) or (
            None if _match(path, config.ignore[len(DEFAULT_IGNORE):]) else _match(path, config.always))
        if g:
            sel.everything = f"{path} changed (declared to run everything: {g!r})"
            return sel
        if runner is not None and path in runner.files:
            sel.everything = (f"{path} changed: the suite runner loads it ({runner.source}), "
                              "so it can change any test's outcome")
            return sel
        g = _match(path, config.runner)
        if g and runner is None:
            sel.everything = (f"{path} changed (declared runner code: {g!r}) and no fresh runner map is "
                              "recorded, so whether the runner loads it is unknown; a --gates-suite run "
                              "through `ci_register run` (nox -s SUITE) records one")
            return sel
        if path.endswith(".py"):
            node = graph.files.get(path)
            if node is None and skipped_by_scan(path) and not _match(path, config.ignore):
                # Under a folder the scan skips (.claude/, build/): no node, no importers by name,
                # but a file loaded by its path may still run. The files whose [select.dynamic]
                # globs name it load it; with none, what loads it is unknown.
                loaders = sorted(p for p, globs in config.dynamic if p in graph.files and _match(path, globs))
                for p in loaders:
                    hit.setdefault(p, f"loads {path} by its path ([select.dynamic]), changed")
                if not loaders:
                    sel.everything = (f"{path} changed: the scan skips its folder (hidden or build), so what loads "
                                      "it is unknown; declare it in [select] ignore if no test loads it, or name it "
                                      "in the [select.dynamic] globs of the file that loads it")
                    return sel
                continue
            if node is None:  # deleted, or outside the scanned tree: its importers stand in
                names = module_names(path, (*graph.package_roots, *_parents(path)))
                for imp in graph.importers_of_name(names):
                    hit.setdefault(imp, f"imports {path}, deleted")
                deleted.add(path)
                if not names and path not in recorded:
                    sel.notes.append(f"{path}: not importable by name; affects no registered test")
                continue
            # A file the catalog says no registered test loads (`ignore`: the framework's own
            # tests, tools) and no recorded run loaded: what it imports cannot matter. Tests that
            # reach it by a static edge still count it changed.
            ignored = bool(_match(path, config.ignore)) and path not in recorded and path not in test_set
            if node.syntax_error and not ignored:
                sel.everything = f"{path} does not parse ({node.syntax_error}); its imports are unknown"
                return sel
            if node.open_import and not ignored:
                sel.everything = f"{path}:{node.open_import} imports a module by a computed name; what it loads is unknown"
                return sel
            hit[path] = "changed"
            if path in test_set or path in recorded or _is_test_file(path) or _match(path, config.ignore):
                continue
            if importers is None:
                importers = {f for out in graph.edges.values() for f in out} | graph.fixture_files() | set(graph.plugins)
            if path not in importers:
                # No static import reaches it and no recorded run loaded it: a computed name
                # (or a root the graph does not know) may load it. Never under-select.
                roots = ", ".join(graph.package_roots)
                sel.everything = (f"{path} changed: no file imports it (package roots {roots}) and no recorded "
                                  "run loaded it, so what loads it is unknown; declare it in [select] ignore "
                                  "if no test can load it, or record import maps (--gates-suite runs)")
                return sel
            continue
        stands_for = [globs for g, globs in config.data if fnmatch.fnmatchcase(path, g) or (g.endswith("/**") and path.startswith(g[:-2]))]
        if stands_for:
            for f in graph.files:
                if _match(f, [x for gl in stands_for for x in gl]):
                    hit.setdefault(f, f"stands for {path}, changed")
            continue
        if _match(path, config.ignore):
            sel.notes.append(f"{path}: ignored ([select] ignore)")
            continue
        sel.everything = f"{path} changed: not Python and not declared in [select] always/ignore/data"
        return sel
    # A computed import may load any Python file but those the catalog says no test loads
    # (`ignore`: the framework's own tests, tools, docs), which the no-importer rule trusts too.
    python_changed = any(p.endswith(".py") and not _match(p, config.ignore) for p in changed) or any(
        not _match(p, config.ignore) for p in hit)
    open_files = {p for p, n in graph.files.items() if n.open_import}
    for test in sorted(test_set):
        if test in hit and hit[test] == "changed":
            sel.files[test] = f"{test} changed"
            continue
        m = maps.get(test)
        gone = sorted(deleted & m) if m else []
        if gone:
            sel.files[test] = f"{test} loaded {gone[0]} in its recorded run (deleted)"
            continue
        tree = graph.closure(test, seeds=sorted(m) if m else ())
        reached = sorted((f for f in tree if f in hit), key=lambda f: (len(_chain(tree, f, graph.conftests)), f))
        if reached:
            f = reached[0]
            sel.files[test] = _say(_chain(tree, f, graph.conftests), graph.conftests, hit[f], m or (), graph.plugins)
            continue
        if m is not None:
            continue  # its recorded run says what its computed imports loaded
        opens = sorted(f for f in tree if f in open_files)
        if opens and python_changed:
            f = opens[0]
            line = graph.files[f].open_import
            sel.files[test] = _say(_chain(tree, f, graph.conftests), graph.conftests,
                                   f"line {line} imports by a computed name, so any Python change may reach it",
                                   (), graph.plugins)
    return sel


def select_by_suite(graph: Graph, suites: Mapping[str, Iterable[str]], changed: Sequence[str], config: SelectConfig,
                    maps: Mapping[str, Iterable[str]] | None = None, runner: RunnerMap | None = None,
                    evidence: Evidence | None = None) -> Selection:
    """:func:`select_tests` with function-level evidence (:mod:`ci_register.planning.evidence`):
    a changed file whose syntax tree is equal affects nothing, and for a suite whose record
    is usable, a bodies-only change none of whose changed functions ran in that suite's
    recorded run counts as no change. A suite whose record was made before the base is
    judged on the whole change since the record's commit (``evidence.since``), not only on
    ``changed``. ``suites``: {suite: its registered paths}."""
    tests = sorted({p for paths in suites.values() for p in paths})
    changed = tuple(dict.fromkeys(Path(c).as_posix().removeprefix("./") for c in changed))
    if evidence is None:
        return select_tests(graph, tests, changed, config, maps, runner)
    # Declared paths (CI configuration, the catalog) stay as the catalog says.
    def declared(paths: Iterable[str]) -> set[str]:
        return {p for p in paths if _match(p, config.declared_always) or _match(p, config.always)}

    equal = evidence.equal - declared(changed)
    notes = [f"{p}: the syntax tree is unchanged (comments or layout only); affects nothing" for p in changed
             if p in equal]
    rest = tuple(p for p in changed if p not in equal)
    base = select_tests(graph, tests, rest, config, maps, runner)
    base.changed, base.notes = changed, notes + base.notes
    # Per suite with a record: the paths that count (the change since its record, less the
    # equal ones and the bodies that did not run there) and why the others do not.
    # ``near``: where the record still describes the base (nothing it loaded changed since), the
    # paths of the pull request's own change that count, judged as if recorded at the base.
    judged: dict[str, tuple[tuple[str, ...], dict[str, str], bool, tuple[str, ...] | None]] = {}
    own_bodies = {p: u for p, u in evidence.bodies.items() if p not in declared(changed)}
    for suite, rec in evidence.records.items():
        if suite not in suites:
            continue
        since = evidence.since.get(rec.commit)
        s_changed, s_equal, s_bodies = ((since.changed, set(since.equal), dict(since.bodies)) if since is not None
                                        else (changed, set(evidence.equal), dict(evidence.bodies)))
        kept = declared(s_changed)
        s_equal -= kept
        why = not_executed({p: u for p, u in s_bodies.items() if p not in kept}, rec)
        near = None
        if since is not None and still_describes(rec.entries, since, config.ignore):
            own = not_executed(own_bodies, rec)
            near = tuple(p for p in rest if p not in own)
        judged[suite] = (tuple(p for p in s_changed if p not in s_equal and p not in why), why, since is not None, near)
    if evidence.maps_since is None and all(paths == rest and not wide for paths, _, wide, _ in judged.values()):
        return base
    out = Selection(changed, always_suites=config.always_suites, notes=list(base.notes))
    cache: dict[tuple, Selection] = {(rest, False, None): base}
    alone: list[Selection] = []  # the static graph alone on the change itself (built on first need)
    if evidence.maps_since is not None:  # suites without a record: the maps' whole change
        m = evidence.maps_since
        m_equal = set(m.equal) - declared(m.changed)
        m_paths = tuple(p for p in m.changed if p not in m_equal)
        loaded = set().union(*(maps or {}).values(), runner.files if runner else ())
        m_near = rest if still_describes(loaded, m, config.ignore) else None
    for suite in sorted(suites):
        paths, why, wide, near = judged.get(suite, (rest, {}, False, None))
        if suite not in judged and evidence.maps_since is not None:
            paths, wide, near = m_paths, True, m_near
        key = (paths, wide, near)
        if key not in cache:  # over every registered file: suites with the same paths share it
            sel = select_tests(graph, tests, paths, config, maps, runner)
            sel.changed = changed
            widened = sorted(set(paths) - set(changed))
            sel.notes = [*notes, *(f"{p}: {w}" for p, w in sorted(why.items())),
                         *([f"{len(widened)} path(s) changed between the record's commit and the base count too "
                            f"(e.g. {widened[0]})"] if widened else []), *sel.notes]
            if wide:
                # A record made before the base judges the whole change since it; the static
                # graph alone judges the change itself without any record. Each keeps every
                # test the change can affect, so a test runs only where both keep it.
                if not alone:
                    alone.append(select_tests(graph, tests, rest, config))
                sel = _both(sel, alone[0], tests)
            if near is not None:  # the record describes the base too: its judgement of the change itself
                sel = _both(sel, select_tests(graph, tests, near, config, maps, runner), tests)
            cache[key] = sel
        out.by_suite[suite] = cache[key]
        for p, w in sorted(why.items()):
            note = f"{p}: {w}"
            if note not in out.notes:
                out.notes.append(note)
    everything = {sel.everything for sel in out.by_suite.values()}
    out.everything = everything.pop() if len(everything) == 1 else ""  # all suites alike, else per suite
    out.files = {p: w for sel in out.by_suite.values() for p, w in sel.files.items()}
    return out


def _both(a: Selection, b: Selection, tests: Iterable[str]) -> Selection:
    """The tests both selections keep (each is sound alone, so both together are), with
    ``a``'s reasons and notes."""
    if b.everything:
        return a
    if a.everything:
        out = Selection(a.changed, always_suites=a.always_suites, files=dict(b.files), notes=list(a.notes))
        out.notes.append(f"the record's whole change runs everything ({a.everything[:160]}); the static graph "
                         "on the change itself keeps less")
        return out
    files = {t: a.files[t] for t in tests if t in a.files and t in b.files}
    return Selection(a.changed, always_suites=a.always_suites, files=files, notes=list(a.notes))


def contradicted_declarations(graph: Graph, config: SelectConfig, maps: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """{declared file: why}: the ``[select.dynamic]`` declarations a recorded run contradicts.
    A test file whose static closure, with the declarations applied, reaches a declared file
    and whose recorded run loaded a project file that closure lacks (nor the session's
    plugins load) loaded it by a name the graph does not see: the declaration under-states
    what the computed import loads, so it is not used (the file stays open)."""
    declared = {p: g for p, g in config.dynamic if p in graph.files and graph.files[p].open_import}
    if not declared or not maps:
        return {}
    trial = Graph(graph.root, graph.package_roots, dict(graph.files), graph.modules,
                  {k: set(v) for k, v in graph.edges.items()}, graph.conftests, graph.fixture_edges, graph.plugins,
                  graph.detected_roots)
    for p, globs in declared.items():
        trial.edges.setdefault(p, set()).update(f for f in trial.files if _match(f, globs) and f != p)
    session: set[str] = set()
    for plugin in graph.plugins:
        session |= set(trial.closure(plugin))
    out: dict[str, str] = {}
    for test, files in sorted(maps.items()):
        if test not in trial.files:
            continue
        tree = trial.closure(test)
        reached = sorted(p for p in declared if p in tree and p not in out)
        if not reached:
            continue
        inits = {f"{d}/__init__.py" for d in _parents(test)}  # pytest imports the test's packages
        extra = sorted(f for f in files if f in trial.files and f not in tree and f not in session and f not in inits)
        if extra:
            for p in reached:
                out[p] = (f"the recorded run of {test} loaded {extra[0]}, which no static import of it "
                          f"reaches (declared: {list(declared[p]) or '[]'})")
    return out


def declare_dynamic(graph: Graph, config: SelectConfig, refused: Mapping[str, str] | None = None) -> None:
    """Close the files ``[select.dynamic]`` declares: their computed imports load only the
    files its globs match (a person read the code; the catalog says so), except those a
    recorded run contradicts (``refused``: :func:`contradicted_declarations`)."""
    for path, globs in config.dynamic:
        node = graph.files.get(path)
        if node is None or not node.open_import or path in (refused or {}):
            continue
        node.open_import = 0
        graph.edges.setdefault(path, set()).update(f for f in graph.files if _match(f, globs) and f != path)


def _parents(path: str) -> list[str]:
    out = []
    d = Path(path).parent
    while d.as_posix() != ".":
        out.append(d.as_posix())
        d = d.parent
    return out


def changed_since(base: str, root: Path) -> list[str]:
    """Paths changed between the merge base of ``base`` and HEAD (what a pull request changes)."""
    import subprocess  # noqa: PLC0415 - the one git edge of this module

    if not base or base.startswith("-"):
        # `--base=--output=FILE` would be a git option (it writes FILE): a ref never starts so.
        raise SelectError(f"--base {base!r}: not a git ref (a ref never starts with '-'); give a branch, tag or commit")
    r = subprocess.run(["git", "diff", "--name-only", "--no-renames", "--end-of-options", f"{base}...HEAD"], cwd=root,
                       capture_output=True, text=True, timeout=120, check=False)
    if r.returncode != 0:
        msg = _git_reason(r.stderr)
        raise SelectError(f"--base {base}: {msg}; fetch the base branch (git fetch origin {base}) or pass --changed-files")
    return [line for line in r.stdout.splitlines() if line]


def _git_reason(stderr: str) -> str:
    """git's own reason from its stderr: the first ``fatal:``/``error:`` line (the lines
    after it are usage hints), else the first line; never more than one line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("fatal:", "error:")):
            return line[:300]
    return (lines[0] if lines else "git diff failed")[:300]


def fresh_maps(rows: Iterable[Mapping], now: datetime, max_age_days: float) -> tuple[dict[str, set[str]], list[str]]:
    """({test file: files its recorded runs loaded}, notes) from stored map rows: a file's
    maps of every suite recorded within ``max_age_days`` of ``now``, united. An older map
    (or an unreadable one) is not used: that file falls back to the static graph."""
    maps: dict[str, set[str]] = {}
    stale: set[str] = set()
    refused: list[str] = []
    for r in rows:
        path, files, at = r.get("path"), r.get("files"), r.get("recorded_at")
        if not isinstance(path, str) or path.startswith("<"):  # <runner>, <executed>
            continue
        if why := row_problem(r, now):
            refused.append(f"{str(path)[:80]} ({why})")
            continue
        try:
            when = datetime.fromisoformat(str(at).replace("Z", "+00:00"))
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
        except ValueError:
            stale.add(path)
            continue
        if (now - when).total_seconds() > max_age_days * 86400:
            stale.add(path)
            continue
        maps.setdefault(path, set()).update(f for f in files if isinstance(f, str))
    stale -= set(maps)
    notes = [f"{len(stale)} recorded import map(s) older than {max_age_days:g} days not used "
             f"(e.g. {sorted(stale)[0]}): those files use the static graph"] if stale else []
    if refused:
        notes.append(f"{len(refused)} recorded import map(s) refused (e.g. {refused[0]}): those files use the "
                     "static graph; `gate-report check` lists them")
    return maps, notes


def fresh_runner_map(rows: Iterable[Mapping], now: datetime, max_age_days: float) -> tuple[RunnerMap | None, list[str]]:
    """(the runner map, notes) from stored map rows: the ``<runner>`` rows of every suite
    recorded within ``max_age_days`` of ``now``, united; None when there is none (or only
    older or unreadable ones): then ``[select] runner`` paths run everything."""
    files: set[str] = set()
    newest: tuple[datetime, str, str] | None = None
    suites: set[str] = set()
    stale = 0
    notes_refused: list[str] = []
    for r in rows:
        if r.get("path") != RUNNER_MAP_PATH:
            continue
        if why := row_problem(r, now):
            notes_refused.append(f"a runner map of suite {r.get('suite')} refused ({why})")
            continue
        got, at = r.get("files"), r.get("recorded_at")
        try:
            when = datetime.fromisoformat(str(at).replace("Z", "+00:00"))
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
        except ValueError:
            when = None
        if not isinstance(got, list) or when is None or (now - when).total_seconds() > max_age_days * 86400:
            stale += 1
            continue
        files.update(f for f in got if isinstance(f, str))
        suites.add(str(r.get("suite") or "?"))
        commit = str(r.get("commit_sha") or "no commit")[:10]
        if newest is None or when > newest[0]:
            newest = (when, commit, when.strftime("%Y-%m-%d"))
    notes = [f"{stale} runner map(s) older than {max_age_days:g} days (or unreadable) not used"] if stale else []
    notes += notes_refused
    if newest is None:
        return None, notes
    source = f"runner map of suite(s) {', '.join(sorted(suites))}, newest at {newest[1]} on {newest[2]}"
    return RunnerMap(frozenset(files), source), notes


def select_in_tree(root: Path, catalog, tests: Iterable[str], changed: Sequence[str],
                   history: str | None = None, *, now: datetime | None = None,
                   suites: Mapping[str, Iterable[str]] | None = None, base: str | None = None) -> Selection:
    """Scan the tree at ``root`` with the catalog's ``[select]`` and select ``tests``,
    with the import maps the history (``--history``, else ``GATES_HISTORY``, else
    ``ROOT/history.db``) recorded. With ``base`` (a git ref; the change is its merge base
    with HEAD to HEAD) and ``suites`` ({suite: registered paths}), function-level evidence
    too (:func:`select_by_suite`)."""
    from ci_register.planning.evidence import executed_records, gather, maps_change  # noqa: PLC0415
    from ci_register.planning.imports import scan  # noqa: PLC0415
    from ci_register.planning.recorded_imports import recorded_maps  # noqa: PLC0415

    root = Path(root)
    changed = tuple(dict.fromkeys(Path(c).as_posix().removeprefix("./") for c in changed))
    if too_many := _too_many(changed):  # before the scan and the evidence's git reads
        return too_many
    try:
        cat_rel = Path(catalog.path).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        cat_rel = ""
    config = parse_select(catalog.select, str(catalog.path), catalog_path=cat_rel, suites=catalog.suites)
    rows, problem = recorded_maps(history, root)
    now = now or datetime.now(UTC)
    maps, notes = fresh_maps(rows, now, config.map_max_age_days)
    runner, runner_notes = fresh_runner_map(rows, now, config.map_max_age_days)
    tests = list(tests)
    graph = scan(root, config.package_roots)
    evidence = None
    ev_notes: list[str] = []
    if base is not None and suites is not None:
        merge_base = _merge_base(base, root)
        records, ev_notes = executed_records(rows, now, config.map_max_age_days)
        if merge_base:
            evidence = gather(root, merge_base, "HEAD", changed, records)
            ev_notes += evidence.notes
            evidence.maps_since, got = maps_change(root, _map_commits(rows, now, config.map_max_age_days),
                                                   merge_base, "HEAD")
            ev_notes += got
        sel = select_by_suite(graph, suites, changed, config, maps, runner, evidence)
    else:
        sel = select_tests(graph, tests, changed, config, maps, runner)
    used = len(set(tests) & set(maps))
    held = f"a runner map ({runner.source}, {len(runner.files)} files)" if runner else "no runner map"
    held_ex = (f"executed-functions records of suite(s) {', '.join(sorted(evidence.records)) or '(none usable)'}"
               if evidence is not None else "")
    sel.maps = "; ".join([f"recorded import maps for {used} of {len(set(tests))} registered file(s), {held}",
                          *([held_ex] if held_ex else []), *notes, *runner_notes, *ev_notes,
                          *([f"no recorded import maps read ({problem}): the static graph alone"] if problem else [])])
    return sel


def _map_commits(rows: Iterable[Mapping], now: datetime, max_age_days: float) -> set[str]:
    """The commits of the import-map and runner-map rows selection uses (sound and fresh)."""
    out = set()
    for r in rows:
        path, commit = r.get("path"), r.get("commit_sha")
        if not isinstance(path, str) or path == "<executed>" or not commit or row_problem(r, now):
            continue
        try:
            when = datetime.fromisoformat(str(r.get("recorded_at")).replace("Z", "+00:00"))
        except ValueError:
            continue
        when = when if when.tzinfo else when.replace(tzinfo=UTC)
        if (now - when).total_seconds() <= max_age_days * 86400:
            out.add(str(commit))
    return out


def _merge_base(base: str, root: Path) -> str | None:
    import subprocess  # noqa: PLC0415 - the git edge of this module

    r = subprocess.run(["git", "merge-base", "--end-of-options", base, "HEAD"], cwd=root, capture_output=True, text=True,
                       timeout=120, check=False)
    return r.stdout.strip() or None if r.returncode == 0 else None
