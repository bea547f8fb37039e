"""Small builders for model records, shared by unit tests."""

from __future__ import annotations

from preemptd.framework.model import (
    Admission,
    Flavor,
    FlavorQuotas,
    PodSet,
    PodSetAdmission,
    PreemptionPolicy,
    QueueSpec,
    ResourceGroup,
    ResourceQuota,
    Workload,
)
from preemptd.framework.objects import Inventory

_NO_PREEMPTION = PreemptionPolicy()


def queue(
    name: str,
    parent: str | None = None,
    *,
    cpu: float = 0,
    flavor: str = "default",
    borrowing_limit: float | None = None,
    lending_limit: float | None = None,
    preemption: PreemptionPolicy = _NO_PREEMPTION,
    **kw: object,
) -> QueueSpec:
    """A queue with one flavor of cpu (given in cores, stored in milli-cores)."""
    quota = ResourceQuota(
        int(cpu * 1000),
        None if borrowing_limit is None else int(borrowing_limit * 1000),
        None if lending_limit is None else int(lending_limit * 1000),
    )
    groups = (ResourceGroup(("cpu",), (FlavorQuotas(flavor, {"cpu": quota}),)),)
    return QueueSpec(name, parent, groups, preemption=preemption, **kw)  # type: ignore[arg-type]


def cohort(name: str, parent: str | None = None) -> QueueSpec:
    return QueueSpec(name, parent, defined=False)


def workload(
    name: str,
    queue_name: str,
    cpu: float,
    *,
    count: int = 1,
    priority: int = 0,
    created: int = 0,
    admitted: bool = False,
    admitted_at: int | None = None,
    flavor: str = "default",
    min_count: int | None = None,
    evicted: bool = False,
) -> Workload:
    pod_set = PodSet("main", count, {"cpu": int(cpu * 1000)}, min_count=min_count)
    admission = (
        Admission(queue_name, (PodSetAdmission("main", count, {"cpu": flavor}),)) if admitted else None
    )
    return Workload(
        "ns",
        name,
        queue_name,
        (pod_set,),
        priority=priority,
        created=created,
        admission=admission,
        admitted_at=admitted_at if admitted_at is not None else (0 if admitted else None),
        evicted=evicted,
    )


def inventory(queues: list[QueueSpec], workloads: list[Workload], flavors: tuple[str, ...] = ("default",)) -> Inventory:
    inv = Inventory()
    for f in flavors:
        inv.flavors[f] = Flavor(f)
    inv.queues = {q.name: q for q in queues}
    inv.workloads = {w.key: w for w in workloads}
    return inv
