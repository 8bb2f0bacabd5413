"""Accessors for ``metadata`` fields of objects held as dicts.

Missing or mistyped fields read as absent; none of these functions raise."""

from __future__ import annotations

from typing import Any

from .types import ObjectKey


def _field(obj: Any, name: str) -> Any:
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    return metadata.get(name) if isinstance(metadata, dict) else None


def _str_field(obj: Any, name: str) -> str | None:
    value = _field(obj, name)
    return value if isinstance(value, str) else None


def name(obj: Any) -> str | None:
    """``metadata.name``."""
    return _str_field(obj, "name")


def namespace(obj: Any) -> str | None:
    """``metadata.namespace``; ``None`` for cluster-scoped objects."""
    return _str_field(obj, "namespace")


def uid(obj: Any) -> str | None:
    """``metadata.uid``."""
    return _str_field(obj, "uid")


def resource_version(obj: Any) -> str | None:
    """``metadata.resourceVersion``."""
    return _str_field(obj, "resourceVersion")


def creation_timestamp(obj: Any) -> str | None:
    """``metadata.creationTimestamp`` (RFC 3339)."""
    return _str_field(obj, "creationTimestamp")


def generation(obj: Any) -> int | None:
    """``metadata.generation``."""
    value = _field(obj, "generation")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def is_deleting(obj: Any) -> bool:
    """Whether ``metadata.deletionTimestamp`` is set: the object is being deleted."""
    return _str_field(obj, "deletionTimestamp") is not None


def labels(obj: Any) -> dict[str, str]:
    """``metadata.labels``; entries whose value is not a string are skipped."""
    value = _field(obj, "labels")
    if not isinstance(value, dict):
        return {}
    return {key: label for key, label in value.items() if isinstance(label, str)}


def key(obj: Any) -> ObjectKey | None:
    """The object's key (namespace and name), if it has a name."""
    object_name = name(obj)
    return None if object_name is None else ObjectKey(namespace(obj), object_name)
