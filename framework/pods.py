"""The lifecycle classes of a Deployment's pods (SEMANTICS §6).

A pod that is already on its way out is a cheaper victim than one that still
serves: taking it costs at most a force delete, and preferring it keeps the
choice stable while victims move through their lifecycle
(normal → surplus → terminating → force-deleting → gone).
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import attrgetter

from .model import Pod

__all__ = [
    "CLASS_NAMES",
    "FORCE_DELETING",
    "NORMAL",
    "SURPLUS",
    "TERMINATING",
    "Descending",
    "classify",
]

FORCE_DELETING, TERMINATING, SURPLUS, NORMAL = range(4)
CLASS_NAMES = ("force-deleting", "terminating", "surplus", "normal")


class Descending:
    """A string that sorts in *descending* order: victim keys take "higher name first".

    Building one costs next to nothing; a comparison reaches it only when every earlier
    part of two keys ties, so the cost of comparing in Python is rarely paid."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __lt__(self, other: Descending) -> bool:
        return self.text > other.text

    def __le__(self, other: Descending) -> bool:
        return self.text >= other.text

    def __gt__(self, other: Descending) -> bool:
        return self.text < other.text

    def __ge__(self, other: Descending) -> bool:
        return self.text <= other.text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Descending) and self.text == other.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"Descending({self.text!r})"


def classify(pods: Iterable[Pod], committed: int, *, ordered: bool = False) -> list[tuple[Pod, int]]:
    """Each pod (bound and not finished) with its class, ordered by class, then
    namespace/name.

    Surplus pods are the non-terminating ones beyond the committed count that the
    ReplicaSet removes first on a scale-down: lowest ``pod-deletion-cost``, then
    newest ``creationTimestamp``, then higher name. ``ordered``: the pods come in
    namespace/name order already (a snapshot's ``pods_by_workload`` lists do).
    """
    pods = list(pods)
    if len(pods) <= committed and not any(map(_DELETING, pods)):
        # Nothing leaving, nothing beyond the committed count: every pod is normal.
        if not ordered:
            pods.sort(key=_namespace_name)
        return [(pod, NORMAL) for pod in pods]
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


_DELETING = attrgetter("facts.deleting")  # Pod.deleting, read without the property


def _namespace_name(pod: Pod) -> tuple[str, str]:
    return (pod.namespace, pod.name)


def _name(pod: Pod) -> str:
    return pod.name


def _cost_then_newest(pod: Pod) -> tuple[int, int]:
    return (pod.deletion_cost, -pod.created)
