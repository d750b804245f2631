"""Installing the tool elsewhere: the wheel into a fresh virtualenv, used from another
repository; and the CPU torch pin resolving to the CPU build through the extra index."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ISOLATED = {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k not in ("PYTHONPATH", "GATES_HISTORY")}
    return {**env, **ISOLATED, **extra}


def run(*cmd: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=180,
                          env=env or _env())


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh virtualenv with the built wheel of this checkout; dependencies come from
    the running interpreter's site-packages (a .pth path line: offline, no resolver)."""
    tmp = tmp_path_factory.mktemp("install")
    # Build from a copy: setuptools writes build/ and *.egg-info beside the sources.
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for pkg in ("ci_register", "gates", "suitelib", "serving"):
        shutil.copytree(REPO / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    wheels = tmp / "wheels"
    r = run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", wheels, src,
            env=_env())
    assert r.returncode == 0, r.stderr[-2000:]
    (wheel,) = wheels.glob("gpu_ci_gates-*.whl")
    venv = tmp / "venv"
    r = run(sys.executable, "-m", "venv", "--without-pip", venv)
    assert r.returncode == 0, r.stderr
    py = venv / "bin" / "python"
    site = Path(run(py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    (site / "_deps_from_host.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    r = run(sys.executable, "-m", "pip", "--python", py, "install", "--no-deps", "--no-index", wheel)
    assert r.returncode == 0, r.stderr[-2000:]
    return venv


@pytest.fixture
def adopter(tmp_path: Path) -> Path:
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "catalog.toml").write_text(
        '[collect]\ntests = "checks"\nglobs = ["**/test_*.py"]\n\n'
        '[suites.smoke]\nbackend = "cpu"\ndescription = "Smoke."\nschedule = "per-commit"\nshard_budget_s = 60\n')
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "test_smoke.py").write_text(
        'from ci_register import register_cpu_ci\nregister_cpu_ci(est_time=3, suite="smoke")\ndef test_a():\n    pass\n')
    (tmp_path / "noxfile.py").write_text('from ci_register.running.nox_sessions import install\n\ninstall("ci/catalog.toml")\n')
    return tmp_path


def test_wheel_works_from_another_repository(venv, adopter, tmp_path):
    py, bin_ = venv / "bin" / "python", venv / "bin"
    where = run(py, "-c", "import ci_register, gates; print(ci_register.__file__); print(gates.__file__)", cwd=tmp_path).stdout
    assert all(str(venv) in line for line in where.split()), where  # the wheel, not a checkout
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = run(py, "-m", "ci_register", "list", "--root", adopter, "--catalog", "ci/catalog.toml", "--json", cwd=elsewhere)
    assert r.returncode == 0, r.stderr
    assert [f["path"] for f in json.loads(r.stdout)["suites"]["smoke"]["files"]] == ["checks/test_smoke.py"]
    assert (bin_ / "gate-report").is_file()
    r = run(bin_ / "gate-report", "--help")
    assert r.returncode == 0 and "usage" in r.stdout.lower()
    r = run(py, "-m", "nox", "-l", "--json", cwd=adopter)
    assert r.returncode == 0, r.stderr
    assert [s["session"] for s in json.loads(r.stdout)] == ["smoke"]
    spec = run(py, "-c", "from ci_register.running.nox_sessions import distribution_spec; print(distribution_spec())", cwd=tmp_path)
    assert spec.stdout.strip().endswith(".whl']"), spec.stdout + spec.stderr  # a CPU venv gets the same wheel
    r = run(py, "-m", "ci_register", "run", "smoke", "--catalog", "ci/catalog.toml", "--root", adopter,
            "--dry-run", cwd=elsewhere)
    assert r.returncode == 0 and "checks/test_smoke.py:2" in r.stdout, r.stdout + r.stderr


def _fake_wheel(folder: Path, version: str) -> None:
    """A metadata-only torch wheel: enough for pip's resolver, nothing to import."""
    name = f"torch-{version}-py3-none-any.whl"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / name, "w") as z:
        di = f"torch-{version}.dist-info"
        z.writestr(f"{di}/METADATA", f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
        z.writestr(f"{di}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{di}/RECORD", "")
    (folder / "index.html").write_text(f'<a href="{name}">{name}</a>\n')


def test_cpu_torch_pin_resolves_to_the_cpu_build_through_the_extra_index(tmp_path):
    sys.path.insert(0, str(REPO))
    try:
        import noxfile
    finally:
        sys.path.pop(0)
    pypi, cpu = tmp_path / "pypi" / "torch", tmp_path / "cpu" / "torch"
    _fake_wheel(pypi, "2.13.0")  # PyPI's build (CUDA on Linux)
    _fake_wheel(cpu, "2.13.0+cpu")  # PyTorch's CPU index
    resolved = {}
    for index in (f"file://{tmp_path / 'cpu'}", ""):
        os.environ[noxfile.TORCH_INDEX_ENV] = index
        try:
            args = noxfile.cpu_torch_args()
        finally:
            del os.environ[noxfile.TORCH_INDEX_ENV]
        r = run(sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-deps", "--quiet",
                "--report", "-", "--index-url", f"file://{tmp_path / 'pypi'}", *args)
        assert r.returncode == 0, r.stderr
        resolved[index] = json.loads(r.stdout)["install"][0]["metadata"]["version"]
    assert resolved == {f"file://{tmp_path / 'cpu'}": "2.13.0+cpu", "": "2.13.0"}
    assert noxfile.TORCH_INDEX == "https://download.pytorch.org/whl/cpu"


def _noxfile():
    sys.path.insert(0, str(REPO))
    try:
        import noxfile
    finally:
        sys.path.pop(0)
    return noxfile


def _fake_torch(site: Path, version: str, cuda: str | None) -> None:
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "version.py").write_text(
        f"from typing import Optional\n__version__ = '{version}'\ndebug = False\n"
        f"cuda: Optional[str] = {cuda!r}\ngit_version = 'abc'\nhip: Optional[str] = None\n")
    di = site / f"torch-{version}.dist-info"
    di.mkdir()
    (di / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
    (di / "RECORD").write_text("torch/version.py,,\n")


@pytest.mark.parametrize(("version", "cuda", "report"), [
    ("2.13.0+cpu", None, "2.13.0+cpu None None"),  # PyTorch's CPU index
    ("2.13.0", None, "2.13.0 None None"),  # a CPU wheel without the local version (find-links)
    ("2.13.0", "12.8", "2.13.0 12.8 None"),  # PyPI's Linux wheel
])
def test_the_installed_torch_build_is_read_without_importing_torch(tmp_path, version, cuda, report):
    site = tmp_path / "site"
    _fake_torch(site, version, cuda)
    r = run(sys.executable, "-c", _noxfile().TORCH_BUILD_SCRIPT, env=_env(PYTHONPATH=str(site)))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == report


def test_a_cuda_torch_in_a_cpu_session_fails_in_one_line():
    nf = _noxfile()
    assert nf.cpu_torch_problem("2.13.0+cpu None None", "") is None
    assert nf.cpu_torch_problem("2.13.0 None None", "") is None
    msg = nf.cpu_torch_problem("2.13.0 12.8 None", "https://download.pytorch.org/whl/cpu")
    assert msg is not None and "\n" not in msg
    assert msg.startswith("torch 2.13.0 is a CUDA 12.8 build, not the CPU one: PyTorch's CPU index "
                          "https://download.pytorch.org/whl/cpu was not reached; set GPU_CI_TORCH_INDEX")
    assert msg.endswith("rebuild the session's venv: nox --reuse-venv=never -s cpu")
    assert "GPU_CI_TORCH_INDEX is empty" in nf.cpu_torch_problem("2.13.0 12.8 None", "")
    assert "ROCm 6.4" in nf.cpu_torch_problem("2.13.0+rocm6.4 None 6.4", "")


def _torch_wheel(folder: Path, version: str, cuda: str | None) -> None:
    """A torch wheel holding only torch/version.py: what the session's check reads."""
    name = f"torch-{version}-py3-none-any.whl"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / name, "w") as z:
        z.writestr("torch/version.py", f"__version__ = '{version}'\ncuda = {cuda!r}\nhip = None\n")
        di = f"torch-{version}.dist-info"
        z.writestr(f"{di}/METADATA", f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
        z.writestr(f"{di}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{di}/RECORD", "")
    (folder / "index.html").write_text(f'<a href="{name}">{name}</a>\n')


def test_the_cuda_torch_advice_gets_the_cpu_build_where_a_rerun_keeps_cuda(tmp_path):
    # PyPI's torch==2.13.0 (a CUDA build) where the CPU index was out of reach: the cpu
    # session stops with exit 2 and its advice; a rerun with the index fixed but the venv
    # reused (-r) keeps CUDA; the advised command gets the CPU build. Real nox, this
    # noxfile, an envdir of the test's own; offline (the project's dependencies from this
    # Python through PYTHONPATH, no index but the fakes).
    _torch_wheel(tmp_path / "pypi" / "torch", "2.13.0", "12.8")
    _torch_wheel(tmp_path / "cpu" / "torch", "2.13.0+cpu", None)
    envdir = tmp_path / "nox"
    build = tmp_path / "build-backend"  # setuptools alone from this Python: never its torch
    build.mkdir()
    for name in ("setuptools", "pkg_resources", "_distutils_hack"):
        if (Path(sysconfig.get_paths()["purelib"]) / name).is_dir():
            (build / name).symlink_to(Path(sysconfig.get_paths()["purelib"]) / name)
    env = _env(PIP_INDEX_URL=f"file://{tmp_path / 'pypi'}", PIP_NO_DEPS="1", PIP_NO_BUILD_ISOLATION="0",
               PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_CONFIG_FILE=os.devnull, PYTHONPATH=str(build))
    env.pop("CI", None)

    def nox(*args: str, index: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "--envdir", str(envdir),
                               *args, "-s", "cpu", "--install-only"], capture_output=True, text=True, timeout=600,
                              env={**env, "GPU_CI_TORCH_INDEX": index}, cwd=tmp_path)

    first = nox(index=f"file://{tmp_path / 'unreachable'}")
    out = first.stdout + first.stderr
    assert first.returncode == 2 and "torch 2.13.0 is a CUDA 12.8 build" in out, out[-3000:]
    advice = re.search(r"rebuild the session's venv: (nox [^\n]*-s cpu)", out).group(1)
    assert advice == "nox --reuse-venv=never -s cpu"
    cpu = f"file://{tmp_path / 'cpu'}"
    again = nox("-r", index=cpu)  # what the old advice said: the CUDA build stays
    assert again.returncode == 2 and "is a CUDA 12.8 build" in again.stdout + again.stderr
    fixed = nox(*advice.split()[1:-2], index=cpu)
    out = fixed.stdout + fixed.stderr
    assert fixed.returncode == 0 and "is a CUDA" not in out, out[-3000:]
    (torch,) = (envdir / "cpu").glob("lib/python*/site-packages/torch-*.dist-info")
    assert torch.name == "torch-2.13.0+cpu.dist-info"


def test_a_torch_index_with_a_token_stays_off_the_command_line(monkeypatch):
    # nox prints each command it runs: a private mirror's token in
    # GPU_CI_TORCH_INDEX=https://ci:TOKEN@mirror/simple was in every CPU session's log.
    nf = _noxfile()
    private = "https://ci:PWSECRET@mirror.internal/simple"
    monkeypatch.setenv(nf.TORCH_INDEX_ENV, private)
    assert "PWSECRET" not in " ".join(nf.cpu_torch_args())
    assert nf.cpu_torch_args() == ["torch==2.13.0", "--retries", "1", "--timeout", "30"]
    assert nf.cpu_torch_env() == {"PIP_EXTRA_INDEX_URL": private}  # pip reads it there
    assert "PWSECRET" not in nf.cpu_torch_problem("2.13.0 12.8 None", private)
    monkeypatch.setenv(nf.TORCH_INDEX_ENV, "https://download.pytorch.org/whl/cpu")
    assert nf.cpu_torch_env() == {} and "--extra-index-url" in nf.cpu_torch_args()


def test_cpu_sessions_check_the_torch_they_installed(monkeypatch):
    nf = _noxfile()

    class Session:
        name = "cpu"

        def __init__(self, report: str | None) -> None:
            self.report, self.calls, self.virtualenv = report, [], type("V", (), {"location": None})()
            self.env: dict[str, str] = {}  # nox.Session.env: what the session sets for its commands

        def install(self, *args):
            self.calls.append(("install", *args))

        def run_install(self, *args, **kwargs):
            # The check is an install step (nox's run_install), so --install-only runs it.
            self.calls.append(("run", *args))
            return self.report

        def error(self, msg):
            raise RuntimeError(msg)

    monkeypatch.setattr(nf, "venv_lock", lambda s: __import__("contextlib").nullcontext())
    monkeypatch.setattr(nf, "mark_exit", lambda code: None)
    ok = Session("2.13.0+cpu None None\n")
    nf._install_project(ok, "cpu")
    assert [c[0] for c in ok.calls] == ["install", "run", "install"]  # torch, check, project
    cuda = Session("2.13.0 13.0 None\n")
    with pytest.raises(RuntimeError, match="torch 2.13.0 is a CUDA 13.0 build"):
        nf._install_project(cuda, "cpu")
    reused = Session(None)  # nox -R: run_install skips and returns None; nothing to judge
    nf._install_project(reused, "cpu")
    assert [c[0] for c in reused.calls] == ["install", "run", "install"]
    plan_only = Session("")
    nf._install_project(plan_only)  # no torch, no check
    assert [c[0] for c in plan_only.calls] == ["install"]


@pytest.mark.parametrize("in_nox", [False, True])
@pytest.mark.parametrize(("code", "marked"), [(2, [2]), (130, [130]), (1, [])])
def test_gate_report_session_keeps_the_commands_exit_status(monkeypatch, code, marked, in_nox):
    # nox reduces a failed session to 1: `nox -s gate-report -- --run ""` (bad input, 2)
    # read as a failing report (1).
    import nox.command  # noqa: PLC0415

    nf = _noxfile()
    calls: list[tuple] = []

    class Session:
        name, posargs = "gate-report", ["--run", ""]
        env: dict[str, str] = {}

        def run(self, *args, **kwargs):
            calls.append(("run", args, kwargs))
            raise nox.command.CommandFailed(f"exit {code}", return_code=code)

        def error(self, msg):
            raise RuntimeError(msg)

    got: list[int] = []
    monkeypatch.setattr(nf, "_install_project", lambda session, *extras: calls.append(("install",)))
    monkeypatch.setattr(nf, "mark_exit", got.append)
    monkeypatch.setattr(nf, "REPORT_IN_NOX", in_nox)
    with pytest.raises((RuntimeError, nox.command.CommandFailed)):
        nf.gate_report(Session())
    assert got == marked
    if in_nox:  # nox's own Python has the package's dependencies: nothing installed
        assert calls[0][1][:5] == (sys.executable, "-m", "gates.commands.cli", "--run", "")
        assert calls[0][2] == {"external": True}
    else:
        assert calls[0] == ("install",)
        assert calls[1][1][:3] == ("gate-report", "--run", "") and calls[1][2] == {"external": False}


@pytest.mark.parametrize(("args", "code", "marked"), [
    (["build", "base-b-1gpu"], 2, [2]), (["build"], 130, [130]), (["build"], 1, []),
    (["key"], 2, [2])])
def test_jit_cache_session_keeps_the_commands_exit_status(monkeypatch, tmp_path, args, code,
                                                          marked):
    # `nox -s jit-cache -- build` on bad input (a suite session's 2, flashinfer_cache's 2)
    # exited 1: nox reduces a failed session to 1 unless the session marks the code.
    import nox.command  # noqa: PLC0415

    nf = _noxfile()
    calls: list[tuple] = []

    class Session:
        name, posargs = "jit-cache", args

        def create_tmp(self):
            return str(tmp_path)

        def run(self, *cmd, **kwargs):
            calls.append((cmd, kwargs))
            if len(calls) == (2 if args[0] == "build" else 1):  # build: pin passes, the suite fails
                raise nox.command.CommandFailed(f"exit {code}", return_code=code)

        def error(self, msg):
            raise RuntimeError(msg)

    got: list[int] = []
    monkeypatch.setattr(nf, "mark_exit", got.append)
    with pytest.raises((RuntimeError, nox.command.CommandFailed)):
        nf.jit_cache(Session())
    assert got == marked and all(kw == {"external": True} for _, kw in calls)
    assert calls[-1][0][1:3] == (("-m", "nox") if args[0] == "build" else
                                 ("-m", "suitelib.flashinfer_cache"))
