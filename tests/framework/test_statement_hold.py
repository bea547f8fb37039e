"""A statement's hold (``Statement.hold`` / ``release``, used by the victim walk) leaves the
quota and the node room exactly as a rollback to the same checkpoint does: the same values,
the same keys in the same order (a flavor-resource first met during the hold left at 0),
and the same best fits, over random trees (lending and borrowing limits) and random
sequences of usage added and removed, node room taken and given, and nested rollbacks."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import Flavor, Node
from preemptd.framework.nodes import NodePool, Placements
from preemptd.framework.quota import Accounting, QuotaNode, QuotaTree
from preemptd.framework.session import Statement
from preemptd.framework.testing import queue

from tests.framework.test_headroom_bound import _tree as random_tree

CPU = ("default", "cpu")
OTHER = ("other", "cpu")  # in no queue's quota: first met when a step adds it
GPU = "nvidia.com/gpu"


def _placements() -> Placements:
    flavor = Flavor("gpu", {"pool": "gpu"})
    nodes = {f"n{i}": Node(f"n{i}", {"pool": "gpu"}, {GPU: 8, "cpu": 16_000}) for i in range(4)}
    return Placements(NodePool(nodes, {"gpu": flavor}))


def _play(statement: Statement, tree: QuotaTree, seed: int, steps: int) -> None:
    """Random steps on ``statement``: usage added and removed (only what was added), room
    taken and given, some undone by a nested checkpoint and rollback."""
    rng = random.Random(seed)
    leaves = sorted(tree.leaves.values(), key=lambda n: n.name)
    added: list[tuple[QuotaNode, dict[tuple[str, str], int]]] = []
    marks: list[tuple[int, list[tuple[QuotaNode, dict[tuple[str, str], int]]]]] = []  # checkpoints, with what was added then
    for _ in range(steps):
        step = rng.randrange(7)
        if step <= 1:
            usage = {CPU: rng.randrange(0, 9000, 500)}
            if rng.random() < 0.3:
                usage[OTHER] = rng.randrange(1, 4000)
            leaf = rng.choice(leaves)
            statement.add_usage(leaf, usage)
            added.append((leaf, usage))
        elif step == 2 and added:
            leaf, usage = added.pop(rng.randrange(len(added)))
            statement.remove_usage(leaf, usage)
        elif step == 3:
            statement.take_room(f"n{rng.randrange(4)}", {GPU: rng.randrange(1, 4), "cpu": 1000})
        elif step == 4:
            statement.give_room(f"n{rng.randrange(4)}", {GPU: rng.randrange(1, 4)})
        elif step == 5:
            marks.append((statement.checkpoint(), list(added)))
        elif marks:
            mark, before = marks.pop()
            statement.rollback(mark)
            added = before



def _state(accounting: Accounting, placements: Placements) -> object:
    fits = [placements.best_fit("gpu", {GPU: g, "cpu": 500}, {}, ()) for g in range(1, 9)]
    return [list(u.items()) for u in accounting.usage], {n: list(f.items()) for n, f in placements.free.items()}, fits


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**9), st.booleans())
def test_release_of_a_hold_leaves_what_a_rollback_leaves(seed: int, committed: bool) -> None:
    rng = random.Random(seed)
    tree = random_tree(rng)
    states = []
    for use_hold in (False, True):
        accounting, placements = Accounting(tree), _placements()
        statement = Statement(accounting, placements)
        _play(statement, tree, seed, 8)  # before the hold
        if committed:
            statement.commit()
        start = statement.hold() if use_hold else statement.checkpoint()
        _play(statement, tree, seed + 1, 30)
        if use_hold:
            statement.release(start)
        else:
            statement.rollback(start)
        states.append((_state(accounting, placements), len(statement.ops)))
        statement.rollback()  # and the steps before the hold still undo exactly
        states.append((_state(accounting, placements), len(statement.ops)))
    assert states[:2] == states[2:]


def test_a_hold_copies_each_queue_once_and_restores_a_key_first_met_at_zero() -> None:
    """Worked by hand: ``a`` holds 2 cores (of nominal 4) when the hold starts; during it
    3 cores and 1 core of another flavor are added and 1 core removed; the release puts
    back 2 cores, the other flavor's key stays at 0 (as a rollback leaves it)."""
    tree = QuotaTree({q.name: q for q in (queue("a", cpu=4),)})
    accounting = Accounting(tree)
    statement = Statement(accounting, None)
    a = tree.nodes["a"]
    statement.add_usage(a, {CPU: 2_000})
    start = statement.hold()
    statement.add_usage(a, {CPU: 3_000, OTHER: 1_000})
    statement.remove_usage(a, {CPU: 1_000})
    assert [(CPU, 4_000), (OTHER, 1_000)] == list(accounting.usage[a.index].items())
    statement.release(start)
    assert [(CPU, 2_000), (OTHER, 0)] == list(accounting.usage[a.index].items())
    assert 1 == len(statement.ops)
    statement.rollback()
    assert 0 == accounting.used(a, CPU)


def test_a_hold_inside_a_hold_and_a_rollback_past_a_hold_undo_exactly() -> None:
    """A hold taken while another is on releases to its own checkpoint (a plain rollback:
    the outer copies are of the state before the outer hold), the outer release then
    restores the outer start; a rollback past a hold ends it, so a later hold at the same
    checkpoint copies afresh."""
    tree = QuotaTree({q.name: q for q in (queue("a", cpu=4),)})
    accounting = Accounting(tree)
    statement = Statement(accounting, None)
    a = tree.nodes["a"]
    outer = statement.hold()
    statement.add_usage(a, {CPU: 1_000})
    inner = statement.hold()
    statement.add_usage(a, {CPU: 2_000})
    statement.release(inner)
    assert 1_000 == accounting.used(a, CPU)
    statement.add_usage(a, {CPU: 500})
    statement.release(outer)
    assert 0 == accounting.used(a, CPU) and not statement.ops
    statement.add_usage(a, {CPU: 1_000})
    start = statement.hold()
    statement.add_usage(a, {CPU: 1_000})
    statement.rollback(0)  # past the hold: it ends
    statement.add_usage(a, {CPU: 3_000})
    again = statement.hold()
    assert again == start == 1
    statement.add_usage(a, {CPU: 500})
    statement.release(again)
    assert 3_000 == accounting.used(a, CPU)
