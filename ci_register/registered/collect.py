"""Static collection: read registration markers from test files with ``ast``.

Test files are never imported (importing a GPU test on a CPU box, or a file
with a heavy top-level import, is exactly what a planner must not do). Only
literal, top-level calls count; everything else is an error naming file, line
and fix, so a registration can never silently vanish.
"""

from __future__ import annotations

import ast
import difflib
import math
import os
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ci_register.registered.catalog import Catalog
from ci_register.registered.gate_options import GATE_OPTIONS, MILES_GATE_KEYS, miles_options
from ci_register.registered.paths import (
    NotRegularFile,
    find_test_files,
    glob_match,
    py_files,
    read_regular,
    selected,
)

__all__ = [
    "marker_sources",
    "CollectIssue",
    "Registration",
    "GateDeclaration",
    "Collection",
    "collect",
    "find_test_files",
    "parse_file",
    "GATE_OPTIONS",
]

# SGLang's positional order, then its keyword-only arguments, plus miles' labels.
_POSITIONAL = ("est_time", "suite", "nightly", "disabled")
_KEYWORDS = set(_POSITIONAL) | {"stage", "runner_config", "in_process_group", "labels"}
MAX_EST_TIME_S = 7 * 86400  # a week: anything longer is a typo, and overflows timers
MAX_FILE_BYTES = 2_000_000  # parsed with ast: a 50 MB literal took 22 GB of memory


@dataclass(frozen=True)
class CollectIssue:
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass(frozen=True)
class Registration:
    path: str  # posix, relative to the collection base
    line: int
    marker: str
    backend: str
    suite: str
    est_time: float
    nightly: bool = False
    disabled: str | None = None
    stage: str | None = None
    runner_config: str | None = None
    labels: tuple[str, ...] = ()
    tests: int = 0  # top-level test functions/classes seen statically
    declared: str = ""  # the suite name as the call gives it (SGLang's effective suite)
    group: str | None = None  # SGLang's in_process_group, kept for listings

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "line": self.line,
            "marker": self.marker,
            "backend": self.backend,
            "suite": self.suite,
            "est_time": self.est_time,
            "nightly": self.nightly,
            "disabled": self.disabled,
            "stage": self.stage,
            "runner_config": self.runner_config,
            "labels": list(self.labels),
            "declared": self.declared or self.suite,
            "in_process_group": self.group,
        }


@dataclass(frozen=True)
class GateDeclaration:
    path: str
    line: int
    metric_key: str
    options: dict[str, object]
    miles: dict[str, object] = field(default_factory=dict)  # miles' keywords as written

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"path": self.path, "line": self.line, "metric_key": self.metric_key, "options": self.options}
        if self.miles:
            out["miles"] = self.miles
        return out


@dataclass
class Collection:
    registrations: list[Registration] = field(default_factory=list)
    gates: list[GateDeclaration] = field(default_factory=list)
    issues: list[CollectIssue] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    # Reported, not errors: files outside every [collect] glob that call a marker, and
    # gate calls below module top level.
    notes: list[CollectIssue] = field(default_factory=list)

    def for_suite(self, suite: str, *, include_disabled: bool = False, nightly: bool | None = None,
                  labels: Iterable[str] | None = None) -> list[Registration]:
        """Registrations of one suite, sorted by path; ``nightly=False`` drops nightly-only files.

        ``labels`` (miles' PR gating): only registrations without labels or sharing one.
        """
        wanted = set(labels) if labels is not None else None
        out = []
        for r in self.registrations:
            if r.suite != suite or (r.disabled and not include_disabled):
                continue
            if nightly is False and r.nightly:
                # A per-commit run skips nightly-only files; a nightly run runs everything.
                continue
            if wanted is not None and r.labels and not wanted & set(r.labels):
                continue
            out.append(r)
        return sorted(out, key=lambda r: r.path)


def _call_name(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


def _literal(node: ast.expr) -> tuple[bool, object]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _count_tests(tree: ast.Module) -> int:
    n = 0
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name.startswith("test"):
            n += 1
        elif isinstance(stmt, ast.ClassDef) and stmt.name.startswith("Test"):
            n += 1
    return n


def _bind(call: ast.Call, path: str, marker: str) -> tuple[dict[str, object], list[CollectIssue]]:
    """Bind a marker call's literal arguments to SGLang's parameter names."""
    issues: list[CollectIssue] = []
    args: dict[str, object] = {}
    line = call.lineno
    if len(call.args) > len(_POSITIONAL):
        issues.append(CollectIssue(path, line, f"{marker}() takes at most {len(_POSITIONAL)} positional arguments ({', '.join(_POSITIONAL)}); pass the rest by keyword"))
    for name, node in zip(_POSITIONAL, call.args, strict=False):
        if isinstance(node, ast.Starred):
            issues.append(CollectIssue(path, line, f"{marker}(*...) is not literal; write each argument out"))
            continue
        ok, value = _literal(node)
        if not ok:
            issues.append(CollectIssue(path, line, f"argument {name!r} of {marker}() must be a literal (a number, string, list...), not an expression"))
        args[name] = value
    for kw in call.keywords:
        if kw.arg is None:
            issues.append(CollectIssue(path, line, f"{marker}(**...) is not literal; write each keyword out"))
            continue
        if kw.arg not in _KEYWORDS:
            issues.append(CollectIssue(path, line, f"unknown keyword {kw.arg!r} in {marker}(); known: {', '.join(sorted(_KEYWORDS))}"))
            continue
        if kw.arg in args:
            issues.append(CollectIssue(path, line, f"{marker}() got {kw.arg!r} twice"))
            continue
        ok, value = _literal(kw.value)
        if not ok:
            issues.append(CollectIssue(path, line, f"argument {kw.arg!r} of {marker}() must be a literal (a number, string, list...), not an expression"))
        args[kw.arg] = value
    return args, issues


def _suite_name(args: dict[str, object], marker: str, catalog: Catalog) -> tuple[object, str | None]:
    """(suite name, error): ``suite=``, or SGLang's rule over ``stage=`` + ``runner_config=``."""
    suite, stage, runner = args.get("suite"), args.get("stage"), args.get("runner_config")
    if suite is not None and (stage is not None or runner is not None):
        which = "stage" if stage is not None else "runner_config"
        return None, f"{marker}() got both suite={suite!r} and {which}={args[which]!r}; pass suite= or stage= with runner_config=, not both"
    if (stage is not None and not isinstance(stage, str)) or (runner is not None and not isinstance(runner, str)):
        return None, f"stage and runner_config must be strings, got {stage!r} and {runner!r}"
    if stage is not None and runner is not None:
        return catalog.stage_suite.format(stage=stage, runner_config=runner), None
    if runner is not None:
        return None, f"{marker}() got runner_config={runner!r} without stage=; pass both (the suite is {catalog.stage_suite!r})"
    return (suite if suite is not None else stage), None


def _est_time_problem(est: object) -> str | None:
    """Why `est` is not a usable est_time, or None (huge ints are refused before any
    float conversion: 10**400 has no float)."""
    if isinstance(est, bool) or not isinstance(est, int | float):
        return f"est_time must be a number of seconds, got {_short(est)}"
    if isinstance(est, int) and not -MAX_EST_TIME_S <= est <= MAX_EST_TIME_S or \
            isinstance(est, float) and not math.isfinite(est):
        return f"est_time must be at most {MAX_EST_TIME_S} s (a week), got {_short(est)}"
    if est < 0:  # SGLang registers est_time=0 (a file it does not time)
        return f"est_time must be >= 0 seconds, got {est!r}"
    if est > MAX_EST_TIME_S:
        return f"est_time must be at most {MAX_EST_TIME_S} s (a week), got {est!r}"
    return None


def _short(value: object) -> str:
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**30 else \
        f"an integer of {len(str(abs(value)))} digits"
    return text if len(text) <= 60 else text[:57] + "..."


def _registration(call: ast.Call, path: str, marker: str, backend: str, catalog: Catalog, tests: int) -> tuple[Registration | None, list[CollectIssue]]:
    args, issues = _bind(call, path, marker)
    if issues:
        return None, issues
    line = call.lineno
    fail = lambda msg: (None, [CollectIssue(path, line, msg)])  # noqa: E731
    if "est_time" not in args:
        return fail(f"{marker}() needs est_time=SECONDS (the expected wall time of this file)")
    problem = _est_time_problem(args["est_time"])
    if problem:
        return fail(problem)
    est = args["est_time"]
    disabled = args.get("disabled")
    if disabled is not None and (not isinstance(disabled, str) or not disabled.strip()):
        return fail(f"disabled must be a reason string (or None), got {disabled!r}")
    name, error = _suite_name(args, marker, catalog)
    if error:
        return fail(error)
    if name is None:
        return fail(f"{marker}() names no suite; add suite=\"...\" ({catalog.suggest('', backend)})")
    if not isinstance(name, str):
        return fail(f"suite must be a string, got {name!r}")
    suite = catalog.find(backend, name)
    if name == "" and disabled:
        # A disabled registration with suite="" belongs to no suite: listed, never run.
        key = ""
    elif name == "":
        return fail(f"{marker}() has suite=\"\": an enabled registration must name a suite (suite=\"\" is only for disabled=\"reason\")")
    elif suite is None and backend in catalog.unchecked_backends:
        key = ""  # read and listed under its own name; no session runs it until declared
    elif suite is None:
        other = [s for s in catalog.suites.values() if s.key[1] == name]
        if other:
            s = other[0]
            return fail(f"{marker}() registers {backend} tests but {name!r} is declared only as a {s.backend} suite "
                        f"([suites.{s.name}]); use the {s.backend} marker or declare a {backend} suite with name = {name!r}")
        return fail(f"unknown {backend} suite {name!r}; {catalog.suggest(name, backend)}; or declare it in {catalog.path}")
    else:
        key = suite.name
    nightly = args.get("nightly", False)
    if not isinstance(nightly, bool):
        return fail(f"nightly must be True or False, got {nightly!r}")
    group = args.get("in_process_group")
    if group is not None and not isinstance(group, str):
        return fail(f"in_process_group must be a string, got {group!r}")
    labels = args.get("labels") or []
    if not isinstance(labels, list | tuple) or not all(isinstance(x, str) for x in labels):
        return fail(f"labels must be a list of strings, got {labels!r}")
    unknown = [x for x in labels if catalog.labels and x not in catalog.labels]
    if unknown:
        close = difflib.get_close_matches(unknown[0], catalog.labels, n=3)
        return fail(f"unknown label {unknown[0]!r}; {'closest: ' + ', '.join(close) if close else 'add it to [collect] labels'}")
    stage, runner_config = args.get("stage"), args.get("runner_config")
    return Registration(
        path=path,
        line=line,
        marker=marker,
        backend=backend,
        suite=key,
        est_time=float(est),
        nightly=nightly,
        disabled=disabled,
        stage=stage if isinstance(stage, str) else None,
        runner_config=runner_config if isinstance(runner_config, str) else None,
        labels=tuple(labels),
        tests=tests,
        declared=name,
        group=group,
    ), []


def _gate(call: ast.Call, path: str, marker: str, default_mode: str = "enforce",
          gate_defaults: dict[str, dict] | None = None) -> tuple[GateDeclaration | None, list[CollectIssue]]:
    line = call.lineno
    if call.args:
        return None, [CollectIssue(path, line, f"{marker}() takes keyword arguments only: {marker}(metric_key=\"...\", ...)")]
    opts: dict[str, object] = {}
    for kw in call.keywords:
        if kw.arg is None:
            return None, [CollectIssue(path, line, f"{marker}(**...) is not literal; write each keyword out")]
        if kw.arg != "metric_key" and kw.arg not in GATE_OPTIONS and kw.arg not in MILES_GATE_KEYS:
            return None, [CollectIssue(path, line, f"unknown keyword {kw.arg!r} in {marker}(); known: metric_key, {', '.join(GATE_OPTIONS + MILES_GATE_KEYS)}")]
        ok, value = _literal(kw.value)
        if not ok:
            return None, [CollectIssue(path, line, f"argument {kw.arg!r} of {marker}() must be a literal")]
        opts[kw.arg] = value
    key = opts.pop("metric_key", None)
    if not isinstance(key, str) or not key:
        return None, [CollectIssue(path, line, f"{marker}() needs metric_key=\"...\" (a string)")]
    # The catalog's [gate_defaults] fill what the call omits (miles' GATE_DEFAULTS).
    for name, value in (gate_defaults or {}).get(key, {}).items():
        opts.setdefault(name, value)
    raw = {k: opts[k] for k in MILES_GATE_KEYS if k in opts}
    error = miles_options(opts, marker)
    if error:
        return None, [CollectIssue(path, line, error)]
    if "mode" not in opts and default_mode != "enforce":
        opts["mode"] = default_mode
    return GateDeclaration(path, line, key, opts, raw), []


def _no_registration(path: str, catalog: Catalog) -> CollectIssue:
    return CollectIssue(path, 1, "test file has no registration; add e.g. `register_cuda_ci(est_time=60, suite=\"...\")` "
                                 "at module top level (`python -m ci_register list` shows the suites)")


def _has_main_call(tree: ast.Module) -> bool:
    """``if __name__ == "__main__":`` with a call in its body (what SGLang's runner needs)."""
    for stmt in tree.body:
        t = stmt.test if isinstance(stmt, ast.If) else None
        if (isinstance(t, ast.Compare) and isinstance(t.left, ast.Name) and t.left.id == "__name__"
                and len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq) and len(t.comparators) == 1
                and isinstance(t.comparators[0], ast.Constant) and t.comparators[0].value == "__main__"
                and any(isinstance(n, ast.Call) for s in stmt.body for n in ast.walk(s))):
            return True
    return False


def _implicit_suite(path: str, catalog: Catalog) -> str | None:
    for glob, (suite, _) in catalog.implicit.items():
        if glob_match(path, glob):
            return suite
    return None


_TOP_STATEMENT = re.compile(r"^[A-Za-z_@]", re.M)
_OPEN_PAREN = re.compile(r"\s*\(")


def _call_starts(source: str, names: Iterable[str]) -> list[int]:
    """Offsets of ``name(`` for each name (a word on its own, spaces allowed before the
    parenthesis): str.find per name, far faster than one regex alternation over the text."""
    out: list[int] = []
    for name in names:
        i = source.find(name)
        while i != -1:
            before = source[i - 1] if i else " "
            if not (before.isalnum() or before == "_") and _OPEN_PAREN.match(source, i + len(name)):
                end = i + len(name)
                if end >= len(source) or not (source[end].isalnum() or source[end] == "_"):
                    out.append(i)
            i = source.find(name, i + 1)
    return sorted(out)
_MAIN_LINE = re.compile(r"""^if\s+__name__\s*==\s*["']__main__["']\s*:""", re.M)


def _quiet_parse(text: str, path: str) -> ast.Module:
    with warnings.catch_warnings():  # a test file's invalid escapes are its own business
        warnings.simplefilter("ignore")
        return ast.parse(text, filename=path)


def _partial_tree(source: str, path: str, names: set[str], need_main: bool) -> ast.Module | None:
    """The statements collection reads, parsed alone: the file's head up to its last
    marker call, and its ``if __name__ == "__main__":`` block; None to parse it all.

    Parsing a whole large test file is most of a big tree's collection time. Every
    marker mention must be a call at column 0 (else nested calls or strings need the
    full tree), and each part must parse on its own, which holds only when it is cut at
    a statement boundary (a cut inside a string or brackets is a syntax error). What
    lies between the parts is not read: a syntax error there surfaces when the file runs.
    """
    calls = _call_starts(source, names)
    if not calls or any(i and source[i - 1] != "\n" for i in calls):
        return None  # a call below top level, or in a string: read the whole tree
    nxt = _TOP_STATEMENT.search(source, source.find("\n", calls[-1]) + 1)
    head_end = nxt.start() if nxt else len(source)
    try:
        tree = _quiet_parse(source[:head_end], path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if need_main:
        mark = source.rfind("__main__")
        start = source.rfind("\n", 0, mark) + 1
        if mark < head_end or not _MAIN_LINE.match(source, start):
            return None
        try:  # newlines in front keep the block's line numbers those of the file
            tail = _quiet_parse("\n" * source.count("\n", 0, start) + source[start:], path)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        tree.body += tail.body
    return tree


def _implicit_registration(path: str, catalog: Catalog, suite: str, tests: int) -> Registration:
    s = catalog.suites[suite]  # miles registers such files with est_time 1 s
    return Registration(path=path, line=1, marker="[implicit]", backend=s.backend, suite=s.name,
                        est_time=1.0, tests=tests, declared=s.key[1])


def parse_file(source: str, path: str, catalog: Catalog, *, notes: list[CollectIssue] | None = None,
               implicit: str | None = None) -> tuple[list[Registration], list[GateDeclaration], list[CollectIssue]]:
    """Read one file's registrations and gate declarations (pure: text in, data out).

    ``implicit``: the suite a file without a marker call belongs to (a catalog's
    [implicit] rule, as miles' tests/fast/). ``notes`` receives what is reported but
    not an error: gate calls below module top level, which declare nothing.
    """
    names = set(catalog.markers) | {catalog.gate_marker}
    if not any(n in source for n in names):
        if implicit is None:
            return [], [], [_no_registration(path, catalog)]
        if catalog.require != "tests":  # nothing to read: the folder registers the file
            return [_implicit_registration(path, catalog, implicit, 0)], [], []
    # Counting top-level tests needs the whole file; SGLang's rule (require = main) does not.
    tree = _partial_tree(source, path, names, catalog.require == "main") if catalog.require != "tests" else None
    try:
        tree = tree or _quiet_parse(source, path)
    except SyntaxError as exc:
        return [], [], [CollectIssue(path, exc.lineno or 1, f"syntax error: {exc.msg}; fix the file")]
    except (RecursionError, MemoryError, ValueError) as exc:
        # A 200,000-term expression or deep nesting: Python's parser gives up.
        what = "nested too deeply" if isinstance(exc, RecursionError) else f"not parseable ({exc.__class__.__name__})"
        return [], [], [CollectIssue(path, 1, f"test file is {what} for the parser; split the long expression or move data out of the file")]
    tests = _count_tests(tree)
    regs: list[Registration] = []
    gates: list[GateDeclaration] = []
    issues: list[CollectIssue] = []
    top_level: set[int] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            name = _call_name(stmt.value)
            if name in catalog.markers:
                top_level.add(id(stmt.value))
                reg, errs = _registration(stmt.value, path, name, catalog.markers[name], catalog, tests)
                issues += errs
                if reg:
                    regs.append(reg)
            elif name == catalog.gate_marker:
                top_level.add(id(stmt.value))
                decl, errs = _gate(stmt.value, path, name, catalog.gate_mode, catalog.gate_defaults)
                issues += errs
                if decl:
                    gates.append(decl)
    # Walking the whole tree is most of the cost of collection; skip it when the text
    # has no more `marker(` occurrences than the top-level calls already found.
    nested = ast.walk(tree) if len(_call_starts(source, names)) > len(top_level) else ()
    for node in nested:
        if isinstance(node, ast.Call) and id(node) not in top_level and _call_name(node) in names:
            if _call_name(node) == catalog.gate_marker:
                # A gate built at run time (a test of the gate itself, a helper): not a
                # declaration; the file's top-level calls are.
                if notes is not None:
                    notes.append(CollectIssue(path, node.lineno, f"{_call_name(node)}() below module top level declares no gate (only top-level literal calls do); ignored"))
                continue
            issues.append(CollectIssue(path, node.lineno, f"{_call_name(node)}() must be called at module top level (not inside a function, class, if or loop) to count; move it"))
    seen: dict[tuple[str, str, bool], int] = {}
    for r in regs:
        k = (r.backend, r.suite, r.nightly)
        if k in seen and r.suite:
            issues.append(CollectIssue(path, r.line, f"file registered twice to suite {r.suite!r} (first at line {seen[k]}); remove one"))
        seen.setdefault(k, r.line)
    if not regs and not issues and implicit is not None:
        regs.append(_implicit_registration(path, catalog, implicit, tests))
    if not regs and not issues:
        issues.append(_no_registration(path, catalog))
    enabled = [r for r in regs if not r.disabled]
    if enabled and catalog.require == "tests" and tests == 0:
        issues.append(CollectIssue(path, regs[0].line, "registered file defines no test functions or Test classes at top level; add tests or remove the registration"))
    if enabled and catalog.require == "main" and not _has_main_call(tree):
        issues.append(CollectIssue(path, enabled[0].line, "registered file has no `if __name__ == \"__main__\":` block that runs its tests (the runner runs `python3 FILE`); add `unittest.main()` there"))
    return regs, gates, issues


def _read(file: Path, rel: str, issues: list[CollectIssue]) -> str | None:
    """A test file's text (a UTF-8 BOM allowed, as Python allows it), or None with an issue."""
    try:
        data = read_regular(file, MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            size = file.stat().st_size
            issues.append(CollectIssue(rel, 1, f"test file is {size / 1e6:.1f} MB, above the {MAX_FILE_BYTES / 1e6:g} MB the collector parses; move data out of the test file"))
            return None
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        issues.append(CollectIssue(rel, 1, f"cannot read test file (not UTF-8 at byte {exc.start}); make it UTF-8 text"))
    except NotRegularFile:
        issues.append(CollectIssue(rel, 1, "named like a test file but not a regular file (a FIFO, device or folder); never read; remove or rename it"))
    except OSError as exc:
        issues.append(CollectIssue(rel, 1, f"cannot read test file ({exc.strerror or exc.__class__.__name__}); fix or remove it (a broken or looping symlink?)"))
    return None


def _display(path: Path, base: Path) -> str:
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return path.as_posix()


def _outside(others: list[tuple[str, str]], base: str, catalog: Catalog, out: Collection) -> None:
    """Report files that call a marker but match no [collect] glob: never silently dropped."""
    names = sorted(catalog.markers)
    for full, _ in others:
        try:
            data = read_regular(full, MAX_FILE_BYTES + 1)
            if len(data) > MAX_FILE_BYTES:
                continue
            source = data.decode("utf-8-sig")
        except (UnicodeDecodeError, OSError):
            continue
        if not any(n in source for n in names) or not _call_starts(source, names):
            continue
        try:
            tree = _quiet_parse(source, full)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for stmt in tree.body:  # only top-level calls register; others are not registrations
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and _call_name(stmt.value) in catalog.markers:
                shown = os.path.relpath(full, base).replace(os.sep, "/") if full.startswith(base + os.sep) else full
                out.notes.append(CollectIssue(shown, stmt.lineno,
                    f"{_call_name(stmt.value)}() in a file no [collect] glob of {catalog.path} matches: not collected; add its folder to globs or remove the call"))
                break


def tests_root(catalog: Catalog, base: Path) -> Path:
    """The folder searched: [collect] tests under the repository root, else the catalog's folder."""
    return base / catalog.tests if catalog.tests else catalog.root


def _name_problem(rel: str) -> str | None:
    """Why a test file's name cannot name a test, or None. pytest, the history, the
    matrix and every report name a file in UTF-8 on one line: a byte that is not UTF-8
    cannot be stored or matched, and a newline split each error about the file in two."""
    bad = next((c for c in rel if "\udc80" <= c <= "\udcff"), None)
    if bad is not None:
        return f"file name is not UTF-8 (byte 0x{ord(bad) - 0xDC00:02x}); rename it in UTF-8"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in rel):
        return "file name holds a control character (a newline?); rename it"
    return None


# `from MODULE import (a, b as c,` ... `)`: where a test file takes its markers from.
_IMPORT_FROM = re.compile(r"^from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]*)", re.M)
_SHIPPED_MARKERS = "ci_register"  # this package: every marker name, wherever the tool is installed


def marker_sources(source: str, names: Iterable[str]) -> list[tuple[str, str, int]]:
    """(marker name, module, line) for each ``from MODULE import NAME`` of a marker at
    the top of a file (text only: the file is never imported)."""
    wanted, out = set(names), []
    for m in _IMPORT_FROM.finditer(source):
        imported = {w.split()[0] for w in m.group(2).strip("()").replace("\\", " ").split(",") if w.split()}
        out += [(name, m.group(1), source.count("\n", 0, m.start()) + 1) for name in sorted(imported & wanted)]
    return out


def _module_in_tree(module: str, path: str, base: Path, roots: tuple[str, ...]) -> bool:
    """Whether ``module`` is a file or package of the tree: under a package root, or under
    a folder above ``path`` (pytest puts test folders on sys.path); relative imports
    from ``path``'s own package."""
    dotted = module.lstrip(".")
    parts = dotted.split(".") if dotted else []
    if module.startswith("."):
        up = Path(path).parent
        for _ in range(len(module) - len(dotted) - 1):
            up = up.parent
        folders = [base / up]
    else:
        here = Path(path).parent
        folders = [base / r for r in roots] + [base / here] + [base / p for p in here.parents]
    for folder in folders:
        target = folder.joinpath(*parts)
        if not parts or target.with_suffix(".py").is_file() or target.is_dir():
            return True
    return False


def _marker_source_notes(col: Collection, sources: dict[str, list[tuple[str, str, int]]], base: Path,
                         catalog: Catalog) -> None:
    roots = (".", "src", "python", *[str(r) for r in catalog.select.get("package_roots", []) or []])
    found: dict[tuple[str, str], bool] = {}
    for path, imports in sources.items():
        for name, module, line in imports:
            if module == _SHIPPED_MARKERS or module.startswith(_SHIPPED_MARKERS + "."):
                continue
            key = (module, str(Path(path).parent) if module.startswith(".") else "")
            if key not in found:
                found[key] = _module_in_tree(module, path, base, roots)
            if not found[key]:
                col.notes.append(CollectIssue(path, line, (
                    f"{name} is imported from {module}, which this tree lacks: the run imports the file "
                    f"and fails unless {module} is installed there; import it from {_SHIPPED_MARKERS}")))


def collect(catalog: Catalog, root: Path | None = None, base: Path | None = None) -> Collection:
    """Collect every registration under ``root`` (default: :func:`tests_root`).

    Paths in the result are relative to ``base`` (default: the current directory),
    which is what pytest and error messages want. A tree where no file matches the
    globs is an issue: an empty collection must never plan an empty, passing run.
    """
    base = Path(base) if base is not None else Path.cwd()
    root = Path(root) if root is not None else tests_root(catalog, base)
    out = Collection()
    if not root.is_dir():
        out.issues.append(CollectIssue(str(root), 1, "test root is not a folder; pass --root PATH (or set [collect] tests)"))
        return out
    root, base = root.resolve(), base.resolve()  # once: resolving per file is slow
    every = py_files(root)
    globs, exclude = list(catalog.globs), list(catalog.exclude)
    chosen = [(full, rel) for full, rel in every if selected(rel, globs, exclude)]
    if not chosen:
        out.issues.append(CollectIssue(str(catalog.path), 1, f"no file under {_display(root, base) or '.'} matches [collect] globs {globs}; fix the globs, [collect] tests or --root"))
        return out
    notes: list[CollectIssue] = []
    sources: dict[str, list[tuple[str, str, int]]] = {}
    base_s = str(base)
    for full, rel_root in chosen:
        rel = os.path.relpath(full, base_s).replace(os.sep, "/") if full.startswith(base_s + os.sep) else full
        if problem := _name_problem(rel):
            shown = rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            shown = "".join(repr(c)[1:-1] if ord(c) < 0x20 or ord(c) == 0x7F else c for c in shown)
            out.issues.append(CollectIssue(shown, 1, problem))
            continue
        out.files.append(rel)
        source = _read(Path(full), rel, out.issues)
        if source is None:
            continue
        regs, gates, issues = parse_file(source, rel, catalog, notes=notes, implicit=_implicit_suite(rel_root, catalog))
        if regs and (imports := marker_sources(source, [*catalog.markers, catalog.gate_marker])):
            sources[rel] = imports
        out.registrations += regs
        out.gates += gates
        out.issues += issues
    out.notes += notes
    _marker_source_notes(out, sources, base, catalog)
    undeclared: dict[tuple[str, str], Registration] = {}
    for r in out.registrations:
        if not r.suite and r.declared:
            undeclared.setdefault((r.backend, r.declared), r)
    for (backend, name), r in sorted(undeclared.items()):
        out.notes.append(CollectIssue(r.path, r.line, f"{backend} suite {name!r} is not declared in {catalog.path}: its files are listed, never run; declare it to run them"))
    picked = {full for full, _ in chosen}
    _outside([f for f in every if f[0] not in picked], base_s, catalog, out)
    return out
