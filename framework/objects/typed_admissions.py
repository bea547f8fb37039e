"""Typed decoding of a Workload's admission (private to :mod:`objects`): see
:mod:`.typed_workloads`, whose reader of a Workload reads its ``status.admission`` here.

The admissions of a large cluster's Workloads repeat a few shapes (a pod set ``main`` of
so many pods on one flavor): their flavor maps are read once per distinct map, and
admissions of one shape share their pod sets' records, as the records are read-only.
From a Workload's own text, an admission's pod sets are read and checked once per
distinct text, Workload pod sets, owner kind and catalog (:func:`read_admission`).
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from ..model import Admission, FrozenDict, PodSet, PodSetAdmission
from .fields import Catalog
from .records import new_admission, new_pod_set_admission
from .typed import _count, _intern, _NotPlain, _shared, _strings, _text, sharing
from .typed_pods import _NULL, _kept

__all__ = ["read_admission"]


class _AdmittedPodSet(msgspec.Struct, forbid_unknown_fields=True):
    name: str | None = None
    count: int | None = None
    flavors: dict[str, str] | None = None


class _AdmissionDoc(msgspec.Struct, forbid_unknown_fields=True):
    queue: str | None = None
    podSets: list[_AdmittedPodSet] | None = None


class _AdmissionText(_AdmissionDoc, forbid_unknown_fields=True):
    """An admission decoded from its Workload's text: its pod sets left as their JSON text."""

    podSets: msgspec.Raw = _NULL  # type: ignore[assignment]  # the same field, as its text


# The maps of admitted flavors as the JSON gave them, to what they read as; the pod
# sets' records of an admission by (name, count, its flavor map's id) of each.
_FLAVORS: dict[tuple[tuple[str, str], ...], tuple[FrozenDict[str, str], frozenset[str]]] = sharing({})
_ADMITTED: dict[tuple[tuple[str, int, int], ...], tuple[PodSetAdmission, ...]] = sharing({})
# The same by the JSON text of the admission's pod sets, the Workload's pod sets (by id:
# they are kept with the answer, so the id names them) and whether a Deployment owns it,
# as checked against one catalog (``_CHECKED_BY``): a new catalog empties it.
_BY_TEXT: dict[tuple[bytes, int, bool], tuple[tuple[PodSetAdmission, ...], tuple[PodSet, ...]]] = sharing({})
_CHECKED_BY: list[Catalog | None] = [None]
_ADMITTED_DOCS = msgspec.json.Decoder(list[_AdmittedPodSet] | None)


def read_admission(
    doc: _AdmissionDoc | None,
    queue: str,
    pod_sets: tuple[PodSet, ...],
    by_name: Mapping[str, PodSet],
    catalog: Catalog,
    owned_by_deployment: bool,
) -> Admission | None:
    """The Workload's admission (in its queue unless it names one); ``None`` for none. Pod
    sets given as a text that does not read as admitted pod sets raise
    ``msgspec.ValidationError``, as a part of the Workload that is not plain."""
    if doc is None:
        return None
    given: list[_AdmittedPodSet] | msgspec.Raw | None = doc.podSets
    if type(given) is not msgspec.Raw:
        admitted = _admitted(given, by_name, catalog, owned_by_deployment)
    else:  # read and checked once per distinct text, pod sets and owner kind
        if _CHECKED_BY[0] is not catalog:
            _BY_TEXT.clear()
            _CHECKED_BY[0] = catalog
        key = (bytes(given), id(pod_sets), owned_by_deployment)
        found = _BY_TEXT.get(key)
        if found is None:
            docs = _ADMITTED_DOCS.decode(given)
            found = _kept(_BY_TEXT, key, (_admitted(docs, by_name, catalog, owned_by_deployment), pod_sets))
        admitted = found[0]
    return new_admission(_intern(doc.queue or queue), admitted)


def _flavors(mapping: dict[str, str] | None) -> tuple[FrozenDict[str, str], frozenset[str]]:
    """An admitted pod set's flavors (resource -> flavor), shared, and the flavors named."""
    key = tuple(mapping.items()) if mapping else ()
    found = _FLAVORS.get(key)
    if found is None:
        flavors = _strings(mapping)
        found = _kept(_FLAVORS, key, (_shared(flavors), frozenset(flavor for _, flavor in flavors)))
    return found


def _admitted(
    docs: list[_AdmittedPodSet] | None,
    by_name: Mapping[str, PodSet],
    catalog: Catalog,
    owned_by_deployment: bool,
) -> tuple[PodSetAdmission, ...]:
    """An admission's pod sets, checked against the Workload's and the catalog's flavors."""
    assigned: list[tuple[str, int, FrozenDict[str, str]]] = []
    seen: set[str] = set()
    for doc_set in docs or _no_admitted_pod_sets():
        name = _intern(_text(doc_set.name))
        spec_pod_set = by_name.get(name)
        if spec_pod_set is None or name in seen:
            raise _NotPlain
        seen.add(name)
        count = _count(doc_set.count)
        if count is None:
            count = spec_pod_set.count
        elif count > spec_pod_set.count and not owned_by_deployment:
            raise _NotPlain
        flavors, named = _flavors(doc_set.flavors)
        for flavor in named:
            if catalog.flavor_problem(flavor) is not None:
                raise _NotPlain
        if spec_pod_set.requests.keys() - flavors.keys():
            raise _NotPlain
        assigned.append((name, count, flavors))
    # Admissions of one shape share their pod sets' records (the flavor maps are shared
    # already, and kept alive by the records: their ids name them while kept here).
    key = tuple([(name, count, id(flavors)) for name, count, flavors in assigned])
    pod_sets = _ADMITTED.get(key)
    if pod_sets is None:
        pod_sets = _kept(_ADMITTED, key, tuple([new_pod_set_admission(*a) for a in assigned]))
    return pod_sets


def _no_admitted_pod_sets() -> list[_AdmittedPodSet]:
    raise _NotPlain  # at least one is required
