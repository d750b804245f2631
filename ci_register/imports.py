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

from ci_register.paths import read_regular

__all__ = ["FileNode", "Graph", "module_names", "scan", "parse_imports"]

_SKIP_DIRS = {"__pycache__", ".git", ".nox", ".venv", "venv", "node_modules", ".tox", "build", "dist"}
_DYNAMIC_CALLS = {"import_module", "__import__"}
_SCRIPT = re.compile(r"[\w./-]+\.py\b")
_MODULE_FLAG = re.compile(r"-m\s+([A-Za-z_][\w.]*)")


@dataclass
class FileNode:
    path: str  # posix, relative to the repository root
    imports: set[str] = field(default_factory=set)  # absolute dotted names it may load
    relative: set[str] = field(default_factory=set)  # "pkg/dir/mod": path stems of relative imports
    prefixes: set[str] = field(default_factory=set)  # "pkg.models." : every module under it
    strings: set[str] = field(default_factory=set)  # literals that may name a module or file
    open_import: int = 0  # line of a dynamic import with no literal name (0: none)
    syntax_error: str = ""  # "line N: message" when the file does not parse


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


def parse_imports(source: str, path: str) -> FileNode:
    """The imports of one file (``path`` relative to the root, for relative imports)."""
    node = FileNode(path)
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None) or 1
        node.syntax_error = f"line {line}: {getattr(exc, 'msg', str(exc))}"
        return node
    consts: _Consts | None = None
    for n in ast.walk(tree):
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
            if name not in _DYNAMIC_CALLS or not n.args:
                continue
            arg = n.args[0]
            consts = consts or _Consts(tree)
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
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and 0 < len(n.value) < 200 and "\n" not in n.value:
            node.strings.add(n.value)
            if " " in n.value or "/" in n.value:  # a command line: `python -m pkg.x`, `python scripts/run.py`
                node.strings.update(_SCRIPT.findall(n.value))
                node.strings.update(_MODULE_FLAG.findall(n.value))
    return node


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

    def loads(self, path: str) -> set[str]:
        return self.edges.get(path, set())

    def closure(self, start: str) -> dict[str, str | None]:
        """Every file ``start`` can load, transitively, with the file that loaded it
        (a BFS tree: the chain back to ``start`` is a shortest one)."""
        seen: dict[str, str | None] = {start: None}
        todo = deque([start])
        for c in self.conftests.get(start, ()):
            if c not in seen:
                seen[c] = start
                todo.append(c)
        while todo:
            cur = todo.popleft()
            for nxt in sorted(self.edges.get(cur, ())):
                if nxt not in seen:
                    seen[nxt] = cur
                    todo.append(nxt)
        return seen

    def importers_of_name(self, names: Iterable[str]) -> set[str]:
        """Files whose imports name any of ``names`` or a module under them (for files
        deleted by a change: the tree no longer has them, their importers still say so)."""
        names = set(names)
        out = set()
        for path, node in self.files.items():
            for imp in node.imports:
                if imp in names or any(imp.startswith(n + ".") for n in names):
                    out.add(path)
                    break
        return out


def _walk(root: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        for f in sorted(filenames):
            if f.endswith(".py"):
                out.append((Path(dirpath) / f).relative_to(root).as_posix())
    return out


def scan(root: Path, package_roots: Sequence[str] = (".",), files: Sequence[str] | None = None,
         cache: dict[tuple[str, str], FileNode] | None = None) -> Graph:
    """Parse every Python file under ``root`` (or just ``files``) and resolve imports.

    ``cache`` keeps parsed files by (path, content digest) across calls: scanning
    many commits of one repository parses only what each commit changed.
    """
    root = Path(root)
    rels = list(files) if files is not None else _walk(root)
    roots = tuple(dict.fromkeys([*(r.strip("/") or "." for r in package_roots)]))
    modules: dict[str, set[str]] = {}
    file_roots: dict[str, list[str]] = {}
    for rel in rels:
        fr = _file_roots(rel, roots)
        file_roots[rel] = fr
        for name in module_names(rel, roots):
            modules.setdefault(name, set()).add(rel)
    nodes: dict[str, FileNode] = {}
    for rel in rels:
        try:
            text = read_regular(root / rel).decode("utf-8", errors="replace")
        except OSError as exc:
            nodes[rel] = FileNode(rel, syntax_error=f"line 1: unreadable ({exc.strerror})")
            continue
        if cache is None:
            nodes[rel] = parse_imports(text, rel)
            continue
        key = (rel, hashlib.blake2b(text.encode(), digest_size=16).hexdigest())
        if key not in cache:
            cache[key] = parse_imports(text, rel)
        nodes[rel] = copy.deepcopy(cache[key])  # selection may close a node; the cache stays as parsed
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

    edges: dict[str, set[str]] = {}
    tops = _top_packages(modules)
    for rel, node in nodes.items():
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
            elif "." in s and s.rpartition(".")[0] in modules and " " not in s:  # "pkg.mod.func", a function path
                out |= modules[s.rpartition(".")[0]]
            elif s.endswith(".py"):  # a script path, from the root or the file's folder
                for cand in (s.removeprefix("./"), (here / s).as_posix()):
                    if cand in by_path:
                        out.add(cand)
        out.discard(rel)
        edges[rel] = out
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
    return Graph(root, roots, nodes, modules, edges, conftests)


def _top_packages(modules: dict[str, set[str]]) -> set[str]:
    return {m for m in modules if "." not in m and any(f.endswith("__init__.py") for f in modules[m])}
