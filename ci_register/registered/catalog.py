"""The suite catalog: suites, their hardware, and how test files register.

The catalog is data (TOML) so that adding a suite, or reading a tree whose
markers have other names, needs no code. This module is stdlib-only because
``noxfile.py`` imports it before any virtualenv exists.
"""

from __future__ import annotations

import difflib
import functools
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ci_register.registered.gate_options import GATE_OPTIONS, MILES_GATE_KEYS, miles_options
from ci_register.registered.paths import NotRegularFile, read_regular

__all__ = [
    "BACKENDS",
    "RESERVED_NAMES",
    "SCHEDULES",
    "CatalogError",
    "Capability",
    "Hardware",
    "Suite",
    "Catalog",
    "load_catalog",
    "parse_catalog",
    "DEFAULT_CATALOG",
]

# SGLang's backends (its register_*_ci markers) plus "rocm", this tool's first name for AMD.
BACKENDS = ("cuda", "rocm", "amd", "cpu", "npu", "xpu", "musa", "mlx")
SCHEDULES = ("per-commit", "nightly")
DEFAULT_CATALOG = Path("suites") / "catalog.toml"

_SUITE_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
_CAPABILITY = re.compile(r"^(\d+)\.(\d+|x)$")
_SUITE_KEYS = {
    "backend",
    "description",
    "schedule",
    "runner_labels",
    "shard_budget_s",
    "shards",
    "hardware",
    "install",
    "uninstall",
    "pytest_args",
    "name",
}
_COLLECT_KEYS = {"globs", "exclude", "gate_marker", "gate_mode", "tests", "stage_suite", "require", "unchecked_backends",
                 "labels"}
GATE_MODES = ("enforce", "warn", "off")
# What a registered, enabled file must contain: top-level pytest tests (this tool's rule),
# an `if __name__ == "__main__":` block with a call (SGLang's: it runs `python3 file.py`),
# or nothing.
REQUIRE = ("tests", "main", "none")
# SGLang's rule for register_*_ci(stage=..., runner_config=...).
STAGE_SUITE = "{stage}-test-{runner_config}"
_HARDWARE_KEYS = {"gpu_count", "gpu_models", "min_capability", "max_capability"}
# Session names the noxfile defines for the framework: a suite named so would be
# shadowed by it (`nox -s tests` would run the framework's tests, not the suite).
RESERVED_NAMES = ("tests", "lint", "registry", "matrix", "rerun", "est-time", "history-browse",
                  "gate-report", "bench-gates")


class CatalogError(ValueError):
    """A catalog that cannot be used; the message names file, line and fix."""


@dataclass(frozen=True, order=True)
class Capability:
    """A compute capability bound; ``minor=None`` means any minor (``10.x``)."""

    major: int
    minor: int | None

    def __str__(self) -> str:
        return f"{self.major}.{'x' if self.minor is None else self.minor}"

    def admits_as_min(self, cap: tuple[int, int]) -> bool:
        return cap >= (self.major, self.minor or 0)

    def admits_as_max(self, cap: tuple[int, int]) -> bool:
        if self.minor is None:
            return cap[0] <= self.major
        return cap <= (self.major, self.minor)


@dataclass(frozen=True)
class Hardware:
    gpu_count: int = 0
    gpu_models: tuple[str, ...] = ()
    min_capability: Capability | None = None
    max_capability: Capability | None = None

    def describe(self) -> str:
        """`4x H200 (capability 9.0)` style, for error messages and listings."""
        if self.gpu_count == 0:
            return "no GPU"
        what = "/".join(self.gpu_models) if self.gpu_models else "GPU"
        lo, hi = self.min_capability, self.max_capability
        if lo and hi and str(lo) == str(hi):
            cap = f" (capability {lo})"
        elif lo and hi:
            cap = f" (capability {lo} to {hi})"
        elif lo:
            cap = f" (capability {lo} or newer)"
        elif hi:
            cap = f" (capability up to {hi})"
        else:
            cap = ""
        return f"{self.gpu_count}x {what}{cap}"


@dataclass(frozen=True)
class Suite:
    name: str
    backend: str
    description: str
    schedule: str
    runner_labels: tuple[str, ...]
    shard_budget_s: float
    hardware: Hardware
    shards: int | None = None
    install: tuple[str, ...] = ()
    uninstall: tuple[str, ...] = ()
    pytest_args: tuple[str, ...] = ()
    registered_as: str = ""  # the name registrations use (SGLang keys suites by backend and name)

    @property
    def key(self) -> tuple[str, str]:
        return (self.backend, self.registered_as or self.name)

    @property
    def is_gpu(self) -> bool:
        return self.hardware.gpu_count > 0

    @property
    def nightly(self) -> bool:
        return self.schedule == "nightly"

    def tags(self) -> list[str]:
        """Nox tags: backend, GPU count, schedule, and gpu or cpu (each once: a CPU
        suite's backend is already ``cpu``)."""
        return list(dict.fromkeys([
            self.backend,
            f"{self.hardware.gpu_count}gpu",
            self.schedule,
            "gpu" if self.is_gpu else "cpu",
        ]))


@dataclass(frozen=True)
class Catalog:
    path: Path
    suites: dict[str, Suite]
    markers: dict[str, str]  # marker function name -> backend
    globs: tuple[str, ...] = ("**/test_*.py",)
    exclude: tuple[str, ...] = ()
    gate_marker: str = "register_ci_gate"
    root: Path = field(default=Path("."))
    tests: str | None = None  # test folder relative to the repository root (--root)
    stage_suite: str = STAGE_SUITE
    require: str = "tests"
    implicit: dict[str, tuple[str, str]] = field(default_factory=dict)  # glob -> (suite key, source)
    # Backends whose registrations may name undeclared suites (SGLang checks no AMD or NPU
    # suite name): such a registration is read and listed, and no session runs it.
    unchecked_backends: tuple[str, ...] = ()
    # Mode of a gate declaration that names none ("warn" for miles: its gates report only).
    gate_mode: str = "enforce"
    # The labels registrations may use (miles' registry); empty: any label.
    labels: tuple[str, ...] = ()
    # [gate_defaults]: metric key -> register_ci_gate options a declaration of that key
    # gets where it omits them (miles' GATE_DEFAULTS: bands for bare declarations).
    gate_defaults: dict[str, dict] = field(default_factory=dict, compare=False)
    select: dict = field(default_factory=dict, compare=False)  # raw [select] table (ci_register.planning.select)

    def known(self) -> str:
        return ", ".join(sorted(self.suites))

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_key", {s.key: s for s in self.suites.values()})

    def find(self, backend: str, name: str) -> Suite | None:
        """The suite a registration of ``backend`` naming ``name`` belongs to."""
        return self._by_key.get((backend, name))  # type: ignore[attr-defined]

    def suggest(self, name: str, backend: str | None = None) -> str:
        """A short hint for an unknown suite name: the closest declared names, not all."""
        pool = sorted({s.key[1] for s in self.suites.values() if backend is None or s.backend == backend})
        return _hint_cached(name, tuple(pool or sorted({s.key[1] for s in self.suites.values()})))

    def session_suggest(self, name: str) -> str:
        """Like :meth:`suggest`, over session (table) names: for --suite and nox -s."""
        return _hint(name, sorted(self.suites))


@functools.lru_cache(maxsize=1024)
def _hint_cached(name: str, pool: tuple[str, ...]) -> str:
    return _hint(name, list(pool))


def _hint(name: str, pool: list[str]) -> str:
    """A few names: all of a short list, else the closest (an error line stays one short line)."""
    if len(pool) <= 8:
        return "known: " + ", ".join(pool)
    close = difflib.get_close_matches(name, pool, n=3, cutoff=0.6)
    if close:
        return "closest: " + ", ".join(close)
    return f"{len(pool)} suites declared, none close; see `python -m ci_register list`"


def _line_of(text: str, needle: str) -> int:
    """Best-effort line number of a table header, for error messages."""
    for i, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return i
    return 1


def _capability(value: object, where: str) -> Capability:
    m = _CAPABILITY.match(str(value)) if isinstance(value, str) else None
    if not m:
        raise CatalogError(f"{where}: capability {value!r} must be a string like \"9.0\" or \"10.x\"")
    minor = None if m.group(2) == "x" else int(m.group(2))
    return Capability(int(m.group(1)), minor)


def _str_list(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CatalogError(f"{where}: must be a list of strings, got {value!r}")
    return tuple(value)


def _no_unknown_fields(raw: dict, known: set[str], table: str, where: str) -> None:
    unknown = sorted(set(raw) - known)
    if unknown:
        raise CatalogError(f"{where}: unknown field {unknown[0]!r} in [{table}]; known: {', '.join(sorted(known))}")


def _suite(name: str, raw: object, where: str) -> Suite:
    if not _SUITE_NAME.fullmatch(name):
        raise CatalogError(f"{where}: suite name {name!r} must be lowercase letters, digits, '-', '_' or '.'")
    if name in RESERVED_NAMES:
        raise CatalogError(f"{where}: suite name {name!r} is a framework session of the noxfile ({', '.join(RESERVED_NAMES)}); rename the suite")
    if not isinstance(raw, dict):
        raise CatalogError(f"{where}: [suites.{name}] must be a table")
    _no_unknown_fields(raw, _SUITE_KEYS, f"suites.{name}", where)
    for key in ("backend", "description", "schedule", "shard_budget_s"):
        if key not in raw:
            raise CatalogError(f"{where}: [suites.{name}] is missing {key!r}")
    backend = raw["backend"]
    if backend not in BACKENDS:
        raise CatalogError(f"{where}: [suites.{name}] backend {backend!r}; use one of {', '.join(BACKENDS)}")
    schedule = raw["schedule"]
    if schedule not in SCHEDULES:
        raise CatalogError(f"{where}: [suites.{name}] schedule {schedule!r}; use one of {', '.join(SCHEDULES)}")
    description = raw["description"]
    if not isinstance(description, str) or not description.strip() or "\n" in description:
        raise CatalogError(f"{where}: [suites.{name}] description must be one non-empty line")
    budget = raw["shard_budget_s"]
    if isinstance(budget, bool) or not isinstance(budget, int | float) or not 0 < budget <= 7 * 86400:
        raise CatalogError(f"{where}: [suites.{name}] shard_budget_s must be a number of seconds above 0 and at most a week (604800), got {budget!r}")
    shards = raw.get("shards")
    if shards is not None and (isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= 256):
        raise CatalogError(f"{where}: [suites.{name}] shards must be an integer from 1 to 256 (a GitHub Actions matrix runs at most 256 jobs)")
    hw_raw = raw.get("hardware", {})
    if not isinstance(hw_raw, dict):
        raise CatalogError(f"{where}: [suites.{name}.hardware] must be a table")
    _no_unknown_fields(hw_raw, _HARDWARE_KEYS, f"suites.{name}.hardware", where)
    count = hw_raw.get("gpu_count", 0)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise CatalogError(f"{where}: [suites.{name}.hardware] gpu_count must be an integer >= 0")
    if backend == "cpu" and count:
        raise CatalogError(f"{where}: [suites.{name}] is a cpu suite but asks for {count} GPUs")
    if backend != "cpu" and not count:
        raise CatalogError(f"{where}: [suites.{name}] is a {backend} suite: set hardware.gpu_count >= 1")
    hardware = Hardware(
        gpu_count=count,
        gpu_models=_str_list(hw_raw.get("gpu_models", []), f"{where}: [suites.{name}.hardware] gpu_models"),
        min_capability=_capability(hw_raw["min_capability"], where) if "min_capability" in hw_raw else None,
        max_capability=_capability(hw_raw["max_capability"], where) if "max_capability" in hw_raw else None,
    )
    return Suite(
        name=name,
        backend=backend,
        description=description.strip(),
        schedule=schedule,
        runner_labels=_str_list(raw.get("runner_labels", []), f"{where}: [suites.{name}] runner_labels"),
        shard_budget_s=float(budget),
        hardware=hardware,
        shards=shards,
        install=_str_list(raw.get("install", []), f"{where}: [suites.{name}] install"),
        uninstall=_str_list(raw.get("uninstall", []), f"{where}: [suites.{name}] uninstall"),
        pytest_args=_str_list(raw.get("pytest_args", []), f"{where}: [suites.{name}] pytest_args"),
        registered_as=_registered_as(raw.get("name", name), name, where),
    )


def _registered_as(value: object, name: str, where: str) -> str:
    if not isinstance(value, str) or not value.strip() or "\n" in value:
        raise CatalogError(f"{where}: [suites.{name}] name must be the non-empty suite name registrations use")
    return value


def _collect_options(collect: object, where: str) -> dict[str, object]:
    """[collect]'s settings, checked (a typo is an error, not a silently ignored key)."""
    if not isinstance(collect, dict):
        raise CatalogError(f"{where}: [collect] must be a table")
    _no_unknown_fields(collect, _COLLECT_KEYS, "collect", where)
    out: dict[str, object] = {
        "globs": _str_list(collect.get("globs", ["**/test_*.py"]), f"{where}: collect.globs"),
        "exclude": _str_list(collect.get("exclude", []), f"{where}: collect.exclude"),
    }
    for key in ("gate_marker", "tests", "stage_suite", "require"):
        value = collect.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise CatalogError(f"{where}: collect.{key} must be a non-empty string, got {value!r}")
    if collect.get("gate_marker"):
        if not collect["gate_marker"].isidentifier():
            raise CatalogError(f"{where}: collect.gate_marker must be a function name, got {collect['gate_marker']!r}")
        out["gate_marker"] = collect["gate_marker"]
    if collect.get("tests"):
        out["tests"] = collect["tests"]
    if "stage_suite" in collect:
        fmt = collect["stage_suite"]
        try:
            fmt.format(stage="s", runner_config="r")
        except (KeyError, IndexError, ValueError):
            raise CatalogError(f"{where}: collect.stage_suite {fmt!r} may use only {{stage}} and {{runner_config}}") from None
        out["stage_suite"] = fmt
    if "unchecked_backends" in collect:
        backends = _str_list(collect["unchecked_backends"], f"{where}: collect.unchecked_backends")
        bad = [b for b in backends if b not in BACKENDS]
        if bad:
            raise CatalogError(f"{where}: collect.unchecked_backends: unknown backend {bad[0]!r}; use {', '.join(BACKENDS)}")
        out["unchecked_backends"] = backends
    if "labels" in collect:
        out["labels"] = _str_list(collect["labels"], f"{where}: collect.labels")
    if "gate_mode" in collect:
        if collect["gate_mode"] not in GATE_MODES:
            raise CatalogError(f"{where}: collect.gate_mode {collect['gate_mode']!r}; use one of {', '.join(GATE_MODES)}")
        out["gate_mode"] = collect["gate_mode"]
    if "require" in collect:
        if collect["require"] not in REQUIRE:
            raise CatalogError(f"{where}: collect.require {collect['require']!r}; use one of {', '.join(REQUIRE)}")
        out["require"] = collect["require"]
    return out


def _implicit(raw: object, suites: dict[str, Suite], where: str) -> dict[str, tuple[str, str]]:
    """[implicit]: files matching a glob belong to a suite without a marker call (miles)."""
    if not isinstance(raw, dict):
        raise CatalogError(f"{where}: [implicit] must be a table of \"GLOB\" = \"SUITE\"")
    out: dict[str, tuple[str, str]] = {}
    for glob, suite in raw.items():
        if not isinstance(suite, str) or suite not in suites:
            raise CatalogError(f"{where}: [implicit] {glob!r} = {suite!r}: not a suite of this catalog; {_closest_table(str(suite), suites)}")
        out[glob] = (suite, f"implicit {glob!r}")
    return out


def _closest_table(name: str, suites: dict[str, Suite]) -> str:
    close = difflib.get_close_matches(name, sorted(suites), n=3, cutoff=0.6)
    return ("closest: " + ", ".join(close)) if close else "declare it as [suites.NAME]"


def parse_catalog(text: str, path: Path) -> Catalog:
    """Parse catalog TOML text; every problem is a one-line :class:`CatalogError`."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib reports "(at line N, column M)"; lift the line to the front.
        m = re.search(r"at line (\d+)", str(exc))
        line = m.group(1) if m else "1"
        raise CatalogError(f"{path}:{line}: malformed catalog: {exc}; fix the TOML (a suite defined twice is a duplicate table)") from None
    except RecursionError:  # tomllib recurses per nested array or inline table
        raise CatalogError(f"{path}: malformed catalog: arrays or tables nested too deeply to read; "
                           "fix the TOML (a catalog nests a few levels)") from None
    unknown = sorted(set(data) - {"collect", "markers", "suites", "implicit", "select", "gate_defaults"})
    if unknown:
        raise CatalogError(f"{path}:{_line_of(text, unknown[0])}: unknown table {unknown[0]!r}; known: collect, gate_defaults, implicit, markers, select, suites")
    if not isinstance(data.get("select", {}), dict):
        raise CatalogError(f"{path}:{_line_of(text, 'select')}: [select] must be a table (see ci_register/planning/select.py)")
    options = _collect_options(data.get("collect", {}), f"{path}:{_line_of(text, '[collect]')}")
    markers_raw = data.get("markers", {"register_cuda_ci": "cuda", "register_rocm_ci": "rocm", "register_cpu_ci": "cpu"})
    if not isinstance(markers_raw, dict):
        raise CatalogError(f"{path}:{_line_of(text, 'markers')}: markers must be a table of name = backend")
    markers: dict[str, str] = {}
    for name, backend in markers_raw.items():
        if backend not in BACKENDS:
            raise CatalogError(
                f"{path}:{_line_of(text, name)}: marker {name!r} maps to unknown backend {backend!r}; use one of {', '.join(BACKENDS)}"
            )
        markers[name] = backend
    suites_raw = data.get("suites", {})
    if not isinstance(suites_raw, dict):
        raise CatalogError(f"{path}:{_line_of(text, 'suites')}: suites must be tables [suites.NAME]")
    if not suites_raw:
        raise CatalogError(f"{path}:1: the catalog defines no suites; add a [suites.NAME] table")
    suites = {
        name: _suite(name, raw, f"{path}:{_line_of(text, f'[suites.{name}]')}")
        for name, raw in suites_raw.items()
    }
    seen: dict[tuple[str, str], str] = {}
    for name, s in suites.items():
        if s.key in seen:
            raise CatalogError(
                f"{path}:{_line_of(text, f'[suites.{name}]')}: [suites.{name}] and [suites.{seen[s.key]}] are both "
                f"the {s.key[0]} suite {s.key[1]!r}; give one another name or backend"
            )
        seen[s.key] = name
    implicit = _implicit(data.get("implicit", {}), suites, f"{path}:{_line_of(text, '[implicit]')}")
    defaults = _gate_defaults(data.get("gate_defaults", {}), path, text)
    return Catalog(path=path, suites=suites, markers=markers, root=path.parent, implicit=implicit,
                   select=data.get("select", {}), gate_defaults=defaults, **options)


def _gate_defaults(raw: object, path: Path, text: str) -> dict[str, dict]:
    """[gate_defaults."METRIC/KEY"] tables of register_ci_gate options, checked as a call's."""
    where = f"{path}:{_line_of(text, 'gate_defaults')}"
    if not isinstance(raw, dict):
        raise CatalogError(f"{where}: [gate_defaults] must be tables [gate_defaults.\"METRIC/KEY\"]")
    out: dict[str, dict] = {}
    for key, opts in raw.items():
        at = f"{path}:{_line_of(text, key)}"
        if not isinstance(opts, dict):
            raise CatalogError(f"{at}: gate_defaults {key!r} must be a table of register_ci_gate options")
        bad = [k for k in opts if k not in GATE_OPTIONS and k not in MILES_GATE_KEYS]
        if bad:
            raise CatalogError(f"{at}: gate_defaults {key!r}: unknown option {bad[0]!r}; known: "
                               f"{', '.join(GATE_OPTIONS + MILES_GATE_KEYS)}")
        error = miles_options(dict(opts), "gate_defaults")
        if error:
            raise CatalogError(f"{at}: gate_defaults {key!r}: {error}")
        out[key] = dict(opts)
    return out


# A catalog of every SGLang suite is about 20 kB; `--catalog /dev/zero` read until memory
# ran out, and a FIFO blocked forever.
MAX_CATALOG_BYTES = 4 * 1024 * 1024


def load_catalog(path: str | Path) -> Catalog:
    path = Path(path)
    try:
        data = read_regular(path, MAX_CATALOG_BYTES + 1)
        text = data.decode("utf-8-sig")  # an editor's BOM is not an error
    except FileNotFoundError:
        raise CatalogError(f"{path}: catalog not found; pass --catalog PATH") from None
    except UnicodeDecodeError:
        raise CatalogError(f"{path}:1: catalog is not UTF-8 text") from None
    except NotRegularFile:
        raise CatalogError(f"{path}: not a regular file (a FIFO, device or folder); pass "
                           "--catalog PATH of a TOML file") from None
    except OSError as exc:
        raise CatalogError(f"{path}: cannot read the catalog ({exc.strerror or exc}); pass --catalog PATH") from None
    if len(data) > MAX_CATALOG_BYTES:
        raise CatalogError(f"{path}: over {MAX_CATALOG_BYTES // (1024 * 1024)} MiB, not a "
                           "catalog; pass --catalog PATH of the suite catalog")
    return parse_catalog(text, path)
