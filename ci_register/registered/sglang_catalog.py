"""Write a catalog of SGLang's suites from the suite lists of its ``test/run_suite.py``.

    python -m ci_register sglang-catalog /path/to/sglang --out ci/catalog.toml

SGLang keeps its suite names in three dict literals of ``test/run_suite.py``
(``PER_COMMIT_SUITES``, ``NIGHTLY_SUITES``, ``OTHER_SUITES``: backend -> names). They are
read with ``ast`` (nothing imported) and written as one ``[suites.NAME]`` table each:
schedule from the list, GPU count and model from the name ("8-gpu-h200" -> 8x H200,
"16-npu-a3" -> 16), ``runner_labels`` the name's runner part, ``shard_budget_s`` 1800 s
(nightly 7200 s) or the suite's longest file in the tree. A name two backends share gets
a ``-BACKEND`` table key and ``name =`` the shared name. Rerun it when SGLang's
lists change; the catalog's header records the commit it was read from.
``examples/sglang/catalog.toml`` is its output for SGLang at the commit its header names.

A tree without ``test/run_suite.py``, or one whose lists are not literals, is one
``error:`` line naming the file and exit 2.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

from ci_register.registered.catalog import CatalogError, parse_catalog
from ci_register.registered.collect import collect

__all__ = ["SglangCatalogError", "fitted_budgets", "main", "read_lists", "render"]

LISTS = {"PER_COMMIT_SUITES": "per-commit", "NIGHTLY_SUITES": "nightly", "OTHER_SUITES": "per-commit"}
MODELS = {"h100": ["H100"], "h200": ["H200"], "h20": ["H20"], "b200": ["B200"], "gb300": ["GB300"],
          "mi30x": ["MI300", "MI325"], "mi35x": ["MI350", "MI355"]}
MARKERS = {"cuda": "register_cuda_ci", "amd": "register_amd_ci", "cpu": "register_cpu_ci",
           "npu": "register_npu_ci", "xpu": "register_xpu_ci", "musa": "register_musa_ci",
           "mlx": "register_mlx_ci"}

HEADER = """\
# SGLang's suites, declared for this tool: a catalog for SGLang's test tree as it is.
# Written by `python -m ci_register sglang-catalog` from test/run_suite.py at {commit}.
#
# A table's key is the nox session name (unique); `name` is the suite name that
# registrations use where two backends share one (suites are keyed by backend and name,
# as in SGLang). GPU counts and models come from the names; runner_labels are the
# names' runner part: map them to your runners. Use it from a checkout of SGLang:
#
#   python -m ci_register list --root ../sglang --catalog /path/to/examples/sglang/catalog.toml

[collect]
# SGLang's runner reads test/registered/**/*.py, whatever the file names.
tests = "test"
globs = ["registered/**/*.py"]
exclude = ["**/conftest.py", "**/__init__.py", "**/cpu/utils.py"]
# SGLang runs `python3 FILE`: an enabled file needs an `if __name__ == "__main__":` call.
require = "main"
stage_suite = "{{stage}}-test-{{runner_config}}"
# SGLang checks the suite names of CUDA, CPU, MUSA, XPU and MLX registrations only.
unchecked_backends = ["amd", "npu"]

[select]
# SGLang's package lives in python/sglang: `import sglang.srt.x` is python/sglang/srt/x.py.
package_roots = ["python"]

[markers]
{markers}
"""


class SglangCatalogError(ValueError):
    """The tree is not an SGLang checkout this reader understands; one line with the fix."""


def read_lists(run_suite: Path) -> dict[str, dict[str, list[str]]]:
    """{list name: {backend: [suite, ...]}} from the module's top-level dict literals."""
    if not run_suite.is_file():
        raise SglangCatalogError(f"{run_suite}: not found; pass the root of an SGLang checkout "
                                 "(its test/run_suite.py lists the suites)")
    try:
        tree = ast.parse(run_suite.read_text(encoding="utf-8"), filename=str(run_suite))
    except (SyntaxError, ValueError, OSError, RecursionError, MemoryError) as exc:
        # ValueError: not UTF-8, a NUL byte; RecursionError: nested past the parser's depth.
        where = f":{exc.lineno}" if isinstance(exc, SyntaxError) and exc.lineno else ""
        raise SglangCatalogError(f"{run_suite}{where}: cannot be read as Python "
                                 f"({exc.__class__.__name__}); pass an SGLang checkout") from None
    out: dict[str, dict[str, list[str]]] = {}
    for stmt in tree.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            continue
        name = stmt.targets[0].id
        if name not in LISTS or not isinstance(stmt.value, ast.Dict):
            continue
        out[name] = {}
        for key, value in zip(stmt.value.keys, stmt.value.values, strict=True):
            backend = key.attr.lower() if isinstance(key, ast.Attribute) else None
            if backend is None or not isinstance(value, ast.List):
                raise SglangCatalogError(f"{run_suite}:{stmt.lineno}: {name} is not a backend -> list "
                                         "literal; this reader knows SGLang's layout at bf186cf8")
            try:
                out[name][backend] = [ast.literal_eval(v) for v in value.elts]
            except ValueError:
                raise SglangCatalogError(f"{run_suite}:{stmt.lineno}: {name}[{backend}] holds a "
                                         "non-literal suite name; list names as strings") from None
    missing = sorted(set(LISTS) - set(out))
    if missing:
        raise SglangCatalogError(f"{run_suite}: no {missing[0]} literal found; this reader knows "
                                 "SGLang's layout at bf186cf8")
    return out


def hardware(name: str, backend: str) -> tuple[int, list[str]]:
    if backend == "cpu":
        return 0, []
    m = re.search(r"(\d+)-(?:gpu|npu)", name)
    models = [v for tok, vals in MODELS.items() if re.search(rf"(?<![a-z0-9]){tok}(?![a-z0-9])", name) for v in vals]
    return (int(m.group(1)) if m else 1), models


# A CPU suite's venv gets SGLang's package from python/ (the tests import it; the
# nox sessions install a repository's own package only from a pyproject at its root).
CPU_INSTALL = 'install = ["-e", "./python"]'


def render(lists: dict[str, dict[str, list[str]]], commit: str, budgets: dict[str, float] | None = None) -> str:
    used = sorted({b for per in lists.values() for b in per} | {"cuda", "cpu"})
    text = [HEADER.format(commit=commit, markers="\n".join(f'{MARKERS[b]} = "{b}"' for b in used if b in MARKERS))]
    seen: dict[str, str] = {}
    for list_name, schedule in LISTS.items():
        for backend, names in lists[list_name].items():
            for name in names:
                if seen.get(name) == backend:
                    continue  # listed twice for one backend
                key = name if name not in seen else f"{name}-{backend}"
                seen.setdefault(name, backend)
                count, models = hardware(name, backend)
                runner = re.sub(r"^(base|stage|extra)-[a-c]-", "", name)
                text.append(f"[suites.{key}]")
                if key != name:
                    text.append(f'name = "{name}"')
                text += [f'backend = "{backend}"', f'description = "SGLang {backend} suite {name}."',
                         f'schedule = "{schedule}"', f'runner_labels = ["{runner}"]',
                         f"shard_budget_s = {(budgets or {}).get(key) or (7200 if schedule == 'nightly' else 1800):g}"]
                if backend == "cpu":
                    text.append(CPU_INSTALL)
                if count:
                    text += [f"[suites.{key}.hardware]", f"gpu_count = {count}"]
                    if models:
                        text.append("gpu_models = [" + ", ".join(f'"{m}"' for m in models) + "]")
                text.append("")
    return "\n".join(text)


def fitted_budgets(text: str, tree: Path) -> dict[str, float]:
    """Budgets raised to the longest enabled file of each suite in the tree (rounded up to
    whole minutes), so that planning never refuses a file SGLang runs."""
    catalog = parse_catalog(text, tree / "catalog.toml")
    longest: dict[str, float] = {}
    for r in collect(catalog, base=tree).registrations:
        if r.suite and not r.disabled:
            longest[r.suite] = max(longest.get(r.suite, 0.0), r.est_time)
    return {name: 60.0 * -(-secs // 60) for name, secs in longest.items()
            if secs > catalog.suites[name].shard_budget_s}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ci_register sglang-catalog",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("tree", help="an SGLang checkout (its root, holding test/run_suite.py)")
    p.add_argument("--out", default="-", help="the catalog file to write (default: stdout)")
    args = p.parse_args(argv)
    tree = Path(args.tree)
    try:
        lists = read_lists(tree / "test" / "run_suite.py")
        commit = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True,
                                text=True, check=False, timeout=30).stdout.strip() or "(not a git checkout)"
        text = render(lists, commit)
        if (tree / "test" / "registered").is_dir():
            text = render(lists, commit, fitted_budgets(text, tree))
        if args.out == "-":
            sys.stdout.write(text)
            return 0
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text, encoding="utf-8")
    except (SglangCatalogError, CatalogError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: {args.out}: cannot write ({exc.strerror or exc}); choose a writable path",
              file=sys.stderr)
        return 2
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
