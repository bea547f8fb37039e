"""The words of a victim search (framework/preemption/search.py): its first explanation
line counts its candidates and names the flavor-resources it needs. The words for a set
of needed flavor-resources are made once per session and kept by that set: a search
needing another set of the same size is named by its own.
"""

from __future__ import annotations

from preemptd.framework.model import PreemptionPolicy
from preemptd.framework.run import run_session
from preemptd.framework.session import Registry
from preemptd.framework.testing import inventory, queue, snapshot, workload
from preemptd.plugins import cohort_reclaim, priority

NOW = 1_000_000


def test_each_search_names_its_own_needed_flavor_resources() -> None:
    """Queue ``a`` has 2 cores of flavor ``x``, queue ``b`` 2 cores of flavor ``y``; each
    runs a low-priority 2-core workload and has a high-priority 2-core one pending. Each
    pending one preempts its queue's runner: its search has one candidate and needs cpu
    of its own queue's flavor (SEMANTICS §4), which its first line names."""
    policy = PreemptionPolicy(within_queue="LowerPriority")
    parsed = inventory(
        [queue("a", cpu=2, flavor="x", preemption=policy), queue("b", cpu=2, flavor="y", preemption=policy)],
        [
            workload("a-low", "a", 2, priority=0, created=1, admitted=True, flavor="x"),
            workload("b-low", "b", 2, priority=0, created=2, admitted=True, flavor="y"),
            workload("a-high", "a", 2, priority=9, created=3),
            workload("b-high", "b", 2, priority=9, created=4),
        ],
        flavors=("x", "y"),
    )
    registry = Registry([("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)])
    decisions = run_session(snapshot(parsed, NOW), registry, actions=("allocate", "preempt"))
    assert sorted(p.workload for p in decisions.preempted) == ["ns/a-low", "ns/b-low"]
    a_lines = decisions.explanations["ns/a-high"]
    b_lines = decisions.explanations["ns/b-high"]
    assert "1 candidate(s) use the needed cpu in flavor x" in a_lines
    assert "1 candidate(s) use the needed cpu in flavor y" in b_lines
    assert not any("flavor y" in line for line in a_lines)
    assert not any("flavor x" in line for line in b_lines)
