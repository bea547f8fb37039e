"""A flavor-resource is one tuple object (``quota.fr_of``) wherever the quota keys by it.

The queues' quota figures and kept levels, the requests the flavor checks build, the
snapshot's usage maps and the usage of the assignments the flavor scans make all hold the
same tuple, so a look-up with one of them is found on identity. What they answer is
unchanged: usage charged under an equal tuple made elsewhere counts as before.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from preemptd.framework import evaluate_flavor
from preemptd.framework.flavors import default_assign
from preemptd.framework.model import (
    Flavor,
    FlavorQuotas,
    PodSet,
    QueueSpec,
    ResourceGroup,
    ResourceQuota,
    Workload,
)
from preemptd.framework.objects import Inventory
from preemptd.framework.quota import Accounting, QuotaTree, fr_of
from preemptd.framework.session import Assignment, Registry, Session
from preemptd.framework.testing import snapshot
from preemptd.plugins import flavor_fungibility

from benchmarks.generate import NOW_MS, generate_saturated


def _fresh(flavor: str, resource: str) -> tuple[str, str]:
    """An equal tuple that is another object, of equal strings that are other objects."""
    return ("".join(list(flavor)), "".join(list(resource)))


def _spec(name: str, parent: str | None, nominal: int, lending: int | None = None) -> QueueSpec:
    quotas = {"cpu": ResourceQuota(nominal=nominal, lending_limit=lending)}
    group = ResourceGroup(covered=("cpu",), flavors=(FlavorQuotas("default", quotas),))
    return QueueSpec(name=name, parent=parent, resource_groups=(group,))


def _tree() -> QuotaTree:
    # root (cohort) > a (4 cpu, 1 lent at most: 3 of reserve), b (6 cpu)
    return QuotaTree(
        {
            "root": QueueSpec(name="root", parent=None),
            "a": _spec("a", "root", 4000, lending=1000),
            "b": _spec("b", "root", 6000),
        }
    )


def test_one_tuple_per_flavor_resource() -> None:
    made, other = _fresh("default", "cpu"), _fresh("default", "cpu")
    assert made == other and made is not other
    assert fr_of(*made) is fr_of(*other) is fr_of("default", "cpu")
    assert fr_of("default", "cpu") is not fr_of("default", "memory")


def test_quota_figures_key_by_the_shared_tuple() -> None:
    tree = _tree()
    for node in tree.nodes.values():
        for figures in (node.nominal, node.subtree, node.guaranteed, node.potential, node.lending_limit):
            assert all(key is fr_of(*key) for key in figures)
    assert tree.nodes["a"].guaranteed and tree.nodes["root"].subtree


def test_usage_charged_under_an_equal_tuple_counts_as_before() -> None:
    tree = _tree()
    a, b, root = tree.nodes["a"], tree.nodes["b"], tree.nodes["root"]
    accounting = Accounting(tree)
    cpu = fr_of("default", "cpu")
    # SEMANTICS §1: a uses 5 cpu; its reserve of 3 holds 3, the 2 above go up to root.
    accounting.add_all(a, {_fresh("default", "cpu"): 5000})
    accounting.add(b, _fresh("default", "cpu"), 1000)
    assert [accounting.used(n, cpu) for n in (a, b, root)] == [5000, 1000, 3000]
    # root's quota: 6 of b's and 1 a lends = 7 cpu, 3 used: b may take 4 more; a has used
    # up its reserve of 3, so it too may take only the 4 root has left.
    assert accounting.available(b, cpu) == 4000
    assert accounting.available(a, cpu) == 4000
    assert accounting.fit_level(b, cpu, 4000) == 0
    assert accounting.fit_level(b, cpu, 4001) == -1
    accounting.remove_all(a, {_fresh("default", "cpu"): 5000})
    assert [accounting.used(n, cpu) for n in (a, b, root)] == [0, 1000, 1000]


def test_the_flavor_checks_request_under_the_shared_tuple() -> None:
    snap = snapshot(generate_saturated(1, queues=10, workloads=300), NOW_MS)
    session = Session(snap, Registry([]))
    session.open()
    workload = next(w for ws in snap.pending_by_queue.values() for w in ws)
    leaf = snap.tree.leaves[workload.queue]
    group = leaf.spec.resource_groups[0]
    spec = workload.pod_sets[0]
    option = evaluate_flavor(session, workload, leaf, spec, spec.count, group, group.flavors[0].flavor, {})
    assert option.usage
    assert all(key is fr_of(*key) for key in option.usage)
    assert leaf.levels and all(key is fr_of(*key) for key in leaf.levels)


def test_the_snapshots_usage_maps_key_by_the_shared_tuple() -> None:
    # Every admitted workload's usage and every queue's charged usage is keyed by the one
    # tuple, so the accounting's look-ups with the quota's keys match on identity.
    snap = snapshot(generate_saturated(1, queues=10, workloads=300), NOW_MS)
    admitted = [w for ws in snap.admitted_by_queue.values() for w in ws]
    assert admitted
    for workload in admitted:
        usage = snap.usage[workload.key]
        assert usage and all(key is fr_of(*key) for key in usage)
    # SEMANTICS §1: a workload's usage is Σ count × requests on its admitted flavors.
    workload = admitted[0]
    assert workload.admission is not None
    want: dict[tuple[str, str], int] = {}
    for psa in workload.admission.pod_sets:
        spec = next(ps for ps in workload.pod_sets if ps.name == psa.name)
        for resource, amount in spec.requests.items():
            if resource in psa.flavors and amount:
                key = (psa.flavors[resource], resource)
                want[key] = want.get(key, 0) + amount * psa.count
    assert dict(snap.usage[workload.key]) == want


_GI = 1 << 30


def _two_pod_sets_session(plugins: Registry) -> tuple[Session, Workload]:
    """Queue q: one group of cpu and memory over flavors a and b, 8 cores and 16 Gi each;
    workload w: podSet main (2 pods of 1.5 cores and 2 Gi) and podSet aux (1 pod of 0.5 core)."""
    quotas = {"cpu": ResourceQuota(nominal=8000), "memory": ResourceQuota(nominal=16 * _GI)}
    group = ResourceGroup(covered=("cpu", "memory"), flavors=(FlavorQuotas("a", quotas), FlavorQuotas("b", quotas)))
    pod_sets = (PodSet("main", 2, {"cpu": 1500, "memory": 2 * _GI}), PodSet("aux", 1, {"cpu": 500}))
    w = Workload("ns", "w", "q", pod_sets)
    inv = Inventory()
    inv.flavors = {"a": Flavor("a"), "b": Flavor("b")}
    inv.queues = {"q": QueueSpec(name="q", parent=None, resource_groups=(group,))}
    inv.workloads = {w.key: w}
    session = Session(snapshot(inv, NOW_MS), plugins)
    session.open()
    return session, w


def _default(session: Session, w: Workload) -> Assignment:
    leaf = session.leaf(w.queue)
    assert leaf is not None
    return default_assign(session, w, leaf)


def _fungibility(session: Session, w: Workload) -> Assignment:
    found = flavor_fungibility.assign_flavors(session, w)
    assert found is not None
    return found


@pytest.mark.parametrize("assign", [_default, _fungibility], ids=["default", "flavor-fungibility"])
def test_an_assignments_usage_keys_by_the_shared_tuple(assign: Callable[[Session, Workload], Assignment]) -> None:
    plugins = Registry([(flavor_fungibility.NAME, flavor_fungibility, None)] if assign is _fungibility else [])
    session, w = _two_pod_sets_session(plugins)
    assignment = assign(session, w)
    # SEMANTICS §1, §3: both podSets fit flavor a, the first listed; a podSet's usage is
    # count × requests per flavor-resource, the assignment's their sum.
    assert [ps.flavors for ps in assignment.pod_sets] == [{"cpu": "a", "memory": "a"}, {"cpu": "a"}]
    main, aux = (ps.usage for ps in assignment.pod_sets)
    assert main == {("a", "cpu"): 3000, ("a", "memory"): 4 * _GI}
    assert aux == {("a", "cpu"): 500}
    assert assignment.usage == {("a", "cpu"): 3500, ("a", "memory"): 4 * _GI}
    for usage in (main, aux, assignment.usage):
        assert all(key is fr_of(*key) for key in usage)
