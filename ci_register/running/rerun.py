"""Rerun: from a file spec to the suite session that runs exactly those files.

``python -m ci_register rerun SPEC [--suite NAME] [--run]`` where SPEC is a path,
a bare file name, a glob or a folder (relative to the repository or to
``suites/``), optionally followed by ``::test`` (a pytest node id inside one
file). Files resolve through the same static collection as a suite run, so a
rerun agrees with what CI would run: an ambiguous bare name lists its
candidates, a disabled registration is refused with its reason, and a file
registered to several suites fans out to one command per suite.

:func:`resolve` and :func:`make_targets` are pure; :func:`execute` runs commands.
"""

from __future__ import annotations

import ast
import fnmatch
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ci_register.registered.collect import Collection, Registration
from ci_register.running.budget import file_timeout
from ci_register.running.redact import mask_secrets

__all__ = [
    "SETUP_S",
    "RerunError",
    "Selection",
    "Target",
    "check_test_name",
    "describe",
    "execute",
    "main_rerun",
    "make_targets",
    "plan_rerun",
    "resolve",
    "split_spec",
]

SETUP_S = 300  # session start-up (venv reuse, collection) on top of the files' budgets
_GLOB = set("*?[")


class RerunError(ValueError):
    """A spec that selects nothing runnable; the message names the file and the fix."""


@dataclass
class Selection:
    registrations: list[Registration]
    test: str | None = None  # the part after "::", for exactly one file
    skipped: list[Registration] = field(default_factory=list)  # disabled, left out of a folder/glob


@dataclass
class Target:
    suite: str
    files: list[str]  # paths, or "path::test" node ids
    registrations: list[Registration]
    expected_s: float
    timeout_s: int
    nightly: bool = False  # a nightly-only file in a per-commit suite needs --nightly
    sources: dict[str, str] = field(default_factory=dict)  # path -> "history" | "est_time"
    seconds: dict[str, float] = field(default_factory=dict)  # path -> expected seconds

    def args(self, extra: Sequence[str] = ()) -> list[str]:
        out = [a for f in self.files for a in ("--file", f)]
        if self.nightly:
            out.append("--nightly")
        return [*out, *extra]

    def command(self, extra: Sequence[str] = ()) -> str:
        """The shell line a person would type (GNU timeout enforces the limit)."""
        return shlex.join(["timeout", str(self.timeout_s), "nox", "-s", self.suite, "--", *self.args(extra)])


def split_spec(spec: str) -> tuple[str, str | None]:
    """``"suites/x/test_a.py::TestC::test_b"`` -> ``("suites/x/test_a.py", "TestC::test_b")``."""
    path, sep, test = spec.partition("::")
    if sep and not test:
        raise RerunError(f"{spec!r}: nothing after '::'; write PATH::TEST_NAME or just PATH")
    return path, (test if sep else None)


def _norm(part: str, root: Path) -> str:
    p = Path(part)
    if p.is_absolute():
        try:
            p = p.resolve().relative_to(root.resolve())
        except ValueError:
            raise RerunError(f"{part}: outside the repository {root}; pass a path inside it") from None
    s = p.as_posix()
    return s[2:] if s.startswith("./") else s


def _match_files(part: str, files: Sequence[str], root: Path, prefixes: Sequence[str] = ("", "suites/")) -> tuple[list[str], bool]:
    """Matched test files and whether the spec named one file explicitly.

    ``prefixes``: folders a relative spec may be given under (the repository root and the
    catalog's test folder, e.g. SGLang's ``test/registered/``)."""
    rel = _norm(part, root).rstrip("/")
    if _GLOB & set(rel):
        hits = [f for f in files if any(fnmatch.fnmatch(f, pre + rel) for pre in prefixes)]
        if "/" not in rel:
            hits += [f for f in files if fnmatch.fnmatch(f.rsplit("/", 1)[-1], rel)]
        return sorted(set(hits)), False
    for pre in prefixes:
        folder = pre + rel
        if folder and (root / folder).is_dir():
            return [f for f in files if f.startswith(folder.rstrip("/") + "/")], False
    for pre in prefixes:
        if pre + rel in files:
            return [pre + rel], True
    if "/" in rel or (root / rel).is_file():
        if (root / rel).is_file() or (root / "suites" / rel).is_file():
            raise RerunError(f"{rel}: not a test file the catalog collects (see its [collect] globs); name a registered file")
        raise RerunError(f"{rel}: no such file or folder under {root} or suites/; check the path")
    names = {rel, rel + ".py"}
    hits = sorted(f for f in files if f.rsplit("/", 1)[-1] in names)
    if not hits:
        raise RerunError(f"{rel}: no test file of that name under suites/; pass a path, a glob or a folder")
    if len(hits) > 1:
        raise RerunError(f"{rel}: ambiguous, {len(hits)} files have that name: {', '.join(hits)}; pass one of them")
    return hits, True


def resolve(spec: str, collection: Collection, root: Path, suite: str | None = None,
            prefixes: Sequence[str] = ("", "suites/")) -> Selection:
    """The registrations a spec selects (pure apart from is_dir/is_file checks under root)."""
    part, test = split_spec(spec)
    files, explicit = _match_files(part, collection.files, root, prefixes)
    if not files:
        raise RerunError(f"{spec}: matches no test file; check the glob or folder")
    if test is not None and len(files) != 1:
        raise RerunError(f"{spec}: '::{test}' needs exactly one file, the spec matched {len(files)}; name one file")
    by_path: dict[str, list[Registration]] = {}
    for r in collection.registrations:
        by_path.setdefault(r.path, []).append(r)
    problems = [i for i in collection.issues if i.path in files]
    if problems:
        raise RerunError("; ".join(str(i) for i in problems[:3]))
    regs = sorted((r for f in files for r in by_path.get(f, [])), key=lambda r: (r.path, r.suite))
    if suite is not None:
        chosen = [r for r in regs if r.suite == suite]
        if not chosen:
            where = sorted({r.suite for r in regs})
            raise RerunError(f"{spec}: not registered to suite {suite!r}; registered to: {', '.join(where) or 'none'}; drop --suite or pick one of those")
        regs = chosen
    # A registration without a session (suite="" or an undeclared suite of an unchecked
    # backend) cannot run; it is reported beside the disabled ones.
    disabled = [r for r in regs if r.disabled or not r.suite]
    enabled = [r for r in regs if not r.disabled and r.suite]
    if explicit and disabled and not enabled:
        r = disabled[0]
        if not r.suite and not r.disabled:
            raise RerunError(f"{r.path}:{r.line}: {r.backend} suite {r.declared!r} has no session; declare it in the catalog to run it")
        raise RerunError(f"{r.path}:{r.line}: disabled in suite {r.suite!r} ({r.disabled}); remove disabled= from the registration to rerun it")
    if not enabled:
        raise RerunError(f"{spec}: every matched registration is disabled ({', '.join(f'{r.path}: {r.disabled}' for r in disabled[:3])})")
    return Selection(enabled, test, disabled)


def check_test_name(path: str, test: str, source: str) -> None:
    """Refuse ``::name`` when the file has no top-level test function or class of that name."""
    head = test.split("::", 1)[0].split("[", 1)[0]
    tree = ast.parse(source, filename=path)
    names: list[str] = []
    for n in tree.body:  # defined, imported or assigned at top level: pytest collects all three
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(n.name)
        elif isinstance(n, ast.ImportFrom):
            names += [a.asname or a.name for a in n.names]
        elif isinstance(n, ast.Assign):
            names += [t.id for t in n.targets if isinstance(t, ast.Name)]
    if head not in names:
        known = [n for n in names if n.startswith(("test", "Test"))]
        raise RerunError(f"{path}: no test {head!r} at top level; known: {', '.join(known) or 'none'}")


def make_targets(
    sel: Selection,
    expected: Mapping[tuple[str, str], float],
    nightly_suites: Sequence[str] = (),
    sources: Mapping[tuple[str, str], str] | None = None,
) -> list[Target]:
    """One target per suite; ``expected`` maps (suite, path) to seconds."""
    out: list[Target] = []
    for name in sorted({r.suite for r in sel.registrations}):
        regs = [r for r in sel.registrations if r.suite == name]
        secs = {r.path: float(expected.get((name, r.path), r.est_time)) for r in regs}
        files = [f"{r.path}::{sel.test}" if sel.test else r.path for r in regs]
        limit = int(sum(file_timeout(s) for s in secs.values()) + SETUP_S)
        nightly = any(r.nightly for r in regs) and name not in nightly_suites
        src = {r.path: (sources or {}).get((name, r.path), "est_time") for r in regs}
        out.append(Target(name, files, regs, sum(secs.values()), limit, nightly, src, secs))
    return out


def describe(target: Target, extra: Sequence[str] = ()) -> str:
    lines = [f"suite {target.suite}: {len(target.files)} file(s), expected {target.expected_s:.0f} s, timeout {target.timeout_s} s"]
    for r in target.registrations:
        secs, source = target.seconds.get(r.path, r.est_time), target.sources.get(r.path, "est_time")
        lines.append(f"  {r.path}:{r.line}  expected {secs:.0f} s ({source}"
                     + (f"; est_time {r.est_time:g} s)" if source != "est_time" else ")"))
    lines.append(target.command(extra))
    return "\n".join(lines)


def execute(argv: list[str], timeout_s: float, cwd: Path) -> int:
    """Run a command in its own process group; its exit status (128+N when signal N
    killed it); on timeout stop the whole group, exit 1."""
    print("+ " + mask_secrets(shlex.join(argv)), flush=True)
    proc = subprocess.Popen(argv, cwd=cwd, start_new_session=True)
    try:
        rc = proc.wait(timeout=timeout_s)
        # Killed by signal N reads -N, which max() over the targets took for a pass.
        return 128 - rc if rc < 0 else rc
    except subprocess.TimeoutExpired:
        print(f"error: rerun exceeded its {timeout_s:.0f} s limit (2 x expected + 60 s per file + {SETUP_S} s); stopping it", file=sys.stderr)
        for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
            try:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=wait)
                break
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue
        return 1
    except KeyboardInterrupt:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait()
        return 130


def plan_rerun(
    spec: str,
    root: Path,
    catalog_path: Path,
    *,
    suite: str | None = None,
    history: str | None = None,
    fingerprint: str | None = None,
) -> tuple[Selection, list[Target]]:
    """Collect the tree, resolve the spec and size each suite's command from history."""
    from ci_register.planning import durations  # noqa: PLC0415 - reads the history
    from ci_register.registered.catalog import load_catalog  # noqa: PLC0415
    from ci_register.registered.collect import collect, tests_root  # noqa: PLC0415

    catalog = load_catalog(catalog_path)
    if suite is not None and suite not in catalog.suites:
        raise RerunError(f"--suite {suite!r}: unknown suite; {catalog.session_suggest(suite)}")
    folder = tests_root(catalog, root).resolve()
    try:
        under = folder.relative_to(root.resolve()).as_posix()
    except ValueError:
        under = "."
    # A spec may be relative to the repository, the test folder, or a glob's fixed folder
    # (SGLang's "registered/" under "test/").
    heads = [("" if under == "." else under.rstrip("/") + "/")]
    for glob in catalog.globs:
        fixed = glob.split("*", 1)[0].rpartition("/")[0]
        if fixed:
            heads.append(heads[0] + fixed + "/")
    prefixes = tuple(dict.fromkeys(["", *heads, "suites/"]))
    sel = resolve(spec, collect(catalog, base=root), root, suite, prefixes)
    if sel.test is not None:
        check_test_name(sel.registrations[0].path, sel.test, (root / sel.registrations[0].path).read_text(encoding="utf-8"))
    expected: dict[tuple[str, str], float] = {}
    sources: dict[tuple[str, str], str] = {}
    warned: set[str] = set()
    for name in sorted({r.suite for r in sel.registrations}):
        regs = [r for r in sel.registrations if r.suite == name]
        # The matrix's fingerprint (the suite's newest trusted run): a rerun printed on
        # a laptop sizes the GPU suite's command as CI planned it (durations.expected).
        found = durations.lookup(regs, catalog.suites[name], history, root=root,
                                 fingerprint=fingerprint or durations.LATEST)
        if found.warning and found.warning not in warned:  # one history, one warning
            warned.add(found.warning)
            print(f"warning: {found.warning}", file=sys.stderr)
        secs, src = durations.expected(regs, found.figures)
        for path in secs:
            expected[(name, path)] = secs[path]
            sources[(name, path)] = src[path]
    nightly = [n for n, s in catalog.suites.items() if s.nightly]
    return sel, make_targets(sel, expected, nightly, sources)


def main_rerun(
    spec: str,
    root: Path,
    catalog_path: Path,
    *,
    suite: str | None = None,
    history: str | None = None,
    run: bool = False,
    via_nox: bool = True,
    extra: Sequence[str] = (),
) -> int:
    """Print (and with ``run`` execute) each suite's command; exit 0/1/2."""
    from ci_register.registered.catalog import CatalogError  # noqa: PLC0415

    try:
        sel, targets = plan_rerun(spec, root, catalog_path, suite=suite, history=history)
    except (RerunError, CatalogError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    extra = [*(["--history", history] if history else []), *extra]
    for r in sel.skipped:
        if r.suite:
            print(f"skipped: {r.path}:{r.line} disabled in suite {r.suite!r} ({r.disabled})")
        else:
            print(f"skipped: {r.path}:{r.line} {r.backend} suite {r.declared or '(none)'!r} has no session in the catalog")
    if len(targets) > 1:
        print(f"{spec}: registered to {len(targets)} suites; one command each (--suite NAME picks one)")
    for t in targets:
        print(describe(t, extra))
    if not run:
        return 0
    rc = 0
    for t in targets:
        if via_nox:
            argv = [sys.executable, "-m", "nox", "-f", str(root / "noxfile.py"), "-s", t.suite, "--", *t.args(extra)]
        else:
            argv = [sys.executable, "-m", "ci_register", "run", t.suite, *t.args(extra)]
        rc = max(rc, execute(argv, t.timeout_s, root))
    return rc
