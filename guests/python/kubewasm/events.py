"""Kubernetes Events about objects."""

from __future__ import annotations

import enum

from . import _host
from .types import Gvk, ObjectKey


class EventType(enum.Enum):
    """The type of an event."""

    NORMAL = "Normal"
    WARNING = "Warning"


def event(
    kind: Gvk,
    key: ObjectKey,
    reason: str,
    action: str,
    note: str,
    event_type: EventType = EventType.NORMAL,
) -> None:
    """Records an event about the object ``key`` of ``kind`` (its uid is filled in from the
    cache).

    ``reason`` is short CamelCase (``SuccessfulCreate``), ``action`` what the controller did
    (``Create``), ``note`` human-readable text. Events are best effort: repeated ones may be
    merged or dropped. Host errors raise :class:`~kubewasm.HostError`."""
    wit_type = (
        _host.events.EventType.WARNING
        if event_type is EventType.WARNING
        else _host.events.EventType.NORMAL
    )
    record = _host.events.Event(
        _host.gvk(kind), key.namespace, key.name, wit_type, reason, action, note
    )
    _host.call(_host.events.record_event, record)
