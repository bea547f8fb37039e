"""After a take, the candidate index patches a queue's list instead of building it again.

A take changes the units of the workload taken from and of no other; the index keeps,
per list, each workload's units in the list's order, and replaces only the segments of
the workloads taken from since the list was made. These tests pin that the patched list
is the one a build would give (same units, same order, same priority bounds) after any
sequence of takes, whole or pod by pod, and that no build happens for a patched class.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from preemptd.framework import (
    CLASS_OTHER_QUEUE,
    CLASS_SAME_QUEUE,
    IN_COHORT_RECLAIM,
    IN_QUEUE,
    queue_units,
)
from preemptd.framework.preemption import unitindex
from preemptd.framework.session import Candidate, Session, Taken
from preemptd.framework.testing import cohort, inventory, open_session, queue, workload
from preemptd.plugins import cohort_reclaim, priority

PLUGINS = [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)]
NOW = 1_000_000
_BUILD = unitindex._build  # a fresh build, whatever a test does to the module
CLASSES = [
    {"reason": IN_QUEUE, "group": CLASS_SAME_QUEUE},
    {"reason": IN_COHORT_RECLAIM, "group": CLASS_OTHER_QUEUE, "only_within_nominal": True},
]


def _session(seed: int) -> Session:
    rng = random.Random(seed)
    queues = [cohort("all"), queue("a", "all", cpu=4), queue("b", "all", cpu=4)]
    running = []
    for i in range(14):
        count = rng.choice([1, 1, 3])
        running.append(
            workload(
                f"w{i}", rng.choice(["a", "b"]), 1, count=count, min_count=1 if count > 1 else None,
                priority=rng.randrange(4), created=rng.randrange(5), admitted=True,
            )
        )
    return open_session(inventory(queues, running), PLUGINS, NOW)


def take_at_random(session: Session, leaf: Any, rng: random.Random) -> None:
    """Take the first unit left of a random running workload of ``leaf``, as a walk would."""
    offered: dict[str, Candidate] = {}
    for unit in queue_units(session, leaf, **CLASSES[0]).units:
        if not unit.evicted:
            offered.setdefault(unit.key, unit)  # a workload's first unit left, as a walk takes them
    if offered:
        _take(session, offered[rng.choice(sorted(offered))])


def _take(session: Session, unit: Candidate) -> None:
    """What the rounds record when a preemptor takes ``unit`` (actions/allocate.py)."""
    session.relied[unit.unit] = unit
    taken = session.taken.setdefault(unit.key, Taken(preemptor="ns/p", reason=unit.reason))
    if unit.count is None:
        taken.whole = True
    else:
        taken.pods += unit.count
        taken.pod_names.extend(pod.key for pod in unit.pods)
    session.unit_cache.pop(unit.key, None)


def _built(session: Session, name: str, cls: dict[str, Any]) -> tuple[list[Candidate], tuple[list[int], list[int]]]:
    leaf = session.snapshot.tree.leaves[name]
    fresh = _BUILD(
        session, leaf, cls["reason"], cls["group"], cls.get("only_within_nominal", False), False,
        session.snapshot.admitted_by_queue.get(name, ()),
    )
    return fresh.units, (fresh.priorities, fresh.created)


@pytest.mark.parametrize("seed", range(10))
def test_a_patched_list_is_the_list_a_build_gives_after_every_take(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = _session(seed)
    rng = random.Random(seed)
    leaves = session.snapshot.tree.leaves
    for name in ("a", "b"):
        for cls in CLASSES:
            queue_units(session, leaves[name], **cls)
    builds: list[str] = []
    real = _BUILD

    def counting(*args: Any, **kwargs: Any) -> Any:
        builds.append(args[1].name)
        return real(*args, **kwargs)

    monkeypatch.setattr(unitindex, "_build", counting)
    for _ in range(8):
        take_at_random(session, leaves[rng.choice(["a", "b"])], rng)
        for queue_name in ("a", "b"):
            for cls in CLASSES:
                found = queue_units(session, leaves[queue_name], **cls)
                units, bounds = _built(session, queue_name, cls)
                assert found.units == units and (found.priorities, found.created) == bounds, (queue_name, cls)
    assert builds == [], "every list after a take is patched, none built again"
