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
        pods = [view for view in map(PodView.of, cache.list(POD, req.namespace)) if view]

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
            name = kubewasm.generate_name(f"{req.name}-")
            while name in taken:
                name = kubewasm.generate_name(f"{req.name}-")
            taken.add(name)
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
