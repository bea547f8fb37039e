"""The lifecycle classes of a Deployment's pods (SEMANTICS §6).

A pod that is already on its way out is a cheaper victim than one that still
serves: taking it costs at most a force delete, and preferring it keeps the
choice stable while victims move through their lifecycle
(normal → surplus → terminating → force-deleting → gone).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from .model import Pod

__all__ = [
    "CLASS_NAMES",
    "FORCE_DELETING",
    "NORMAL",
    "SURPLUS",
    "TERMINATING",
    "classify",
    "descending",
]

FORCE_DELETING, TERMINATING, SURPLUS, NORMAL = range(4)
CLASS_NAMES = ("force-deleting", "terminating", "surplus", "normal")


@lru_cache(maxsize=1 << 16)
def descending(text: str) -> tuple[int, ...]:
    """A key that sorts strings in *descending* lexical order (longer first on a shared prefix).
    Cached: victim orders build it for the same pod names search after search."""
    return (*(-ord(ch) for ch in text), 1)


def classify(pods: Iterable[Pod], committed: int) -> list[tuple[Pod, int]]:
    """Each pod (bound and not finished) with its class, in a deterministic order.

    Surplus pods are the non-terminating ones beyond the committed count that the
    ReplicaSet removes first on a scale-down: lowest ``pod-deletion-cost``, then
    newest ``creationTimestamp``, then higher name.
    """
    leaving: list[tuple[Pod, int]] = []
    live: list[Pod] = []
    for pod in pods:
        if pod.deleting:
            leaving.append((pod, FORCE_DELETING if pod.force_delete else TERMINATING))
        else:
            live.append(pod)
    # Higher name first, then (stable) lowest cost and newest first.
    live.sort(key=_name, reverse=True)
    live.sort(key=_cost_then_newest)
    extra = max(0, len(live) - committed)
    classes = leaving + [(pod, SURPLUS) for pod in live[:extra]] + [(pod, NORMAL) for pod in live[extra:]]
    classes.sort(key=lambda pc: (pc[1], pc[0].namespace, pc[0].name))
    return classes


def _name(pod: Pod) -> str:
    return pod.name


def _cost_then_newest(pod: Pod) -> tuple[int, int]:
    return (pod.deletion_cost, -pod.created)
