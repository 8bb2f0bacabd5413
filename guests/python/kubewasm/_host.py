"""The bindings componentize-py generates from ``wit/controller.wit`` and the conversions
between their records and this package's values.

Outside a component (native unit tests) the bindings do not exist: every host call then raises
:class:`OutsideHostError`, as the Rust SDK's native stubs panic. Everything else in the package is
pure Python and works natively."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .errors import ApiError, DeniedError, HostError, InvalidError, UnavailableError
from .types import Gvk, Metadata, ObjectKey, Selection


class OutsideHostError(RuntimeError):
    """A host call was made outside a component, where there is no host to answer it."""


class _Absent:
    """Stands in for a bindings module outside a component."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        raise OutsideHostError(
            f"{self._name}.{attribute}: host calls only work inside a kubewasm component"
        )


try:
    from componentize_py_types import Err
    from wit_world.imports import cache, events, log, types, writes
except ImportError:
    cache, events, log, types, writes = (
        _Absent(name) for name in ("cache", "events", "log", "types", "writes")
    )

    class Err(Exception):  # type: ignore[no-redef]
        """Never raised: stands in for componentize-py's ``Err`` in ``except`` clauses."""

        value: Any


def call(function: Callable[..., Any], *args: Any) -> Any:
    """Calls a host import, raising its WIT ``error`` as a :class:`HostError`."""
    try:
        return function(*args)
    except Err as error:
        raise host_error(error.value) from None


def host_error(error: Any) -> HostError:
    """The :class:`HostError` for a WIT ``error`` variant."""
    if isinstance(error, types.Error_Api):
        status = error.value
        return ApiError(status.code, status.reason, status.message)
    if isinstance(error, types.Error_Denied):
        return DeniedError(error.value)
    if isinstance(error, types.Error_Invalid):
        return InvalidError(error.value)
    return UnavailableError(error.value)


def gvk(kind: Gvk) -> Any:
    """The WIT record of ``kind``."""
    return types.Gvk(kind.group, kind.version, kind.kind)


def gvk_from(kind: Any) -> Gvk:
    """``kind`` from its WIT record."""
    return Gvk(kind.group, kind.version, kind.kind)


def object_key(key: ObjectKey) -> Any:
    """The WIT record of ``key``."""
    return types.ObjectKey(key.namespace, key.name)


def object_key_from(key: Any) -> ObjectKey:
    """``key`` from its WIT record."""
    return ObjectKey(key.namespace, key.name)


def _selection(selection: Selection | Gvk) -> Any:
    if isinstance(selection, Gvk):
        selection = Selection(selection)
    return types.Selection(gvk(selection.kind), selection.namespace, selection.label_selector)


def _mapping(how: str, label: str | None) -> Any:
    if how == "owner":
        return types.Mapping_Owner()
    if how == "label":
        return types.Mapping_Label(label)
    return types.Mapping_Guest()


def metadata(declared: Metadata) -> Any:
    """The WIT ``controller-metadata`` record of ``declared``."""
    return types.ControllerMetadata(
        declared.name,
        _selection(declared.primary),
        [gvk(kind) for kind in declared.owns],
        [
            types.Watch(_selection(w.selection), _mapping(w.mapping.how, w.mapping.label_name))
            for w in declared.watches
        ],
        declared.finalizer,
        declared.max_concurrency,
        declared.resync_seconds,
        _flags(declared.reconcile_on),
    )


def _flags(names: Iterable[str]) -> Any:
    """The WIT flags ``changes`` with ``names`` set."""
    flags = types.Changes(0)
    for name in names:
        flags |= types.Changes[name.upper()]
    return flags
