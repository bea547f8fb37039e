"""The margins of a lazy walk's lender test kept as rows by place for chains through cohorts
(framework/preemption/margins.py: ``gives``, ``keep``, ``held_of``).

A margin is a node's usage less its nominal, less the needed usage of the victims waiting
under it (SEMANTICS §4, the lender test asked on a lower bound). Each node's margins are one
row, a number per needed flavor-resource at its place in the attempt's ``places``; a
candidate's held flavor-resources come with their places. By hand: a cohort ``c`` under the
root (off the preemptor's path) holding queue ``q``, two needed flavor-resources.
"""

from __future__ import annotations

from preemptd.framework.model import FR, FlavorQuotas, QueueSpec, ResourceGroup, ResourceQuota
from preemptd.framework.preemption.margins import Margins, gives, held_of, keep, margin_row
from preemptd.framework.quota import Accounting, QuotaTree
from preemptd.framework.testing import cohort

CPU: FR = ("default", "cpu")
MEM: FR = ("default", "memory")


def _queue(name: str, parent: str, cpu: int, memory: int) -> QueueSpec:
    quotas = {"cpu": ResourceQuota(cpu * 1000), "memory": ResourceQuota(memory * 1000)}
    return QueueSpec(name, parent, (ResourceGroup(("cpu", "memory"), (FlavorQuotas("default", quotas),)),))


def _setup() -> tuple[Accounting, QuotaTree]:
    tree = QuotaTree(
        {
            spec.name: spec
            for spec in (
                cohort("root"),
                _queue("p", "root", 4, 4),
                cohort("c", "root"),
                _queue("q", "c", 2, 4),
                _queue("r", "c", 2, 2),
            )
        }
    )
    accounting = Accounting(tree)
    # q uses 1 core above its nominal and its memory exactly; r 1 core under, 1 GiB above.
    accounting.add_all(tree.nodes["q"], {CPU: 3000, MEM: 4000})
    accounting.add_all(tree.nodes["r"], {CPU: 1000, MEM: 3000})
    return accounting, tree


def test_a_row_holds_usage_less_nominal_at_each_place() -> None:
    accounting, tree = _setup()
    q, c = tree.nodes["q"], tree.nodes["c"]
    places = ((0, MEM), (1, CPU))
    # q: memory 4000 - 4000, cpu 3000 - 2000; c: memory 7000 - 6000, cpu 4000 - 4000.
    assert margin_row(accounting.usage[q.index], q.subtree, places) == [0, 1000]
    assert margin_row(accounting.usage[c.index], c.subtree, places) == [1000, 0]
    assert held_of({CPU: 500}, places) == [(1, CPU)]
    assert held_of({MEM: 1, CPU: 2}, places) == [(0, MEM), (1, CPU)]


def test_the_test_reads_each_held_place_on_every_node_of_the_chain() -> None:
    """A victim of q passes only if q and c are each above nominal on something it holds."""
    accounting, tree = _setup()
    q, c = tree.nodes["q"], tree.nodes["c"]
    chain = (q, c)
    places = ((0, MEM), (1, CPU))
    margins: Margins = {}
    # Memory only: q is at its nominal memory (0): refused.
    assert not gives(accounting.usage, chain, held_of({MEM: 1000}, places), places, margins)
    # Cores only: q above (1000) but c at its nominal cores (0): refused.
    assert not gives(accounting.usage, chain, held_of({CPU: 1000}, places), places, margins)
    # Both: q above on cores, c above on memory: passes.
    both = {CPU: 1000, MEM: 500}
    assert gives(accounting.usage, chain, held_of(both, places), places, margins)
    assert margins == {q: [0, 1000], c: [1000, 0]}
    # It waits: its usage comes off both rows at each place.
    keep(accounting.usage, chain, both, held_of(both, places), places, margins)
    assert margins == {q: [-500, 0], c: [500, -1000]}
    # Now q is at or below nominal on both: the same request is refused on the lower bound.
    assert not gives(accounting.usage, chain, held_of(both, places), places, margins)


def test_keep_makes_the_rows_it_does_not_find() -> None:
    accounting, tree = _setup()
    r, c = tree.nodes["r"], tree.nodes["c"]
    places = ((0, CPU), (1, MEM))
    margins: Margins = {}
    usage = {MEM: 1000}
    keep(accounting.usage, (r, c), usage, held_of(usage, places), places, margins)
    # r: cpu 1000 - 2000, memory 3000 - 2000 - 1000; c: cpu 4000 - 4000, memory 7000 - 6000 - 1000.
    assert margins == {r: [-1000, 0], c: [0, 0]}
