"""The lender test of a lazy walk asked on margins (framework/preemption/margins.py).

A margin is a node's usage less its nominal, read once, less the needed usage of the
victims accepted under it since. Held to the lower bound it stands for (the node's usage
less the needed usage waiting under it, ``waiting.lender_gives_anyway``) and, with nothing
waiting, to the exact test (``quota.lender_may_give``), along random walks over random
trees with two needed flavor-resources: victims accepted under random queues, some taken
from the quota per top (their margins dropped), all taken at once now and then.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import FR, FlavorQuotas, QueueSpec, ResourceGroup, ResourceQuota
from preemptd.framework.preemption.margins import Margins, drop, gives, held_of, keep
from preemptd.framework.preemption.waiting import Chain, Pending, lender_gives_anyway, remember
from preemptd.framework.quota import Accounting, QuotaNode, QuotaTree, lender_may_give
from preemptd.framework.session import CLASS_OTHER_QUEUE, Candidate
from preemptd.framework.testing import cohort, workload

CPU: FR = ("default", "cpu")
MEM: FR = ("default", "memory")



def forget(waiting: list[Candidate], chains: dict[QuotaNode, Chain], pending: Pending) -> None:
    """The lower bound's sums of the nodes under one top dropped when its waiting victims
    are taken from the quota: only they are in those sums."""
    for victim in waiting:
        for node in chains[victim.leaf]:
            pending.pop(node, None)

def _queue(name: str, parent: str, cpu: int, memory: int, lending: int | None) -> QueueSpec:
    quotas = {
        "cpu": ResourceQuota(cpu * 1000, None, None if lending is None else lending * 1000),
        "memory": ResourceQuota(memory * 1000),
    }
    groups = (ResourceGroup(("cpu", "memory"), (FlavorQuotas("default", quotas),)),)
    return QueueSpec(name, parent, groups)


def _tree(rng: random.Random) -> QuotaTree:
    """``root`` over the preemptor's queue ``p`` and cohorts ``c0``..: queues under them."""
    specs = [cohort("root"), _queue("p", "root", 4, 4, None)]
    parents = ["root"]
    for i in range(rng.randint(1, 3)):
        specs.append(cohort(f"c{i}", rng.choice(parents)))
        parents.append(f"c{i}")
    for i in range(rng.randint(2, 6)):
        cpu, memory, lending = rng.randint(0, 4), rng.randint(0, 4), rng.choice([None, 0, 1])
        specs.append(_queue(f"q{i}", rng.choice(parents[1:]), cpu, memory, lending))
    return QuotaTree({spec.name: spec for spec in specs})


def _chain(queue: QuotaNode, path: frozenset[QuotaNode]) -> tuple[QuotaNode, ...]:
    found = []
    node: QuotaNode | None = queue
    while node is not None and node not in path:
        found.append(node)
        node = node.parent
    return tuple(found)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_margins_answer_as_the_lower_bound_of_the_waiting_victims_and_exactly_with_none(seed: int) -> None:
    rng = random.Random(seed)
    tree = _tree(rng)
    accounting = Accounting(tree)
    queues = [node for node in tree.leaves.values() if node.name != "p"]
    for queue in queues:
        accounting.add_all(queue, {CPU: rng.randrange(0, 9000, 500), MEM: rng.randrange(0, 9000, 500)})
    leaf = tree.nodes["p"]
    path = frozenset(leaf.path())
    needed = frozenset(rng.sample([CPU, MEM], rng.randint(1, 2)))
    chains = {queue: _chain(queue, path) for queue in queues}
    places = tuple(enumerate(needed))
    margins: Margins = {}
    pending: dict[QuotaNode, dict[FR, int]] = {}
    others: dict[QuotaNode, list[Candidate]] = {}
    asked = 0
    for i in range(rng.randint(1, 40)):
        queue = rng.choice(queues)
        chain = chains[queue]
        usage = {fr: rng.randrange(0, 3000, 500) for fr in rng.sample([CPU, MEM], rng.randint(1, 2))}
        held = [fr for fr in needed if fr in usage]
        top = chain[-1]
        answer = gives(accounting.usage, chain, held_of(usage, places), places, margins)
        assert answer == lender_gives_anyway(accounting.usage, chain, held, pending)
        if not others.get(top):
            assert answer == lender_may_give(accounting, leaf, queue, usage, needed, path)
            asked += 1
        if answer:
            victim = Candidate(workload(f"v{i}", queue.name, 1), queue, usage, "", CLASS_OTHER_QUEUE)
            others.setdefault(top, []).append(victim)
            keep(accounting.usage, chain, usage, held_of(usage, places), places, margins)
            remember(chain, usage, held, pending)
        if rng.random() < 0.2 and others:
            # The victims under one top are taken from the quota.
            top = rng.choice(list(others))
            waiting = others.pop(top)
            drop(waiting, chains, margins)
            forget(waiting, chains, pending)
            for victim in waiting:
                accounting.remove_all(victim.leaf, victim.usage)
        elif rng.random() < 0.1:
            # Every waiting victim is taken.
            for waiting in others.values():
                for victim in waiting:
                    accounting.remove_all(victim.leaf, victim.usage)
            others.clear()
            margins.clear()
            pending.clear()
    assert asked
