"""The Kubernetes backend (issue 8): informers in, sessions, commits out.

``KubernetesBackend`` is the entry point; ``daemon.loop`` drives it. Modules:
``client`` (where the cluster is; verbs on resources), ``informers`` (list+watch
caches), ``inventory`` (the framework Inventory kept up to date per event),
``workloads`` (the Workload objects and their status), ``owners``, ``jobs`` and
``deployments`` (making Jobs and Deployments follow their Workloads),
``commit`` (decisions to writes), ``events`` (Kubernetes Events).
"""

from .backend import WATCHED, CycleReport, KubernetesBackend
from .client import ApiError, Kube, load_configuration

__all__ = ["WATCHED", "ApiError", "CycleReport", "Kube", "KubernetesBackend", "load_configuration"]
