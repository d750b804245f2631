"""A static import graph of a repository: which Python files each file can load.

Every ``*.py`` file is parsed with ``ast`` (never imported) and its imports are
resolved to files of the same tree:

- ``import a.b.c`` loads ``a``, ``a.b`` and ``a.b.c`` (each package's
  ``__init__.py`` runs); ``from a.b import x`` loads ``a.b`` and ``a.b.x`` when
  ``x`` is a submodule; ``from . import x`` and ``from ..m import y`` resolve
  against the importing file's package. Package ``__init__`` re-exports need no
  special case: the ``__init__.py`` is a node with its own imports.
- Module names come from the package roots (``[select] package_roots`` in the
  catalog: ``.``, ``src`` layouts, ``python/`` folders) and, for each file,
  from its pytest "basedir" and every folder above it up to the root (tests
  put their own folders on ``sys.path``). A name that several roots resolve
  adds every match: more edges only ever select more.
- Imports anywhere in a file count (inside functions, ``try`` blocks and
  ``if TYPE_CHECKING``): the graph over-approximates, never under.
- ``importlib.import_module("a.b")`` and ``__import__("a.b")`` with a literal are
  imports; with a literal prefix (``f"pkg.models.{name}"``, ``"pkg." + name``)
  they load every module under that prefix; with anything else the file is
  *open* (it may load any module) and the selection treats it so.
- A file that edits ``sys.path`` (``sys.path.insert``, ``site.addsitedir``, ...), and every
  file under a conftest that does, may import a folder of the tree by a bare name: an
  absolute import no root resolves is an edge to every file whose path ends with that
  name (``import recipe`` reaches ``examples/openenv/recipe.py``).
- A string literal equal to a module name or a file path of the tree, and the
  ``-m pkg.server`` / ``scripts/run.py`` inside a command-line string (what a test
  starts in a subprocess), are edges too; so is ``"pkg.mod.func"`` to ``pkg.mod``
  (a function named by its dotted path, for a loader to import).

Pure apart from reading the files: :func:`scan` builds a :class:`Graph`.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import os
import re
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ci_register.registered.paths import read_regular

__all__ = ["FileNode", "Graph", "module_names", "parse_imports", "scan", "skipped_by_scan"]

_SKIP_DIRS = {"__pycache__", ".git", ".nox", ".venv", "venv", "node_modules", ".tox", "build", "dist"}
_DYNAMIC_CALLS = {"import_module", "__import__"}
# Calls that run a file named by its path (the path argument's index): a literal path is an
# edge to that file, any other makes the file open, like a computed import_module.
_FILE_LOADERS = {"spec_from_file_location": 1, "run_path": 0, "SourceFileLoader": 1, "SourcelessFileLoader": 1}
_SCRIPT = re.compile(r"[\w./-]+\.py\b")
_MODULE_FLAG = re.compile(r"-m\s+([A-Za-z_][\w.]*)")
# A dotted name standing as a word of a command line (`--custom-rm-path pkg.rm.score`,
# `--spec pkg.models.x get_spec`): a loader the command starts imports it by that name.
_DOTTED = re.compile(r"(?<![\w./-])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?![\w/-])")
# The longest string literal read for the names and paths inside it (a command line joined
# from many literals is one constant); longer ones are data.
MAX_COMMAND_CHARS = 20_000


# The largest Python file the scan parses: ast takes ~440 times a file's size in memory
# (a 50 MB literal took 22 GB); a generated module past this is not parsed.
MAX_SCAN_BYTES = 4 << 20


@dataclass
class FileNode:
    path: str  # posix, relative to the repository root
    imports: set[str] = field(default_factory=set)  # absolute dotted names it may load
    relative: set[str] = field(default_factory=set)  # "pkg/dir/mod": path stems of relative imports
    prefixes: set[str] = field(default_factory=set)  # "pkg.models." : every module under it
    strings: set[str] = field(default_factory=set)  # literals that may name a module or file
    open_import: int = 0  # line of a dynamic import with no literal name (0: none)
    path_edit: int = 0  # line of a sys.path insert/append/extend/assignment or site.addsitedir (0: none)
    syntax_error: str = ""  # "line N: message" when the file does not parse
    # conftest.py only: each fixture's own imports (a sub-node), the fixtures it requests,
    # and which are autouse. A fixture's imports count only for tests that can use it.
    fixtures: dict[str, FileNode] = field(default_factory=dict)
    fixture_args: dict[str, set[str]] = field(default_factory=dict)
    autouse: set[str] = field(default_factory=set)
    names: set[str] = field(default_factory=set)  # identifiers and short strings: fixtures it may request


def _relative_stem(path: str, level: int, module: str | None) -> str | None:
    """Path stem that ``from <level dots><module> import ...`` in ``path`` names."""
    d = Path(path).parent
    for _ in range(level - 1):
        if d.as_posix() == ".":
            return None  # beyond the top: Python raises ImportError too
        d = d.parent
    stem = d / module.replace(".", "/") if module else d
    return stem.as_posix()


class _Consts:
    """String values a file gives its names: every ``NAME = <expr>`` in the file, and the
    loop variables of ``pkgutil.iter_modules`` / ``walk_packages`` walks (which yield
    every module under the walk's prefix). A name assigned anything else is unknown."""

    def __init__(self, tree: ast.Module) -> None:
        self.assigned: dict[str, list[ast.expr | None]] = {}
        self.walks: dict[str, ast.expr | None] = {}  # loop variable -> the walk's prefix
        self.modules: dict[str, str] = {}  # name bound by an import -> the module's dotted name
        for n in ast.walk(tree):
            if isinstance(n, ast.Import):
                for a in n.names:
                    self.modules[a.asname or a.name.partition(".")[0]] = a.name if a.asname else a.name.partition(".")[0]
            elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
                for a in n.names:
                    self.modules[a.asname or a.name] = f"{n.module}.{a.name}"
            elif isinstance(n, ast.Assign):
                for t in n.targets:
                    self._bind(t, n.value)
            elif isinstance(n, ast.AnnAssign) and n.value is not None:
                self._bind(n.target, n.value)
            elif isinstance(n, ast.AugAssign | ast.NamedExpr):
                self._bind(n.target, None)  # rebinding by an expression: unknown
            elif isinstance(n, ast.For | ast.comprehension) and isinstance(n.iter, ast.Call):
                f = n.iter.func
                if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")) in ("iter_modules", "walk_packages"):
                    prefix = n.iter.args[1] if len(n.iter.args) > 1 else next(
                        (k.value for k in n.iter.keywords if k.arg == "prefix"), None)
                    for t in ast.walk(n.target):
                        if isinstance(t, ast.Name):
                            self.walks[t.id] = prefix

    def _bind(self, target: ast.expr, value: ast.expr | None) -> None:
        if isinstance(target, ast.Name):
            self.assigned.setdefault(target.id, []).append(value)
        elif isinstance(target, ast.Tuple | ast.List):
            for t in target.elts:
                self._bind(t, None)

    def values(self, node: ast.expr | None, depth: int = 0) -> set[str] | None:
        """Every string ``node`` can be, or None when any is unknown."""
        if node is None or depth > 8:
            return None
        if isinstance(node, ast.Constant):
            return {node.value} if isinstance(node.value, str) else None
        if isinstance(node, ast.Name) and node.id in self.assigned and node.id not in self.walks:
            out: set[str] = set()
            for v in self.assigned[node.id]:
                got = self.values(v, depth + 1)
                if got is None:
                    return None
                out |= got
            return out
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and isinstance(node.func.value, ast.Name) and 1 <= len(node.args) <= 2 and not node.keywords:
            table = self.table(node.func.value.id)  # `_LAZY.get(name)`: any value of a literal table
            if table is None:
                return None
            if len(node.args) == 2:
                default = self.values(node.args[1], depth + 1)
                return None if default is None else table | default
            return table
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            return self.table(node.value.id)  # `_LAZY[name]`
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.values(node.left, depth + 1), self.values(node.right, depth + 1)
            if left is None or right is None or len(left) * len(right) > 64:
                return None
            return {x + y for x in left for y in right}
        if isinstance(node, ast.Attribute) and node.attr == "__name__" and isinstance(node.value, ast.Name) \
                and node.value.id in self.modules and node.value.id not in self.assigned:
            return {self.modules[node.value.id]}  # `pkg.__name__` of an imported module
        if isinstance(node, ast.FormattedValue) and node.conversion == -1 and node.format_spec is None:
            return self.values(node.value, depth + 1)
        if isinstance(node, ast.JoinedStr):
            parts = [self.values(v, depth + 1) for v in node.values]
            if any(p is None or len(p) != 1 for p in parts):
                return None
            return {"".join(next(iter(p)) for p in parts if p)}
        return None

    def table(self, name: str) -> set[str] | None:
        """The values of ``NAME = {"k": "pkg.mod", ...}``, a dict literal of strings bound
        once (a lazy-import table), or None."""
        bound = self.assigned.get(name, [])
        if len(bound) != 1 or not isinstance(bound[0], ast.Dict) or name in self.walks:
            return None
        vals = bound[0].values
        if not vals or not all(isinstance(v, ast.Constant) and isinstance(v.value, str) for v in vals):
            return None
        return {v.value for v in vals}

    def prefixes(self, node: ast.expr | None, depth: int = 0) -> set[str] | None:
        """Literal starts of every string ``node`` can be (``f"pkg.{x}"``, ``P + x``, a
        walk's loop variable ``info.name``), or None when unknown."""
        if node is None or depth > 8:
            return None
        exact = self.values(node, depth + 1)
        if exact is not None:
            return exact
        if isinstance(node, ast.JoinedStr) and node.values:  # the literal parts before the first unknown
            head = ""
            for v in node.values:
                got = self.values(v, depth + 1)
                if got is None or len(got) != 1:
                    break
                head += next(iter(got))
            return {head}
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.prefixes(node.left, depth + 1)
        base = node
        while isinstance(base, ast.Attribute | ast.Subscript):  # info.name, found[1]
            base = base.value
        if isinstance(base, ast.Name) and base.id in self.walks:
            return self.values(self.walks[base.id], depth + 1)
        if isinstance(node, ast.Name) and node.id in self.assigned:
            out: set[str] = set()
            for v in self.assigned[node.id]:
                got = self.prefixes(v, depth + 1)
                if got is None:
                    return None
                out |= got
            return out
        return None


def _fixture_defs(tree: ast.Module) -> dict[str, tuple[ast.AST, set[str], bool]]:
    """Top-level ``@pytest.fixture`` functions of a conftest: name -> (node, the
    fixtures it requests, autouse)."""
    out: dict[str, tuple[ast.AST, set[str], bool]] = {}
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for dec in fn.decorator_list:
            call = dec if isinstance(dec, ast.Call) else None
            target = call.func if call else dec
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            if name != "fixture":
                continue
            kw = {k.arg: k.value for k in (call.keywords if call else ())}
            fname = kw["name"].value if isinstance(kw.get("name"), ast.Constant) else fn.name
            # autouse=False literally is the only "not autouse"; anything computed counts as autouse
            auto = "autouse" in kw and not (isinstance(kw["autouse"], ast.Constant) and not kw["autouse"].value)
            a = fn.args
            args = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)} - {"self"}
            if fname in out:  # the same name twice: either may run
                prev = out[fname]
                out[fname] = (prev[0], prev[1] | args, prev[2] or auto)
                out[f"{fname}#{fn.lineno}"] = (fn, args, True)  # its imports count for every test
            else:
                out[fname] = (fn, args, auto)
            break
    return out


def parse_imports(source: str, path: str) -> FileNode:
    """The imports of one file (``path`` relative to the root, for relative imports).

    In a ``conftest.py``, the imports inside each fixture are kept apart
    (:attr:`FileNode.fixtures`): they count only for tests that can use the fixture.
    """
    node = FileNode(path)
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None) or 1
        node.syntax_error = f"line {line}: {getattr(exc, 'msg', str(exc))}"
        return node
    except (RecursionError, MemoryError):  # Python's own import fails on it the same way
        node.syntax_error = "line 1: nested too deeply to parse"
        return node
    consts = _LazyConsts(tree)
    inside: set[int] = set()
    if Path(path).name == "conftest.py":
        for fname, (fn, args, auto) in _fixture_defs(tree).items():
            sub = FileNode(f"{path}::{fname}")
            body = list(ast.walk(fn))
            _collect(body, sub, path, consts)
            inside.update(id(n) for n in body)
            node.fixtures[fname] = sub
            node.fixture_args[fname] = args
            if auto:
                node.autouse.add(fname)
    _collect([n for n in ast.walk(tree) if id(n) not in inside], node, path, consts)
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            node.names.add(n.id)
        elif isinstance(n, ast.arg):
            node.names.add(n.arg)
        elif isinstance(n, ast.Attribute):
            node.names.add(n.attr)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and len(n.value) < 200:
            node.names.update(re.split(r"[\s,]+", n.value))  # usefixtures("a"), parametrize("a,b", indirect=True)
    return node


class _LazyConsts:
    """A file's :class:`_Consts`, built on the first computed import (most files have none)."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.got: _Consts | None = None

    def values(self, node: ast.expr | None) -> set[str] | None:
        self.got = self.got or _Consts(self.tree)
        return self.got.values(node)

    def prefixes(self, node: ast.expr | None) -> set[str] | None:
        self.got = self.got or _Consts(self.tree)
        return self.got.prefixes(node)


def _is_sys_path(n: ast.AST) -> bool:
    return isinstance(n, ast.Attribute) and n.attr == "path" and isinstance(n.value, ast.Name) and n.value.id == "sys"


def _edits_sys_path(n: ast.Call) -> bool:
    """``sys.path.insert/append/extend(...)`` or ``site.addsitedir(...)``."""
    f = n.func
    return isinstance(f, ast.Attribute) and (
        (f.attr in ("insert", "append", "extend") and _is_sys_path(f.value)) or f.attr == "addsitedir")


def _collect(nodes: Iterable[ast.AST], node: FileNode, path: str, consts: _LazyConsts) -> None:
    nodes = list(nodes)
    docs = _docstrings(nodes)
    for n in nodes:
        if isinstance(n, ast.Assign | ast.AugAssign):  # sys.path[:0] = [...], sys.path += [...], sys.path = [...]
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if any(_is_sys_path(t) or (isinstance(t, ast.Subscript) and _is_sys_path(t.value)) for t in targets):
                node.path_edit = node.path_edit or n.lineno
        if isinstance(n, ast.Import):
            for alias in n.names:
                node.imports.add(alias.name)
        elif isinstance(n, ast.ImportFrom):
            if n.level:
                stem = _relative_stem(path, n.level, n.module)
                if stem is not None:
                    node.relative.add(stem)
                    node.relative.update(f"{stem}/{a.name}" for a in n.names if a.name != "*")
            elif n.module:
                node.imports.add(n.module)
                node.imports.update(f"{n.module}.{a.name}" for a in n.names if a.name != "*")
        elif isinstance(n, ast.Call):
            func = n.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if _edits_sys_path(n):
                node.path_edit = node.path_edit or n.lineno
            if name in _FILE_LOADERS:
                _file_loader(n, _FILE_LOADERS[name], node, consts)
                continue
            if name not in _DYNAMIC_CALLS or not n.args:
                continue
            arg = n.args[0]
            exact = consts.values(arg)
            for target in exact or ():
                if target.startswith("."):  # relative to the `package=` argument: assume this file's
                    stem = _relative_stem(path, len(target) - len(target.lstrip(".")), target.lstrip(".") or None)
                    if stem is None:
                        node.open_import = node.open_import or n.lineno
                    else:
                        node.relative.add(stem)
                else:
                    node.imports.add(target)
            if exact is not None:
                continue
            starts = consts.prefixes(arg)
            if starts and all(p and not p.startswith(".") for p in starts):
                node.prefixes.update(starts)
            else:
                node.open_import = node.open_import or n.lineno
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and 0 < len(n.value) <= MAX_COMMAND_CHARS \
                and id(n) not in docs:
            if len(n.value) < 200 and "\n" not in n.value:
                node.strings.add(n.value)
            if " " in n.value or "/" in n.value:  # a command line: `python -m pkg.x`, `python scripts/run.py`
                node.strings.update(_SCRIPT.findall(n.value))
                node.strings.update(_MODULE_FLAG.findall(n.value))
                if " " in n.value:  # `--custom-rm-path pkg.rm.score`: a loader's dotted name
                    node.strings.update(_DOTTED.findall(n.value))


def _docstrings(nodes: Iterable[ast.AST]) -> set[int]:
    """The ids of the docstring constants among ``nodes`` (prose, not names a program loads)."""
    out = set()
    for n in nodes:
        if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and n.body:
            first = n.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                out.add(id(first.value))
    return out


def _file_loader(n: ast.Call, index: int, node: FileNode, consts: _LazyConsts) -> None:
    """``spec_from_file_location(name, path)``, ``runpy.run_path(path)``, ...: a literal path
    is an edge (a script path, from the root or the file's folder); any other opens the file."""
    arg = n.args[index] if len(n.args) > index else next(
        (k.value for k in n.keywords if k.arg in ("location", "path", "path_name")), None)
    paths = consts.values(arg) if arg is not None else None
    if paths and all(p.endswith(".py") for p in paths):
        node.strings.update(paths)
    else:
        node.open_import = node.open_import or n.lineno


def module_names(rel: str, roots: Sequence[str]) -> list[str]:
    """Dotted names of file ``rel`` under each root that contains it."""
    out = []
    p = Path(rel)
    for root in roots:
        r = Path(root)
        try:
            sub = p.relative_to(r) if root not in ("", ".") else p
        except ValueError:
            continue
        parts = list(sub.with_suffix("").parts)
        if parts and parts[-1] == "__init__":
            parts = parts[:-1]
        if parts and all(s.isidentifier() for s in parts):
            out.append(".".join(parts))
    return out


def _file_roots(rel: str, package_roots: Sequence[str]) -> list[str]:
    """Roots a file's absolute imports may resolve against: the package roots and
    every folder above the file (pytest's rootdir-less import mode puts the test's
    basedir on ``sys.path``; tests insert their own folders too)."""
    roots = list(package_roots)
    d = Path(rel).parent
    while True:
        s = d.as_posix()
        if s not in roots:
            roots.append(s)
        if s == ".":
            break
        d = d.parent
    return roots


@dataclass
class Graph:
    root: Path
    package_roots: tuple[str, ...]
    files: dict[str, FileNode]
    modules: dict[str, set[str]]  # dotted name -> files that name may denote
    edges: dict[str, set[str]]  # file -> files it loads
    conftests: dict[str, list[str]]  # test file -> conftest.py files above it
    fixture_edges: dict[str, dict[str, set[str]]] = field(default_factory=dict)  # conftest -> fixture -> files
    plugins: tuple[str, ...] = ()  # files the tree registers as pytest plugins (pytest11 entry points)
    detected_roots: tuple[str, ...] = ()  # package roots found in the tree (not given by the catalog)

    def loads(self, path: str) -> set[str]:
        return self.edges.get(path, set())

    def closure(self, start: str, seeds: Iterable[str] = ()) -> dict[str, str | None]:
        """Every file ``start`` can load, transitively, with the file that loaded it
        (a BFS tree: the chain back to ``start`` is a shortest one).

        The conftest.py files above ``start`` and the tree's pytest plugins load with it;
        of a conftest's fixtures, only those ``start`` (or a file it loads, or a fixture it
        uses) can request, and the autouse ones, add their imports. ``seeds`` are more
        files known to load with it (a recorded run's)."""
        seen: dict[str, str | None] = {start: None}
        todo = deque([start])
        chain = self.conftests.get(start, [])
        for c in (*chain, *self.plugins, *seeds):
            if c not in seen and c in self.files:
                seen[c] = start
                todo.append(c)
        used: set[str] = set()
        while True:
            while todo:
                cur = todo.popleft()
                for nxt in sorted(self.edges.get(cur, ())):
                    if nxt not in seen:
                        seen[nxt] = cur
                        todo.append(nxt)
            # Fixtures the loaded files can request, to a fixed point (fixtures request fixtures).
            names: set[str] = set()
            for f in seen:
                node = self.files.get(f)
                if node is not None and f not in chain:
                    names |= node.names
            added = False
            changed = True
            while changed:
                changed = False
                for c in [x for x in seen if x in self.fixture_edges]:
                    node = self.files[c]
                    for fx in node.fixtures:
                        if fx in used or not (fx in names or fx in node.autouse):
                            continue
                        used.add(fx)
                        names |= node.fixture_args.get(fx, set())
                        changed = True
                        for nxt in sorted(self.fixture_edges[c].get(fx, ())):
                            if nxt not in seen:
                                seen[nxt] = c
                                todo.append(nxt)
                                added = True
            if not added:
                return seen

    def fixture_files(self) -> set[str]:
        """Files some conftest fixture loads (they have an importer, in a fixture)."""
        return {f for fx in self.fixture_edges.values() for fs in fx.values() for f in fs}

    def importers_of_name(self, names: Iterable[str]) -> set[str]:
        """Files whose imports name any of ``names`` or a module under them (for files
        deleted by a change: the tree no longer has them, their importers still say so)."""
        names = set(names)
        out = set()
        for path, node in self.files.items():
            for imp in node.imports | {i for sub in node.fixtures.values() for i in sub.imports}:
                if imp in names or any(imp.startswith(n + ".") for n in names):
                    out.add(path)
                    break
        return out


def skipped_by_scan(rel: str) -> bool:
    """Whether the scan leaves ``rel`` out: a file under a hidden or build folder
    (``.claude/``, ``build/``, ``__pycache__``), which no graph node stands for."""
    return any(part in _SKIP_DIRS or part.startswith(".") for part in Path(rel).parts[:-1])


def _walk(root: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        for f in sorted(filenames):
            if f.endswith(".py"):
                out.append((Path(dirpath) / f).relative_to(root).as_posix())
    return out


def _declared_roots(root: Path) -> tuple[list[str], list[str]]:
    """Package roots and pytest plugin modules the tree's packaging files declare:
    ``pyproject.toml`` (setuptools ``packages.find.where`` / ``package-dir``, poetry
    ``packages.from``, hatch wheel ``packages``, ``pytest11`` entry points) and
    ``setup.cfg`` (``package_dir``, ``packages.find where``), at the top and one or two
    folders down (``python/pyproject.toml``)."""
    import configparser  # noqa: PLC0415
    import tomllib  # noqa: PLC0415

    roots: list[str] = []
    plugins: list[str] = []
    found = [root / "pyproject.toml", root / "setup.cfg", *root.glob("*/pyproject.toml"),
             *root.glob("*/setup.cfg"), *root.glob("*/*/pyproject.toml")]
    for f in found[:64]:
        if not f.is_file() or any(part in _SKIP_DIRS or part.startswith(".") for part in f.relative_to(root).parts[:-1]):
            continue
        here = f.parent.relative_to(root)
        try:
            text = f.read_text(encoding="utf-8", errors="replace")
            if f.name == "pyproject.toml":
                data = tomllib.loads(text)
                tool = data.get("tool", {}) if isinstance(data.get("tool"), dict) else {}
                st = tool.get("setuptools", {}) if isinstance(tool.get("setuptools"), dict) else {}
                where = (st.get("packages", {}) or {}).get("find", {}).get("where", []) if isinstance(st.get("packages"), dict) else []
                dirs = [*(where if isinstance(where, list) else [])]
                pdir = st.get("package-dir", {})
                if isinstance(pdir, dict):
                    dirs += [v for v in pdir.values() if isinstance(v, str)]
                for pk in (tool.get("poetry", {}) or {}).get("packages", []) if isinstance(tool.get("poetry"), dict) else []:
                    if isinstance(pk, dict) and isinstance(pk.get("from"), str):
                        dirs.append(pk["from"])
                wheel = tool.get("hatch", {}).get("build", {}).get("targets", {}).get("wheel", {}) \
                    if isinstance(tool.get("hatch"), dict) else {}
                for pk in wheel.get("packages", []) if isinstance(wheel, dict) else []:
                    if isinstance(pk, str):
                        dirs.append(Path(pk).parent.as_posix())
                eps = (data.get("project", {}) or {}).get("entry-points", {}) if isinstance(data.get("project"), dict) else {}
                for target in (eps.get("pytest11", {}) or {}).values() if isinstance(eps, dict) else ():
                    if isinstance(target, str):
                        plugins.append(target.partition(":")[0].strip())
                roots.append(here.as_posix())
            else:
                cp = configparser.ConfigParser()
                cp.read_string(text)
                pdir = cp.get("options", "package_dir", fallback="")
                dirs = [line.partition("=")[2].strip() for line in pdir.splitlines() if line.strip().startswith("=")]
                dirs += [cp.get("options.packages.find", "where", fallback="")]
                for line in cp.get("options.entry_points", "pytest11", fallback="").splitlines():
                    if "=" in line:
                        plugins.append(line.partition("=")[2].partition(":")[0].strip())
                roots.append(here.as_posix())
        except (OSError, ValueError, configparser.Error, AttributeError, TypeError, RecursionError):
            continue  # a packaging file we cannot read (or nested past the parser's depth): the import-derived roots still apply
        roots += [(here / d).as_posix() for d in dirs if d and isinstance(d, str) and not Path(d).is_absolute() and ".." not in Path(d).parts]
    return roots, plugins


def _import_roots(rels: Sequence[str], nodes: dict[str, FileNode]) -> list[str]:
    """Folders that hold a top-level package or module the tree imports by absolute name
    (``python/`` of ``python/pkg/...`` when any file says ``import pkg``)."""
    tops = set()
    for node in nodes.values():
        for imp in (*node.imports, *(i for sub in node.fixtures.values() for i in sub.imports)):
            tops.add(imp.partition(".")[0])
    out = set()
    for rel in rels:
        parts = Path(rel).parts
        for i, part in enumerate(parts):
            name = part[:-3] if i == len(parts) - 1 and part.endswith(".py") else part
            if name in tops and (i == len(parts) - 1 or f"{'/'.join(parts[:i + 1])}/__init__.py" in nodes):
                if all(p.isidentifier() for p in (*parts[i:-1], Path(parts[-1]).stem)):
                    out.add("/".join(parts[:i]) or ".")
                break
    return sorted(out)


def scan(root: Path, package_roots: Sequence[str] = (".",), files: Sequence[str] | None = None,
         cache: dict[tuple[str, str], FileNode] | None = None, *, detect: bool = True) -> Graph:
    """Parse every Python file under ``root`` (or just ``files``) and resolve imports.

    Package roots are the given ones plus, with ``detect``, those the tree's packaging
    files declare and the folders that hold the top-level packages it imports
    (``src/``, ``python/``): a file maps to a module without being told where.
    ``cache`` keeps parsed files by (path, content digest) across calls: scanning
    many commits of one repository parses only what each commit changed.
    """
    root = Path(root)
    rels = list(files) if files is not None else _walk(root)
    nodes: dict[str, FileNode] = {}
    for rel in rels:
        try:
            data = read_regular(root / rel, MAX_SCAN_BYTES + 1)
        except OSError as exc:
            nodes[rel] = FileNode(rel, syntax_error=f"line 1: unreadable ({exc.strerror})")
            continue
        if len(data) > MAX_SCAN_BYTES:
            # Not parsed (memory), and what it imports is unknown: a test reaching it
            # runs on any Python change, and a change to it runs everything.
            nodes[rel] = FileNode(rel, open_import=1, syntax_error=(
                f"line 1: over {MAX_SCAN_BYTES >> 20} MB, not parsed"))
            continue
        text = data.decode("utf-8", errors="replace")
        if cache is None:
            nodes[rel] = parse_imports(text, rel)
            continue
        key = (rel, hashlib.blake2b(text.encode(), digest_size=16).hexdigest())
        if key not in cache:
            cache[key] = parse_imports(text, rel)
        nodes[rel] = copy.deepcopy(cache[key])  # selection may close a node; the cache stays as parsed
    given = [r.strip("/") or "." for r in package_roots]
    declared, plugin_names = _declared_roots(root) if detect else ([], [])
    found = [*declared, *_import_roots(rels, nodes)] if detect else []
    roots = tuple(dict.fromkeys([*given, *(r.strip("/") or "." for r in found)]))
    detected = tuple(r for r in roots if r not in given)
    modules: dict[str, set[str]] = {}
    file_roots: dict[str, list[str]] = {}
    for rel in rels:
        fr = _file_roots(rel, roots)
        file_roots[rel] = fr
        for name in module_names(rel, roots):
            modules.setdefault(name, set()).add(rel)
    by_path = set(rels)

    def resolve(name: str, fr: list[str]) -> set[str]:
        found = set(modules.get(name, ()))
        rel_path = name.replace(".", "/")
        for r in fr:
            if r in roots:
                continue  # already in `modules`
            base = rel_path if r == "." else f"{r}/{rel_path}"
            for cand in (f"{base}.py", f"{base}/__init__.py"):
                if cand in by_path:
                    found.add(cand)
        return found

    tops = _top_packages(modules)

    def targets(rel: str, node: FileNode) -> set[str]:
        fr = file_roots[rel]
        out: set[str] = set()
        for imp in node.imports:
            parts = imp.split(".")
            for i in range(1, len(parts) + 1):  # a.b.c loads a, a.b and a.b.c
                out |= resolve(".".join(parts[:i]), fr)
        for stem in node.relative:
            out |= {c for c in (f"{stem}.py", f"{stem}/__init__.py") if c in by_path}
        for prefix in node.prefixes:
            parts = prefix.rpartition(".")[0].split(".") if "." in prefix else []
            for i in range(1, len(parts) + 1):
                out |= resolve(".".join(parts[:i]), fr)
            out |= {f for m, fs in modules.items() if m.startswith(prefix) for f in fs}
        here = Path(rel).parent
        for s in node.strings:
            if s in modules and ("." in s or s in tops):
                out |= modules[s]
            elif "." in s and s.rpartition(".")[0] in modules and " " not in s and not s.endswith(".py"):  # "pkg.mod.func"
                out |= modules[s.rpartition(".")[0]]
            elif s.endswith(".py"):  # a script path, from the root or the file's folder
                for cand in (s.removeprefix("./"), (here / s).as_posix()):
                    if cand in by_path:
                        out.add(cand)
        out.discard(rel)
        return out

    conftests = {}
    conf_dirs = {Path(r).parent.as_posix(): r for r in rels if Path(r).name == "conftest.py"}
    for rel in rels:
        chain = []
        d = Path(rel).parent
        while True:
            c = conf_dirs.get(d.as_posix())
            if c and c != rel:
                chain.append(c)
            if d.as_posix() == ".":
                break
            d = d.parent
        if chain:
            conftests[rel] = chain
    # A file that edits sys.path (or sits under a conftest that does: pytest loads it first)
    # may import any folder of the tree by a bare name: an absolute import the roots do not
    # resolve there may name any file whose path ends with that name.
    def edits(rel: str) -> bool:
        n = nodes[rel]
        return bool(n.path_edit or any(sub.path_edit for sub in n.fixtures.values()))

    edited = {rel for rel in rels if edits(rel) or any(edits(c) for c in conftests.get(rel, ()))}
    tails: dict[str, set[str]] = {}
    if edited:
        for rel in rels:
            parts = list(Path(rel).parts)
            parts[-1] = parts[-1][:-3]
            if parts[-1] == "__init__":
                parts.pop()
            for i in range(len(parts)):
                if all(p.isidentifier() for p in parts[i:]):
                    tails.setdefault(".".join(parts[i:]), set()).add(rel)

    def by_tail(rel: str, node: FileNode) -> set[str]:
        out: set[str] = set()
        for imp in node.imports:
            if resolve(imp.partition(".")[0], file_roots[rel]):
                continue
            parts = imp.split(".")
            for i in range(1, len(parts) + 1):
                out |= tails.get(".".join(parts[:i]), set())
        return out

    edges: dict[str, set[str]] = {}
    fixture_edges: dict[str, dict[str, set[str]]] = {}
    for rel, node in nodes.items():
        edges[rel] = targets(rel, node) | (by_tail(rel, node) - {rel} if rel in edited else set())
        if node.fixtures:
            fixture_edges[rel] = {fx: targets(rel, sub) for fx, sub in node.fixtures.items()}
            for sub in node.fixtures.values():  # a computed import in a fixture: the conftest is open
                node.open_import = node.open_import or sub.open_import
    plugins = tuple(sorted({f for name in plugin_names for f in modules.get(name, ())}))
    return Graph(root, roots, nodes, modules, edges, conftests, fixture_edges, plugins, detected)


def _top_packages(modules: dict[str, set[str]]) -> set[str]:
    return {m for m in modules if "." not in m and any(f.endswith("__init__.py") for f in modules[m])}
