"""The Sweep kind (``example.com/v1``): ``parallelism`` trial pods of one template at a time.

A Sweep is a made-up custom resource, small enough to show a whole integration::

    apiVersion: example.com/v1
    kind: Sweep
    metadata: {name: lr-search, labels: {preemptd.io/queue-name: research}}
    spec:
      suspend: true          # preemptd holds it until admitted
      parallelism: 4         # trials running at once: the pod set's count
      template: {spec: {containers: [...]}}
    status:
      phase: Running         # Succeeded or Failed once the sweep is over

Built on :class:`Suspendable`, the integration only says where the pods' template
and the suspend switch are and when the Sweep is over; admission, eviction, the
saved placement and the Workload's updates are the base's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from preemptd.daemon.backends.kubernetes.integrations import (
    InvalidOwner,
    Obj,
    PodSetShape,
    Resource,
)
from preemptd.daemon.backends.kubernetes.integrations.suspendable import Suspendable

__all__ = ["SWEEPS", "SweepIntegration"]

SWEEPS = Resource("example.com", "v1", "sweeps", "Sweep", namespaced=True)


class SweepIntegration(Suspendable):
    name = "sweep"  # the entry point's name, and [integrations.sweep]
    resource = SWEEPS
    optional = True  # a cluster without the Sweep CRD is no error

    def shapes(self, owner: Obj) -> list[PodSetShape]:
        spec = owner.get("spec") or {}
        parallelism: Any = spec.get("parallelism", 1)
        if not isinstance(parallelism, int) or isinstance(parallelism, bool) or parallelism < 1:
            raise InvalidOwner("spec.parallelism", f"expected a positive integer, got {parallelism!r}")
        return [PodSetShape("trials", spec.get("template"), parallelism)]

    def templates(self, owner: Obj) -> dict[str, Obj]:
        return {"trials": (owner.get("spec") or {}).get("template") or {}}

    def templates_patch(self, owner: Obj, templates: Mapping[str, Obj]) -> Obj:
        return {"spec": {"template": templates["trials"]}}

    def finished(self, owner: Obj) -> tuple[str, str] | None:
        phase = (owner.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            return str(phase), f"Sweep {str(phase).lower()}"
        return None
