"""The whole request of a workload with several podSets repeats its podSet's walk.

Queue ``a`` lists flavors ``x`` (4 cores) and ``y`` (10 cores, full: ``low`` 4, ``low2`` 4
and ``guarded`` 2, all of priority 0). ``high`` (priority 5) asks for a launcher of 1 core
and a main podSet of 8 cores. The scan puts the launcher on ``x`` (it fits) and the main
podSet on ``y`` (8 cores exceed ``x``'s 4), where its search asks about ``guarded`` first
(the newest), which a plugin refuses, and takes ``low2`` and ``low``.

The whole request asks for what the main podSet's search asked plus the launcher's core
of ``x``. When that core fits the queue's nominal, the plugins offer the whole request the
very candidates they offered the podSet, and its walk would be the same step for step:
its answer is the podSet search's, the veto counted again, without a second walk. When
the launcher's core makes the queue borrow, an attempt within nominal could fail where
the podSet's succeeded, and the level differ: the whole request is walked again. Either way the memo path
decides, explains and counts vetoes as the plain path, which walks every search.
"""

from __future__ import annotations

from typing import Any

import pytest
from preemptd.framework import hookimpl
from preemptd.framework.model import (
    Admission,
    FlavorQuotas,
    PodSet,
    PodSetAdmission,
    PreemptionPolicy,
    QueueSpec,
    ResourceGroup,
    ResourceQuota,
    Workload,
)
from preemptd.framework.preemption.walk import Walk
from preemptd.framework.run import run_session
from preemptd.framework.session import Registry
from preemptd.framework.testing import cohort, inventory, snapshot
from preemptd.plugins import flavor_fungibility, priority

_NOW = 100_000


class _Veto:
    MEMO_SAFE = True

    @staticmethod
    @hookimpl
    def is_preemptible(session: Any, action: str, preemptor: Any, preemptee: Any) -> bool | None:
        return False if preemptee.workload.key.endswith("/guarded") else None


def _admitted(name: str, cpu: int, created: int) -> Workload:
    admission = Admission("a", (PodSetAdmission("main", 1, {"cpu": "y"}),))
    pod_set = PodSet("main", 1, {"cpu": cpu * 1000})
    return Workload("ns", name, "a", (pod_set,), created=created, admission=admission, admitted_at=created)


def _cluster(x_nominal: int) -> Any:
    def quota(cores: int) -> dict[str, ResourceQuota]:
        return {"cpu": ResourceQuota(cores * 1000, None, None)}

    flavors = (FlavorQuotas("x", quota(x_nominal)), FlavorQuotas("y", quota(10)))
    queues = [
        cohort("root"),
        QueueSpec(
            "a",
            "root",
            (ResourceGroup(("cpu",), flavors),),
            preemption=PreemptionPolicy(within_queue="LowerPriority"),
        ),
    ]
    if x_nominal < 1:
        # A lender of x: the launcher's core then borrows.
        lender = (FlavorQuotas("x", quota(4)),)
        queues.append(QueueSpec("b", "root", (ResourceGroup(("cpu",), lender),)))
    high = Workload(
        "ns",
        "high",
        "a",
        (PodSet("launcher", 1, {"cpu": 1000}), PodSet("main", 1, {"cpu": 8000})),
        priority=5,
        created=10,
    )
    workloads = [_admitted("low", 4, 1), _admitted("low2", 4, 2), _admitted("guarded", 2, 3), high]
    return snapshot(inventory(queues, workloads, flavors=("x", "y")), _NOW)


def _decide(monkeypatch: pytest.MonkeyPatch, x_nominal: int, memo: bool) -> tuple[Any, int, int]:
    """The decisions (JSON and explanations), the veto count and how many walks ran."""
    attempts: list[int] = []
    real = Walk.attempt

    def counting(self: Walk, *args: Any, **kwargs: Any) -> Any:
        attempts.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Walk, "attempt", counting)
    registry = Registry(
        [("priority", priority, None), ("flavor-fungibility", flavor_fungibility, None), ("veto", _Veto(), None)]
    )
    decisions = run_session(_cluster(x_nominal), registry, memo=memo)
    monkeypatch.undo()
    return (decisions.to_json(), decisions.explanations), registry.vetoes["veto"], len(attempts)


def test_a_whole_request_adding_what_fits_takes_its_podsets_walk_without_walking_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fast, fast_vetoes, fast_walks = _decide(monkeypatch, 4, memo=True)
    plain, plain_vetoes, plain_walks = _decide(monkeypatch, 4, memo=False)
    assert fast == plain
    decisions = fast[0]
    assert '"workload": "ns/low"' in decisions and '"workload": "ns/low2"' in decisions
    assert '"workload": "ns/guarded", "preemptor"' not in decisions
    # Asked about "guarded" by the main podSet's search and by the whole request's.
    assert fast_vetoes == plain_vetoes == 2
    # The plain path walks both searches; the memo path walks the podSet's only.
    assert (plain_walks, fast_walks) == (2, 1)


def test_a_whole_request_whose_added_flavor_borrows_is_walked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    fast, fast_vetoes, fast_walks = _decide(monkeypatch, 0, memo=True)
    plain, plain_vetoes, plain_walks = _decide(monkeypatch, 0, memo=False)
    assert fast == plain
    assert fast_vetoes == plain_vetoes
    # The launcher's core of x borrows (a walk within nominal, or the level it measures,
    # could then differ from the podSet's): the whole request walks on its own.
    assert fast_walks == plain_walks == 2
