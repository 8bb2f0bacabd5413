"""The pure decision logic of the PodSet controller: which pods belong to a PodSet, which
orphans to adopt, how many pods to create, which to delete, and the resulting status. Nothing
here calls the host, so it is unit-tested natively (``test_logic.py``).

PodSets and pods are the API's JSON as dicts."""

from __future__ import annotations

import contextlib
import copy
import functools
from dataclasses import dataclass, field

from kubewasm import Gvk, ObjectKey, conditions, meta, owner, selector

GROUP = "kubewasm.dev"
VERSION = "v1alpha1"
KIND = "PodSet"
#: The PodSet kind.
PODSET = Gvk(GROUP, VERSION, KIND)
#: The Pod kind.
POD = Gvk("", "v1", "Pod")
#: The condition set while creating or deleting pods fails, as on ReplicaSets.
REPLICA_FAILURE = "ReplicaFailure"
#: Most pods created or deleted by one reconcile, like the ReplicaSet controller's burst limit.
MAX_BURST = 500


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def spec(podset: dict) -> dict:
    """``spec`` of a PodSet (empty when absent)."""
    return _dict(podset.get("spec"))


def replicas(podset: dict) -> int:
    """``spec.replicas``: 1 when absent, negative values count as 0."""
    wanted = spec(podset).get("replicas", 1)
    return max(0, wanted) if isinstance(wanted, int) else 1


def pod_selector(podset: dict) -> dict:
    """``spec.selector``: which pods count towards the replicas."""
    return _dict(spec(podset).get("selector"))


def _template(podset: dict) -> dict:
    return _dict(spec(podset).get("template"))


def _template_metadata(podset: dict) -> dict:
    return _dict(_template(podset).get("metadata"))


@dataclass(frozen=True)
class PodView:
    """What the controller needs to know about one pod."""

    name: str
    uid: str
    #: ``metadata.resourceVersion``, the precondition of adoption.
    resource_version: str = ""
    labels: dict = field(default_factory=dict)
    owner_references: list = field(default_factory=list)
    #: Whether ``metadata.deletionTimestamp`` is set.
    deleting: bool = False
    #: ``status.phase`` (empty when unknown).
    phase: str = ""
    #: ``spec.nodeName`` (empty when unscheduled).
    node_name: str = ""
    #: Whether the ``Ready`` condition is ``True``.
    ready: bool = False
    #: When the pod last became ready (RFC 3339), if ready.
    ready_since: str | None = None
    #: The highest restart count among its containers.
    restarts: int = 0
    #: ``metadata.creationTimestamp`` (RFC 3339).
    created: str | None = None

    @classmethod
    def of(cls, pod: dict) -> PodView | None:
        """Reads a pod from its JSON; ``None`` if it has no name or uid."""
        name, uid = meta.name(pod), meta.uid(pod)
        if name is None or uid is None:
            return None
        status = _dict(pod.get("status"))
        ready_condition = next(
            (
                c
                for c in status.get("conditions") or []
                if isinstance(c, dict) and c.get("type") == "Ready"
            ),
            {},
        )
        ready = ready_condition.get("status") == "True"
        since = ready_condition.get("lastTransitionTime")
        restarts = [
            c["restartCount"]
            for c in status.get("containerStatuses") or []
            if isinstance(c, dict) and isinstance(c.get("restartCount"), int)
        ]
        phase = status.get("phase")
        node_name = _dict(pod.get("spec")).get("nodeName")
        return cls(
            name=name,
            uid=uid,
            resource_version=meta.resource_version(pod) or "",
            labels=meta.labels(pod),
            owner_references=owner.owner_references(pod),
            deleting=meta.is_deleting(pod),
            phase=phase if isinstance(phase, str) else "",
            node_name=node_name if isinstance(node_name, str) else "",
            ready=ready,
            ready_since=since if ready and isinstance(since, str) else None,
            restarts=max(restarts, default=0),
            created=meta.creation_timestamp(pod),
        )

    @property
    def controller(self) -> dict | None:
        """The controller owner reference, if any."""
        return next((r for r in self.owner_references if r.get("controller") is True), None)

    @property
    def active(self) -> bool:
        """Neither terminated (``Succeeded``/``Failed``) nor being deleted."""
        return not self.deleting and self.phase not in ("Succeeded", "Failed")


class InvalidSpec(ValueError):
    """A PodSet spec the controller refuses to act on."""


def validate(podset: dict) -> None:
    """Checks what the API server checks for ReplicaSets: a valid, non-empty selector that
    matches the template's labels. Raises :class:`InvalidSpec` otherwise."""
    wanted = pod_selector(podset)
    if selector.is_empty(wanted):
        raise InvalidSpec("spec.selector must not be empty")
    try:
        matching = selector.matches(wanted, _dict(_template_metadata(podset).get("labels")))
    except selector.SelectorError as error:
        raise InvalidSpec(str(error)) from None
    if not matching:
        raise InvalidSpec("spec.selector does not match spec.template.metadata.labels")


def controlled_pods(owner_uid: str, pods: list[PodView]) -> list[PodView]:
    """The active pods controlled by the PodSet with uid ``owner_uid``."""
    return [
        pod
        for pod in pods
        if pod.active and pod.controller is not None and pod.controller["uid"] == owner_uid
    ]


def adopters(podsets: list[dict], labels: dict[str, str]) -> list[ObjectKey]:
    """The PodSets that would adopt an orphan pod with these ``labels``: those not being
    deleted whose valid selector matches. ``podsets`` are the PodSets of the pod's namespace."""
    keys = []
    for podset in podsets:
        key = meta.key(podset)
        if key is None or meta.is_deleting(podset):
            continue
        try:
            validate(podset)
        except InvalidSpec:
            continue
        if selector.matches(pod_selector(podset), labels):
            keys.append(key)
    return keys


@dataclass(frozen=True)
class Plan:
    """What one reconcile should do."""

    #: Active orphans matching the selector, to adopt with :func:`adoption_patch`.
    adopt: list[PodView]
    #: The PodSet's pods once the adoptions succeed (controlled and adopted, all active).
    owned: list[PodView]
    #: How many pods to create.
    create: int
    #: Pods to delete, in order of preference.
    delete: list[PodView]


def plan(podset: dict, pods: list[PodView]) -> Plan:
    """Decides what to adopt, create and delete, given the PodSet and the pods of its
    namespace it may act on (at least those it controls and those its selector matches; the
    others are ignored). Raises :class:`InvalidSpec` for a spec it refuses to act on.

    Pods controlled by something else are ignored, as are orphans that are being deleted or
    terminated. At most :data:`MAX_BURST` pods are created or deleted at once."""
    validate(podset)
    wanted = pod_selector(podset)
    owned = controlled_pods(meta.uid(podset) or "", pods)
    adopt = [
        pod
        for pod in pods
        if pod.active and pod.controller is None and selector.matches(wanted, pod.labels)
    ]
    owned = owned + adopt
    want = replicas(podset)
    surplus = min(max(0, len(owned) - want), MAX_BURST)
    return Plan(
        adopt=adopt,
        owned=owned,
        create=min(max(0, want - len(owned)), MAX_BURST),
        delete=sorted(owned, key=functools.cmp_to_key(deletion_order))[:surplus],
    )


def _after_or_zero(a: str | None, b: str | None) -> bool:
    """``a`` is newer than ``b``, a missing time counting as newest (Kubernetes'
    ``afterOrZero``)."""
    if a is not None and b is not None:
        return a > b
    return a is None


_PHASE_RANK = {"Unknown": 1, "Running": 2}


def _delete_first(a: PodView, b: PodView) -> bool:
    """Whether ``a`` should be deleted before ``b``, as in Kubernetes' ``ActivePods.Less``."""
    # Unscheduled before scheduled.
    if a.node_name != b.node_name and (not a.node_name or not b.node_name):
        return not a.node_name
    # Pending < Unknown < Running.
    rank_a, rank_b = _PHASE_RANK.get(a.phase, 0), _PHASE_RANK.get(b.phase, 0)
    if rank_a != rank_b:
        return rank_a < rank_b
    # Not ready before ready.
    if a.ready != b.ready:
        return not a.ready
    # Ready for a shorter time first.
    if a.ready and a.ready_since != b.ready_since:
        return _after_or_zero(a.ready_since, b.ready_since)
    # More restarts first.
    if a.restarts != b.restarts:
        return a.restarts > b.restarts
    # Newer first.
    if a.created != b.created:
        return _after_or_zero(a.created, b.created)
    return False


def deletion_order(a: PodView, b: PodView) -> int:
    """Deletion preference as a comparison: negative means ``a`` goes first. Ties break by
    name."""
    if _delete_first(a, b):
        return -1
    if _delete_first(b, a):
        return 1
    return (a.name > b.name) - (a.name < b.name)


def owner_reference(podset: dict) -> dict:
    """The controller owner reference of a pod adopted by ``podset``."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "name": meta.name(podset) or "",
        "uid": meta.uid(podset) or "",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def adoption_patch(podset: dict, pod: PodView) -> list[dict]:
    """The JSON patch adopting ``pod``: adds a controller owner reference to ``podset``, with
    the resourceVersion the cache saw as precondition, so that a concurrent change (another
    controller adopting it first) fails with 409 Conflict instead of overwriting it."""
    ours = owner_reference(podset)
    references = [r for r in pod.owner_references if r["uid"] != ours["uid"]] + [ours]
    return [
        {"op": "replace", "path": "/metadata/resourceVersion", "value": pod.resource_version},
        {"op": "add", "path": "/metadata/ownerReferences", "value": references},
    ]


def pod_manifest(podset: dict, name: str) -> dict:
    """The pod to server-side apply for a new replica called ``name``. The host adds the
    controller owner reference (``owned=True``)."""
    template = _template_metadata(podset)
    metadata: dict = {"name": name}
    namespace = meta.namespace(podset)
    if namespace is not None:
        metadata["namespace"] = namespace
    for key in ("labels", "annotations"):
        if template.get(key):
            metadata[key] = copy.deepcopy(template[key])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": copy.deepcopy(_template(podset).get("spec")),
    }


@dataclass(frozen=True)
class Failure:
    """Why creating or deleting pods failed, for the ``ReplicaFailure`` condition."""

    #: ``FailedCreate``, ``FailedDelete`` or ``InvalidSpec``.
    reason: str
    message: str


def status(podset: dict, live: list[PodView], created: int, failure: Failure | None) -> dict:
    """The status after a reconcile: ``live`` are the PodSet's pods still there after the
    deletions, ``created`` how many pods were created. ``ReplicaFailure`` is set when
    ``failure`` is given and removed otherwise; other conditions are kept."""
    previous = _dict(podset.get("status")).get("conditions")
    kept = copy.deepcopy(previous) if isinstance(previous, list) else []
    generation = meta.generation(podset)
    if failure is not None:
        conditions.set_condition(
            kept, REPLICA_FAILURE, True, failure.reason, failure.message, generation
        )
    else:
        conditions.remove_condition(kept, REPLICA_FAILURE)
    result: dict = {
        "replicas": len(live) + created,
        "readyReplicas": sum(1 for pod in live if pod.ready),
    }
    if generation is not None:
        result["observedGeneration"] = generation
    with contextlib.suppress(selector.SelectorError):
        result["selector"] = selector.to_query(pod_selector(podset))
    if kept:
        result["conditions"] = kept
    return result


def status_object(podset: dict, status: dict) -> dict:
    """The object to apply to the status subresource."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {"name": meta.name(podset), "namespace": meta.namespace(podset)},
        "status": status,
    }
