"""The enabled plugins of one scheduler, in order, with failure isolation.

pluggy holds the hook specifications and validates implementations; the
session does not call hooks through ``pm.hook`` though. It asks the registry
for each hook's implementations once (``impls``) and calls them directly,
which keeps pluggy's per-call cost out of the loops that run per candidate,
and lets every call be guarded: a plugin that raises fails safe, is counted
in :attr:`Registry.failures` and described in :attr:`Registry.errors` (the
daemon logs and exports both; the framework itself does no I/O).

A failure is a raise of anything but ``KeyboardInterrupt`` (``sys.exit`` in a
hook included) or an answer of the wrong type: every answer is checked here,
where the answers of all plugins are combined (:data:`ANSWERS`), and a wrong one
is dropped as if the plugin had not answered. ``errors`` holds one entry per
plugin and hook, the first message and traceback with the number of failures,
so a hook that fails on every call is reported once, not once per call.
"""

from __future__ import annotations

import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import pluggy

from . import hooks
from .assignment import Assignment
from .candidates import Candidate, DeferredPods, Offer

__all__ = ["ANSWERS", "Impl", "PluginError", "Policy", "Registry", "bad_answer"]


@dataclass(frozen=True, slots=True)
class Impl:
    """One plugin's implementation of one hook; pluggy lets it take a subset of the arguments.

    ``call(kwargs)`` calls it with its arguments taken from the caller's map. It is a
    function made once, with the record, that names each argument directly (no method
    frame, no argument tuple): ``is_preemptible`` calls it per candidate and plugin."""

    plugin: str
    function: Callable[..., Any]
    argnames: tuple[str, ...]
    call: Callable[[dict[str, Any]], Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "call", _caller(self.function, self.argnames))


def _caller(function: Callable[..., Any], argnames: tuple[str, ...]) -> Callable[[dict[str, Any]], Any]:
    """``function`` called with the values of ``argnames`` taken from a keyword map."""
    if not argnames:
        return lambda kwargs: function()
    if len(argnames) == 1:
        (a,) = argnames
        return lambda kwargs: function(kwargs[a])
    if len(argnames) == 2:
        a, b = argnames
        return lambda kwargs: function(kwargs[a], kwargs[b])
    if len(argnames) == 3:
        a, b, c = argnames
        return lambda kwargs: function(kwargs[a], kwargs[b], kwargs[c])
    if len(argnames) == 4:
        a, b, c, d = argnames
        return lambda kwargs: function(kwargs[a], kwargs[b], kwargs[c], kwargs[d])
    pick = itemgetter(*argnames)
    return lambda kwargs: function(*pick(kwargs))


@dataclass(slots=True)
class PluginError:
    """The first failure of one plugin in one hook; ``count``: its failures so far."""

    plugin: str
    hook: str
    message: str
    traceback: str = ""
    count: int = 1


_CANDIDATE_TYPES = frozenset({Candidate, DeferredPods})


def _candidates(answer: object) -> bool:
    # An intact Offer of the framework's sources alone holds only their candidates, and
    # is read by its runs, never by its items (``candidates.UNIT_SOURCES``, ``using``).
    if type(answer) is Offer and not answer.foreign and answer.intact():
        return True
    if not isinstance(answer, (list, tuple)):
        return False
    # One pass in C for the usual case; subclasses are checked one by one.
    return set(map(type, answer)) <= _CANDIDATE_TYPES or all(isinstance(c, Candidate) for c in answer)


def _callables(answer: object) -> bool:
    return isinstance(answer, (list, tuple)) and all(map(callable, answer))


ANSWERS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "workload_order": (callable, "a callable sort key"),
    "victim_order": (callable, "a callable sort key"),
    "placement_score": (callable, "a callable scorer"),
    "preemption_candidates": (_candidates, "a list of Candidate"),
    "get_accumulated_scenario_filters": (_callables, "a list of callables"),
    "assign_flavors": (lambda answer: isinstance(answer, Assignment), "an Assignment"),
    "round_order": (callable, "a callable picker"),
    "may_search_victims": (callable, "a callable"),
    "victim_strategy": (callable, "a callable strategy"),
}
"""What a non-``None`` answer of each hook must be; hooks not listed return nothing
the framework reads (their answers are ignored)."""


def bad_answer(answer: object, expected: str) -> TypeError:
    """The failure recorded for an answer of the wrong type."""
    shown = repr(answer)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return TypeError(f"returned {type(answer).__name__} {shown}, expected {expected}")


class Registry:
    """Plugins registered in the order given (the configuration's order)."""

    __slots__ = (
        "_error_index", "_impls", "_memo_unsafe", "configs", "errors", "failures", "names", "pm", "vetoes",
    )

    def __init__(self, plugins: Sequence[tuple[str, object, object | None]] = ()) -> None:
        self.pm = pluggy.PluginManager(hooks.PROJECT)
        self.pm.add_hookspecs(hooks)
        self.names: list[str] = []
        self.configs: dict[str, object | None] = {}
        self.failures: Counter[str] = Counter()
        self.vetoes: Counter[str] = Counter()
        self.errors: list[PluginError] = []
        self._error_index: dict[tuple[str, str], PluginError] = {}
        self._impls: dict[str, list[Impl]] = {}
        self._memo_unsafe: str | None = None  # memo_unsafe(), until a plugin is added
        for name, plugin, config in plugins:
            self.add(name, plugin, config)

    def add(self, name: str, plugin: object, config: object | None = None) -> None:
        self.pm.register(plugin, name=name)
        self.pm.check_pending()
        self.names.append(name)
        self.configs[name] = config
        self._impls.clear()
        self._memo_unsafe = None

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

    def memo_unsafe(self) -> str:
        """The first plugin that implements a hook a victim search consults without
        declaring ``MEMO_SAFE = True`` (see :mod:`.hooks`), or an empty string. Asked at
        every session's open; found once per set of plugins."""
        found = self._memo_unsafe
        if found is None:
            found = self._memo_unsafe = self._first_memo_unsafe()
        return found

    def _first_memo_unsafe(self) -> str:
        for hook in hooks.SEARCH_HOOKS:
            for impl in self.impls(hook):
                plugin = self.pm.get_plugin(impl.plugin)
                if getattr(plugin, hooks.MEMO_SAFE_ATTRIBUTE, False) is not True:
                    return impl.plugin
        return ""

    def record_failure(self, plugin: str, hook: str, exc: BaseException) -> None:
        """Count one failure of ``plugin`` in ``hook``; the first one of each pair is
        described (message and traceback), later ones only counted.

        An interrupt is never a plugin's failure: when ``exc`` was raised while a
        ``KeyboardInterrupt`` was propagating (a ``finally`` or ``except`` that failed in
        turn, such as a rollback cut short), the interrupt is raised again instead."""
        interrupt = _interrupt_behind(exc)
        if interrupt is not None:
            raise interrupt
        self.failures[plugin] += 1
        found = self._error_index.get((plugin, hook))
        if found is not None:
            found.count += 1
            return
        text = "".join(traceback.format_exception(exc))
        error = self._error_index[(plugin, hook)] = PluginError(
            plugin, hook, f"{type(exc).__name__}: {exc}", text
        )
        self.errors.append(error)

    def call_all(self, hook: str, **kwargs: Any) -> list[tuple[str, Any]]:
        """Call every implementation, collecting non-``None`` results; failures (a raise,
        or an answer of the wrong type, see :data:`ANSWERS`) are isolated."""
        results = []
        check = ANSWERS.get(hook)
        impls = self._impls.get(hook)
        for impl in impls if impls is not None else self.impls(hook):
            try:
                result = impl.call(kwargs)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # a plugin must not take the scheduler down
                self.record_failure(impl.plugin, hook, exc)
                continue
            if result is None:
                continue
            if check is not None and not check[0](result):
                self.record_failure(impl.plugin, hook, bad_answer(result, check[1]))
                continue
            results.append((impl.plugin, result))
        return results

    def call_first(self, hook: str, **kwargs: Any) -> Any:
        """The first good non-``None`` result, in plugin order; failures count as no answer."""
        check = ANSWERS.get(hook)
        impls = self._impls.get(hook)
        for impl in impls if impls is not None else self.impls(hook):
            try:
                result = impl.call(kwargs)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                self.record_failure(impl.plugin, hook, exc)
                continue
            if result is None:
                continue
            if check is not None and not check[0](result):
                self.record_failure(impl.plugin, hook, bad_answer(result, check[1]))
                continue
            return result
        return None


class Policy:
    """The answers of ``round_order``, ``may_search_victims`` and ``victim_strategy``,
    taken once per session and called directly, each call guarded (see :mod:`.hooks`).

    Every attribute is ``None`` (or empty) when no plugin answers: the framework then
    keeps its classic behaviour and pays nothing for the hooks."""

    __slots__ = ("allowed", "picker", "registry", "strategy")

    def __init__(self, registry: Registry, session: object) -> None:
        self.registry = registry
        self.picker = self._first(registry, "round_order", session)
        self.allowed = registry.call_all("may_search_victims", session=session)
        self.strategy = self._first(registry, "victim_strategy", session)

    @staticmethod
    def _first(registry: Registry, hook: str, session: object) -> tuple[str, Any] | None:
        found = registry.call_all(hook, session=session)
        return found[0] if found else None

    def pick(self, entries: Sequence[Assignment]) -> int:
        """The index of the next entry; 0 (the classic order) without a working picker."""
        if self.picker is None:
            return 0
        name, picker = self.picker
        try:
            index = picker(entries)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            self.registry.record_failure(name, "round_order", exc)
            self.picker = None
            return 0
        if type(index) is not int or not 0 <= index < len(entries):
            self.registry.record_failure(name, "round_order", bad_answer(index, "an index into entries"))
            self.picker = None
            return 0
        return index

    def may_search(self, leaf: Any, fr: Any, request: int) -> bool:
        for name, allowed in self.allowed:
            try:
                if allowed(leaf, fr, request) is True:
                    return True
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                self.registry.record_failure(name, "may_search_victims", exc)
        return False


def _interrupt_behind(exc: BaseException) -> KeyboardInterrupt | None:
    """The ``KeyboardInterrupt`` that ``exc`` was raised during, if any (its context chain)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return current
        seen.add(id(current))
        current = current.__context__
    return None
