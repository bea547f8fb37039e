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

* the search of the chosen flavor that ``finish_assignment`` asks again after the
  flavor scan (``flavor-fungibility`` hands the option over; :func:`asked_again` then
  answers it without building its key again, when the state it was kept for has not
  moved);
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

__all__ = ["asked_again", "memo_key", "recall", "remember"]

Key = tuple[Any, ...]
_LEAF = 6  # where memo_key puts the leaf's index
_USAGE = 7  # and the usage asked for


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


def remember(session: Session, key: Key, result: SearchResult, before: tuple[dict[str, int], int]) -> bool:
    """Keep ``result`` under ``key`` with the vetoes its search counted; whether it was kept."""
    assert session.memo is not None
    if result.replicas or result.resume is not None:
        return False
    vetoes_before, failures_before = before
    registry = session.registry
    if sum(registry.failures.values()) != failures_before:
        return False
    vetoes = tuple(
        (plugin, count - vetoes_before.get(plugin, 0))
        for plugin, count in registry.vetoes.items()
        if count != vetoes_before.get(plugin, 0)
    )
    session.memo[key] = (result, vetoes)
    return True


def asked_again(
    session: Session, result: SearchResult, leaf: QuotaNode, usage: dict[FR, int]
) -> SearchResult | None:
    """``result`` asked for once more, exactly as :func:`recall` answers it (a fresh copy,
    its vetoes counted again), by whoever holds it and knows that the search would be the
    same: same preemptor, needed flavor-resources and node targets (the leaf and the
    usage, in the same order, are checked here). ``None`` when it is not kept in the memo
    or the state it was kept for moved (then the caller searches)."""
    key = result.memo_key
    statement = session.statement
    if key is None or session.memo is None or statement.ops:
        return None
    leaf_epoch, nodes, relied, taken = key[-4:]
    if (
        key[_LEAF] != leaf.index
        or key[_USAGE] != tuple(usage.items())
        or leaf_epoch != statement.epoch(leaf)
        or (nodes != -1 and nodes != statement.node_epoch)
        or relied != len(session.relied)
        or taken != len(session.taken)
    ):
        return None
    found = recall(session, key)
    if found is not None:
        found.memo_key = key
    return found
