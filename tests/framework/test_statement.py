"""A statement undoes exactly what it did, quota and node room alike."""

from __future__ import annotations

from preemptd.framework.model import Flavor, Node
from preemptd.framework.nodes import NodePool, Placements
from preemptd.framework.quota import Accounting, QuotaTree
from preemptd.framework.session import Statement
from preemptd.framework.testing import cohort, queue

CPU = ("default", "cpu")


def test_rollback_to_a_checkpoint_keeps_what_came_before_it() -> None:
    """Operations before the checkpoint stay; those after it are undone in reverse."""
    tree = QuotaTree({q.name: q for q in (cohort("c"), queue("a", "c", cpu=4, lending_limit=1), queue("b", "c", cpu=4))})
    acc = Accounting(tree)
    statement = Statement(acc, None)
    a, b, c = tree.nodes["a"], tree.nodes["b"], tree.nodes["c"]
    statement.add_usage(a, {CPU: 2_000})
    mark = statement.checkpoint()
    statement.add_usage(a, {CPU: 3_000})
    statement.remove_usage(a, {CPU: 1_000})
    statement.add_usage(b, {CPU: 4_000})
    statement.rollback(mark)
    assert (2_000, 0, 0) == (acc.used(a, CPU), acc.used(b, CPU), acc.used(c, CPU))
    statement.rollback()
    assert (0, 0) == (acc.used(a, CPU), acc.used(c, CPU))


def test_rollback_restores_node_room_and_the_best_fit_order() -> None:
    """Room taken on a node comes back on rollback, and best fit sees the node as before."""
    flavor = Flavor("gpu", {"pool": "gpu"})
    nodes = {
        "n1": Node("n1", {"pool": "gpu"}, {"nvidia.com/gpu": 8, "cpu": 8_000}),
        "n2": Node("n2", {"pool": "gpu"}, {"nvidia.com/gpu": 4, "cpu": 8_000}),
    }
    placements = Placements(NodePool(nodes, {"gpu": flavor}))
    statement = Statement(Accounting(QuotaTree({})), placements)
    request = {"nvidia.com/gpu": 2}
    assert "n2" == placements.best_fit("gpu", request, {}, ())  # least free GPUs that fits
    statement.take_room("n2", {"nvidia.com/gpu": 3})
    assert "n1" == placements.best_fit("gpu", request, {}, ())
    statement.rollback()
    assert {"nvidia.com/gpu": 4, "cpu": 8_000} == placements.free["n2"]
    assert "n2" == placements.best_fit("gpu", request, {}, ())


def test_commit_makes_earlier_operations_permanent() -> None:
    """After commit, a rollback to zero no longer undoes what was committed."""
    tree = QuotaTree({q.name: q for q in (queue("solo", cpu=4),)})
    acc = Accounting(tree)
    statement = Statement(acc, None)
    statement.add_usage(tree.nodes["solo"], {CPU: 1_000})
    statement.commit()
    statement.rollback()
    assert 1_000 == acc.used(tree.nodes["solo"], CPU)
