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
DAEMON_MODULES = (
    "clock", "backends.kubernetes.lease", "loop", "service", "http", "tls", "webhook", "webhook_certs", "metrics",
    "notify", "logging", "convert", "pending",
)


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


MAX_LINES = 450


@pytest.mark.parametrize("folder", ["framework", "plugins"])
def test_no_module_is_over_the_line_limit(folder: str) -> None:
    """No file of framework/ or plugins/ is over 450 lines: a longer one is split by concept."""
    long = {
        str(file.relative_to(REPO)): count
        for file in sorted((REPO / folder).rglob("*.py"))
        if (count := len(file.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert {} == long


# --- the layer rule -------------------------------------------------------------------
#
# Each contract below is named for why it exists (kopf's .importlinter does the same).
# Every import counts: at module level, inside a function, under TYPE_CHECKING, and
# importlib.import_module / __import__ with a literal name. A lazy or type-only import
# that runs back up a floor is exactly how an import circle hides, so it fails here.


@dataclass(frozen=True)
class Layer:
    """A folder or file of the repository and what it may import.

    ``forbidden`` and ``allowed`` name modules: an entry matches the module and every
    module under it, or, written ``=name``, that module only (a package's face).
    ``exceptions`` are modules allowed although ``forbidden`` matches them;
    ``type_only`` pairs (file, module) allowed only under ``TYPE_CHECKING``."""

    folder: str
    package: str
    forbidden: tuple[str, ...] = ()
    # When set, the only modules besides the standard library this layer may import.
    allowed: tuple[str, ...] | None = None
    exceptions: tuple[str, ...] = ()
    type_only: tuple[tuple[str, str], ...] = ()
    why: str = ""


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
    why="the core is pure and deterministic",
)
PLUGINS = Layer(
    folder="plugins",
    package="preemptd.plugins",
    forbidden=("preemptd.daemon",),
    # A built-in plugin sees exactly what a third-party plugin sees: the face.
    allowed=("=preemptd.framework", "preemptd.plugins", "pluggy"),
    why="a built-in plugin sees exactly what a third-party plugin sees",
)

# framework/, from the ground up (LAYOUT.md §1). A room imports only rooms of its own
# floor or lower ones; nothing inside the package imports its face.
FRAMEWORK_FLOORS: tuple[tuple[str, ...], ...] = (
    ("quantity", "model", "pods", "decisions"),
    ("objects",),
    ("quota", "nodes", "snapshot"),
    ("session",),
    ("preemption",),
    ("flavors",),
    ("actions",),
    ("run",),
    ("testing",),
)
FLOOR_WHY = {
    "session": "the session holds state and combines plugin answers; it never runs a search or an action",
    "preemption": "flavor evaluation calls the victim search, never the other way round",
    "flavors": "flavors are evaluated for the actions, which sit above them",
    "actions": "the session is opened and closed by run.py, above every action",
}
# Inside session/, the runtime order; hooks.py may name the Session in annotations.
SESSION_ORDER = ("candidates", "statement", "assignment", "hooks", "registry", "session")
SESSION_TYPE_ONLY = (("framework/session/hooks.py", "preemptd.framework.session.session"),)
# Inside preemption/, the runtime order.
PREEMPTION_ORDER = ("units", "nodeindex", "nodechoice", "replicas", "search", "victims")
# daemon/, from the top down (LAYOUT.md §1): cli > service, simulation/ > loop, backends/ > the rest.
DAEMON_FLOORS: tuple[tuple[str, ...], ...] = (
    ("config", "plugins", "logging", "metrics", "clock", "http", "tls", "notify", "report", "pending", "output", "completion"),
    ("loop", "backends", "webhook_certs", "webhook"),
    ("service", "simulation", "convert", "dump"),
    ("cli",),
)


def _room(folder: str, name: str) -> str:
    return f"{folder}/{name}" if (REPO / folder / name).is_dir() else f"{folder}/{name}.py"


def floor_layers(folder: str, package: str, floors: tuple[tuple[str, ...], ...], face: bool) -> list[Layer]:
    """One layer per room: every room of a higher floor is forbidden to it."""
    layers = []
    for i, rooms in enumerate(floors):
        above = tuple(f"{package}.{name}" for higher in floors[i + 1 :] for name in higher)
        for name in rooms:
            layers.append(
                Layer(
                    folder=_room(folder, name),
                    package=package,
                    forbidden=(*above, *((f"={package}",) if face else ())),
                    type_only=SESSION_TYPE_ONLY if name == "session" and folder == "framework" else (),
                    why=FLOOR_WHY.get(name, f"{folder}/ is built in floors; {name} is on floor {i + 1}"),
                )
            )
    return layers


def order_layers(folder: str, package: str, order: tuple[str, ...], type_only: tuple[tuple[str, str], ...]) -> list[Layer]:
    """One layer per file of a package whose files import each other in one order."""
    return [
        Layer(
            folder=f"{folder}/{name}.py",
            package=package,
            forbidden=(f"={package}", *(f"{package}.{later}" for later in order[i + 1 :])),
            type_only=type_only,
            why=f"inside {folder}/ the files import each other in the order {' -> '.join(order)}",
        )
        for i, name in enumerate(order)
    ]


FACE = Layer(
    folder="framework/__init__.py",
    package="preemptd.framework",
    forbidden=("preemptd.framework.actions", "preemptd.framework.run", "preemptd.framework.testing"),
    why="the plugin API offers what a plugin may use, not the actions that drive it",
)
SIMULATION = Layer(
    folder="daemon/simulation",
    package="preemptd.daemon.simulation",
    forbidden=("preemptd.plugins",),
    exceptions=("preemptd.plugins.min_runtime.resolve", "preemptd.plugins.fair_sharing.shares"),
    why="the invariants check what min-runtime resolves, and the report measures shares, "
    "through the modules the plugins read",
)
LAYERS = (
    FRAMEWORK,
    PLUGINS,
    FACE,
    SIMULATION,
    *floor_layers("framework", "preemptd.framework", FRAMEWORK_FLOORS, face=True),
    *order_layers("framework/session", "preemptd.framework.session", SESSION_ORDER, SESSION_TYPE_ONLY),
    *order_layers("framework/preemption", "preemptd.framework.preemption", PREEMPTION_ORDER, ()),
    *floor_layers("daemon", "preemptd.daemon", DAEMON_FLOORS, face=False),
)


@dataclass(frozen=True, order=True)
class Violation:
    path: str
    line: int
    module: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: imports {self.module}: {self.why}"


def _modules() -> frozenset[str]:
    """Every module of the three installed folders, by its installed name."""
    found = set()
    for folder, package in (("framework", "preemptd.framework"), ("plugins", "preemptd.plugins"), ("daemon", "preemptd.daemon")):
        for file in (REPO / folder).rglob("*.py"):
            relative = file.relative_to(REPO / folder)
            stem = () if relative.stem == "__init__" else (relative.stem,)
            found.add(".".join([package, *relative.parent.parts, *stem]))
    return frozenset(found)


MODULES = _modules()


def resolve(name: str) -> str:
    """The module an imported name loads: itself, or the module that defines it
    (``preemptd.framework.Session`` is the face, ``preemptd.framework``)."""
    if name in MODULES:
        return name
    parent = name.rpartition(".")[0]
    return parent if parent in MODULES else name


def matches(module: str, prefixes: tuple[str, ...]) -> bool:
    target = resolve(module)
    for prefix in prefixes:
        if prefix.startswith("="):
            if target == prefix[1:]:
                return True
        elif module == prefix or module.startswith(prefix + ".") or target == prefix or target.startswith(prefix + "."):
            return True
    return False


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_modules(source: str, package: str) -> list[tuple[int, str, bool]]:
    """Every module (or ``module.name``) a source imports, relative imports made absolute,
    with whether the import sits under ``if TYPE_CHECKING:``.

    ``from X import Y`` yields ``X.Y`` because Y may be a submodule
    (``from .. import daemon``). Calls of ``importlib.import_module`` and
    ``__import__`` with a literal name count as imports too.
    """
    found: list[tuple[int, str, bool]] = []

    def visit(node: ast.AST, type_only: bool) -> None:
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name, type_only) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                up = node.level - 1
                if up >= len(parts):
                    found.append((node.lineno, "." * node.level + base, type_only))
                    return
                base = ".".join([*parts[: len(parts) - up], *([base] if base else [])])
            found.extend(
                (node.lineno, base if alias.name == "*" else f"{base}.{alias.name}", type_only)
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
            found.append((node.lineno, node.args[0].value, type_only))
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            visit(node.test, type_only)
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, type_only)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, type_only)

    visit(ast.parse(source), False)
    return sorted(found, key=lambda item: item[0])


def check_source(source: str, *, path: str, package: str, layer: Layer) -> list[Violation]:
    """The imports of one source file of ``layer`` that break the layer rule."""
    violations = []
    why = f" ({layer.why})" if layer.why else ""
    for line, module, type_only in imported_modules(source, package):
        if module.startswith("."):
            violations.append(
                Violation(path, line, module, "relative import above the top package")
            )
        elif matches(module, layer.forbidden) and not matches(module, layer.exceptions):
            if type_only and any(path == file and matches(module, (allowed,)) for file, allowed in layer.type_only):
                continue
            violations.append(Violation(path, line, module, f"{layer.folder} must not import it{why}"))
        elif (
            layer.allowed is not None
            and module.partition(".")[0] not in sys.stdlib_module_names
            and not matches(module, layer.allowed)
        ):
            allowed = ", ".join(name.lstrip("=") for name in layer.allowed)
            why = f"{layer.folder} may import only the standard library and {allowed}"
            violations.append(Violation(path, line, module, why))
    return violations


def _files(layer: Layer) -> list[Path]:
    root = REPO / layer.folder
    return [root] if root.is_file() else sorted(root.rglob("*.py"))


def _package_of(file: Path) -> str:
    """The installed package a file of framework/, plugins/ or daemon/ belongs to."""
    relative = file.relative_to(REPO)
    top = {"framework": "preemptd.framework", "plugins": "preemptd.plugins", "daemon": "preemptd.daemon"}
    return ".".join([top[relative.parts[0]], *relative.parts[1:-1]])


def check_layer(layer: Layer) -> list[Violation]:
    violations = []
    for file in _files(layer):
        source = file.read_text(encoding="utf-8")
        path = str(file.relative_to(REPO))
        try:
            violations += check_source(source, path=path, package=_package_of(file), layer=layer)
        except SyntaxError as exc:
            # requires-python is 3.11: newer syntax is a defect the rule must report.
            why = f"does not parse on Python {sys.version_info[0]}.{sys.version_info[1]}: {exc.msg}"
            violations.append(Violation(path, exc.lineno or 0, "-", why))
    return violations


@pytest.mark.parametrize("layer", LAYERS, ids=[layer.folder for layer in LAYERS])
def test_layer_imports_only_what_it_may(layer: Layer) -> None:
    """No file imports across the layer rule: framework/ and plugins/ as a whole, every
    floor inside framework/ and daemon/, and the order inside session/ and preemption/."""
    assert _files(layer), f"{layer.folder} has no Python files"
    violations = check_layer(layer)
    assert not violations, "\n".join(map(str, violations))


def test_every_room_of_the_floors_is_checked() -> None:
    """Every module of framework/ and daemon/ lies in some floor's room (a new top-level
    module must be given a floor, or it would escape the rule)."""
    roomed = {layer.folder for layer in LAYERS}
    unplaced = []
    for folder in ("framework", "daemon"):
        for entry in sorted((REPO / folder).iterdir()):
            if entry.name in ("__init__.py", "__pycache__", "py.typed") or entry.suffix not in (".py", ""):
                continue
            name = f"{folder}/{entry.name}"
            if name not in roomed:
                unplaced.append(name)
    assert [] == unplaced


def import_graph(folder: str) -> dict[str, set[tuple[str, bool]]]:
    """Module -> the modules of the same folder it imports (with whether only under
    TYPE_CHECKING), every kind of import counted."""
    graph: dict[str, set[tuple[str, bool]]] = {}
    for file in sorted((REPO / folder).rglob("*.py")):
        package = _package_of(file)
        me = package if file.stem == "__init__" else f"{package}.{file.stem}"
        edges = graph.setdefault(me, set())
        for _, module, type_only in imported_modules(file.read_text(encoding="utf-8"), package):
            target = resolve(module)
            if target in MODULES and target != me and target.startswith(_package_of(REPO / folder / "x.py")):
                edges.add((target, type_only))
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(found)


def test_framework_import_graph_has_no_cycle() -> None:
    """Without the one type-only hooks -> session reference, framework/'s import graph
    (lazy and type-only imports included) has no cycle; with it, the only cycle stays
    inside session/."""
    graph = import_graph("framework")
    allowed = ("preemptd.framework.session.hooks", "preemptd.framework.session.session")
    without = {
        module: {t for t, type_only in edges if not (type_only and (module, t) == allowed)}
        for module, edges in graph.items()
    }
    assert [] == cycles(without)
    full = {module: {t for t, _ in edges} for module, edges in graph.items()}
    assert all(m.startswith("preemptd.framework.session.") for cycle in cycles(full) for m in cycle)


def test_daemon_import_graph_has_no_cycle() -> None:
    """daemon/'s import graph, lazy and type-only imports included, has no cycle."""
    graph = import_graph("daemon")
    assert [] == cycles({module: {t for t, _ in edges} for module, edges in graph.items()})


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ],
)
def test_cycle_finder_finds_exactly_the_cycles(graph: dict[str, set[str]], expected: list[list[str]]) -> None:
    """The cycle finder reports each import circle once, and nothing for a tree."""
    assert expected == cycles(graph)


def _layer(folder: str) -> Layer:
    return next(layer for layer in LAYERS if layer.folder == folder)


@pytest.mark.parametrize(
    ("layer", "path", "package", "source", "expected"),
    [
        (FRAMEWORK, "synthetic.py", "preemptd.framework", "from ..daemon import cli", ["preemptd.daemon.cli"]),
        (FRAMEWORK, "synthetic.py", "preemptd.framework", "from .. import plugins", ["preemptd.plugins"]),
        (
            FRAMEWORK,
            "synthetic.py",
            "preemptd.framework.actions",
            "from ...plugins.priority import order",
            ["preemptd.plugins.priority.order"],
        ),
        (
            FRAMEWORK,
            "synthetic.py",
            "preemptd.framework",
            "from preemptd.daemon.config import Config",
            ["preemptd.daemon.config.Config"],
        ),
        (FRAMEWORK, "synthetic.py", "preemptd.framework", "import asyncio, json\nimport socket", ["asyncio", "socket"]),
        (
            FRAMEWORK,
            "synthetic.py",
            "preemptd.framework",
            "from kubernetes_asyncio import client",
            ["kubernetes_asyncio.client"],
        ),
        (
            FRAMEWORK,
            "synthetic.py",
            "preemptd.framework",
            "import importlib\nimportlib.import_module('preemptd.plugins.priority')",
            ["preemptd.plugins.priority"],
        ),
        (FRAMEWORK, "synthetic.py", "preemptd.framework", "from .model import Workload\nimport pluggy", []),
        (PLUGINS, "synthetic.py", "preemptd.plugins", "from preemptd.daemon import config", ["preemptd.daemon.config"]),
        (PLUGINS, "synthetic.py", "preemptd.plugins", "from ..daemon.config import Config", ["preemptd.daemon.config.Config"]),
        (PLUGINS, "synthetic.py", "preemptd.plugins", "import yaml", ["yaml"]),
        (PLUGINS, "synthetic.py", "preemptd.plugins", "from ...elsewhere import x", ["...elsewhere"]),
        (PLUGINS, "synthetic.py", "preemptd.plugins", "from preemptd import __version__", ["preemptd.__version__"]),
        (
            PLUGINS,
            "synthetic.py",
            "preemptd.plugins",
            "from __future__ import annotations\nfrom collections import Counter\nimport pluggy\n"
            "from preemptd.framework import Session, hookimpl\nfrom .min_runtime.resolve import Config",
            [],
        ),
        # plugins/ import the face only, not the modules behind it.
        (
            PLUGINS,
            "synthetic.py",
            "preemptd.plugins",
            "from preemptd.framework.session import Session\nfrom ..framework import model",
            ["preemptd.framework.session.Session", "preemptd.framework.model"],
        ),
        # session/ may not import preemption, flavors, actions, run or testing: not at
        # the top, not inside a function, not under TYPE_CHECKING.
        (
            _layer("framework/session"),
            "framework/session/session.py",
            "preemptd.framework.session",
            "from ..preemption import find_victims\ndef f():\n    from ..flavors import evaluate_flavor\n"
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..actions import ACTIONS\n"
            "from .. import run, testing",
            [
                "preemptd.framework.preemption.find_victims",
                "preemptd.framework.flavors.evaluate_flavor",
                "preemptd.framework.actions.ACTIONS",
                "preemptd.framework.run",
                "preemptd.framework.testing",
            ],
        ),
        # preemption/ may not import flavors, actions, run or testing; the session is below it.
        (
            _layer("framework/preemption"),
            "framework/preemption/victims.py",
            "preemptd.framework.preemption",
            "from ..session import Session\nfrom ..flavors import evaluate_flavor\nfrom ..actions import books",
            ["preemptd.framework.flavors.evaluate_flavor", "preemptd.framework.actions.books"],
        ),
        # flavors.py may not import actions, run or testing; preemption is below it.
        (
            _layer("framework/flavors.py"),
            "framework/flavors.py",
            "preemptd.framework",
            "from .preemption import find_victims\nfrom .actions.allocate import nominate\nfrom .run import run_session",
            ["preemptd.framework.actions.allocate.nominate", "preemptd.framework.run.run_session"],
        ),
        # quota, nodes, snapshot and objects/ may not import session (nor anything above).
        (
            _layer("framework/snapshot.py"),
            "framework/snapshot.py",
            "preemptd.framework",
            "from .nodes import Placements\nfrom .session import Session\nfrom .preemption import pod_unit",
            ["preemptd.framework.session.Session", "preemptd.framework.preemption.pod_unit"],
        ),
        (
            _layer("framework/objects"),
            "framework/objects/queues.py",
            "preemptd.framework.objects",
            "from ..model import QueueSpec\nfrom ..quota import QuotaTree\nfrom ..session import candidates",
            ["preemptd.framework.quota.QuotaTree", "preemptd.framework.session.candidates"],
        ),
        # Nothing inside framework/ imports its face.
        (
            _layer("framework/preemption"),
            "framework/preemption/units.py",
            "preemptd.framework.preemption",
            "from .. import Session\nfrom ..session import Candidate",
            ["preemptd.framework.Session"],
        ),
        # The one exception: hooks.py names Session under TYPE_CHECKING, and nowhere else.
        (
            _layer("framework/session/hooks.py"),
            "framework/session/hooks.py",
            "preemptd.framework.session",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .session import Scenario, Session\n"
            "from .assignment import Assignment",
            [],
        ),
        (
            _layer("framework/session/hooks.py"),
            "framework/session/hooks.py",
            "preemptd.framework.session",
            "from .session import Session\nfrom .registry import Registry",
            ["preemptd.framework.session.session.Session", "preemptd.framework.session.registry.Registry"],
        ),
        (
            _layer("framework/session/candidates.py"),
            "framework/session/candidates.py",
            "preemptd.framework.session",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .session import Session",
            ["preemptd.framework.session.session.Session"],
        ),
        # daemon/backends/ and daemon/loop.py may not import service, cli or simulation/.
        (
            _layer("daemon/backends"),
            "daemon/backends/files.py",
            "preemptd.daemon.backends",
            "from ..config import Config\nfrom ..service import run_daemon\nfrom ..simulation import engine\n"
            "def f():\n    from ..cli import main",
            ["preemptd.daemon.service.run_daemon", "preemptd.daemon.simulation.engine", "preemptd.daemon.cli.main"],
        ),
        (
            _layer("daemon/loop.py"),
            "daemon/loop.py",
            "preemptd.daemon",
            "from .clock import Clock\nfrom .backends.kubernetes.lease import Elector\nfrom .service import Service",
            ["preemptd.daemon.service.Service"],
        ),
        # daemon/simulation/ may import preemptd.plugins.min_runtime.resolve, no other plugin module.
        (
            SIMULATION,
            "daemon/simulation/invariants.py",
            "preemptd.daemon.simulation",
            "from preemptd.plugins.min_runtime import resolve\nfrom preemptd.plugins.min_runtime import Config\n"
            "from preemptd.plugins import priority",
            ["preemptd.plugins.min_runtime.Config", "preemptd.plugins.priority"],
        ),
    ],
)
def test_layer_checker_catches_violations(
    layer: Layer, path: str, package: str, source: str, expected: list[str]
) -> None:
    """The layer checker reports exactly the forbidden imports of a synthetic source."""
    violations = check_source(source, path=path, package=package, layer=layer)
    assert expected == [violation.module for violation in violations]
