"""The enabled plugins of one scheduler, in order, with failure isolation.

pluggy holds the hook specifications and validates implementations; the
session does not call hooks through ``pm.hook`` though. It asks the registry
for each hook's implementations once (``impls``) and calls them directly,
which keeps pluggy's per-call cost out of the loops that run per candidate,
and lets every call be guarded: a plugin that raises fails safe, is counted
in :attr:`Registry.failures` and described in :attr:`Registry.errors` (the
daemon logs and exports both; the framework itself does no I/O).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pluggy

from . import hooks

__all__ = ["Impl", "PluginError", "Registry"]


@dataclass(frozen=True, slots=True)
class Impl:
    """One plugin's implementation of one hook; pluggy lets it take a subset of the arguments."""

    plugin: str
    function: Callable[..., Any]
    argnames: tuple[str, ...]

    def call(self, kwargs: dict[str, Any]) -> Any:
        return self.function(*[kwargs[name] for name in self.argnames])


@dataclass(frozen=True, slots=True)
class PluginError:
    plugin: str
    hook: str
    message: str


class Registry:
    """Plugins registered in the order given (the configuration's order)."""

    __slots__ = ("_impls", "configs", "errors", "failures", "names", "pm", "vetoes")

    def __init__(self, plugins: Sequence[tuple[str, object, object | None]] = ()) -> None:
        self.pm = pluggy.PluginManager(hooks.PROJECT)
        self.pm.add_hookspecs(hooks)
        self.names: list[str] = []
        self.configs: dict[str, object | None] = {}
        self.failures: Counter[str] = Counter()
        self.vetoes: Counter[str] = Counter()
        self.errors: list[PluginError] = []
        self._impls: dict[str, list[Impl]] = {}
        for name, plugin, config in plugins:
            self.add(name, plugin, config)

    def add(self, name: str, plugin: object, config: object | None = None) -> None:
        self.pm.register(plugin, name=name)
        self.pm.check_pending()
        self.names.append(name)
        self.configs[name] = config
        self._impls.clear()

    def impls(self, hook: str) -> list[Impl]:
        """Every implementation of ``hook``, in plugin order."""
        cached = self._impls.get(hook)
        if cached is None:
            order = {name: i for i, name in enumerate(self.names)}
            caller = getattr(self.pm.hook, hook)
            found = [
                Impl(impl.plugin_name, impl.function, tuple(impl.argnames))
                for impl in caller.get_hookimpls()
            ]
            found.sort(key=lambda impl: order[impl.plugin])
            cached = self._impls[hook] = found
        return cached

    def has(self, hook: str) -> bool:
        return bool(self.impls(hook))

    def record_failure(self, plugin: str, hook: str, exc: BaseException) -> None:
        self.failures[plugin] += 1
        # Keep the first few messages of a storm; the counter carries the rest.
        if len(self.errors) < 100:
            self.errors.append(PluginError(plugin, hook, f"{type(exc).__name__}: {exc}"))

    def call_all(self, hook: str, **kwargs: Any) -> list[tuple[str, Any]]:
        """Call every implementation, collecting non-``None`` results; failures are isolated."""
        results = []
        for impl in self.impls(hook):
            try:
                result = impl.call(kwargs)
            except Exception as exc:  # a plugin must not take the scheduler down
                self.record_failure(impl.plugin, hook, exc)
                continue
            if result is not None:
                results.append((impl.plugin, result))
        return results

    def call_first(self, hook: str, **kwargs: Any) -> Any:
        """The first non-``None`` result, in plugin order; failures count as no answer."""
        for impl in self.impls(hook):
            try:
                result = impl.call(kwargs)
            except Exception as exc:
                self.record_failure(impl.plugin, hook, exc)
                continue
            if result is not None:
                return result
        return None
