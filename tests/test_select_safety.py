"""Safety of the selection, checked by really importing: on generated trees, every test
module the selection leaves out is imported (its conftests first) in a fresh interpreter
with a meta-path finder that records each file Python loads; none of them may be the
changed file. Zero unsafe omissions over every (tree, changed file) pair."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

from ci_register.planning.imports import scan
from ci_register.planning.select import parse_select, select_tests

# Runs in the child: record every module file the import system finds, then import the
# conftests above each test and the test itself (as pytest would), one test per child
# so modules loaded by one never count for another.
RECORDER = r"""
import importlib.abc, importlib.machinery, importlib.util, json, os, sys
root, conftests, test = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
loaded = set()
class Recorder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.origin and spec.origin.startswith(root):
            loaded.add(os.path.relpath(spec.origin, root))
        return spec
sys.meta_path.insert(0, Recorder())
def run(rel):
    loaded.add(rel)
    folder = os.path.join(root, os.path.dirname(rel))
    sys.path.insert(0, folder)  # pytest's rootdir-less mode: the file's basedir on sys.path
    spec = importlib.util.spec_from_file_location("_t_" + rel.replace("/", "_")[:-3], os.path.join(root, rel))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
sys.path.insert(0, root)
for c in conftests:
    run(c)
run(test)
print(json.dumps(sorted(loaded)))
"""

STYLES = (
    "import {abs}",
    "from {parent} import {leaf}",
    "from {abs} import VALUE",
    "from . import {sib}",
    "from .{sib} import VALUE",
    "from .. import {up}",
    "def lazy():\n    import {abs}",
    "import importlib\nimportlib.import_module('{abs}')",
)


def generate(rng: random.Random, root: Path) -> list[str]:
    """A random package tree with varied import styles (acyclic), a conftest, tests."""
    mods: list[tuple[str, ...]] = []
    for top in ("alpha", "beta"):
        mods.append((top,))
        for sub in ("core", "ops", "io"):
            mods.append((top, sub))
            for leaf in ("m1", "m2", "m3"):
                mods.append((top, sub, leaf))
    packages = {m for m in mods if len(m) < 3}
    order = mods[:]
    rng.shuffle(order)
    rank = {m: i for i, m in enumerate(order)}
    files: dict[str, str] = {}
    for m in mods:
        lines = ["VALUE = 1"]  # first: a module caught in an import cycle already has it
        # Imports go to modules later in a random order; parents load implicitly, so
        # cycles still occur and resolve (VALUE exists before any import runs).
        later = [t for t in mods if rank[t] > rank[m]]
        for target in rng.sample(later, min(len(later), rng.randint(0, 2))):
            lines.append(_import_line(rng, m, target, m in packages))
        path = "/".join(m) + ("/__init__.py" if m in packages else ".py")
        files[path] = "\n".join(lines) + "\n"
    files["tests/conftest.py"] = f"import {'.'.join(rng.choice(mods))}\n"
    tests = []
    for i in range(6):
        path = f"tests/{'unit/' if i % 2 else ''}test_{i}.py"
        targets = rng.sample(mods, rng.randint(0, 2))
        files[path] = "".join(f"import {'.'.join(t)}\n" for t in targets) + "def test_x():\n    pass\n"
        tests.append(path)
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tests


def _import_line(rng: random.Random, me: tuple[str, ...], target: tuple[str, ...], is_pkg: bool) -> str:
    here = me if is_pkg else me[:-1]  # the package relative imports start from
    options = [STYLES[0], STYLES[2], STYLES[6], STYLES[7]]
    if len(target) > 1:
        options.append(STYLES[1])
    if target[:-1] == here and len(target) > len(here):
        options += [STYLES[3], STYLES[4]]
    if len(here) >= 2 and target[:-1] == here[:-1] and len(target) == len(here):
        options.append(STYLES[5])
    style = rng.choice(options)
    return style.format(abs=".".join(target), parent=".".join(target[:-1]), leaf=target[-1],
                        sib=target[-1], up=target[-1])


def loaded_by(root: Path, test: str, conftests: list[str]) -> set[str]:
    r = subprocess.run([sys.executable, "-c", RECORDER, str(root) + "/", json.dumps(conftests), test],
                       capture_output=True, text=True, timeout=60, cwd=root)
    assert r.returncode == 0, r.stderr
    return set(json.loads(r.stdout))


def test_no_left_out_test_loads_the_changed_file(tmp_path):
    omissions, checked, kept = [], 0, 0
    for seed in range(16):
        rng = random.Random(seed)
        root = tmp_path / f"tree{seed}"
        tests = generate(rng, root)
        graph = scan(root)
        config = parse_select(None, "catalog.toml")
        actual = {t: loaded_by(root, t, graph.conftests.get(t, [])[::-1]) for t in tests}
        for changed in sorted(graph.files):
            sel = select_tests(graph, tests, [changed], config)
            if sel.everything:  # only for a module nothing imports: it runs every test
                assert "no file imports it" in sel.everything
                kept += len(tests)
                continue
            for t in tests:
                if t in sel.files:
                    kept += 1
                    continue
                checked += 1
                if changed in actual[t]:
                    omissions.append((seed, changed, t))
    print(f"{checked} left-out and {kept} selected (tree, changed file, test) triples")
    assert checked > 300 and kept > 100  # the check had room to fail both ways
    assert omissions == []
