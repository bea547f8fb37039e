"""Builders and ``open_session`` for tests, benchmarks and third-party plugin authors.

A plugin is tested the way the scheduler runs it: objects in (CONTRACT §1 dicts,
as a snapshot file holds them), one session over them with the plugin enabled,
decisions out. ::

    from preemptd.framework.testing import decide, open_session

    session = open_session(objects, [("protect-namespace", plugin, Config(["prod"]))], now)
    decisions = decide(session)

The model builders (:func:`queue`, :func:`cohort`, :func:`workload`,
:func:`inventory`) make small records directly, for tests of one rule of the
quota tree or the accounting. This is the top floor of ``framework/``: it may
use every other one, and nothing in the package uses it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from random import Random
from typing import Any

from .actions import ACTIONS
from .decisions import Decisions, number_pending
from .model import (
    Admission,
    Flavor,
    FlavorQuotas,
    PodSet,
    PodSetAdmission,
    PreemptionPolicy,
    QueueSpec,
    ResourceGroup,
    ResourceQuota,
    WithinQueue,
    Workload,
)
from .objects import Inventory, parse_objects
from .quantity import parse_timestamp
from .session import KNOWN_ACTIONS, Registry, Session
from .snapshot import Snapshot

__all__ = ["cohort", "decide", "inventory", "open_session", "queue", "random_queues", "random_workloads", "snapshot", "workload"]

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


def random_workloads(rnd: Random, queues: Sequence[str], most: int, admitted_share: float) -> list[Workload]:
    """From 4 to ``most`` one-pod workloads ``w00``, ``w01``, … on random ``queues`` (cpu 0.5
    to 3), each admitted with odds ``admitted_share`` (priority 0 to 3, admitted at a random
    time up to 90 s) or else pending at priority 1 to 5, so that pending ones may preempt."""
    workloads = []
    for i in range(rnd.randint(4, most)):
        admitted = rnd.random() < admitted_share
        workloads.append(
            workload(
                f"w{i:02d}",
                rnd.choice(queues),
                rnd.choice([0.5, 1, 1, 2, 3]),
                priority=rnd.randint(0, 3) if admitted else rnd.randint(1, 5),
                created=rnd.randint(0, 50),
                admitted=admitted,
                admitted_at=rnd.randint(0, 90_000) if admitted else None,
            )
        )
    return workloads


def random_queues(
    rnd: Random,
    parents: Sequence[str],
    most: int,
    *,
    cpu: int = 8,
    lending: Sequence[float | None] = (None,),
    borrowing: Sequence[float | None] | None = None,
    within: Sequence[WithinQueue] = ("Never", "LowerPriority"),
) -> list[QueueSpec]:
    """From 2 to ``most`` leaf queues ``q0``, ``q1``, … under random ``parents``, each with
    a nominal of 0 to ``cpu`` cores, a borrowing limit drawn from ``borrowing`` (none when
    not given), a lending limit drawn from ``lending``, and a random preemption policy (``withinQueue`` from
    ``within``; ``reclaimWithinCohort`` LowerPriority or Any; ``borrowWithinCohort`` Never
    or LowerPriority)."""
    return [
        queue(
            f"q{i}",
            rnd.choice(parents),
            cpu=rnd.randint(0, cpu),
            borrowing_limit=rnd.choice(borrowing) if borrowing is not None else None,
            lending_limit=rnd.choice(lending),
            preemption=PreemptionPolicy(
                within_queue=rnd.choice(within),
                reclaim_within_cohort=rnd.choice(["LowerPriority", "Any"]),
                borrow_within_cohort=rnd.choice(["Never", "LowerPriority"]),
            ),
        )
        for i in range(rnd.randint(2, most))
    ]


def inventory(queues: list[QueueSpec], workloads: list[Workload], flavors: tuple[str, ...] = ("default",)) -> Inventory:
    inv = Inventory()
    for f in flavors:
        inv.flavors[f] = Flavor(f)
    inv.queues = {q.name: q for q in queues}
    inv.workloads = {w.key: w for w in workloads}
    return inv


Plugin = tuple[str, object, object | None]
"""A plugin as the registry takes it: (name, module or object with hooks, config or None)."""


def snapshot(objects: Iterable[Mapping[str, Any]] | Inventory, now: int | str) -> Snapshot:
    """The snapshot of ``objects`` (CONTRACT §1 dicts, or an :class:`Inventory`) at ``now``
    (epoch milliseconds or RFC 3339). An object that does not parse is an error here,
    naming the object and the field: a test should not run on half its input."""
    if isinstance(objects, Inventory):
        parsed = objects
    else:
        parsed = parse_objects(("<objects>", obj) for obj in objects)
        if parsed.problems:
            raise ValueError("invalid objects:\n" + "\n".join(map(str, parsed.problems)))
    moment = parse_timestamp(now) if isinstance(now, str) else now
    return Snapshot.build(parsed, now=moment)


def open_session(
    objects: Iterable[Mapping[str, Any]] | Inventory,
    plugins: Sequence[Plugin],
    now: int | str,
    *,
    actions: Sequence[str] = ("allocate", "preempt"),
) -> Session:
    """An open session over ``objects`` at ``now`` with ``plugins`` enabled, in order.

    The session is open (every plugin's ``session_open`` has run): call its methods
    (``is_preemptible``, ``workload_key``, ...) directly, or :func:`decide` to run the
    actions and close it."""
    session = Session(snapshot(objects, now), Registry(plugins), actions=actions)
    session.open()
    return session


def decide(session: Session) -> Decisions:
    """Run the session's actions and close it: the decisions ``preemptd cycle`` would print."""
    assert set(session.actions) <= set(KNOWN_ACTIONS)
    for name, action in ACTIONS.items():
        if name in session.actions:
            action(session)
    decisions = session.close()
    number_pending(decisions, session.snapshot.pending_by_queue, session.workload_key)
    return decisions
