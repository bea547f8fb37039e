"""Lint, types and the layer rule, run as ordinary tests so one command checks everything.

ruff and mypy are called from the interpreter that runs the tests, so the versions
pinned by the test extras are the ones that judge the code.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

EXAMPLE_PLUGIN = REPO / "examples" / "plugins" / "preemptd-example-plugin"

LINTED = ("preemptd", "framework", "plugins", "daemon", "tests", "benchmarks", "examples")


def run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run ``python -m ARGS`` and fail the test with its output unless it exits 0."""
    result = subprocess.run(
        [sys.executable, "-m", *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = result.stdout + result.stderr
    if result.returncode != 0:
        pytest.fail(f"{' '.join(map(str, args))} exited {result.returncode}:\n{output}")
    return output


def test_ruff_finds_nothing() -> None:
    """`ruff check` passes over every Python folder of the repository."""
    folders = [name for name in LINTED if (REPO / name).is_dir()]
    run("ruff", "check", "--no-fix", *folders, cwd=REPO)


# The daemon's process modules (issue 9) and what they import are held to the same bar.
DAEMON_MODULES = ("clock", "backends.kubernetes.lease", "loop", "service", "http", "metrics", "notify", "logging")


def test_mypy_strict_passes_on_framework_and_plugins(tmp_path: Path) -> None:
    """`mypy --strict` passes on preemptd.framework, preemptd.plugins, the example plugin, and
    the daemon's process modules (loop, leader election, HTTP, metrics, notify, logging)."""
    # The folders install under other names (package-dir mapping), which mypy cannot
    # follow through the editable install's import hook; a tree of symlinks gives it
    # the installed layout while it still reads the repository's files.
    tree = tmp_path / "tree"
    package = tree / "preemptd"
    package.mkdir(parents=True)
    shutil.copy(REPO / "preemptd" / "__init__.py", package / "__init__.py")
    for folder in ("framework", "plugins", "daemon"):
        (package / folder).symlink_to(REPO / folder, target_is_directory=True)
    # The example shows third-party authors the API; checking it keeps it true.
    example = EXAMPLE_PLUGIN / "preemptd_protect_namespace"
    (tree / example.name).symlink_to(example, target_is_directory=True)
    env = {**os.environ, "MYPYPATH": str(tree)}
    run(
        "mypy",
        "--config-file",
        REPO / "pyproject.toml",
        "--cache-dir",
        REPO / ".mypy_cache",
        "--no-error-summary",
        "-p",
        "preemptd.framework",
        "-p",
        "preemptd.plugins",
        "-p",
        example.name,
        *(arg for module in DAEMON_MODULES for arg in ("-m", f"preemptd.daemon.{module}")),
        cwd=tree,
        env=env,
    )


# --- the layer rule -------------------------------------------------------------------


@dataclass(frozen=True)
class Layer:
    """A folder of the repository, the package it installs as, and what it may import."""

    folder: str
    package: str
    forbidden: tuple[str, ...] = ()
    # When set, the only modules besides the standard library this layer may import.
    allowed: tuple[str, ...] | None = None


FRAMEWORK = Layer(
    folder="framework",
    package="preemptd.framework",
    # The core is pure and deterministic: no upper layer, no I/O, no event loop.
    forbidden=(
        "preemptd.plugins",
        "preemptd.daemon",
        "asyncio",
        "socket",
        "subprocess",
        "urllib.request",
        "requests",
        "aiohttp",
        "httpx",
        "kubernetes",
        "kubernetes_asyncio",
    ),
)
PLUGINS = Layer(
    folder="plugins",
    package="preemptd.plugins",
    forbidden=("preemptd.daemon",),
    # A built-in plugin sees exactly what a third-party plugin sees.
    allowed=("preemptd.framework", "preemptd.plugins", "pluggy"),
)
LAYERS = (FRAMEWORK, PLUGINS)


@dataclass(frozen=True, order=True)
class Violation:
    path: str
    line: int
    module: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: imports {self.module}: {self.why}"


def matches(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


def imported_modules(source: str, package: str) -> list[tuple[int, str]]:
    """Every module (or ``module.name``) a source imports, relative imports made absolute.

    ``from X import Y`` yields ``X.Y`` because Y may be a submodule
    (``from .. import daemon``). Calls of ``importlib.import_module`` and
    ``__import__`` with a literal name count as imports too.
    """
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                up = node.level - 1
                if up >= len(parts):
                    found.append((node.lineno, "." * node.level + base))
                    continue
                base = ".".join([*parts[: len(parts) - up], *([base] if base else [])])
            found.extend(
                (node.lineno, base if alias.name == "*" else f"{base}.{alias.name}")
                for alias in node.names
            )
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and (
                (isinstance(node.func, ast.Name) and node.func.id == "__import__")
                or (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
            )
        ):
            found.append((node.lineno, node.args[0].value))
    return found


def check_source(source: str, *, path: str, package: str, layer: Layer) -> list[Violation]:
    """The imports of one source file of ``layer`` that break the layer rule."""
    violations = []
    for line, module in imported_modules(source, package):
        if module.startswith("."):
            violations.append(
                Violation(path, line, module, "relative import above the top package")
            )
        elif matches(module, layer.forbidden):
            violations.append(Violation(path, line, module, f"{layer.folder}/ must not import it"))
        elif (
            layer.allowed is not None
            and module.partition(".")[0] not in sys.stdlib_module_names
            and not matches(module, layer.allowed)
        ):
            allowed = ", ".join(layer.allowed)
            why = f"{layer.folder}/ may import only the standard library and {allowed}"
            violations.append(Violation(path, line, module, why))
    return violations


def check_layer(layer: Layer) -> list[Violation]:
    violations = []
    root = REPO / layer.folder
    for file in sorted(root.rglob("*.py")):
        relative = file.relative_to(root)
        package = ".".join([layer.package, *relative.parent.parts])
        source = file.read_text(encoding="utf-8")
        path = str(file.relative_to(REPO))
        try:
            violations += check_source(source, path=path, package=package, layer=layer)
        except SyntaxError as exc:
            # requires-python is 3.11: newer syntax is a defect the rule must report.
            why = f"does not parse on Python {sys.version_info[0]}.{sys.version_info[1]}: {exc.msg}"
            violations.append(Violation(path, exc.lineno or 0, "-", why))
    return violations


@pytest.mark.parametrize("layer", LAYERS, ids=[layer.folder for layer in LAYERS])
def test_layer_imports_only_what_it_may(layer: Layer) -> None:
    """No file of framework/ or plugins/ imports across the layer rule."""
    assert list(REPO.joinpath(layer.folder).rglob("*.py")), f"{layer.folder}/ has no Python files"
    violations = check_layer(layer)
    assert not violations, "\n".join(map(str, violations))


@pytest.mark.parametrize(
    ("layer", "package", "source", "expected"),
    [
        (FRAMEWORK, "preemptd.framework", "from ..daemon import cli", ["preemptd.daemon.cli"]),
        (FRAMEWORK, "preemptd.framework", "from .. import plugins", ["preemptd.plugins"]),
        (
            FRAMEWORK,
            "preemptd.framework.actions",
            "from ...plugins.priority import order",
            ["preemptd.plugins.priority.order"],
        ),
        (
            FRAMEWORK,
            "preemptd.framework",
            "from preemptd.daemon.config import Config",
            ["preemptd.daemon.config.Config"],
        ),
        (
            FRAMEWORK,
            "preemptd.framework",
            "import asyncio, json\nimport socket",
            ["asyncio", "socket"],
        ),
        (
            FRAMEWORK,
            "preemptd.framework",
            "from kubernetes_asyncio import client",
            ["kubernetes_asyncio.client"],
        ),
        (
            FRAMEWORK,
            "preemptd.framework",
            "import importlib\nimportlib.import_module('preemptd.plugins.priority')",
            ["preemptd.plugins.priority"],
        ),
        (FRAMEWORK, "preemptd.framework", "from .model import Workload\nimport pluggy", []),
        (
            PLUGINS,
            "preemptd.plugins",
            "from preemptd.daemon import config",
            ["preemptd.daemon.config"],
        ),
        (
            PLUGINS,
            "preemptd.plugins",
            "from ..daemon.config import Config",
            ["preemptd.daemon.config.Config"],
        ),
        (PLUGINS, "preemptd.plugins", "import yaml", ["yaml"]),
        (PLUGINS, "preemptd.plugins", "from ...elsewhere import x", ["...elsewhere"]),
        (PLUGINS, "preemptd.plugins", "from preemptd import __version__", ["preemptd.__version__"]),
        (
            PLUGINS,
            "preemptd.plugins",
            "from __future__ import annotations\nfrom collections import Counter\nimport pluggy\n"
            "from preemptd.framework.hooks import hookimpl\nfrom ..framework import model",
            [],
        ),
    ],
)
def test_layer_checker_catches_violations(
    layer: Layer, package: str, source: str, expected: list[str]
) -> None:
    """The layer checker reports exactly the forbidden imports of a synthetic source."""
    violations = check_source(source, path="synthetic.py", package=package, layer=layer)
    assert expected == [violation.module for violation in violations]
