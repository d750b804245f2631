"""Static collection: read registration markers from test files with ``ast``.

Test files are never imported (importing a GPU test on a CPU box, or a file
with a heavy top-level import, is exactly what a planner must not do). Only
literal, top-level calls count; everything else is an error naming file, line
and fix, so a registration can never silently vanish.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ci_register.catalog import Catalog

__all__ = [
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
_KEYWORDS = set(_POSITIONAL) | {"stage", "runner_config", "labels"}
GATE_OPTIONS = ("better", "min_change", "min_value", "max_value", "level", "mode")
_SKIP_DIRS = {"__pycache__", ".git", ".nox", ".venv", "node_modules"}
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
        }


@dataclass(frozen=True)
class GateDeclaration:
    path: str
    line: int
    metric_key: str
    options: dict[str, object]

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "line": self.line, "metric_key": self.metric_key, "options": self.options}


@dataclass
class Collection:
    registrations: list[Registration] = field(default_factory=list)
    gates: list[GateDeclaration] = field(default_factory=list)
    issues: list[CollectIssue] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def for_suite(self, suite: str, *, include_disabled: bool = False, nightly: bool | None = None) -> list[Registration]:
        """Registrations of one suite, sorted by path; ``nightly=False`` drops nightly-only files."""
        out = []
        for r in self.registrations:
            if r.suite != suite or (r.disabled and not include_disabled):
                continue
            if nightly is False and r.nightly:
                # A per-commit run skips nightly-only files; a nightly run runs everything.
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


def _est_time_problem(est: object) -> str | None:
    """Why `est` is not a usable est_time, or None (huge ints are refused before any
    float conversion: 10**400 has no float)."""
    if isinstance(est, bool) or not isinstance(est, int | float):
        return f"est_time must be a number of seconds, got {_short(est)}"
    if isinstance(est, int) and not -MAX_EST_TIME_S <= est <= MAX_EST_TIME_S or \
            isinstance(est, float) and not math.isfinite(est):
        return f"est_time must be at most {MAX_EST_TIME_S} s (a week), got {_short(est)}"
    if est <= 0:
        return f"est_time must be > 0 seconds, got {est!r}"
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
    suite, stage = args.get("suite"), args.get("stage")
    if suite is not None and stage is not None:
        return fail(f"{marker}() got both suite={suite!r} and stage={stage!r}; pass only one")
    name = suite if suite is not None else stage
    if name is None:
        return fail(f"{marker}() names no suite; add suite=\"...\" (known: {catalog.known()})")
    if not isinstance(name, str):
        return fail(f"suite must be a string, got {name!r}")
    if name not in catalog.suites:
        return fail(f"unknown suite {name!r}; known: {catalog.known()}")
    if catalog.suites[name].backend != backend:
        return fail(f"{marker}() registers {backend} tests but suite {name!r} is a {catalog.suites[name].backend} suite; use the {catalog.suites[name].backend} marker")
    nightly = args.get("nightly", False)
    if not isinstance(nightly, bool):
        return fail(f"nightly must be True or False, got {nightly!r}")
    disabled = args.get("disabled")
    if disabled is not None and (not isinstance(disabled, str) or not disabled.strip()):
        return fail(f"disabled must be a reason string (or None), got {disabled!r}")
    runner_config = args.get("runner_config")
    if runner_config is not None and not isinstance(runner_config, str):
        return fail(f"runner_config must be a string, got {runner_config!r}")
    labels = args.get("labels") or []
    if not isinstance(labels, list | tuple) or not all(isinstance(x, str) for x in labels):
        return fail(f"labels must be a list of strings, got {labels!r}")
    return Registration(
        path=path,
        line=line,
        marker=marker,
        backend=backend,
        suite=name,
        est_time=float(est),
        nightly=nightly,
        disabled=disabled,
        stage=stage,
        runner_config=runner_config,
        labels=tuple(labels),
        tests=tests,
    ), []


def _gate(call: ast.Call, path: str, marker: str) -> tuple[GateDeclaration | None, list[CollectIssue]]:
    line = call.lineno
    if call.args:
        return None, [CollectIssue(path, line, f"{marker}() takes keyword arguments only: {marker}(metric_key=\"...\", ...)")]
    opts: dict[str, object] = {}
    for kw in call.keywords:
        if kw.arg is None:
            return None, [CollectIssue(path, line, f"{marker}(**...) is not literal; write each keyword out")]
        if kw.arg != "metric_key" and kw.arg not in GATE_OPTIONS:
            return None, [CollectIssue(path, line, f"unknown keyword {kw.arg!r} in {marker}(); known: metric_key, {', '.join(GATE_OPTIONS)}")]
        ok, value = _literal(kw.value)
        if not ok:
            return None, [CollectIssue(path, line, f"argument {kw.arg!r} of {marker}() must be a literal")]
        opts[kw.arg] = value
    key = opts.pop("metric_key", None)
    if not isinstance(key, str) or not key:
        return None, [CollectIssue(path, line, f"{marker}() needs metric_key=\"...\" (a string)")]
    return GateDeclaration(path, line, key, opts), []


@functools.lru_cache(maxsize=8)
def _call_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + "|".join(map(re.escape, names)) + r")\s*\(")


def parse_file(source: str, path: str, catalog: Catalog) -> tuple[list[Registration], list[GateDeclaration], list[CollectIssue]]:
    """Read one file's registrations and gate declarations (pure: text in, data out)."""
    names = set(catalog.markers) | {catalog.gate_marker}
    if not any(n in source for n in names):
        return [], [], [CollectIssue(path, 1, f"test file has no registration; add e.g. `register_cuda_ci(est_time=60, suite=\"...\")` at module top level (known suites: {catalog.known()})")]
    try:
        tree = ast.parse(source, filename=path)
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
                decl, errs = _gate(stmt.value, path, name)
                issues += errs
                if decl:
                    gates.append(decl)
    # Walking the whole tree is most of the cost of collection; skip it when the text
    # has no more `marker(` occurrences than the top-level calls already found.
    pattern = _call_pattern(tuple(sorted(names)))
    nested = ast.walk(tree) if len(pattern.findall(source)) > len(top_level) else ()
    for node in nested:
        if isinstance(node, ast.Call) and id(node) not in top_level and _call_name(node) in names:
            issues.append(CollectIssue(path, node.lineno, f"{_call_name(node)}() must be called at module top level (not inside a function, class, if or loop) to count; move it"))
    seen: dict[str, int] = {}
    for r in regs:
        if r.suite in seen:
            issues.append(CollectIssue(path, r.line, f"file registered twice to suite {r.suite!r} (first at line {seen[r.suite]}); remove one"))
        seen.setdefault(r.suite, r.line)
    if not regs and not issues:
        issues.append(CollectIssue(path, 1, f"test file has no registration; add e.g. `register_cuda_ci(est_time=60, suite=\"...\")` at module top level (known suites: {catalog.known()})"))
    if regs and tests == 0 and not any(r.disabled for r in regs):
        issues.append(CollectIssue(path, regs[0].line, "registered file defines no test functions or Test classes at top level; add tests or remove the registration"))
    return regs, gates, issues


def _excluded(rel: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch("./" + rel, p) for p in patterns)


def find_test_files(root: Path, globs: Iterable[str], exclude: Iterable[str] = ()) -> list[Path]:
    """Files under root matching any glob, skipping caches and virtualenvs."""
    globs, exclude = list(globs), list(exclude)
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        for fn in sorted(filenames):
            if not fn.endswith(".py"):
                continue
            full = Path(dirpath, fn)
            rel = full.relative_to(root).as_posix()
            # "**/x" in a glob also matches a file at the top level, as pathlib does.
            if any(fnmatch.fnmatch(rel, g) or (g.startswith("**/") and fnmatch.fnmatch(rel, g[3:])) for g in globs) and not _excluded(rel, exclude):
                found.append(full)
    return found


def _read(file: Path, rel: str, issues: list[CollectIssue]) -> str | None:
    """A test file's text (a UTF-8 BOM allowed, as Python allows it), or None with an issue."""
    try:
        size = file.stat().st_size
        if size > MAX_FILE_BYTES:
            issues.append(CollectIssue(rel, 1, f"test file is {size / 1e6:.1f} MB, above the {MAX_FILE_BYTES / 1e6:g} MB the collector parses; move data out of the test file"))
            return None
        return file.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        issues.append(CollectIssue(rel, 1, f"cannot read test file (not UTF-8 at byte {exc.start}); make it UTF-8 text"))
    except OSError as exc:
        issues.append(CollectIssue(rel, 1, f"cannot read test file ({exc.strerror or exc.__class__.__name__}); fix or remove it (a broken or looping symlink?)"))
    return None


def _display(path: Path, base: Path) -> str:
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return path.as_posix()


def collect(catalog: Catalog, root: Path | None = None, base: Path | None = None) -> Collection:
    """Collect every registration under ``root`` (default: the catalog's folder).

    Paths in the result are relative to ``base`` (default: the current directory),
    which is what pytest and error messages want.
    """
    root = Path(root) if root is not None else catalog.root
    base = Path(base) if base is not None else Path.cwd()
    out = Collection()
    if not root.is_dir():
        out.issues.append(CollectIssue(str(root), 1, "test root is not a folder; pass --root PATH"))
        return out
    root, base = root.resolve(), base.resolve()  # once: resolving per file is slow
    for file in find_test_files(root, catalog.globs, catalog.exclude):
        rel = _display(file, base)
        out.files.append(rel)
        source = _read(file, rel, out.issues)
        if source is None:
            continue
        regs, gates, issues = parse_file(source, rel, catalog)
        out.registrations += regs
        out.gates += gates
        out.issues += issues
    return out
