"""``apps/v1`` StatefulSet: scaled like a Deployment, shrunk from its highest ordinal.

Its replicas are what is admitted of ``preemptd.io/desired-replicas`` (see
``deployments``). Unlike a Deployment's, a StatefulSet's pods cannot be chosen
one by one: the controller always removes the highest ordinal first. So its pod
set is elastic (``minCount: 1``): any number of replicas is useful, and a
preemption shrinks it by a count, which the controller takes from the top.
"""

from __future__ import annotations

from ..client import Resource
from ..deployments import Scalable

__all__ = ["STATEFULSETS", "StatefulSetIntegration"]

STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet", namespaced=True)


class StatefulSetIntegration(Scalable):
    name = "statefulset"
    resource = STATEFULSETS
    elastic = True
