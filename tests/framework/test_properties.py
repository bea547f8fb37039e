"""Properties of the session core over generated queue trees and workloads."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.quota import Accounting, QuotaTree
from preemptd.framework.run import run_session
from preemptd.framework.session import Registry, Statement
from preemptd.framework.snapshot import Snapshot, admitted_usage
from preemptd.framework.testing import cohort, inventory, queue, workload
from preemptd.plugins import cohort_reclaim, priority

CPU = ("default", "cpu")


def _world(seed: int, admitted_share: float = 0.5):  # type: ignore[no-untyped-def]
    rnd = random.Random(seed)
    queues = [cohort("root"), cohort("c1", "root"), cohort("c2", "root")]
    names = []
    for i in range(rnd.randint(2, 6)):
        name = f"q{i}"
        names.append(name)
        queues.append(
            queue(
                name,
                rnd.choice(["c1", "c2"]),
                cpu=rnd.randint(0, 8),
                borrowing_limit=rnd.choice([None, 0, 2, 5]),
                lending_limit=rnd.choice([None, 0, 1, 3]),
            )
        )
    tree = QuotaTree({q.name: q for q in queues})
    acc = Accounting(tree)
    workloads = []
    for i in range(rnd.randint(1, 25)):
        q = rnd.choice(names)
        cpu = rnd.randint(1, 6)
        leaf = tree.nodes[q]
        admit = rnd.random() < admitted_share and acc.available(leaf, CPU) >= cpu * 1000
        if admit:
            acc.add(leaf, CPU, cpu * 1000)
        workloads.append(
            workload(f"w{i}", q, cpu, priority=rnd.randint(0, 3), created=rnd.randint(0, 50), admitted=admit)
        )
    return queues, workloads


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=10_000))
def test_admissions_never_exceed_available(seed: int) -> None:
    """Without preemption, everything admitted at the end of a session still fits every queue's Available."""
    queues, workloads = _world(seed)
    snap = Snapshot.build(inventory(queues, workloads), now=100_000)
    decisions = run_session(snap, Registry([("priority", priority, None)]), actions=("allocate",))
    acc = Accounting(snap.tree)
    for w in workloads:
        if w.admission is not None:
            acc.add_all(snap.tree.nodes[w.admission.queue], admitted_usage(w))
    for admitted in decisions.admitted:
        amount = sum(ps.count for ps in admitted.pod_sets) * snap.workloads[admitted.workload].pod_sets[0].requests["cpu"]
        acc.add(snap.tree.nodes[admitted.queue], CPU, amount)
    for leaf in snap.tree.leaves.values():
        assert acc._available(leaf, CPU) >= 0, leaf.name
    for root in snap.tree.roots:
        assert acc.used(root, CPU) <= root.subtree.get(CPU, 0)


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=10_000), st.randoms(use_true_random=False))
def test_decisions_do_not_depend_on_workload_order(seed: int, shuffler: random.Random) -> None:
    """The same objects in another order give byte-identical decisions."""
    queues, workloads = _world(seed)
    registry_plugins = [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)]
    first = run_session(Snapshot.build(inventory(queues, workloads), now=1), Registry(registry_plugins))
    shuffler.shuffle(workloads)
    shuffler.shuffle(queues)
    second = run_session(Snapshot.build(inventory(queues, workloads), now=1), Registry(registry_plugins))
    assert first.to_json() == second.to_json()


@settings(max_examples=80, deadline=None)
@given(
    st.integers(min_value=0, max_value=10_000),
    st.lists(st.tuples(st.booleans(), st.integers(0, 5), st.integers(1, 9_000)), max_size=40),
)
def test_rollback_restores_the_accounting_exactly(seed: int, ops: list[tuple[bool, int, int]]) -> None:
    """Any sequence of statement operations rolled back leaves every node's usage as it was."""
    queues, workloads = _world(seed, admitted_share=1.0)
    snap = Snapshot.build(inventory(queues, workloads), now=1)
    acc = snap.accounting.copy()

    def usage() -> list[dict[tuple[str, str], int]]:
        # An entry at 0 and a missing entry are the same usage.
        return [{fr: v for fr, v in u.items() if v} for u in acc.usage]

    before = usage()
    statement = Statement(acc, None)
    leaves = list(snap.tree.leaves.values())
    middle = None
    for i, (add, which, amount) in enumerate(ops):
        leaf = leaves[which % len(leaves)]
        if add:
            statement.add_usage(leaf, {CPU: amount})
        else:
            statement.remove_usage(leaf, {CPU: min(amount, acc.used(leaf, CPU))})
        if i == len(ops) // 2:
            middle = (statement.checkpoint(), usage())
    if middle is not None:
        statement.rollback(middle[0])
        assert middle[1] == usage()
    statement.rollback(0)
    assert before == usage()
