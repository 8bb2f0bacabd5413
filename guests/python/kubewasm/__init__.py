"""Python SDK for kubewasm controller guests.

A guest is a WebAssembly component exporting the ``guest`` interface of the
``kubewasm:controller`` WIT world. With this package an author subclasses :class:`Controller`
and exports it from the component's main module::

    import kubewasm
    from kubewasm import Gvk, Metadata, log

    class Hello(kubewasm.Controller):
        def metadata(self):
            return Metadata("hello", Gvk("", "v1", "ConfigMap"))

        def reconcile(self, req):
            log.info("reconciling", name=req.name)

    Guest = kubewasm.export(Hello)

Objects are plain dicts; host errors are :class:`HostError` exceptions. Host calls
(:mod:`~kubewasm.cache`, :func:`apply`, :func:`event`, :mod:`~kubewasm.log`, ...) only work
inside a component; :mod:`~kubewasm.meta`, :mod:`~kubewasm.owner`,
:mod:`~kubewasm.conditions`, :mod:`~kubewasm.selector` and :func:`generate_name` are pure and
work in native unit tests too."""

from . import cache, conditions, log, meta, owner, selector
from ._host import OutsideHostError
from .controller import Action, Controller, export
from .errors import (
    ApiError,
    DeniedError,
    HostError,
    InvalidError,
    Permanent,
    ReconcileError,
    Transient,
    UnavailableError,
)
from .events import EventType, event
from .names import generate_name
from .types import (
    CHANGES,
    Gvk,
    Mapping,
    Metadata,
    ObjectKey,
    Reason,
    Request,
    RequeueAfter,
    Selection,
    Watch,
)
from .writes import apply, apply_status, delete, patch_json, patch_merge

__all__ = [
    "Action",
    "ApiError",
    "CHANGES",
    "Controller",
    "DeniedError",
    "EventType",
    "Gvk",
    "HostError",
    "InvalidError",
    "Mapping",
    "Metadata",
    "ObjectKey",
    "OutsideHostError",
    "Permanent",
    "Reason",
    "ReconcileError",
    "Request",
    "RequeueAfter",
    "Selection",
    "Transient",
    "UnavailableError",
    "Watch",
    "apply",
    "apply_status",
    "cache",
    "conditions",
    "delete",
    "event",
    "export",
    "generate_name",
    "log",
    "meta",
    "owner",
    "patch_json",
    "patch_merge",
    "selector",
]
