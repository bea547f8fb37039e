"""Fill-back never leaves an elastic victim below its minCount (SEMANTICS §4, "Elastic
victims"; framework/preemption/fillback.py): while the rest of a workload stays among
the victims, none of its single pods is put back, even where the quota would allow it.
"""

from __future__ import annotations

import json

from preemptd.framework.model import PreemptionPolicy, Workload
from preemptd.framework.run import run_session
from preemptd.framework.session import Registry
from preemptd.framework.testing import inventory, queue, snapshot, workload
from preemptd.plugins import cohort_reclaim, priority


def _preempted(workloads: list[Workload]) -> tuple[dict[str, int | None], str]:
    """Per preempted workload its count, and the victims p's search names."""
    parsed = inventory([queue("q", cpu=16, preemption=PreemptionPolicy(within_queue="LowerPriority"))], workloads)
    registry = Registry([("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)])
    decisions = run_session(snapshot(parsed, 100_000), registry, actions=("allocate", "preempt"))
    preempted = {p["workload"]: p.get("count") for p in json.loads(decisions.to_json())["preempted"]}
    (victims,) = [line for line in decisions.explanations["ns/p"] if line.startswith("minimal set of victims")]
    return preempted, victims


def test_single_pods_stay_victims_while_their_rest_is_needed() -> None:
    """Queue q, cpu nominal 16, full: e (priority 0, 6 pods of 1 core, minCount 3) and x
    (priority 1, 10 cores). p (priority 10) asks for 14 cores. e's units come first: its
    3 single pods above minCount, then the rest (3 pods), then x. The walk takes s1, s2,
    s3 (Available 3), the rest (6) and x (16 >= 14): it fits. Fill-back tries the rest
    first: 13 < 14, it is needed. Each single pod alone would fit (15, then 14), but put
    back while the rest goes it would leave e with 1 or 2 pods, below its minCount of 3:
    none is put back. e is evicted whole (count null) and x with it, and the search names
    all five units. (Were the single pods put back, e would still go whole with its rest,
    but the set would name three units, and their usage would weigh on the later tests.)"""
    preempted, victims = _preempted(
        [
            workload("e", "q", 1, count=6, min_count=3, admitted=True, admitted_at=10),
            workload("x", "q", 10, priority=1, admitted=True, admitted_at=20),
            workload("p", "q", 14, priority=10, created=50),
        ]
    )
    assert preempted == {"ns/e": None, "ns/x": None}
    assert victims == "minimal set of victims: " + ", ".join([*["ns/e (InQueue)"] * 4, "ns/x (InQueue)"])


def test_single_pods_go_back_once_their_rest_is_put_back() -> None:
    """As above, p asking for 11 cores: putting the rest back leaves 13 >= 11, so it
    stays; then e's single pods are each a unit of their own: s3 back (12), s2 back
    (11), s1 needed (10 < 11). Only s1 and x go: e is preempted with a count of 1 and
    keeps 5 pods."""
    preempted, victims = _preempted(
        [
            workload("e", "q", 1, count=6, min_count=3, admitted=True, admitted_at=10),
            workload("x", "q", 10, priority=1, admitted=True, admitted_at=20),
            workload("p", "q", 11, priority=10, created=50),
        ]
    )
    assert preempted == {"ns/e": 1, "ns/x": None}
    assert victims == "minimal set of victims: ns/e (InQueue), ns/x (InQueue)"
