"""How much est_time the change-based selection keeps, over real commits of a repository.

For each sampled commit of a git repository (a bare mirror is enough), the commit's tree
is exported to a temporary folder, its registrations are read by our collector with a
catalog for that tree, the changed paths come from ``git diff-tree`` against the first
parent, and :func:`ci_register.planning.select.select_tests` decides which registered files run.
The figure per commit is the share of the registered est_time (enabled, per-commit
files) the selection keeps; the report gives the median and the distribution, and why
whole runs were kept.

    git clone --bare https://github.com/lightseekorg/tokenspeed tokenspeed.git
    git -C tokenspeed.git update-ref --no-deref HEAD f4d8ec6e03   # the results' head
    python benchmarks/bench_selection.py --repo tokenspeed.git \
        --catalog benchmarks/catalogs/tokenspeed.toml --commits 60 --out benchmarks/results/bench_selection.md \
        --path-filter "python/pyproject.toml" "python/tokenspeed/**" "tokenspeed-kernel/**" \
        "tokenspeed-kernel-amd/**" "tokenspeed-mla/**" "tokenspeed-scheduler/**" "test/**" \
        ".github/workflows/pr-test-*.yml" ".github/workflows/run-pr-test-stage.yml"

Registrations our collector rejects (a keyword our marker signature lacks, such as
TokenSpeed's ``disabled_on_runners``) are read by a minimal literal parse: the
``est_time`` and ``suite`` keyword literals of top-level marker calls; the report
counts them.
"""

from __future__ import annotations

import argparse
import ast
import io
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ci_register.planning.imports import scan  # noqa: E402
from ci_register.planning.select import parse_select, select_tests  # noqa: E402
from ci_register.registered.catalog import load_catalog  # noqa: E402
from ci_register.registered.collect import collect  # noqa: E402


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(repo), *args], capture_output=True, text=True, check=True).stdout


def sample_commits(repo: Path, n: int, window: int) -> list[str]:
    """``n`` commits spread evenly over the newest ``window`` first-parent non-merge commits."""
    commits = git(repo, "log", "--first-parent", "--no-merges", f"-n{window}", "--format=%H", "HEAD").split()
    if len(commits) <= n:
        return commits
    step = len(commits) / n
    return [commits[int(i * step)] for i in range(n)]


def export(repo: Path, commit: str, dest: Path) -> None:
    data = subprocess.run(["git", "--git-dir", str(repo), "archive", "--format=tar", commit], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")


def minimal_registrations(source: str, markers: set[str]) -> list[tuple[str, float]]:
    """(suite, est_time) of top-level marker calls with literal keyword arguments."""
    out = []
    for node in ast.parse(source).body:
        call = node.value if isinstance(node, ast.Expr) else None
        if not isinstance(call, ast.Call) or getattr(call.func, "id", None) not in markers:
            continue
        kw = {k.arg: k.value.value for k in call.keywords if isinstance(k.value, ast.Constant)}
        if call.args and isinstance(call.args[0], ast.Constant):
            kw.setdefault("est_time", call.args[0].value)
        if kw.get("disabled") or kw.get("nightly"):
            continue
        if isinstance(kw.get("est_time"), int | float) and isinstance(kw.get("suite"), str):
            out.append((kw["suite"], float(kw["est_time"])))
    return out


def registrations(tree: Path, catalog) -> tuple[list[tuple[str, str, float]], int]:
    """(suite, path, est_time) of enabled per-commit registrations, and how many came
    from the minimal parse."""
    col = collect(catalog, root=tree, base=tree)
    nightly = {n for n, s in catalog.suites.items() if s.nightly}  # not run for a pull request
    regs = [(r.suite, r.path, r.est_time) for r in col.registrations
            if not r.disabled and not r.nightly and r.suite not in nightly]
    seen = {p for _, p, _ in regs}
    rejected = sorted({i.path for i in col.issues if "unknown keyword" in i.message} - seen)
    fallback = 0
    for path in rejected:
        for suite, est in minimal_registrations((tree / path).read_text(encoding="utf-8"), set(catalog.markers)):
            if suite in catalog.suites and suite not in nightly:
                regs.append((suite, path, est))
            fallback += 1
    return regs, fallback


def path_filter_keeps(changed: list[str], globs: list[str]) -> bool:
    """A path filter such as a workflow's ``on.pull_request.paths``: all or nothing."""
    import fnmatch  # noqa: PLC0415

    return any(fnmatch.fnmatchcase(p, g) or (g.endswith("/**") and p.startswith(g[:-2])) for p in changed for g in globs)


def measure(repo: Path, catalog_path: Path, commits: list[str], path_filter: list[str] = ()) -> list[dict]:
    catalog = load_catalog(catalog_path)
    config = parse_select(catalog.select, str(catalog_path), suites=catalog.suites)
    rows = []
    cache: dict = {}  # parsed files by (path, digest): each commit parses only what it changed
    for i, c in enumerate(commits):
        changed = git(repo, "diff-tree", "--no-commit-id", "-r", "--name-only", "--no-renames", f"{c}^", c).split("\n")
        changed = [p for p in changed if p]
        with tempfile.TemporaryDirectory() as tmp:
            tree = Path(tmp)
            export(repo, c, tree)
            regs, fallback = registrations(tree, catalog)
            t0 = time.perf_counter()
            graph = scan(tree, config.package_roots, cache=cache)
            sel = select_tests(graph, [p for _, p, _ in regs], changed, config)
            secs = time.perf_counter() - t0
        total = sum(e for _, _, e in regs)
        kept = sum(e for s, p, e in regs if sel.keeps(s, p))
        rows.append({
            "commit": c[:10], "subject": git(repo, "log", "-1", "--format=%s", c).strip()[:60],
            "changed": len(changed), "files": len({p for _, p, _ in regs}), "fallback": fallback,
            "total": total, "kept": kept, "share": kept / total if total else 1.0,
            "everything": sel.everything, "selected": len(sel.files), "seconds": secs, "first": i == 0,
            "python_files": len(graph.files),
            "filter": 1.0 if not path_filter or path_filter_keeps(changed, path_filter) else 0.0,
        })
        print(f"[{i + 1}/{len(commits)}] {c[:10]} changed {len(changed):3d} kept {kept:6.0f}/{total:6.0f} s "
              f"({rows[-1]['share']:.0%}) {sel.everything[:70]}", file=sys.stderr)
    return rows


def _reason(everything: str) -> str:
    if "declared to run everything" in everything:
        return "declared path (" + everything.split("'")[-2] + ")"
    if "computed name" in everything:
        return "changed file imports by a computed name"
    if "does not parse" in everything:
        return "changed file does not parse"
    if "no file imports it" in everything:
        return "changed Python file that nothing imports and no recorded map holds"
    if "runner" in everything:
        return "runner code"
    return "undeclared non-Python file"


def report(rows: list[dict], repo: Path, catalog: Path, argv: list[str]) -> str:
    shares = sorted(r["share"] for r in rows)
    everything = [r for r in rows if r["everything"]]
    nothing = [r for r in rows if r["kept"] == 0]
    reasons = Counter(_reason(r["everything"]) for r in everything)
    q = statistics.quantiles(shares, n=4) if len(shares) > 1 else [shares[0]] * 3
    head = git(repo, "rev-parse", "HEAD").strip()[:10]
    lines = [
        "# Test selection on real commits",
        "",
        f"Repository: `{repo.name if repo.name != 'repo' else repo.parent.name}` at `{head}`; catalog `{catalog}`.",
        f"Command: `python benchmarks/bench_selection.py {' '.join(argv)}`",
        "",
        f"- commits sampled: {len(rows)} (first-parent, evenly spaced)",
        f"- registered files per commit: {min(r['files'] for r in rows)}-{max(r['files'] for r in rows)}; "
        f"registered est_time {min(r['total'] for r in rows):.0f}-{max(r['total'] for r in rows):.0f} s; "
        f"registrations read by the minimal parse: {max(r['fallback'] for r in rows)} at most",
        f"- **median share of est_time kept: {statistics.median(shares):.1%}** "
        f"(quartiles {q[0]:.1%} / {q[2]:.1%}, mean {statistics.fmean(shares):.1%})",
        *([f"- the repository's own path filter (all or nothing; `--path-filter`) keeps a median "
           f"{statistics.median(r['filter'] for r in rows):.0%}, mean {statistics.fmean(r['filter'] for r in rows):.1%}; "
           f"the selection keeps less on {sum(r['share'] < r['filter'] for r in rows)} commits, more on "
           f"{sum(r['share'] > r['filter'] for r in rows)}"] if any('--path-filter' in x for x in argv) else []),
        f"- commits that run nothing: {len(nothing)}; commits that run everything: {len(everything)}"
        + (f" ({', '.join(f'{k}: {v}' for k, v in reasons.most_common())})" if everything else ""),
        f"- graph + selection time: {rows[0]['seconds']:.1f} s for the first commit (every file parsed), median "
        f"{statistics.median(r['seconds'] for r in rows[1:] or rows):.2f} s after (files parsed before come from the cache), "
        f"{statistics.median(r['python_files'] for r in rows):.0f} Python files",
        "",
        "| commit | subject | changed | kept s | of s | share | why everything |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        subj = r["subject"].replace("|", "/")
        lines.append(f"| {r['commit']} | {subj} | {r['changed']} | {r['kept']:.0f} | {r['total']:.0f} | "
                     f"{r['share']:.0%} | {_reason(r['everything']) if r['everything'] else ''} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repo", required=True, type=Path, help="git directory (a bare mirror works)")
    p.add_argument("--catalog", required=True, type=Path, help="catalog TOML for that tree, with a [select] table")
    p.add_argument("--commits", type=int, default=60)
    p.add_argument("--window", type=int, default=400, help="sample from this many newest first-parent commits")
    p.add_argument("--out", type=Path, default=None, help="write the Markdown report here")
    p.add_argument("--path-filter", nargs="+", default=[], metavar="GLOB",
                   help="the repository's own trigger paths, to compare with (all or nothing)")
    a = p.parse_args(argv)
    rows = measure(a.repo, a.catalog, sample_commits(a.repo, a.commits, a.window), a.path_filter)
    text = report(rows, a.repo, a.catalog, argv)
    if a.out:
        a.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
