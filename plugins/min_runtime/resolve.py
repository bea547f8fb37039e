"""Which min-runtime applies to a (preemptor, victim) pair (SEMANTICS §5).

The plugin's vetoes and the simulator's invariant checker both ask this module,
so that what the checker holds the scheduler to is what the scheduler applies.
It also holds the plugin's configuration table, which both read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from preemptd.framework import QuantityError, QuotaNode, format_duration, parse_duration

__all__ = [
    "METHODS",
    "NAME",
    "PREEMPT",
    "RECLAIM",
    "Config",
    "Resolution",
    "reclaim_start",
    "resolve_preempt",
    "resolve_reclaim",
]

NAME = "min-runtime"  # the entry point's name, and the key of its session state
METHODS = ("lca", "queue")
PREEMPT = "preemptMinRuntime"
RECLAIM = "reclaimMinRuntime"


def _duration(key: str, value: object, problems: list[str]) -> int:
    try:
        return parse_duration(value)
    except QuantityError as exc:
        problems.append(f"{key}: {exc}")
        return 0


@dataclass(frozen=True, slots=True)
class Config:
    """The table ``[plugins.min-runtime]`` (CONTRACT §4): the node-pool level."""

    default_preempt_min_runtime: str = "0s"
    default_reclaim_min_runtime: str = "0s"
    reclaim_resolve_method: str = "lca"
    default_preempt_min_runtime_ms: int = field(default=0, init=False)
    default_reclaim_min_runtime_ms: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        # A bare number, a malformed or a negative value is an error, never silently
        # zero (SEMANTICS §5): parse_duration refuses all three. Every problem is
        # reported at once, so a user fixes the table in one pass.
        problems: list[str] = []
        preempt = _duration("default_preempt_min_runtime", self.default_preempt_min_runtime, problems)
        reclaim = _duration("default_reclaim_min_runtime", self.default_reclaim_min_runtime, problems)
        if self.reclaim_resolve_method not in METHODS:
            problems.append(
                f"reclaim_resolve_method: unknown method {self.reclaim_resolve_method!r} "
                f"(expected one of {', '.join(map(repr, METHODS))})"
            )
        if problems:
            raise ValueError("; ".join(problems))
        object.__setattr__(self, "default_preempt_min_runtime_ms", preempt)
        object.__setattr__(self, "default_reclaim_min_runtime_ms", reclaim)


@dataclass(frozen=True, slots=True)
class Resolution:
    """The min-runtime that applies to a pair of queues, and where it was set."""

    ms: int
    setting: str  # PREEMPT or RECLAIM
    queue: str | None  # None: the plugin's default

    def describe(self) -> str:
        origin = f"queue {self.queue}" if self.queue is not None else "the default"
        return f"{self.setting} {format_duration(self.ms)} from {origin}"


def _first_set(start: QuotaNode | None, setting: str) -> QuotaNode | None:
    """``start`` or its nearest ancestor that sets ``setting``."""
    node = start
    while node is not None:
        spec = node.spec
        value = spec.preempt_min_runtime if setting == PREEMPT else spec.reclaim_min_runtime
        if value is not None:
            return node
        node = node.parent
    return None


def _resolution(node: QuotaNode | None, setting: str, default: int) -> Resolution:
    if node is None:
        return Resolution(default, setting, None)
    spec = node.spec
    value = spec.preempt_min_runtime if setting == PREEMPT else spec.reclaim_min_runtime
    assert value is not None
    return Resolution(value, setting, node.name)


def resolve_preempt(victim_leaf: QuotaNode, default: int) -> Resolution:
    """In-queue preemption: the first ``preemptMinRuntime`` from the victim's queue up."""
    return _resolution(_first_set(victim_leaf, PREEMPT), PREEMPT, default)


def reclaim_start(preemptor_leaf: QuotaNode, victim_leaf: QuotaNode) -> QuotaNode | None:
    """The child of the two leaves' lowest common ancestor on the victim's side (the
    victim's leaf itself when the LCA is its parent); ``None`` without a common ancestor."""
    preemptor_path = {id(node) for node in preemptor_leaf.path()}
    if id(victim_leaf) in preemptor_path:
        return victim_leaf  # the same leaf: nothing to step down to
    child = victim_leaf
    node = victim_leaf.parent
    while node is not None:
        if id(node) in preemptor_path:
            return child
        child = node
        node = node.parent
    return None


def resolve_reclaim(
    preemptor_leaf: QuotaNode | None, victim_leaf: QuotaNode, default: int, method: str = "lca"
) -> Resolution:
    """Reclaim across queues, by ``method`` (SEMANTICS §5)."""
    if method == "queue":
        return _resolution(_first_set(victim_leaf, RECLAIM), RECLAIM, default)
    start = None if preemptor_leaf is None else reclaim_start(preemptor_leaf, victim_leaf)
    if start is None:
        # No common ancestor: only the victim's top-level queue may speak for it.
        top = victim_leaf.root
        if top.spec.reclaim_min_runtime is not None:
            return _resolution(top, RECLAIM, default)
        return Resolution(default, RECLAIM, None)
    return _resolution(_first_set(start, RECLAIM), RECLAIM, default)
