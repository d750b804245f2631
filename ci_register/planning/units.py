"""A Python file's *units* and what a change did to them, from the syntax tree.

A unit is a function (``def``/``async def``) not nested inside another function: a
module's functions and the methods of its classes (nested classes too), named by
qualname (``Cls.meth``, ``Outer.Inner.meth``). A function, lambda, class or
comprehension nested inside a unit belongs to that unit; module-level code and class
bodies belong to no unit.

:func:`diff_source` compares two versions of a file:

- ``equal``: the syntax trees are equal (only comments, whitespace or blank lines changed):
  the change can affect nothing;
- ``bodies``: with every unit's body blanked the modules are equal (the same names,
  decorators, arguments, defaults, annotations, class bodies and module-level code, the
  same set of units), so only the bodies of the named units changed. Whether such a change
  can affect a suite depends on whether those units ran in it
  (:mod:`ci_register.running.executed`);
- ``structural``: anything else, including an added, removed or renamed unit (pytest and
  pluggy find tests and hooks by name) and a file that does not parse on either side.

:func:`unit_at` maps a code object's first line (``co_firstlineno``, the first decorator's
line for a decorated function) to the unit it belongs to.

Pure and stdlib only: the recorder's tracer calls it in processes that must not load more
of the project than they would anyway, and the selection benchmark loads this file by path.
"""

from __future__ import annotations

import ast
import bisect
from dataclasses import dataclass

__all__ = ["Change", "Unit", "diff_source", "module_units", "unit_at", "units_in_source"]


@dataclass(frozen=True)
class Unit:
    qualname: str
    start: int  # the first decorator's line, else the ``def`` line
    end: int


@dataclass(frozen=True)
class Change:
    kind: str  # "equal", "bodies" or "structural"
    units: tuple[str, ...] = ()  # for "bodies": the units whose bodies changed
    why: str = ""  # for "structural": what was not a body change


_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _walk_units(body: list[ast.stmt], prefix: str):
    """(qualname, node) of every unit under these statements: functions, and functions of
    classes, at any depth of ``if``/``try``/``with``/loops, never inside a function."""
    for node in body:
        if isinstance(node, _FUNCS):
            yield prefix + node.name, node
        elif isinstance(node, ast.ClassDef):
            yield from _walk_units(node.body, f"{prefix}{node.name}.")
        else:
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                sub = getattr(node, field, None)
                if isinstance(sub, list):
                    yield from _walk_units([s for s in sub if isinstance(s, ast.AST)], prefix)


def module_units(tree: ast.Module) -> list[Unit]:
    """The units of a parsed module, by first line."""
    out = []
    for name, node in _walk_units(tree.body, ""):
        start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        out.append(Unit(name, start, node.end_lineno or node.lineno))
    return sorted(out, key=lambda u: u.start)


def units_in_source(source: str | bytes) -> list[Unit] | None:
    """The units of a file's text; None when it does not parse."""
    try:
        return module_units(ast.parse(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def unit_at(units: list[Unit], line: int) -> str | None:
    """The unit whose lines hold ``line`` (units never overlap), else None."""
    i = bisect.bisect_right([u.start for u in units], line) - 1
    if i >= 0 and units[i].start <= line <= units[i].end:
        return units[i].qualname
    return None


def _blank(tree: ast.Module) -> dict[str, list[str]]:
    """Blank every unit's body in place (``pass``); {qualname: dumps of its bodies}. A
    qualname defined twice (a property's getter and setter) keeps both bodies."""
    bodies: dict[str, list[str]] = {}
    for name, node in list(_walk_units(tree.body, "")):
        bodies.setdefault(name, []).append(ast.dump(ast.Module(body=node.body, type_ignores=[])))
        node.body = [ast.Pass()]
    return bodies


def diff_source(old: str | bytes, new: str | bytes) -> Change:
    """What changed between two versions of one file (see the module docstring)."""
    try:
        return _diff_source(old, new)
    except (RecursionError, MemoryError):
        # ast.dump recurses per level: a 2,000-term expression parses, and its dump
        # raised RecursionError through the matrix (a traceback).
        return Change("structural", why="nested too deeply to compare")


def _diff_source(old: str | bytes, new: str | bytes) -> Change:
    try:
        a, b = ast.parse(old), ast.parse(new)
    except (SyntaxError, ValueError) as exc:
        return Change("structural", why=f"does not parse ({type(exc).__name__})")
    if ast.dump(a) == ast.dump(b):
        return Change("equal")
    bodies_a, bodies_b = _blank(a), _blank(b)
    if ast.dump(a) != ast.dump(b):
        return Change("structural", why="more than function bodies changed")
    changed = tuple(sorted(n for n in bodies_a if bodies_a[n] != bodies_b.get(n)))
    read = _source_read(b, set(changed))
    if read:
        return Change("structural", why=read)
    return Change("bodies", changed)


# Decorators known to call the function they wrap as Python (its body runs, so a run that
# did not record it did not run it). Any other (``@triton.jit``, ``@numba.njit``,
# ``@torch.compile``, a project's own) may compile the function from its source instead.
KNOWN_DECORATORS = frozenset({
    "staticmethod", "classmethod", "property", "abstractmethod", "abc.abstractmethod", "overload", "typing.overload",
    "override", "typing.override", "typing_extensions.override", "wraps", "functools.wraps", "lru_cache",
    "functools.lru_cache", "cache", "functools.cache", "cached_property", "functools.cached_property",
    "singledispatch", "functools.singledispatch", "singledispatchmethod", "functools.singledispatchmethod",
    "total_ordering", "functools.total_ordering", "contextmanager", "contextlib.contextmanager",
    "asynccontextmanager", "contextlib.asynccontextmanager", "atexit.register", "fixture", "pytest.fixture",
    "pytest_asyncio.fixture", "hookimpl", "pytest.hookimpl", "hookspec", "pytest.hookspec", "patch", "mock.patch",
    "unittest.mock.patch", "patch.object", "mock.patch.object", "unittest.mock.patch.object", "patch.dict",
    "mock.patch.dict", "unittest.mock.patch.dict", "torch.no_grad", "torch.inference_mode", "torch.enable_grad",
    "dataclass", "dataclasses.dataclass", "nox.session", "session",
})
_KNOWN_PREFIXES = ("pytest.mark.",)
_KNOWN_SUFFIXES = (".setter", ".getter", ".deleter", ".register")


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def known_decorator(node: ast.AST) -> bool:
    name = _dotted(node)
    return bool(name) and (name in KNOWN_DECORATORS or name.startswith(_KNOWN_PREFIXES) or name.endswith(_KNOWN_SUFFIXES))


def _source_read(tree: ast.Module, changed: set[str]) -> str:
    """Why a changed unit's body may be read rather than run (then a record that did not
    see it run says nothing), else "": a decorator not known to call it as Python, or the
    function handed to a call outside any function (``kernel = triton.jit(_kernel)``)."""
    for name, node in _walk_units(tree.body, ""):
        if name not in changed:
            continue
        unknown = next((d for d in node.decorator_list if not known_decorator(d)), None)
        if unknown is not None:
            return (f"the body of {name} changed under @{_dotted(unknown) or 'an expression'}, which may compile "
                    "it from its source rather than run it")
    tops = {n for n in changed if "." not in n}
    for node in ast.walk(tree):  # the units' bodies are blanked: what is left is module and class code
        if isinstance(node, ast.Call):
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                if isinstance(arg, ast.Name) and arg.id in tops:
                    return (f"the body of {arg.id} changed and module code hands it to {_dotted(node) or 'a call'}, "
                            "which may read its source rather than run it")
    return ""
