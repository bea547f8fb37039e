"""The model is read-only all the way down (issue: a plugin's mutation at
``session_close`` made the next cycle admit 120 cpu on a 100-cpu quota).

The daemon keeps one set of model objects in its caches and builds every session's
snapshot from them, so each test runs two sessions over snapshots built from the
same inventory, as the daemon does: the first with a plugin that tries to change
what it was handed at ``session_close``, the second with the built-ins only.

Queue q (no parent): cpu nominal 100. ns/a (cpu 60) is admitted; ns/b (cpu 60,
same priority, created later) is pending. SEMANTICS §1: usage 60, Available
100 - 60 = 40 < 60 → b does not fit; withinQueue Never → no victims → b stays
pending (PreemptionNoCandidates or WaitingForQuota), nothing admitted.
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from preemptd.framework.model import FrozenDict, PodSet
from preemptd.framework.run import run_session
from preemptd.framework.session import Registry, Session, hookimpl
from preemptd.framework.snapshot import Snapshot
from preemptd.framework.testing import inventory, queue, workload
from preemptd.plugins import cohort_reclaim, priority


def _inventory() -> Any:
    return inventory(
        [queue("q", cpu=100)],
        [
            workload("a", "q", 60, created=1, admitted=True),
            workload("b", "q", 60, created=2),
        ],
    )


def _registry(*extra: tuple[str, object, None]) -> Registry:
    return Registry([("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None), *extra])


def _summary(decisions: Any) -> tuple[list[str], list[str]]:
    return [a.workload for a in decisions.admitted], [p.workload for p in decisions.pending]


def _free_quota(session: Session) -> None:
    session.snapshot.workloads["ns/a"].pod_sets[0].requests["cpu"] = 0


def _move_flavor(session: Session) -> None:
    admission = session.snapshot.workloads["ns/a"].admission
    assert admission is not None
    admission.pod_sets[0].flavors["cpu"] = "elsewhere"


def _clear_usage(session: Session) -> None:
    session.snapshot.usage["ns/a"].clear()


def _drop_workload(session: Session) -> None:
    del session.snapshot.workloads["ns/a"]


def _extend_admitted(session: Session) -> None:
    session.snapshot.admitted.append(session.snapshot.workloads["ns/b"])  # type: ignore[attr-defined]


def _scan(session: Session) -> None:
    session.snapshot.workloads["ns/a"].flavor_scan.update({"main": {"default": 1}})


@pytest.mark.parametrize(
    "mutate",
    [_free_quota, _move_flavor, _clear_usage, _drop_workload, _extend_admitted, _scan],
    ids=lambda f: f.__name__.strip("_"),
)
def test_a_mutation_at_session_close_fails_and_the_next_session_is_unaffected(
    mutate: Callable[[Session], None],
) -> None:
    """The write raises in the plugin's hook (its failure, counted) and the next session over the same objects decides as before: b still pending, nothing admitted."""
    inv = _inventory()
    plugin = SimpleNamespace(session_close=hookimpl(lambda session: mutate(session)))
    first = _registry(("meddler", plugin, None))
    decisions = run_session(Snapshot.build(inv, now=1_000), first)
    assert _summary(decisions) == ([], ["ns/b"])
    assert first.failures["meddler"] == 1
    assert first.errors[0].hook == "session_close"
    assert first.errors[0].message.startswith(("TypeError", "AttributeError"))

    second = run_session(Snapshot.build(inv, now=2_000), _registry())
    assert _summary(second) == ([], ["ns/b"])


def test_model_mappings_are_read_only_but_copy_pickle_and_compare_like_dicts() -> None:
    """A record given a plain dict keeps a read-only copy; equality, pickling and copying still work."""
    requests = {"cpu": 1000}
    pod_set = PodSet("main", 1, requests)
    requests["cpu"] = 5  # the caller's dict is not the record's
    assert pod_set.requests == {"cpu": 1000}
    assert type(pod_set.requests) is FrozenDict
    for write in (
        lambda m: m.__setitem__("cpu", 0),
        lambda m: m.pop("cpu"),
        lambda m: m.setdefault("gpu", 1),
        lambda m: m.update(gpu=1),
        lambda m: m.clear(),
        lambda m: m.popitem(),
    ):
        with pytest.raises(TypeError):
            write(pod_set.requests)
    with pytest.raises(TypeError):
        merged = pod_set.requests
        merged |= {"gpu": 1}
    assert pickle.loads(pickle.dumps(pod_set)) == pod_set
    assert copy.deepcopy(pod_set) == pod_set
    assert pod_set.requests | {"gpu": 1} == {"cpu": 1000, "gpu": 1}
