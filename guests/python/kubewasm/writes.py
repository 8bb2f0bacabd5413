"""Writes, executed by the host with the controller's field manager ``kubewasm-<name>``.

Objects are plain dicts (or anything :func:`json.dumps` accepts); host errors raise
:class:`~kubewasm.HostError`."""

from __future__ import annotations

import json
from typing import Any

from . import _host
from .errors import HostError
from .types import Gvk


def apply(obj: dict, *, owned: bool = True, force: bool = True, adopt: bool = False) -> dict:
    """Server-side apply of ``obj``, which must carry ``apiVersion``, ``kind`` and
    ``metadata.name``; ``metadata.namespace`` defaults to the reconciled object's. Include only
    the fields this controller manages.

    ``owned`` makes the reconciled object the controller owner of ``obj``; ``force`` takes over
    fields another manager owns instead of failing with a conflict. Returns the object as the
    API server holds it afterwards; an apply that would change nothing is not sent.

    An owned apply to an existing object that the reconciled object does not control raises a
    409 ``AlreadyExists`` :class:`~kubewasm.ApiError` (see
    :attr:`~kubewasm.HostError.is_already_exists`) and sends nothing, unless ``adopt`` and the
    object has no controller owner: then the reconciled object takes control of it. An object
    controlled by another owner is never taken over."""
    options = _host.writes.ApplyOptions(owned=owned, force=force, adopt=adopt)
    return json.loads(_host.call(_host.writes.apply, json.dumps(obj), options))


def apply_status(obj: dict, *, force: bool = False) -> dict:
    """Server-side apply of the ``status`` subresource of ``obj`` (``apiVersion``, ``kind``,
    ``metadata.name`` and ``status``), with the same rules as :func:`apply`. It is forced only
    with ``force``: otherwise a status field another manager owns raises a 409 ``Conflict``."""
    options = _host.writes.StatusOptions(force=force)
    return json.loads(_host.call(_host.writes.apply_status, json.dumps(obj), options))


def delete(
    kind: Gvk,
    namespace: str | None,
    name: str,
    *,
    uid: str | None = None,
    resource_version: str | None = None,
    missing_ok: bool = False,
) -> None:
    """Deletes an object with background propagation, only if it still has this ``uid`` and
    ``resource_version`` when given (otherwise a 409 :class:`~kubewasm.ApiError`).

    An object that is already gone raises a 404 :class:`~kubewasm.ApiError`, unless
    ``missing_ok``."""
    preconditions = _host.writes.Preconditions(uid, resource_version)
    try:
        _host.call(_host.writes.delete, _host.gvk(kind), namespace, name, preconditions)
    except HostError as error:
        if not (missing_ok and error.is_not_found):
            raise


def patch_merge(kind: Gvk, namespace: str | None, name: str, patch: dict) -> dict:
    """Applies an RFC 7386 JSON merge patch (``None`` removes a key); returns the patched
    object."""
    return _patch(kind, namespace, name, _host.writes.PatchType.MERGE, patch)


def patch_json(kind: Gvk, namespace: str | None, name: str, operations: list) -> dict:
    """Applies an RFC 6902 JSON patch (a list of operations); returns the patched object.

    A ``replace`` of ``/metadata/resourceVersion`` with the resourceVersion the controller read
    makes it an optimistic-concurrency write: it fails with a 409 if the object changed since."""
    return _patch(kind, namespace, name, _host.writes.PatchType.JSON, operations)


def _patch(kind: Gvk, namespace: str | None, name: str, patch_type: Any, patch: Any) -> dict:
    patched = _host.call(
        _host.writes.patch, _host.gvk(kind), namespace, name, patch_type, json.dumps(patch)
    )
    return json.loads(patched)
