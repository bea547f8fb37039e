"""A session: open, actions, close — one pass over one snapshot.

The session owns everything mutable of a pass: the quota accounting, the node
room, the statement that changes both, the decisions and the victims chosen
so far. Plugins see it in every hook. At open it takes each plugin's hot-path
implementations once and composes them into plain callables (order keys,
``is_preemptible``), so the loops that run per workload or per candidate
never go through pluggy.

Actions (SEMANTICS §2): ``allocate`` runs the rounds; ``preempt`` lets a head
that does not fit look for victims (in its own queue and across the cohort);
a deployment may list ``reclaim`` (cross-queue only) and ``preempt``
separately, in which case ``preempt`` means in-queue only. The victim search
is part of each round's nominations, so its time is reported under the name
of the preemption action, and the rest of the rounds under ``allocate``.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .candidates import Candidate
from .decisions import Decisions, Pending
from .model import Workload
from .quota import Accounting, QuotaNode
from .registry import Impl, Registry, bad_answer
from .snapshot import Snapshot
from .statement import Statement

__all__ = ["KNOWN_ACTIONS", "Session", "Taken", "run_session"]

KNOWN_ACTIONS = ("allocate", "preempt", "reclaim")


@dataclass(slots=True)
class Taken:
    """What this session (or an eviction already under way) takes from one workload."""

    whole: bool = False
    pods: int = 0  # single pods of an elastic workload
    pod_names: list[str] = field(default_factory=list)  # every pod taken, whatever its class
    scaled: list[str] = field(default_factory=list)  # normal pods: the scale-down's victims
    preemptor: str = ""
    reason: str = ""
    pod_set: str | None = None


# What may still be assigned once a session is built: the framework flips it around
# each candidate collection. Everything else is fixed for the session's life, so a
# plugin that assigns (``session.state = None``) fails in its own hook instead of
# breaking the hooks and actions after it.
_ASSIGNABLE = frozenset({"defer_pods"})


class Session:
    __slots__ = (
        "_built",
        "_notes",
        "_preemptible",
        "_veto_reasons",
        "_workload_keys",
        "accounting",
        "actions",
        "cross_queue_enabled",
        "decisions",
        "defer_pods",
        "in_queue_enabled",
        "now",
        "placements",
        "registry",
        "relied",
        "snapshot",
        "state",
        "statement",
        "taken",
        "timings",
        "unit_cache",
        "workload_key",
    )

    def __init__(
        self,
        snapshot: Snapshot,
        registry: Registry,
        *,
        actions: Sequence[str] = ("allocate", "preempt"),
    ) -> None:
        unknown = [a for a in actions if a not in KNOWN_ACTIONS]
        if unknown:
            raise ValueError(f"unknown action(s) {unknown}; known: {list(KNOWN_ACTIONS)}")
        self.snapshot = snapshot
        self.registry = registry
        self.actions = tuple(actions)
        self.now = snapshot.now
        self.accounting: Accounting = snapshot.accounting.copy()
        self.placements = snapshot.placements.copy() if snapshot.placements is not None else None
        listeners = registry.has("on_admit") or registry.has("on_evict")
        self.statement = Statement(
            self.accounting,
            self.placements,
            on_admit=self._notify_admit if listeners else None,
            on_evict=self._notify_evict if listeners else None,
        )
        self.decisions = Decisions(now=snapshot.now)
        self.state: dict[str, Any] = {}
        self.timings: dict[str, float] = {}
        self.taken: dict[str, Taken] = {}
        self.unit_cache: dict[str, dict[tuple[Any, ...], list[Candidate]]] = {}
        # Units (``Candidate.unit``) some preemptor of this session relies on, and the
        # victims themselves.
        self.relied: dict[tuple[object, ...], Candidate] = {}
        # Set while a node-by-node search collects candidates: a Deployment's pods then
        # come as one DeferredPods unit, built node by node as the search visits nodes.
        self.defer_pods = False
        split = "reclaim" in self.actions
        self.in_queue_enabled = "preempt" in self.actions
        self.cross_queue_enabled = split or ("preempt" in self.actions)
        self._workload_keys: dict[str, tuple[Any, ...]] = {}
        self._preemptible: list[Impl] = []
        self._veto_reasons: dict[str, str] = {}
        self._notes: dict[str, dict[str, str]] = {}
        self.workload_key: Callable[[Workload], tuple[Any, ...]] = self._default_key
        self._built = True

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in _ASSIGNABLE and getattr(self, "_built", False):
            raise AttributeError(f"session attribute {name!r} is read-only")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"session attribute {name!r} cannot be deleted")

    # -- plugin access -----------------------------------------------------

    def plugin_config(self, name: str) -> Any:
        """The validated configuration object of plugin ``name`` (or ``None``)."""
        return self.registry.configs.get(name)

    def leaf(self, name: str) -> QuotaNode | None:
        return self.snapshot.tree.leaves.get(name)

    # -- open / close ------------------------------------------------------

    def open(self) -> None:
        self.registry.call_all("session_open", session=self)
        keys = self.registry.call_all("workload_order", session=self)
        registry = self.registry

        def composed(w: Workload) -> tuple[Any, ...]:
            parts: list[Any] = []
            for name, key in keys:
                # Each plugin's part is (0, *key); a key that raises gives (1,), which
                # sorts after every answer, so one broken plugin cannot stop ordering.
                try:
                    parts.append((0, *key(w)))
                except KeyboardInterrupt:
                    raise
                except BaseException as exc:
                    registry.record_failure(name, "workload_order", exc)
                    parts.append((1,))
            parts.append(w.created)
            parts.extend(w.tiebreak)
            return tuple(parts)

        object.__setattr__(self, "workload_key", self._cached(composed if keys else self._default_key))
        object.__setattr__(self, "_preemptible", self.registry.impls("is_preemptible"))
        for name in self.registry.names:
            plugin = self.registry.pm.get_plugin(name)
            reason = getattr(plugin, "VETO_REASON", None)
            if isinstance(reason, str):
                self._veto_reasons[name] = reason

    def close(self) -> Decisions:
        for key, message in sorted(self.snapshot.inadmissible.items()):
            self.decisions.pending.append(Pending(key, "Inadmissible", message))
        self.registry.call_all("session_close", session=self)
        return self.decisions

    @staticmethod
    def _default_key(w: Workload) -> tuple[Any, ...]:
        return (w.created, *w.tiebreak)

    def _cached(self, key: Callable[[Workload], tuple[Any, ...]]) -> Callable[[Workload], tuple[Any, ...]]:
        cache = self._workload_keys

        def cached(w: Workload) -> tuple[Any, ...]:
            found = cache.get(w.key)
            if found is None:
                found = cache[w.key] = key(w)
            return found

        return cached

    # -- policy checks used by the victim search ---------------------------

    def is_preemptible(self, action: str, preemptor: Workload, candidate: Candidate) -> str | None:
        """``None`` when every plugin allows it, else the name of the first plugin that vetoed.

        A plugin that raises, or answers anything but a bool or ``None``, vetoes (fail
        safe) and is counted as failed.
        """
        for impl in self._preemptible:
            try:
                ok = impl.call(
                    {"session": self, "action": action, "preemptor": preemptor, "preemptee": candidate}
                )
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                self.registry.record_failure(impl.plugin, "is_preemptible", exc)
                return impl.plugin
            if ok is True or ok is None:
                continue
            if ok is False:
                self.registry.vetoes[impl.plugin] += 1
            else:
                self.registry.record_failure(
                    impl.plugin, "is_preemptible", bad_answer(ok, "a bool or None")
                )
            return impl.plugin
        return None

    def veto_reason(self, plugin: str) -> str | None:
        """The pending reason a plugin's veto stands for (e.g. ``MinRuntime``), if it declares one."""
        return self._veto_reasons.get(plugin)

    def add_note(self, workload: str, plugin: str, text: str) -> None:
        """Let a plugin say why it held a preemptor back; the last note per plugin is
        appended to the preemptor's pending message if it finds no victims."""
        self._notes.setdefault(workload, {})[plugin] = text

    def notes(self, workload: str) -> list[str]:
        return [text for _, text in sorted(self._notes.get(workload, {}).items())]

    def explain(self, workload: str, line: str) -> None:
        self.decisions.explanations.setdefault(workload, []).append(line)

    # -- statement events --------------------------------------------------

    def _notify_admit(self, workload: Workload, count: int | None) -> None:
        self.registry.call_all("on_admit", session=self, workload=workload, count=count)

    def _notify_evict(self, workload: Workload, count: int | None) -> None:
        self.registry.call_all("on_evict", session=self, workload=workload, count=count)


def run_session(
    snapshot: Snapshot,
    registry: Registry,
    *,
    actions: Sequence[str] = ("allocate", "preempt"),
    timings: dict[str, float] | None = None,
) -> Decisions:
    """Open a session over ``snapshot``, run the actions, close it and return its decisions.

    ``timings``, when given, receives seconds per phase: each action by name and
    ``session`` (open to close).
    """
    from .actions.allocate import run_rounds

    started = time.perf_counter()
    # A session allocates many short-lived objects over a large, long-lived
    # snapshot; the cyclic collector would re-scan the snapshot again and again
    # for garbage it cannot find (nothing a session makes is cyclic). It runs
    # again, as before, once the session is over.
    collecting = gc.isenabled()
    gc.disable()
    try:
        session = Session(snapshot, registry, actions=actions)
        session.open()
        if "allocate" in session.actions:
            run_rounds(session)
        decisions = session.close()
        # Plugins keep per-session state that points back at the session; dropping
        # it here frees the session by reference counting, not a later GC pass.
        session.state.clear()
        session.unit_cache.clear()
    finally:
        if collecting:
            gc.enable()
    if timings is not None:
        timings.update(session.timings)
        timings["session"] = time.perf_counter() - started
    return decisions
