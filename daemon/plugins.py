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
from typing import Any, Protocol

import pluggy
from preemptd.framework.session import Registry, hooks

from .config import Config, ConfigProblem, check_table, describe

__all__ = [
    "BUILTINS",
    "ENTRY_POINT_GROUP",
    "PluginInfo",
    "Plugins",
    "installed_entry_points",
    "resolve_plugins",
]

ENTRY_POINT_GROUP = "preemptd.plugins"
BUILTINS = ("priority", "cohort-reclaim", "flavor-fungibility", "min-runtime", "gpu-victims")
_OWN_DISTRIBUTION = "preemptd"


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

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _, _ in self.enabled)

    def registry(self) -> Registry:
        """A fresh framework registry of the enabled plugins, in order."""
        return Registry(self.enabled)


def installed_entry_points() -> list[EntryPoint]:
    """The entry points of the group, one per name.

    Two distributions offering the same name: preemptd's own wins for a built-in
    name, otherwise the first distribution by name (so the choice is stable).
    """
    chosen: dict[str, EntryPoint] = {}
    found = sorted(
        metadata.entry_points(group=ENTRY_POINT_GROUP),
        key=lambda ep: (ep.name, _dist_name(ep) != _OWN_DISTRIBUTION, _dist_name(ep)),
    )
    for entry_point in found:
        chosen.setdefault(entry_point.name, entry_point)
    return list(chosen.values())


def _dist_name(entry_point: EntryPoint) -> str:
    dist = entry_point.dist
    return "" if dist is None else dist.name


def _source(entry_point: EntryPoint) -> str:
    dist = entry_point.dist
    if dist is None or dist.name == _OWN_DISTRIBUTION:
        return "built-in"
    return f"{dist.name} {dist.version}"


def resolve_plugins(
    config: Config, *, entry_points: Iterable[EntryPoint] | None = None
) -> tuple[Plugins, list[ConfigProblem]]:
    """Decide, load and configure the plugins; every problem is collected, none raised.

    ``entry_points`` defaults to :func:`installed_entry_points`.
    """
    available = installed_entry_points() if entry_points is None else entry_points
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
    return Plugins(tuple(infos), tuple(enabled_plugins)), problems


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
    except Exception as exc:  # whatever a third-party import raises
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
