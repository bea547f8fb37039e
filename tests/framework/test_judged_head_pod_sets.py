"""Which kept head judges a head, pod set by pod set (framework/preemption/heads.py, ``judge``).

A head is judged only by a kept head with the same pod sets that is no weaker. When both
have one pod set, ``judge`` compares it field by field (count and requests first, then the
name, the min count, the node selector and the tolerations) and reads no other test of an
elastic head: a head with a min count is judged by nobody, as no kept head has one. With
more pod sets it compares them whole. These tests hold ``judge`` to the judgement written
out in full (``test_judged_heads._written_out``: every kept head tried in order, its pod
sets compared whole, the head's own ``_judgeable``) on generated queues that mix plain heads
with elastic ones and ones of two pod sets, all of the same few shapes, and hold the whole
session (decisions, explanations, flavor scans, vetoes, counters) to the one whose every
head is judged that way through ``nominate``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from preemptd.framework.model import PodSet, PreemptionPolicy, Workload
from preemptd.framework.preemption import heads
from preemptd.framework.quota import QuotaNode
from preemptd.framework.session import Assignment, Registry, Session
from preemptd.framework.testing import cohort, inventory, queue, snapshot, workload
from preemptd.plugins import cohort_reclaim, flavor_fungibility, min_runtime, priority

from tests.framework.test_judged_heads import _outputs, _through_nominate, _written_out

_PLUGINS = (
    ("priority", priority, None),
    ("cohort-reclaim", cohort_reclaim, None),
    ("min-runtime", min_runtime, None),
    ("flavor-fungibility", flavor_fungibility, None),
)


def _registry() -> Registry:
    return Registry(list(_PLUGINS))


# A pending head: cores per pod, pods, priority, creation time, elastic (min count 1), a
# second pod set.
_head = st.tuples(
    st.sampled_from([1, 2]),
    st.sampled_from([1, 2]),
    st.sampled_from([3, 4, 5]),
    st.integers(10, 60),
    st.booleans(),
    st.booleans(),
)


def _cluster(heads_of: list[list[tuple[int, int, int, int, bool, bool]]]) -> Any:
    """Queues ``q0`` .. in one cohort, each 4 cores, full with ``low`` (1 core, priority 1)
    and ``top`` (3 cores, priority 9): a pending head (priority 3 to 5) may take only
    ``low``, which frees too little for all but 1-core heads, so most searches fail and
    their heads are kept to judge the later ones of the same shape."""
    policy = PreemptionPolicy(within_queue="LowerPriority", reclaim_within_cohort="Any")
    queues = [cohort("root")]
    workloads: list[Workload] = []
    for q, pending in enumerate(heads_of):
        name = f"q{q}"
        queues.append(queue(name, "root", cpu=4, preemption=policy))
        workloads.append(workload(f"low{q}", name, 1, priority=1, created=1, admitted=True, admitted_at=0))
        workloads.append(workload(f"top{q}", name, 3, priority=9, created=2, admitted=True, admitted_at=0))
        for i, (cores, count, prio, created, elastic, second) in enumerate(pending):
            made = workload(
                f"h{q}-{i}",
                name,
                cores,
                count=count,
                priority=prio,
                created=created,
                min_count=1 if elastic and count > 1 else None,
            )
            if second:
                made = replace(made, pod_sets=(*made.pod_sets, PodSet("side", 1, {"cpu": 1000})))
            workloads.append(made)
    return inventory(queues, workloads)


def _checked(compared: list[int]) -> Any:
    """``heads.judged_head`` on each head the rounds nominate, held to ``_written_out`` on
    the same state (what the latter counts taken back: the session counts one judgement)."""

    def judged(session: Session, leaf: QuotaNode, workload: Workload) -> Assignment | None:
        fast = heads.judged_head(session, leaf, workload)
        counters = session.counters
        before = counters.judged, counters.dominated, heads.tally(session).answered
        full = _written_out(session, leaf, workload)
        counters.judged, counters.dominated, heads.tally(session).answered = before
        assert fast == full
        compared[0] += fast is not None
        return fast

    return judged


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(_head, min_size=2, max_size=12), min_size=1, max_size=3))
def test_heads_of_mixed_pod_sets_are_judged_as_the_written_out_judgement(
    heads_of: list[list[tuple[int, int, int, int, bool, bool]]],
) -> None:
    parsed = _cluster(heads_of)
    fast = _outputs(lambda: snapshot(parsed, 100_000), _registry, ("allocate", "preempt"))
    compared = [0]
    with pytest.MonkeyPatch.context() as patch:
        _through_nominate(patch, _checked(compared))
        checked = _outputs(lambda: snapshot(parsed, 100_000), _registry, ("allocate", "preempt"))
    with pytest.MonkeyPatch.context() as patch:
        _through_nominate(patch, _written_out)
        full = _outputs(lambda: snapshot(parsed, 100_000), _registry, ("allocate", "preempt"))
    assert fast == full
    assert checked == full
    assert fast[4]["heads-judged"] == compared[0]


def test_an_elastic_head_of_a_kept_heads_shape_is_not_judged_and_a_plain_one_is() -> None:
    """By hand: ``x`` (2 pods of 2 cores, priority 5) fails its search and is kept; ``e``
    (the same pod set with min count 1, priority 4) is no stronger but elastic: it is
    nominated (and tried with fewer pods); ``p`` (the same pod set, priority 4) is judged
    with ``x``; ``s`` (the same pod set and a second one) is not."""
    pending = [(2, 2, 5, 10, False, False), (2, 2, 4, 20, True, False), (2, 2, 4, 30, False, False)]
    pending.append((2, 2, 4, 40, False, True))
    parsed = _cluster([pending])
    decisions_json, explanations, _, _, counters = _outputs(
        lambda: snapshot(parsed, 100_000), _registry, ("allocate", "preempt")
    )
    line = "flavors as for ns/h0-0: the same pod sets, no lower priority, the same state"
    assert explanations.get("ns/h0-2") == [line]
    assert line not in explanations.get("ns/h0-1", [])
    assert line not in explanations.get("ns/h0-3", [])
    assert counters["heads-judged"] == 1
    assert '"ns/h0-2"' in decisions_json
