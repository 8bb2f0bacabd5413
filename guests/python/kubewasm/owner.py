"""Owner references of objects held as dicts, in the API's shape (``apiVersion``, ``kind``,
``name``, ``uid``, ``controller``, ``blockOwnerDeletion``)."""

from __future__ import annotations

from typing import Any

from . import meta
from .types import ObjectKey

_REQUIRED = ("apiVersion", "kind", "name", "uid")


def owner_references(obj: Any) -> list[dict]:
    """``metadata.ownerReferences`` of ``obj``; malformed entries (without a string
    ``apiVersion``, ``kind``, ``name`` and ``uid``) are skipped."""
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    references = metadata.get("ownerReferences") if isinstance(metadata, dict) else None
    if not isinstance(references, list):
        return []
    return [
        reference
        for reference in references
        if isinstance(reference, dict)
        and all(isinstance(reference.get(field), str) for field in _REQUIRED)
    ]


def controller_ref(obj: Any) -> dict | None:
    """The controller owner reference of ``obj`` (the one with ``controller: true``), if any."""
    return next((r for r in owner_references(obj) if r.get("controller") is True), None)


def controller_owner_of(obj: Any) -> ObjectKey | None:
    """The key of ``obj``'s controller owner: its name, in ``obj``'s namespace. Handy in
    ``map_keys``."""
    reference = controller_ref(obj)
    return None if reference is None else ObjectKey(meta.namespace(obj), reference["name"])


def is_controlled_by(child: Any, owner_uid: str) -> bool:
    """Whether ``child``'s controller owner reference points at the object with ``owner_uid``."""
    reference = controller_ref(child)
    return reference is not None and reference["uid"] == owner_uid


def controller_reference_to(owner: Any) -> dict | None:
    """A controller owner reference to ``owner`` (``controller`` and ``blockOwnerDeletion``
    true), as the host adds it for ``owned`` applies; ``None`` if ``owner`` lacks apiVersion,
    kind, name or uid."""
    api_version = owner.get("apiVersion") if isinstance(owner, dict) else None
    kind = owner.get("kind") if isinstance(owner, dict) else None
    name, uid = meta.name(owner), meta.uid(owner)
    if not (isinstance(api_version, str) and isinstance(kind, str) and name and uid):
        return None
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
