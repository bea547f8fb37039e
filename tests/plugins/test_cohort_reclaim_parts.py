"""cohort-reclaim shares each sibling cohort's part of an answer between queues.

A preemptor's cross-queue candidates are, level by level, the candidates of each
sibling subtree of its ancestors, in tree order. A sibling's part is a function of the
tree's committed state (its epoch), the units taken so far, the request, the priority
bounds and whether the preemptor has the advantage at that level: preemptors of other
queues of the tree asking the same get it without walking the subtree again, and the
whole answer is the same list, in the same order, as a walk in a fresh session.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from preemptd.framework.model import PreemptionPolicy, Workload
from preemptd.framework.session import Session, VictimSearch
from preemptd.framework.testing import cohort, inventory, open_session, queue, workload
from preemptd.plugins import cohort_reclaim, priority

PLUGINS = [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)]
CPU = ("default", "cpu")
NOW = 1_000_000
LEAVES = [f"q{c}{i}" for c in range(3) for i in range(3)]


def _cluster(seed: int) -> Any:
    """org -> c0, c1, c2 -> three leaves each (1 cpu nominal); 40 running workloads of
    random queues and priorities, so most queues borrow and some stay within nominal."""
    rng = random.Random(seed)
    queues = [cohort("org")] + [cohort(f"c{c}", "org") for c in range(3)]
    for name in LEAVES:
        policy = PreemptionPolicy(
            reclaim_within_cohort=rng.choice(["Any", "LowerPriority"]),
            borrow_within_cohort=rng.choice(["Never", "LowerPriority"]),
            max_priority_threshold=rng.choice([None, 3]),
        )
        queues.append(queue(name, f"c{name[1]}", cpu=rng.choice([1, 4]), preemption=policy))
    running = [
        workload(f"w{i}", rng.choice(LEAVES), 1, priority=rng.randrange(6), created=rng.randrange(9), admitted=True)
        for i in range(40)
    ]
    return inventory(queues, running)


def _ask(session: Session, preemptor: Workload, cpu: int) -> tuple[list[tuple[str, str, int, bool]], int]:
    leaf = session.snapshot.tree.leaves[preemptor.queue]
    request = VictimSearch(preemptor, leaf, {CPU: cpu * 1000}, frozenset({CPU}))
    found = cohort_reclaim.preemption_candidates(session, preemptor, request)
    return [(c.workload.name, c.reason, c.group, c.only_within_nominal) for c in found], request.left_out


@pytest.mark.parametrize("seed", range(8))
def test_every_answer_from_shared_parts_is_the_fresh_walks_answer_in_order(seed: int) -> None:
    cluster = _cluster(seed)
    rng = random.Random(seed)
    session = open_session(cluster, PLUGINS, NOW)
    for n in range(12):
        preemptor = workload(f"p{n}", rng.choice(LEAVES), 1, priority=rng.randrange(6), created=5)
        cpu = rng.choice([1, 2])
        answer = _ask(session, preemptor, cpu)
        # The same preemptor alone in a fresh session: nothing kept, every subtree walked.
        assert answer == _ask(open_session(cluster, PLUGINS, NOW), preemptor, cpu), preemptor.name


def test_a_preemptor_of_a_sibling_queue_walks_only_what_the_first_did_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # org -> c0 (a, b, c), c1 (d, e); every leaf runs 2 workloads of 1 cpu on a nominal of
    # 1: all borrow, so all are candidates (reclaimWithinCohort Any, borrowWithinCohort
    # Never: one class per queue), and no preemptor has the advantage at any level.
    policy = PreemptionPolicy(reclaim_within_cohort="Any", borrow_within_cohort="Never")
    leaves = {"a": "c0", "b": "c0", "c": "c0", "d": "c1", "e": "c1"}
    queues = [cohort("org"), cohort("c0", "org"), cohort("c1", "org")]
    queues += [queue(name, parent, cpu=1, preemption=policy) for name, parent in leaves.items()]
    running = [workload(f"{name}{i}", name, 1, created=i, admitted=True) for name in leaves for i in range(2)]
    session = open_session(inventory(queues, running), PLUGINS, NOW)
    walked: list[str] = []
    real = cohort_reclaim.queue_units

    def counting(*args: Any, **kwargs: Any) -> Any:
        walked.append(args[1].name)
        return real(*args, **kwargs)

    monkeypatch.setattr(cohort_reclaim, "queue_units", counting)
    first, _ = _ask(session, workload("pa", "a", 1, priority=5, created=9), 1)
    assert walked == ["b", "c", "d", "e"]
    second, _ = _ask(session, workload("pb", "b", 1, priority=5, created=9), 1)
    # c1's part (level org) is a's search's: d and e are not walked again. Of the sibling
    # queues, c's part is a's search's too (nothing taken from it); a is read once.
    assert walked == ["b", "c", "d", "e", "a"]
    assert [name for name, *_ in first] == ["b0", "b1", "c0", "c1", "d0", "d1", "e0", "e1"]
    assert [name for name, *_ in second] == ["a0", "a1", "c0", "c1", "d0", "d1", "e0", "e1"]


def test_a_commit_that_brings_a_sibling_within_nominal_drops_its_part() -> None:
    # org -> c0 (a, b), c1 (c). c runs two workloads of 1 cpu on a nominal of 1: it
    # borrows, so its units are candidates of a's and b's searches (SEMANTICS §4).
    policy = PreemptionPolicy(reclaim_within_cohort="Any", borrow_within_cohort="Never")
    queues = [
        cohort("org"),
        cohort("c0", "org"),
        cohort("c1", "org"),
        queue("a", "c0", cpu=1, preemption=policy),
        queue("b", "c0", cpu=1, preemption=policy),
        queue("c", "c1", cpu=1),
    ]
    running = [workload(f"w{i}", "c", 1, priority=0, created=i, admitted=True) for i in range(2)]
    session = open_session(inventory(queues, running), PLUGINS, NOW)
    names, _ = _ask(session, workload("pa", "a", 1, priority=5, created=9), 1)
    assert sorted(name for name, *_ in names) == ["w0", "w1"]
    # One of c's workloads leaves, committed: c is within its nominal (1 of 1) and is
    # never a victim then; b's preemptor must not be handed c's part from before.
    tree = session.snapshot.tree
    session.statement.remove_usage(tree.leaves["c"], {CPU: 1000})
    session.statement.commit()
    names, _ = _ask(session, workload("pb", "b", 1, priority=5, created=9), 1)
    assert names == []
