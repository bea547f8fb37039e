"""Which plugins run, in which order, with which settings.

Plugins are found through the entry-point group ``preemptd.plugins``; the entry
point's name is the plugin's name and the name of its table
(``[plugins.<name>]``). The five built-ins are on unless ``enabled = false``;
any other plugin is off unless ``enabled = true``, so installing a package never
changes what the scheduler decides by itself (CONTRACT §4).

Order matters (workload and victim order keys: first decisive wins): the
built-ins in their fixed order, then third-party plugins in the order the
configuration names them.

Only enabled plugins are imported: a broken package that nobody enabled must
not stop the daemon.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from logging import Logger
from typing import Any, Protocol

import pluggy
from preemptd.framework.session import PluginError, Registry, hooks

from .config import Config, ConfigProblem, check_table, describe

__all__ = [
    "BUILTINS",
    "ENTRY_POINT_GROUP",
    "FailureLog",
    "PluginInfo",
    "Plugins",
    "choose_entry_points",
    "describe_failure",
    "installed_entry_points",
    "resolve_plugins",
]

ENTRY_POINT_GROUP = "preemptd.plugins"
BUILTINS = ("priority", "cohort-reclaim", "flavor-fungibility", "min-runtime", "gpu-victims")
_OWN_DISTRIBUTION = "preemptd"
# The built-in that answers assign_flavors for every workload (first answer wins).
FLAVOR_ANSWERER = "flavor-fungibility"


class Distribution(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...


class EntryPoint(Protocol):
    """What this module uses of :class:`importlib.metadata.EntryPoint`."""

    @property
    def name(self) -> str: ...

    @property
    def dist(self) -> Distribution | None: ...

    def load(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class PluginInfo:
    name: str
    source: str  # "built-in", "<distribution> <version>", or "not installed"
    requested: bool  # on by the configuration (or by default, for a built-in)
    installed: bool

    @property
    def enabled(self) -> bool:
        """Whether sessions run it."""
        return self.requested and self.installed


@dataclass(frozen=True, slots=True)
class Plugins:
    """Every known plugin for ``preemptd plugins``, and the enabled ones for sessions."""

    infos: tuple[PluginInfo, ...]
    enabled: tuple[tuple[str, object, object | None], ...]  # (name, plugin, config) in order
    warnings: tuple[str, ...] = ()  # e.g. two distributions offering one entry point
    # Third-party plugins implementing assign_flavors while a built-in that always answers
    # it runs first: theirs is never called (hook assign_flavors is first-answer-wins).
    shadowed: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _, _ in self.enabled)

    def registry(self) -> Registry:
        """A fresh framework registry of the enabled plugins, in order."""
        return Registry(self.enabled)


def installed_entry_points(warnings: list[str] | None = None) -> list[EntryPoint]:
    """The entry points of the group, one per name.

    Two distributions offering the same name: preemptd's own wins for a built-in
    name, otherwise the first distribution by name, a distribution without a
    ``Name`` in its metadata last (so the choice is stable); each collision is
    described in ``warnings``, naming the entry point and what was left out.
    """
    return choose_entry_points(metadata.entry_points(group=ENTRY_POINT_GROUP), warnings)


def choose_entry_points(
    entry_points: Iterable[EntryPoint], warnings: list[str] | None = None
) -> list[EntryPoint]:
    """One entry point per name, as :func:`installed_entry_points` chooses them."""
    chosen: dict[str, EntryPoint] = {}
    found = sorted(
        entry_points,
        key=lambda ep: (
            ep.name, _dist_name(ep) != _OWN_DISTRIBUTION, not _dist_name(ep), _dist_name(ep)
        ),
    )
    for entry_point in found:
        kept = chosen.setdefault(entry_point.name, entry_point)
        if kept is not entry_point and warnings is not None:
            warnings.append(
                f"plugin entry point {entry_point.name!r} is offered twice: using the one of "
                f"{_describe_dist(kept)}, ignoring the one of {_describe_dist(entry_point)}"
            )
    return list(chosen.values())


def _dist_name(entry_point: EntryPoint) -> str:
    # A distribution whose metadata has no Name answers None.
    dist = entry_point.dist
    name = None if dist is None else dist.name
    return name if isinstance(name, str) else ""


def _describe_dist(entry_point: EntryPoint) -> str:
    name = _dist_name(entry_point)
    value = getattr(entry_point, "value", "")
    target = f" ({value})" if value else ""
    return f"distribution {name!r}{target}" if name else f"a distribution without a Name{target}"


def _source(entry_point: EntryPoint) -> str:
    dist = entry_point.dist
    name = _dist_name(entry_point)
    if dist is None or name == _OWN_DISTRIBUTION:
        return "built-in"
    if not name:
        return "unnamed distribution"
    version = dist.version
    return f"{name} {version}" if isinstance(version, str) else name


def resolve_plugins(
    config: Config, *, entry_points: Iterable[EntryPoint] | None = None
) -> tuple[Plugins, list[ConfigProblem]]:
    """Decide, load and configure the plugins; every problem is collected, none raised.

    ``entry_points`` defaults to :func:`installed_entry_points`.
    """
    warnings: list[str] = []
    if entry_points is None:
        available: Iterable[EntryPoint] = installed_entry_points(warnings)
    else:
        available = choose_entry_points(entry_points, warnings)
    installed = {ep.name: ep for ep in available}
    problems: list[ConfigProblem] = []
    wanted: dict[str, bool] = {name: True for name in BUILTINS}
    for name, table in config.plugins.items():
        if name not in BUILTINS and name not in installed:
            problems.append(config.problem(("plugins", name), "unknown plugin (not installed)"))
            continue
        enabled = table.get("enabled", name in BUILTINS) if isinstance(table, dict) else True
        if not isinstance(enabled, bool):
            path = ("plugins", name, "enabled")
            problems.append(config.problem(path, f"expected a boolean, got {describe(enabled)}"))
            enabled = False
        wanted[name] = enabled
    # Built-ins first in their fixed order, then the configured third-party plugins in
    # file order, then installed ones nobody named (listed, never run).
    order = [*BUILTINS, *(n for n in config.plugins if n not in BUILTINS and n in installed)]
    order += sorted(n for n in installed if n not in order)
    infos = []
    enabled_plugins = []
    for name in order:
        entry_point = installed.get(name)
        requested = wanted.get(name, False)
        if entry_point is None:
            infos.append(PluginInfo(name, "not installed", requested, installed=False))
            continue
        if requested:
            loaded, found = _load(name, entry_point, config)
            problems += found
            if loaded is not None:
                enabled_plugins.append(loaded)
        infos.append(PluginInfo(name, _source(entry_point), requested, installed=True))
    shadowed: list[str] = []
    if any(name == FLAVOR_ANSWERER for name, _, _ in enabled_plugins):
        shadowed = [
            name
            for name, plugin, _ in enabled_plugins
            if name not in BUILTINS and _implements(plugin, "assign_flavors")
        ]
    for name in shadowed:
        warnings.append(
            f"plugin {name!r} implements assign_flavors, which is never called while "
            f"{FLAVOR_ANSWERER!r} is enabled (it answers first, for every workload)"
        )
    plugins = Plugins(tuple(infos), tuple(enabled_plugins), tuple(warnings), tuple(shadowed))
    return plugins, problems


def _implements(plugin: object, hook: str) -> bool:
    function = getattr(plugin, hook, None)
    return callable(function) and hasattr(function, f"{hooks.PROJECT}_impl")


def _load(
    name: str, entry_point: EntryPoint, config: Config
) -> tuple[tuple[str, object, object | None] | None, list[ConfigProblem]]:
    """Import one enabled plugin and build its configuration from its table."""
    path = ("plugins", name)
    try:
        plugin = entry_point.load()
        if isinstance(plugin, type):
            plugin = plugin()  # a class carrying @hookimpl methods: one instance per daemon
        # Register on a scratch manager first: a plugin with a misspelt hook or a wrong
        # signature is reported here, as a configuration problem, not mid-session.
        manager = pluggy.PluginManager(hooks.PROJECT)
        manager.add_hookspecs(hooks)
        manager.register(plugin, name=name)
        manager.check_pending()
        schemas = [s for s in manager.hook.plugin_config_schema() if s is not None]
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # whatever a third-party import raises, sys.exit included
        return None, [config.problem(path, f"cannot load plugin {name!r}: {type(exc).__name__}: {exc}")]
    table = config.plugins.get(name, {})
    settings = {k: v for k, v in table.items() if k != "enabled"} if isinstance(table, dict) else table
    if not schemas:
        if not isinstance(settings, dict):
            return None, [config.problem(path, "expected a table")]
        unknown = [config.problem((*path, key), "unknown key (the plugin has no settings)") for key in settings]
        return (None if unknown else (name, plugin, None)), unknown
    schema = schemas[0]
    if not (isinstance(schema, type) and dataclasses.is_dataclass(schema)):
        return None, [config.problem(path, f"plugin {name!r}: plugin_config_schema must return a dataclass")]
    arguments, problems = check_table(schema, settings, config=config, path=path)
    if problems:
        return None, problems
    try:
        instance = schema(**arguments)
    except (TypeError, ValueError) as exc:  # the plugin's own checks (__post_init__)
        return None, [config.problem(path, f"plugin {name!r}: {exc}")]
    return (name, plugin, instance), []


def describe_failure(error: PluginError) -> str:
    """One line for a plugin's failures in one hook: its name, the hook, how often, the first error."""
    times = f" ({error.count} calls)" if error.count > 1 else ""
    return f"warning: plugin {error.plugin} failed in {error.hook}{times}: {error.message}"


class FailureLog:
    """Logs the plugin failures of the daemon's sessions without flooding the log.

    A session reports each plugin and hook once (see :class:`Registry`); across
    sessions a pair is warned about at most once per ``interval`` seconds, with the
    number of failures since the last warning, and its traceback is logged once, at
    debug, the first time it fails.
    """

    __slots__ = ("_last", "_traced", "_unreported", "interval")

    def __init__(self, interval: float = 300.0) -> None:
        self.interval = interval
        self._last: dict[tuple[str, str], float] = {}
        self._unreported: dict[tuple[str, str], int] = {}
        self._traced: set[tuple[str, str]] = set()

    def report(self, registry: Registry, log: Logger, now: float) -> None:
        for error in registry.errors:
            pair = (error.plugin, error.hook)
            if pair not in self._traced:
                self._traced.add(pair)
                log.debug("plugin %s failed in %s:\n%s", error.plugin, error.hook, error.traceback)
            count = self._unreported.get(pair, 0) + error.count
            last = self._last.get(pair)
            if last is not None and now - last < self.interval:
                self._unreported[pair] = count
                continue
            self._last[pair] = now
            self._unreported[pair] = 0
            log.warning(
                "plugin %s failed in %s (%d time(s) since the last warning): %s",
                error.plugin, error.hook, count, error.message,
            )
