"""A file's units and what a change did to them (ci_register.planning.units)."""

from __future__ import annotations

import pytest

from ci_register.planning.units import diff_source, unit_at, units_in_source

OLD = '''"""Module doc."""
import functools

LIMIT = 3


@functools.lru_cache
def cached(a, b=1):
    """Doc."""
    return a + b  # a comment


class Box:
    size = 2

    def grow(self):
        def step(x):
            return x + 1
        return [step(i) for i in range(LIMIT)]

    class Inner:
        async def fetch(self):
            return (lambda: 4)()

    @property
    def area(self):
        return self.size ** 2


if LIMIT:
    def conditional():
        return 5
'''


def edit(old: str, new: str) -> str:
    assert old in OLD
    return OLD.replace(old, new)


def test_comments_and_layout_only_leave_the_tree_equal():
    assert diff_source(OLD, edit("# a comment", "# another\n\n")).kind == "equal"
    assert diff_source(OLD, edit("LIMIT = 3", "LIMIT   =   3  # three")).kind == "equal"


@pytest.mark.parametrize(("old", "new", "units"), [
    ("return a + b", "return a - b", ("cached",)),
    ('"""Doc."""', '"""Other doc."""', ("cached",)),  # a docstring is the body's first statement
    ("return x + 1", "return x + 2", ("Box.grow",)),  # a nested function belongs to its unit
    ("range(LIMIT)", "range(LIMIT + 1)", ("Box.grow",)),
    ("(lambda: 4)()", "(lambda: 5)()", ("Box.Inner.fetch",)),
    ("self.size ** 2", "self.size * 2", ("Box.area",)),
    ("return 5", "return 6", ("conditional",)),  # a def under a module-level `if`
])
def test_body_edits_name_their_units(old, new, units):
    got = diff_source(OLD, edit(old, new))
    assert got.kind == "bodies" and got.units == units


@pytest.mark.parametrize(("old", "new"), [
    ("@functools.lru_cache\n", ""),  # a decorator
    ("b=1", "b=2"),  # a default argument
    ("def cached(a, b=1)", "def cached(a: int, b=1)"),  # an annotation
    ("    size = 2\n", "    size = 3\n"),  # a class attribute
    ("LIMIT = 3", "LIMIT = 4"),  # module-level code
    ('"""Module doc."""', '"""Other."""'),  # the module's docstring is module-level code
    ("    class Inner:", "    def extra(self):\n        pass\n\n    class Inner:"),  # an added method
    ("def conditional", "def renamed"),  # pytest and pluggy find hooks by name
])
def test_anything_beyond_bodies_is_structural(old, new):
    assert diff_source(OLD, edit(old, new)).kind == "structural"


def test_a_file_that_does_not_parse_is_structural():
    assert diff_source(OLD, OLD + "\ndef broken(:\n").kind == "structural"
    assert diff_source("def (", OLD).kind == "structural"
    assert units_in_source("def (") is None


def test_code_objects_map_to_their_units_by_first_line():
    ns: dict = {}
    exec(compile(OLD, "m.py", "exec"), ns)
    units = units_in_source(OLD)
    assert [u.qualname for u in units] == ["cached", "Box.grow", "Box.Inner.fetch", "Box.area", "conditional"]
    box = ns["Box"]
    # A decorated function's code starts at its first decorator's line.
    assert unit_at(units, ns["cached"].__wrapped__.__code__.co_firstlineno) == "cached"
    assert unit_at(units, box.area.fget.__code__.co_firstlineno) == "Box.area"
    # Nested code objects (a function, a comprehension, a lambda) belong to the outermost unit.
    grow = box.grow.__code__
    nested = [c for c in grow.co_consts if hasattr(c, "co_firstlineno")]
    assert nested and all(unit_at(units, c.co_firstlineno) == "Box.grow" for c in nested)
    fetch = box.Inner.fetch.__code__
    lam = next(c for c in fetch.co_consts if getattr(c, "co_name", "") == "<lambda>")
    assert unit_at(units, lam.co_firstlineno) == "Box.Inner.fetch"
    # Module-level code and class bodies are no unit.
    assert unit_at(units, 4) is None
    assert unit_at(units, OLD.splitlines().index("    size = 2") + 1) is None


def test_a_file_nested_past_the_parsers_depth_is_structural_not_a_crash():
    # A 2,000-term expression parses, but ast.dump recursed past Python's limit; a
    # 200,000-term one does not parse (RecursionError, not SyntaxError): each raised
    # through `matrix --base` (a traceback).
    for n in (2_000, 200_000):
        src = "x = " + "+".join(["1"] * n) + "\n"
        change = diff_source(src, src + "y = 2\n")
        assert change.kind == "structural" and "nested too deeply" in change.why
    assert units_in_source("x = " + "+".join(["1"] * 200_000) + "\n") is None
