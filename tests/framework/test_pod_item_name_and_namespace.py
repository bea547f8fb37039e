"""A Pod item's namespace and name as the intake reads them after the last Pod's
(``typed.intake_key``, ``typed_pods.pod_of_item``): a namespace equal to the last Pod's
is taken as that interned text, and a name whose start is the last Pod's stem is cut
there only when the rest holds no "-". Whatever the names and namespaces that follow one
another, each Pod's stem is its name up to and with its last "-", its tail the rest, and
its namespace the interned text of its own.
"""

from __future__ import annotations

import sys
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.framework.test_pod_facts_by_pod_set import read

NAMESPACES = ["a", "b", "ab", "a-b"]
NAME = st.text(alphabet="ab-0", min_size=1, max_size=7)


def item(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"preemptd.io/workload": "w"}},
        "spec": {"nodeName": "n1", "containers": [{"resources": {"requests": {"cpu": "1"}}}]},
    }


def cut(name: str) -> tuple[str, str]:
    """The name up to and with its last "-", and the rest (SEMANTICS' Pod name, by hand)."""
    head, dash, tail = name.rpartition("-")
    return head + dash, tail


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(NAMESPACES), NAME), min_size=1, max_size=12, unique=True))
def test_each_pod_reads_its_own_stem_tail_and_interned_namespace(listed: list[tuple[str, str]]) -> None:
    pods = read([item(namespace, name) for namespace, name in listed])
    assert len(pods) == len(listed)
    for namespace, name in listed:
        pod = pods[f"{namespace}/{name}"]
        assert (pod.facts.stem, pod.tail) == cut(name)
        assert pod.namespace == namespace and pod.namespace is sys.intern(namespace)
        assert pod.workload == f"{namespace}/w"


def test_a_name_that_goes_on_past_the_last_stem_is_cut_at_its_own_last_dash() -> None:
    """``a-`` then ``a-b-0``: the second starts with the first's stem, and the rest has a
    "-"; ``a-1`` after it takes the stem ``a-`` back; ``b`` has none."""
    listed = [("a", "a-"), ("a", "a-b-0"), ("a", "a-1"), ("a-b", "a-2"), ("a-b", "b"), ("a", "b-")]
    pods = read([item(namespace, name) for namespace, name in listed])
    found = [(pods[f"{ns}/{name}"].facts.stem, pods[f"{ns}/{name}"].tail) for ns, name in listed]
    assert found == [("a-", ""), ("a-b-", "0"), ("a-", "1"), ("a-", "2"), ("", "b"), ("b-", "")]
    assert [pods[f"{ns}/{name}"].namespace for ns, name in listed] == [ns for ns, _ in listed]
