"""The Kubernetes ReplicaSet controller rebuilt as a kubewasm guest, in Python.

A ``PodSet`` (``kubewasm.dev/v1alpha1``) keeps ``spec.replicas`` pods built from
``spec.template`` running: it adopts orphan pods matching ``spec.selector``, creates missing
pods, deletes surplus ones (unscheduled, pending and unready pods first, then the newest) and
reports ``status.replicas``, ``status.readyReplicas`` and a ``ReplicaFailure`` condition. The
decisions are made by the pure functions of :mod:`logic`; this module only calls the host."""

from __future__ import annotations

import kubewasm
import logic
from kubewasm import (
    EventType,
    Gvk,
    HostError,
    Mapping,
    Metadata,
    ObjectKey,
    Permanent,
    ReconcileError,
    Request,
    cache,
    log,
    meta,
    owner,
    selector,
)
from logic import POD, PODSET, Failure, PodView


class PodSetController(kubewasm.Controller):
    """The PodSet controller."""

    def metadata(self) -> Metadata:
        # Orphans have no owner to enqueue; `map_keys` finds the PodSets that would adopt them,
        # as the ReplicaSet controller does on pod events.
        return Metadata("podset", PODSET, owns=[POD], max_concurrency=4).watch(
            POD, Mapping.guest()
        )

    def map_keys(self, kind: Gvk, pod: dict) -> list[ObjectKey]:
        # Controlled pods reach their PodSet through `owns`; deleting pods are not adopted.
        if owner.controller_ref(pod) is not None or meta.is_deleting(pod):
            return []
        try:
            podsets = cache.list(PODSET, meta.namespace(pod))
        except HostError as error:
            log.warn("cannot list PodSets", error=error)
            return []
        return logic.adopters(podsets, meta.labels(pod))

    def reconcile(self, req: Request) -> None:
        podset = req.object
        # Gone or going: the garbage collector deletes the pods it owned.
        if podset is None or meta.is_deleting(podset):
            return
        pods = read_pods(podset, req.namespace)

        try:
            plan = logic.plan(podset, pods)
        except logic.InvalidSpec as invalid:
            live = logic.controlled_pods(meta.uid(podset) or "", pods)
            status = logic.status(podset, live, 0, Failure("InvalidSpec", str(invalid)))
            _write_status(podset, status)
            raise Permanent(str(invalid)) from None

        for pod in plan.adopt:
            try:
                kubewasm.patch_json(
                    POD, req.namespace, pod.name, logic.adoption_patch(podset, pod)
                )
            except HostError as error:
                raise ReconcileError.from_host_error(error, f"adopting pod {pod.name}") from None
            log.info("adopted pod", pod=pod.name)

        # The first failure, for the condition and the reconcile's error.
        failure: tuple[Failure, HostError] | None = None
        taken = {pod.name for pod in pods}
        created = 0
        for _ in range(plan.create):
            name = free_name(f"{req.name}-", req.namespace, taken)
            try:
                kubewasm.apply(logic.pod_manifest(podset, name))
            except HostError as error:
                message = f"Error creating pod {name}: {error}"
                _record(req, EventType.WARNING, "FailedCreate", "Create", message)
                failure = (Failure("FailedCreate", message), error)
                # Like the ReplicaSet controller's slow start: stop at the first failure.
                break
            created += 1
            _record(req, EventType.NORMAL, "SuccessfulCreate", "Create", f"Created pod: {name}")

        deleted = set()
        for pod in plan.delete:
            try:
                kubewasm.delete(POD, req.namespace, pod.name, uid=pod.uid, missing_ok=True)
            except HostError as error:
                message = f"Error deleting pod {pod.name}: {error}"
                _record(req, EventType.WARNING, "FailedDelete", "Delete", message)
                failure = failure or (Failure("FailedDelete", message), error)
                continue
            deleted.add(pod.uid)
            _record(
                req, EventType.NORMAL, "SuccessfulDelete", "Delete", f"Deleted pod: {pod.name}"
            )

        live = [pod for pod in plan.owned if pod.uid not in deleted]
        status = logic.status(podset, live, created, failure[0] if failure else None)
        _write_status(podset, status)
        if failure is not None:
            raise ReconcileError.from_host_error(failure[1])


def read_pods(podset: dict, namespace: str | None) -> list[PodView]:
    """The pods the PodSet controls and the orphans its selector may adopt, in name order: read
    from the host's indexes (``list_controlled``, and a ``list`` by the selector's equalities),
    so a reconcile costs its own pods, not its namespace. A selector that has no string form (it
    fails validation in the plan anyway) reads the namespace."""
    controlled = cache.list_controlled(POD, namespace, meta.uid(podset) or "")
    try:
        query: str | None = selector.to_query(logic.pod_selector(podset))
    except selector.SelectorError:
        query = None
    candidates = cache.list(POD, namespace, query)
    by_name: dict[str, PodView] = {}
    for pod in controlled + candidates:
        view = PodView.of(pod)
        if view is not None:
            by_name.setdefault(view.name, view)
    return [by_name[name] for name in sorted(by_name)]


def free_name(base: str, namespace: str | None, taken: set[str]) -> str:
    """A generated pod name that no pod has: neither one read for this reconcile (``taken``, to
    which it is added) nor any other in the cache, since an apply to a taken name would change
    that pod."""
    while True:
        name = kubewasm.generate_name(base)
        if name in taken:
            continue
        taken.add(name)
        if cache.get(POD, namespace, name) is None:
            return name


def _write_status(podset: dict, status: dict) -> None:
    try:
        kubewasm.apply_status(logic.status_object(podset, status))
    except HostError as error:
        raise ReconcileError.from_host_error(error, "updating status") from None


def _record(req: Request, event_type: EventType, reason: str, action: str, note: str) -> None:
    """Records an event about the PodSet; events are best effort, so failures are only logged."""
    try:
        kubewasm.event(PODSET, req.key, reason, action, note, event_type)
    except HostError as error:
        log.debug("could not record event", reason=reason, error=error)


Guest = kubewasm.export(PodSetController)
