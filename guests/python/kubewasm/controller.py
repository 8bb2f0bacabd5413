"""The :class:`Controller` base class and :func:`export`, which turns a controller into the
component's ``guest`` export."""

from __future__ import annotations

import json
from typing import Any

from . import _host
from . import log as _log
from .errors import HostError, Permanent, ReconcileError
from .types import Gvk, Metadata, ObjectKey, Reason, Request, RequeueAfter

#: What ``reconcile`` and ``finalize`` return: ``None`` when done, or :class:`RequeueAfter`.
Action = RequeueAfter | None


class Controller:
    """The reconcile logic of one controller. Subclass it, override :meth:`metadata` and
    :meth:`reconcile` (and :meth:`finalize`, :meth:`map_keys` when needed), and export it from
    the component's main module with ``Guest = kubewasm.export(MyController)``.

    The host creates a fresh instance for every call: attributes, module globals and caches
    never survive from one call to the next. Keep state in the cluster."""

    def metadata(self) -> Metadata:
        """Declares the controller. Called once when the module is loaded; must not depend on
        anything but the module."""
        raise NotImplementedError

    def reconcile(self, req: Request) -> Action:
        """Brings the world in line with the primary object named by ``req``.

        ``req.object`` is ``None`` once the object no longer exists. Return ``None`` when done
        or :class:`RequeueAfter`; raise :class:`Transient` to be retried with backoff,
        :class:`Permanent` to wait for the next change. A :class:`HostError` raised out of it
        ends the reconcile as one or the other by :attr:`HostError.transient`; any other
        exception traps the instance, which the host counts and retries like a transient
        error."""
        raise NotImplementedError

    def finalize(self, req: Request) -> Action:
        """Cleans up before a primary object carrying the controller's finalizer is deleted.
        The host removes the finalizer once this returns ``None``. The default does nothing."""
        return None

    def map_keys(self, kind: Gvk, obj: dict) -> list[ObjectKey]:
        """Maps a changed object of a kind watched with :meth:`Mapping.guest` to the primary
        keys to reconcile. The default maps to nothing."""
        return []


def _request(raw: Any) -> Request:
    try:
        obj = None if raw.object is None else json.loads(raw.object)
    except ValueError as error:
        raise Permanent(f"primary object is not JSON: {error}") from None
    return Request(
        _host.object_key_from(raw.key),
        Reason[raw.reason.name],
        raw.attempt,
        obj,
    )


def _outcome(action: Action | Any) -> Any:
    if action is None:
        return _host.types.Outcome_Done()
    if isinstance(action, RequeueAfter):
        return _host.types.Outcome_RequeueAfter(max(0, round(action.seconds * 1000)))
    raise TypeError(f"reconcile returned {action!r}; return None or RequeueAfter")


def _run(method: Any, raw: Any) -> Any:
    try:
        return _outcome(method(_request(raw)))
    except HostError as error:
        failure = ReconcileError.from_host_error(error)
    except ReconcileError as error:
        failure = error
    variant = (
        _host.types.ReconcileError_Transient
        if failure.transient
        else _host.types.ReconcileError_Permanent
    )
    raise _host.Err(variant(str(failure)))


def export(controller: type[Controller]) -> type:
    """The class componentize-py exports as the ``guest`` interface, for ``controller``:
    assign it to ``Guest`` in the component's main module."""

    class Guest:
        def metadata(self) -> Any:
            return _host.metadata(controller().metadata())

        def reconcile(self, request: Any) -> Any:
            return _run(controller().reconcile, request)

        def finalize(self, request: Any) -> Any:
            return _run(controller().finalize, request)

        def map_keys(self, kind: Any, obj: str) -> list:
            gvk = _host.gvk_from(kind)
            try:
                parsed = json.loads(obj)
            except ValueError as error:
                _log.warn("map-keys received an object that is not JSON", kind=gvk, error=error)
                return []
            return [_host.object_key(key) for key in controller().map_keys(gvk, parsed)]

    Guest.__qualname__ = f"Guest[{controller.__qualname__}]"
    return Guest
