"""The search memo: a victim search already run answers an identical later one.

A search is a function of its inputs and of the session's state: the preemptor
as the plugins read it (key, queue, priority, creation time, pod counts), its
leaf, the usage asked for, the needed flavor-resources, the node targets, the
usage of the preemptor's queue tree, node room when nodes are searched, and the
victims this session chose so far. The statement names the state of a tree by
its epoch (bumped by every commit that changed the tree) and node room by the
node epoch, so a key made of the inputs and those epochs identifies the answer.

The memo is consulted and filled only when the statement holds no uncommitted
operation (nomination runs at the start of a round, between commits), so the
epochs name the state exactly. It repeats:

* the search of the chosen flavor that ``finish_assignment`` runs again after the
  flavor scan;
* the searches of a head nominated again (``WaitingForQuota``, partial admission)
  in a state of its tree that has not moved.

It is exact only when every plugin consulted keeps the contract of ``MEMO_SAFE``
(``session/hooks.py``); otherwise the session runs with ``memo = None``. Vetoes
the search counted are counted again on every answer from memory; a search in
which a plugin failed is not remembered (its failure is counted once per run).
A Deployment's replica search that placed replicas keeps a resumable search
object and is not remembered either.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..model import FR, PodSet, Workload
from ..quota import QuotaNode
from ..session import SearchResult, Session

__all__ = ["memo_key", "recall", "remember"]

Key = tuple[Any, ...]


def memo_key(
    session: Session,
    preemptor: Workload,
    leaf: QuotaNode,
    usage: dict[FR, int],
    needed: frozenset[FR],
    targets: Sequence[tuple[PodSet, int, str]],
) -> Key | None:
    """The key of one search, or ``None`` when it may not be remembered now."""
    statement = session.statement
    if session.memo is None or statement.ops:
        return None
    nodes = statement.node_epoch if (targets or preemptor.is_deployment) else -1
    return (
        preemptor.key,
        preemptor.queue,
        preemptor.priority,
        preemptor.created,
        preemptor.is_deployment,
        tuple(ps.count for ps in preemptor.pod_sets),
        leaf.index,
        tuple(usage.items()),
        needed,
        tuple((spec.name, count, flavor) for spec, count, flavor in targets),
        statement.epoch(leaf),
        nodes,
        len(session.relied),
        len(session.taken),
    )


def recall(session: Session, key: Key) -> SearchResult | None:
    """The remembered answer (a fresh copy), its vetoes counted again; or ``None``."""
    assert session.memo is not None
    found = session.memo.get(key)
    if found is None:
        return None
    result, vetoes = found
    if vetoes:
        counter = session.registry.vetoes
        for plugin, count in vetoes:
            counter[plugin] += count
    session.counters.memo_hits += 1
    return SearchResult(
        list(result.victims),
        result.allow_borrowing,
        result.level,
        result.vetoed_by,
        result.message,
        list(result.lines),
    )


def snapshot_counts(session: Session) -> tuple[dict[str, int], int]:
    """The registry's veto and failure counts before a search."""
    registry = session.registry
    return dict(registry.vetoes), sum(registry.failures.values())


def remember(session: Session, key: Key, result: SearchResult, before: tuple[dict[str, int], int]) -> None:
    """Keep ``result`` under ``key`` with the vetoes its search counted."""
    assert session.memo is not None
    if result.replicas or result.resume is not None:
        return
    vetoes_before, failures_before = before
    registry = session.registry
    if sum(registry.failures.values()) != failures_before:
        return
    vetoes = tuple(
        (plugin, count - vetoes_before.get(plugin, 0))
        for plugin, count in registry.vetoes.items()
        if count != vetoes_before.get(plugin, 0)
    )
    session.memo[key] = (result, vetoes)
