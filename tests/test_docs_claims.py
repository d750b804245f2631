"""What the docs name exists: every `nox -s NAME` is a session or a catalog's suite, every
`--flag` given to a command is in that command's `--help`, every repository path is in
the tree. README.md and docs/adopting.md are also run command by command
(tests/test_docs_commands.py, tests/test_adoption_guide.py); this covers every doc,
inline commands too, and the sessions' own descriptions (`nox -l`).
"""

from __future__ import annotations

import ast
import functools
import glob
import re
import subprocess
import sys
from pathlib import Path

import pytest
from doc_commands import REPO, fenced_commands

DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]

# Paths a doc names that are not in this tree, each for a reason.
NOT_HERE = {
    "suites/x/test_y.py": "a placeholder",
    "suites/kernels/test_x.py": "a placeholder",
    "suites/kernels/test_decode.py": "a plan JSON's example",
    "suites/perf/test_nightly_variants.py": "bench_trim's synthetic nightly",
    "benchmarks/attempts": "kept in history at commit 703120f, as the README says",
    "tests/fast": "miles' tree", "tests/fast-gpu": "miles' tree", "tests/e2e": "miles' tree",
    "tests/ci": "miles' tree", "tests/test_configs.py": "a catalog example's tree",
    "serving/ttft_ms*": "a metric key, not a path",
    ".github/workflows/release-*.yml": "a catalog example's tree",
    ".github/workflows/pr-test-*.yml": "tokenspeed's tree (economy.md's --path-filter)",
    ".github/workflows/run-pr-test-stage.yml": "tokenspeed's tree (economy.md's --path-filter)",
    "serving/vllm-cpu/tiny-arith/swap/VARIANT/accuracy": "a metric key, not a path",
}
# The README's generated dry run plans a five-file example suite (tools/sync_docs.py).
GENERATED_EXAMPLE = re.compile(r"suites/(quantization|kernels|serving)/test_(fp8|int4|rmsnorm|rope|sampler)\.py")
# Options a program accepts under a second name its --help does not print.
ALIASES = {"--junitxml": "--junit-xml"}  # pytest registers both
TOP = ("ci_register/", "gates/", "suites/", "suitelib/", "serving/", "tests/", "benchmarks/", "tools/",
       "examples/", "docs/", ".ci/", ".github/")


def _where(path: Path, text: str, pos: int) -> str:
    return f"{path.relative_to(REPO)}:{text[:pos].count(chr(10)) + 1}"


@functools.cache
def _run(*argv: str) -> str:
    r = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=120, cwd=REPO)
    return r.stdout + r.stderr


@functools.cache
def _sessions() -> dict[str, str]:
    """nox session name -> its `nox -l` line."""
    out = _run("-m", "nox", "-f", str(REPO / "noxfile.py"), "-l")
    return {line.split()[1]: line for line in out.splitlines() if line[:2] in ("* ", "- ")}


def _suites() -> set[str]:
    from ci_register.registered.catalog import load_catalog

    names = set()
    for path in (REPO / "suites" / "catalog.toml", *sorted((REPO / "examples").glob("*/catalog.toml"))):
        names |= {s.name for s in load_catalog(path).suites.values()} | set(load_catalog(path).suites)
    return names


def _commands() -> list[tuple[str, str]]:
    """(where, command) for every command the docs show: fenced, inline and `nox -l`'s."""
    out = []
    for path in DOCS:
        out += [(c.where, c.text.replace("\\\n", " ")) for c in fenced_commands(path)]
        text = path.read_text(encoding="utf-8")
        out += [(_where(path, text, m.start()), m.group(1))
                for m in re.finditer(r"`((?:python3? |gate-report|nox -s )[^`]*)`", text)]
    for name, line in _sessions().items():
        desc = line.split("->", 1)[-1]
        if " -- " in desc:
            out.append((f"nox -l ({name})", f"nox -s {name} -- {desc.split(' -- ', 1)[1]}"))
    return out


# The program behind a framework session's arguments.
_SESSION_PROGRAM = {
    "matrix": ("-m", "gates.commands.planner", "matrix"), "rerun": ("-m", "ci_register", "rerun"),
    "est-time": ("-m", "ci_register", "est-time"), "bisect": ("-m", "gates.commands.cli", "bisect"),
    "gate-report": ("-m", "gates.commands.cli", "report"), "bench-gates": ("benchmarks/bench_gates.py",),
    "registry": ("-m", "ci_register", "list"), "jit-cache": ("-m", "suitelib.flashinfer_cache"),
}


def _subcommands(program: tuple[str, ...]) -> set[str]:
    text = _run(*program, "--help")
    m = re.search(r"\{([\w,-]+)\}", text)
    return (set(m.group(1).split(",")) if m else set()) | set(re.findall(r"^ {4}([a-z][\w-]+) {2,}", text, re.M))


def _program(words: list[str]) -> tuple[tuple[str, ...], list[str]] | None:
    """The argv whose `--help` lists the command's options, and the command's arguments."""
    if words[0] == "nox" and "-s" in words[:-1]:
        session = words[words.index("-s") + 1]
        rest = words[words.index("--") + 1:] if "--" in words else []
        if session in ("tests", "lint", "actionlint", "history-browse"):  # pytest's own, none, paths, a path
            return None
        return _SESSION_PROGRAM.get(session, ("-m", "ci_register", "run")), rest
    if words[0] == "gate-report":
        program, rest = ("-m", "gates.commands.cli"), words[1:]
    elif words[0] in ("python", "python3") and len(words) > 2 and words[1] == "-m":
        program, rest = ("-m", words[2]), words[3:]
        if words[2] == "pytest":  # with the plugins a suite run loads
            plugins = [w for i, w in enumerate(rest) if i and rest[i - 1] == "-p"]
            return (*program, *(a for p in plugins for a in ("-p", p))), rest
    elif words[0] in ("python", "python3") and len(words) > 1 and words[1].endswith(".py"):
        program, rest = (words[1],), words[2:]
    else:
        return None
    if rest and rest[0] in _subcommands(program):
        return (*program, rest[0]), rest[1:]
    if program == ("-m", "gates.commands.cli"):
        return (*program, "report"), rest
    return program, rest


def test_every_session_and_suite_the_docs_name_exists():
    known = set(_sessions()) | _suites()
    texts = {str(p.relative_to(REPO)): p.read_text(encoding="utf-8") for p in DOCS}
    texts["nox -l"] = "\n".join(_sessions().values())
    for argv in (("-m", "gates.commands.cli", "--help"), ("-m", "ci_register", "--help")):
        texts[" ".join(argv[1:])] = _run(*argv)
    named = {(where, m.group(1)) for where, text in texts.items()
             for m in re.finditer(r"(?:--suite|nox -s) ([a-z][a-z0-9.-]*)", text)}
    assert len(named) > 20
    assert not [(w, n) for w, n in named if n not in known], "sessions or suites that do not exist"


def test_every_option_the_docs_give_a_command_is_in_its_help():
    checked, missing = 0, []
    for where, command in _commands():
        for part in re.split(r"&&|\|(?!\w)", command):
            if part.strip().startswith("sqlite-utils"):
                continue
            words = [w.strip("\"'") for w in part.split("#")[0].replace("[", " ").replace("]", " ").split()]
            while words and "=" in words[0] and not words[0].startswith("-"):
                words = words[1:]  # VAR=value before the command
            got = _program(words) if words else None
            if got is None:
                continue
            program, rest = got
            text = _run(*program, "--help")
            assert "usage" in text.lower(), f"{where}: `{' '.join(program)} --help` gives no usage:\n{text[-800:]}"
            for word in rest:
                flag = re.match(r"--[a-z][\w-]*", word)
                if flag:
                    checked += 1
                    name = ALIASES.get(flag.group(), flag.group())
                    if not re.search(re.escape(name) + r"(?![\w-])", text):
                        missing.append(f"{where}: {flag.group()} is not in `{' '.join(program)} --help` "
                                       f"({part.strip()[:100]})")
    assert checked > 100
    assert not missing, "\n".join(missing)


def test_every_repository_path_the_docs_name_exists():
    missing = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"(?<![\w./$<-])((?:\.?[\w-]+/)+[\w.*-]*[\w*])(?![\w/])", text):
            rel = m.group(1)
            if not rel.startswith(TOP) or rel in NOT_HERE or GENERATED_EXAMPLE.fullmatch(rel):
                continue
            if not (glob.glob(str(REPO / rel), recursive=True) if "*" in rel else (REPO / rel).exists()):
                missing.append(f"{_where(path, text, m.start())}: {rel}")
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("name", sorted(NOT_HERE))
def test_a_path_let_off_is_still_named_and_still_absent(name):
    # An entry the docs dropped, or a file that now exists, is an entry to remove.
    assert any(name in p.read_text(encoding="utf-8") for p in DOCS), f"{name}: no doc names it"
    assert not (glob.glob(str(REPO / name)) if "*" in name else (REPO / name).exists()), f"{name} exists"


def test_a_help_description_taken_from_a_docstring_is_a_whole_sentence():
    # `description=__doc__.splitlines()[0]` on a sentence that runs on cut it mid-phrase.
    cut = []
    for path in sorted(p for p in REPO.glob("[!.]*/**/*.py") if p.parts[len(REPO.parts)] != "tests"):
        text = path.read_text(encoding="utf-8")
        if "description=__doc__.splitlines()[0]" in text:
            first = (ast.get_docstring(ast.parse(text), clean=False) or "").splitlines()[0]
            if not first.rstrip().endswith((".", ":", ")")):
                cut.append(f"{path.relative_to(REPO)}: {first}")
    assert not cut, "\n".join(cut)


def test_every_catalog_key_is_documented_in_the_adoption_guide():
    from ci_register.planning import select
    from ci_register.registered import catalog

    guide = (REPO / "docs" / "adopting.md").read_text(encoding="utf-8")
    keys = catalog._SUITE_KEYS | catalog._COLLECT_KEYS | catalog._HARDWARE_KEYS | select._KEYS
    assert not sorted(k for k in keys if not any(f in guide for f in (f"`{k}`", f"{k} =", f".{k}]")))


def test_the_readme_names_every_verdict_the_gate_writes():
    from gates.model.verdicts import VERDICTS

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert [v for v in VERDICTS if f"`{v}`" not in readme] == []


def _constants() -> dict[str, set[float]]:
    """Every module-level numeric UPPER_CASE constant of gates/ and ci_register/."""
    import importlib

    out: dict[str, set[float]] = {}
    for path in sorted([*(REPO / "gates").rglob("*.py"), *(REPO / "ci_register").rglob("*.py")]):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        if module.endswith("__main__"):
            continue
        for name, value in vars(importlib.import_module(module)).items():
            if name.isupper() and isinstance(value, int | float) and not isinstance(value, bool):
                out.setdefault(name, set()).add(float(value))
    return out


def test_constants_in_the_calibration_tables_are_the_codes():
    # Rows `| `NAME`, `NAME2` | v1, v2 | why |`: each value is that constant's, as the code has it.
    consts, checked, wrong = _constants(), 0, []
    path = REPO / "docs" / "gates" / "calibration.md"
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not re.fullmatch(r"`[A-Z][A-Z0-9_]+`(, `[A-Z][A-Z0-9_]+`)*", cells[0]):
            continue
        names = re.findall(r"`([A-Z][A-Z0-9_]+)`", cells[0])
        values = [re.match(r"[0-9][0-9.e-]*", v.strip()) for v in cells[1].split(", ")]
        if len(values) != len(names):
            continue
        for name, value in zip(names, values, strict=True):
            if value is None:
                continue
            checked += 1
            if not any(abs(c - float(value.group())) <= 1e-4 * max(1.0, abs(c)) for c in consts.get(name, ())):
                wrong.append(f"calibration.md:{n}: {name} = {value.group()}, code {sorted(consts.get(name, ()))}")
    assert checked > 15
    assert not wrong, "\n".join(wrong)


def test_economy_md_lists_the_built_in_always_and_ignore_paths():
    from ci_register.planning.select import DEFAULT_ALWAYS, DEFAULT_IGNORE

    doc = (REPO / "docs" / "economy.md").read_text(encoding="utf-8")
    spelled = {"requirements*.txt": "requirements files", "**/requirements*.txt": "requirements files",
               "**/*.md": "Markdown", "*.md": "Markdown", "**/*.rst": "reStructuredText",
               "*.rst": "reStructuredText"}
    assert [p for p in (*DEFAULT_ALWAYS, *DEFAULT_IGNORE) if spelled.get(p, f"`{p}`") not in doc] == []


def test_gate_report_help_gives_the_exit_codes_it_returns():
    # gate-report exits with the reported sessions' worst exit code (Report.exit_code):
    # 143 for a run stopped by SIGTERM (tests/test_surfaces_agree.py), not only 0, 1, 2.
    text = _run("-m", "gates.commands.cli", "--help")
    assert "worst exit code of the reported sessions" in text and "128+N" in text


def test_every_test_the_docs_cite_exists():
    cited = {m.group(1) for p in DOCS for m in re.finditer(r"`(test_[a-z0-9_]+)`", p.read_text(encoding="utf-8"))}
    defined = {m.group(1) for folder in ("tests", "suites") for p in (REPO / folder).rglob("*.py")
               for m in re.finditer(r"^\s*def (test_\w+)", p.read_text(encoding="utf-8"), re.M)}
    tables = {"test_rows"}  # the history's table, not a test
    assert len(cited) >= 3 and sorted(cited - defined - tables) == []



# A figure a doc states and the results file that measured it (command and machine are
# there): (doc, the figure in the doc, results file, the same figure there). The groups
# of the two regexes are compared in order: a doc edited past its measurement, or a
# rerun whose figures the doc does not follow, fails here.
_TRAINED = "benchmarks/results/serving_trained_model.md"
_SERVING = "benchmarks/results/serving_cpu.md"
_TRAINING_CPU = r"step 399 loss [\d.]+ wall \d+ s cpu (\d+) s"
FIGURES = [
    ("README.md", r"\((\d+) CPU-seconds on one thread", _TRAINED, _TRAINING_CPU),
    ("docs/serving.md", r"trained in (\d+) CPU-seconds", _TRAINED, _TRAINING_CPU),
    ("docs/serving.md", r"scored (0\.\d+) on the 500\s+held problems in transformers", _TRAINED,
     r"held accuracy (0\.\d+) on 500 problems"),
    ("docs/serving.md", r"it scored (0\.\d+) \(n = 500\) in the eval", _SERVING,
     r"evals/tiny-arith-held/accuracy\s*\|\s*(0\.\d+)\s*\|\s*500\b"),
    ("docs/serving.md", r"bf16 (0\.\d+), fp8", _SERVING, r"swap/bf16/accuracy\s*\|\s*(0\.\d+)\s*\|\s*500\b"),
    ("docs/serving.md", r"fp8 (0\.\d+)\s+\(floor (0\.\d+), passes\)", _SERVING,
     r"swap/fp8/accuracy\s*\|\s*(0\.\d+)\s*\|\s*500\s*\|\s*ratio\s*\|\s*(0\.\d\d\d)"),
    ("docs/serving.md", r"broken (0\.\d+)\s+\(18\.6 points down", _SERVING,
     r"swap/broken/accuracy\s*\|\s*(0\.\d+)\s*\|\s*500\b"),
    ("docs/serving.md", r"Start to healthy took (\d+)-(\d+) s", _SERVING,
     r"\(`start_s`\): (\d+)\.\d, [\d.]+ and (\d+)\.\d s"),
    ("docs/adopting.md", r"31f1ca96: (\d+) registrations \((\d+) implicit\) and (\d+) gates, all equal",
     "benchmarks/results/adopt_miles.md",
     r"registrations: miles (\d+) \((\d+) implicit\), ours \1 \(\2 implicit\); suites differing: 0\n"
     r"register_ci_gate: miles (\d+) .*ours \3 .*True"),
    ("README.md", r"xz -9e: (\d+) MiB,", "benchmarks/results/device_carry.md", r"\.dev holds (\d+) MiB \(15 wheels"),
    ("README.md", r"names the culprit in (\d+)% of 200 simulated trials \((\d+)\s+test executions on average\) and says "
     r"\"no isolable change\" in (\d+)%", "benchmarks/results/bench_bisect.md",
     r"step\s+(\d+)\.0%[^\n]*?\s(\d+)\.\d / \d+ / \d+[\s\S]*?\nnull\s+(\d+)\.0%"),
    ("README.md", r"flag (\d+), (\d+), (\d+) times without acceptance \(seeds 0-2,\s+no confirm; (\d+), (\d+), (\d+) with "
     r"the default confirm\)", "benchmarks/results/bench_accept.md",
     r"(?=[\s\S]*confirm 0\)\nmode[^\n]*\nnone\s+(\d+)\s+(\d+)\s+(\d+))confirm 4\)\nmode[^\n]*\nnone\s+(\d+)\s+(\d+)\s+(\d+)"),
    ("README.md", r"\+([\d.]+)% on a\s+decode step\) in (\d+) test executions, about (\d+)-(\d+) s each",
     "benchmarks/results/gpu_bisect_h200.md",
     r"(?=[\s\S]*The step is \+([\d.]+)%)[\s\S]*?(\d+) test executions[\s\S]*?about (\d+)-(\d+) s on that machine"),
    ("README.md", r"compiles its kernels at first use \((\d+) s of a cold `base-b-1gpu` run's (\d+) s",
     "benchmarks/results/bench_jit_cache.md",
     r"(?=[\s\S]*?RUN cold: rc=0 wall=[\d.]+ s; JIT builds \d+, of which \d+ compiled \(>= 1 s\) for (\d+)\.\d s)"
     r"[\s\S]*?RUN cold: rc=0 wall=(\d+)\.\d s"),
    ("docs/fleet.md", r"gives a snapshot of (\d+) runs, ([\d.]+) MB", "benchmarks/results/bench_fleet.md",
     r"Snapshot of the 1,000-run history: (\d+) runs, ([\d.]+) MB"),
    ("docs/fleet.md", r"run\s+and its confirm reruns: (\d+) kB", "benchmarks/results/bench_fleet.md",
     r"each shard file after\s+the strip: (\d+) kB"),
    ("docs/fleet.md", r"32 one-run shards into a\s+1,000-run history: ([\d.]+) s", "benchmarks/results/bench_fleet.md",
     r"\| 32 x 1000 \| [^|]* \| ([\d.]+) s \|"),
    ("docs/fleet.md", r"with its verdicts takes ([\d.]+) kB after VACUUM", "benchmarks/results/bench_fleet.md",
     r"\| m008[^|]*\| ([\d.]+) kB \|"),
    ("docs/internals.md", r"A 73-metric run with its verdicts takes ([\d.]+) kB", "benchmarks/results/bench_fleet.md",
     r"\| m008[^|]*\| ([\d.]+) kB \|"),
    ("docs/internals.md", r"names cut false alarms from ([\d.]+)% / ([\d.]+)% to ([\d.]+)% / ([\d.]+)% a series",
     "benchmarks/results/bench_gates_machines.md",
     r"(?=[\s\S]*?\| no\s+\| ([\d.]+)%)(?=[\s\S]*?\| no[\s\S]*?\| no\s+\| ([\d.]+)%)"
     r"(?=[\s\S]*?\| yes\s+\| ([\d.]+)%)(?=[\s\S]*?\| yes[\s\S]*?\| yes\s+\| ([\d.]+)%)"),
    ("docs/gates/surfaces.md", r"(\d),(\d{3}) sessions \(\d+ with reruns, \d+ with two or more\), (\d+) exit-code and "
     r"(\d+) verdict", "benchmarks/results/bench_surfaces.md",
     r"Sessions: (\d)(\d{3}); failed: \d+; report exit-code mismatches: (\d+); verdict mismatches: (\d+)"),
    ("docs/economy.md", r"runner map \| ([\d.]+)% \|\n\| static graph alone \(`ci_register/\*\*` runs everything\) \| ([\d.]+)%",
     "benchmarks/results/replay_selection.md",
     r"static graph \+ recorded maps: ([\d.]+)%\*\* \(median [\d.]+%\); static graph alone: mean ([\d.]+)%"),
    ("docs/economy.md", r"took ([\d.]+) s for the first commit\s+and a median ([\d.]+) s after",
     "benchmarks/results/bench_selection.md", r"graph \+ selection time: ([\d.]+) s for the first commit.*?median ([\d.]+) s"),
]


@pytest.mark.parametrize(("doc", "said", "results", "measured"), FIGURES,
                         ids=[f"{doc}:{said[:30]}" for doc, said, _, _ in FIGURES])
def test_a_figure_the_docs_state_is_the_one_its_results_file_holds(doc, said, results, measured):
    in_doc = re.search(said, (REPO / doc).read_text(encoding="utf-8"))
    in_results = re.search(measured, (REPO / results).read_text(encoding="utf-8"))
    assert in_doc, f"{doc} no longer states {said!r}: update FIGURES with the doc"
    assert in_results, f"{results} holds no {measured!r}: rerun its command, or correct the doc"
    assert in_doc.groups() == in_results.groups(), f"{doc} says {in_doc.groups()}, {results} measured {in_results.groups()}"


def test_a_revision_the_docs_replay_this_repository_at_is_one_of_its_commits():
    # economy.md replayed `--rev 5549f2ba0d`, a name main never had (its commit is a1d3d76).
    shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=REPO, capture_output=True,
                             text=True, timeout=60)
    if shallow.returncode or shallow.stdout.strip() != "false":
        pytest.skip("needs this repository's whole history (a full clone)")
    revs = [(where, m.group(1)) for where, cmd in _commands() if "--repo" not in cmd
            for m in re.finditer(r"--rev ([0-9a-f]{7,40})\b", cmd)]
    assert revs, "the docs no longer replay a revision of this repository: drop this test"
    missing = [f"{where}: --rev {rev}" for where, rev in revs
               if subprocess.run(["git", "cat-file", "-e", f"{rev}^{{commit}}"], cwd=REPO, capture_output=True,
                                 timeout=60).returncode]
    assert missing == []


def test_a_commit_or_tag_the_docs_check_out_is_in_this_repository():
    # The README said `git checkout gate-lab-2026-12 -- benchmarks/attempts`: a tag main never had.
    shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=REPO, capture_output=True,
                             text=True, timeout=60)
    if shallow.returncode or shallow.stdout.strip() != "false":
        pytest.skip("needs this repository's whole history (a full clone)")
    texts = [(p, p.read_text(encoding="utf-8")) for p in (*DOCS, REPO / "benchmarks" / "results" / "attempts.md")]
    named = [(_where(p, t, m.start()), m.group(1)) for p, t in texts
             for m in re.finditer(r"git (?:checkout|show) ([\w.^~-]+)(?::| -- )", t)]
    assert named, "the docs no longer check anything out of this repository's history: drop this test"
    missing = [f"{where}: {rev}" for where, rev in named
               if subprocess.run(["git", "cat-file", "-e", f"{rev}^{{commit}}"], cwd=REPO, capture_output=True,
                                 timeout=60).returncode]
    assert missing == []


def test_economy_mds_share_of_the_changes_that_run_no_declared_path_is_the_replays():
    # A figure derived from replay_selection.md's per-change table (no line states it):
    # the mean "maps" share over the changes with no "why everything", and how many keep 0%.
    doc = (REPO / "docs" / "economy.md").read_text(encoding="utf-8")
    said = re.search(r"\| the (\d+) changes that touch no declared path and no file the runner loads "
                     r"\| ([\d.]+)% \((\d+) keep 0%\) \|", doc)
    assert said, "economy.md no longer states the replay's no-declared-path share: drop this test"
    rows = [[c.strip() for c in line.split("|")[1:-1]]
            for line in (REPO / "benchmarks/results/replay_selection.md").read_text(encoding="utf-8").splitlines()
            if re.match(r"\| [0-9a-f]{10} \|", line)]
    rest = [float(r[4].rstrip("%")) for r in rows if not r[7]]
    assert rest and said.groups() == (str(len(rest)), f"{sum(rest) / len(rest):.1f}",
                                      str(sum(1 for m in rest if m == 0)))
