"""Records built without the constructor's calls: the model's, for :mod:`objects`, and
the decisions' the rounds make (``actions/``).

A large cluster's snapshot makes a record per object: more than a hundred thousand Pods,
tens of thousands of Workloads with their pod sets and admissions. The constructor of a
frozen dataclass writes each field through a call of ``object.__setattr__`` (the frozen
class refuses plain writes): thirteen calls a Pod, a third of what reading a plain Pod
cost, and a Workload's constructor cost a quarter of reading it.

Here a record is first an instance of its *twin* (:func:`twin`): a plain class with
exactly the slots of the record's class, in the same order, whose fields are written as
ordinary attributes (no call each). Then its class is made the record's. Python allows
that assignment only between classes of the same layout (the same slots, no
``__dict__``) and checks it at each assignment; :func:`twin` makes one such assignment
when it is made, so a model class whose layout no longer allows it fails at import.

:func:`builder` makes, per class, the function that does this for the fields the
constructor takes, in their order, and then runs the class's ``__post_init__`` as the
constructor does: the record is the one the constructor makes of the same values
(``tests/framework/test_model_records.py``). The intake of plain Pods writes a Pod's
twin in place instead (``typed_pods.pod_of_item``), its maps already shared FrozenDicts,
so that its ``__post_init__`` would change nothing and is not run.

The intake makes an ``Entry`` (a frozen dataclass of five fields) per object that is
not a plain Pod: tens of thousands of Workloads, read later, are built the same way.

The rounds of a session make a ``Pending`` verdict per workload they leave pending (thousands
in a saturated session) and a ``Preempted`` entry per victim workload; both are frozen
dataclasses, whose constructor writes each field through ``object.__setattr__``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from ..decisions import Pending, Preempted
from ..model import (
    Admission,
    FlavorQuotas,
    Node,
    PodSet,
    PodSetAdmission,
    PreemptionPolicy,
    QueueSpec,
    ResourceGroup,
    ResourceQuota,
    Workload,
)
from .fields import Entry

__all__ = [
    "builder",
    "new_admission",
    "new_entry",
    "new_flavor_quotas",
    "new_pending",
    "new_pod_set",
    "new_pod_set_admission",
    "new_preempted",
    "new_preemption",
    "new_queue",
    "new_resource_group",
    "new_resource_quota",
    "new_workload",
    "twin",
]

T = TypeVar("T")


def twin(cls: type) -> Any:
    """A plain class with the slots of the dataclass ``cls`` (made with ``slots=True``):
    an instance of it, every slot written, becomes a ``cls`` by ``obj.__class__ = cls``."""
    slots = cls.__dict__.get("__slots__")
    if not dataclasses.is_dataclass(cls) or not isinstance(slots, tuple) or cls.__bases__ != (object,):
        raise TypeError(f"{cls.__name__}: not a dataclass with slots of its own")
    made = type(f"{cls.__name__}Twin", (), {"__slots__": slots, "__module__": __name__})
    made().__class__ = cls  # TypeError here: not the same layout
    return made


def builder(cls: type[T]) -> Callable[..., T]:
    """``build(*values)``: the ``cls`` record ``cls(*values)`` makes, every field the
    constructor takes given in order (none left to its default), made as a :func:`twin`
    and then given to ``cls.__post_init__`` when there is one."""
    fields = [field.name for field in dataclasses.fields(cls) if field.init]  # type: ignore[arg-type]
    if any(not name.isidentifier() or name.startswith("_") for name in fields):
        raise TypeError(f"{cls.__name__}: a field this builder cannot name")
    lines = [f"def build({', '.join(fields)}):", "    record = Twin()"]
    lines += [f"    record.{name} = {name}" for name in fields]
    lines.append("    record.__class__ = cls")
    if hasattr(cls, "__post_init__"):
        lines.append("    record.__post_init__()")
    lines.append("    return record")
    scope: dict[str, Any] = {"Twin": twin(cls), "cls": cls}
    exec("\n".join(lines), scope)  # the code: the lines above, names from ``fields`` only
    build: Callable[..., T] = scope["build"]
    build.__qualname__ = f"builder({cls.__name__})"
    return build


# The intake's entries (one per object of a kind other than a plain Pod).
new_entry = builder(Entry)
# The records of a Workload, as the typed reader makes them (``typed_workloads``).
new_workload = builder(Workload)
new_pod_set = builder(PodSet)
new_pod_set_admission = builder(PodSetAdmission)
new_admission = builder(Admission)
# The records of a Queue, as the typed reader makes them (``typed_queues``).
new_queue = builder(QueueSpec)
new_resource_group = builder(ResourceGroup)
new_flavor_quotas = builder(FlavorQuotas)
new_resource_quota = builder(ResourceQuota)
new_preemption = builder(PreemptionPolicy)
# A Node's record, as the typed reader makes it (``typed_nodes``).
new_node = builder(Node)

# The decision records the rounds make (``actions/allocate.py``, ``actions/preempting.py``).
new_pending = builder(Pending)
new_preempted = builder(Preempted)
