"""Failed tests are named on every report surface, not counted only: two of three launch
variants failing read "2 test(s) failed" in gate-report's text, Markdown, JSON and HTML,
while the console, JUnit and the history named them."""

from __future__ import annotations

import json

import pytest

from gates.commands.cli import main as gate_report

VARIANTS = '''
import pytest

@pytest.mark.parametrize("variant", ["seqs8", "dies-at-start", "never-healthy"])
def test_variant(variant):
    if variant == "dies-at-start":
        raise RuntimeError("ServerStartError: vllm exited 1 before healthy; token=ghp_abcdefghijklmnopqrstuvwxyz0123456789")
    if variant == "never-healthy":
        pytest.fail("ServerStartError: not healthy after 600 s")
'''


@pytest.fixture
def history(pytester: pytest.Pytester):
    pytester.makepyfile(test_variants=VARIANTS)
    db = pytester.path / "h.db"
    result = pytester.runpytest("--gates-suite", "cpu", f"--gates-history={db}",
                                "-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    result.assert_outcomes(passed=1, failed=2)
    return db


@pytest.mark.parametrize("fmt", ["text", "md", "json", "html"])
def test_every_surface_names_the_failing_variants(history, tmp_path, capsys, fmt):
    out = tmp_path / f"r.{fmt}"
    capsys.readouterr()
    code = gate_report(["--history", str(history), "--no-health", "--format", fmt,
                        "--out", str(out)])
    assert code == 1
    text = out.read_text()
    for variant, why in (("dies-at-start", "vllm exited 1 before healthy"),
                         ("never-healthy", "not healthy after 600 s")):
        assert f"test_variant[{variant}]" in text, text[:2000]
        assert why in text
    assert "test_variant[seqs8]" not in text  # it passed
    assert "ghp_abcdefghijklmnopqrstuvwxyz0123456789" not in text  # masked as every surface
    if fmt == "json":
        [run] = json.loads(text)["runs"]
        assert [t["nodeid"].split("::")[1] for t in run["failed_tests"]] == [
            "test_variant[dies-at-start]", "test_variant[never-healthy]"]
    if fmt == "text":  # the headline, wrapped at 120 columns
        head = " ".join(line.strip() for line in text.split("\n\n", 1)[0].splitlines())
        assert head.endswith(
            "2 test(s) failed: test_variant[dies-at-start], test_variant[never-healthy]"), head
        assert max(map(len, text.splitlines())) <= 120
