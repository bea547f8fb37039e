"""A flavor-resource is one tuple object (``quota.fr_of``) wherever the quota keys by it.

The queues' quota figures and kept levels, the requests the flavor checks build and the
snapshot's usage maps all hold the same tuple, so a look-up with one of them is found on identity. What they answer
is unchanged: usage charged under an equal tuple made elsewhere counts as before.
"""

from __future__ import annotations

from preemptd.framework import evaluate_flavor
from preemptd.framework.model import FlavorQuotas, QueueSpec, ResourceGroup, ResourceQuota
from preemptd.framework.quota import Accounting, QuotaTree, fr_of
from preemptd.framework.session import Registry, Session
from preemptd.framework.testing import snapshot

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
