"""Reads from the host's informer cache.

Reads never reach the API server and only cover the kinds the controller declared (primary,
owned and watched). Objects are plain dicts, without ``metadata.managedFields``. Host errors
raise :class:`~kubewasm.HostError`."""

from __future__ import annotations

import builtins
import json

from . import _host
from .types import Gvk


def get(kind: Gvk, namespace: str | None, name: str) -> dict | None:
    """The object ``namespace/name`` of ``kind``, or ``None`` if the cache does not hold it.
    ``namespace`` is ``None`` for a cluster-scoped kind."""
    text = _host.call(_host.cache.get, _host.gvk(kind), namespace, name)
    return None if text is None else json.loads(text)


def list(  # noqa: A001 - mirrors the WIT function's name
    kind: Gvk, namespace: str | None = None, label_selector: str | None = None
) -> builtins.list[dict]:
    """Every cached object of ``kind`` in ``namespace`` (``None``: all namespaces), optionally
    filtered by a label selector in the API server's syntax (``app=web,tier in (a,b)``),
    ordered by namespace, then name. A selector with an equality (``key=value``) is served from
    the host's index of that label, so the list costs the objects it finds."""
    texts = _host.call(_host.cache.list, _host.gvk(kind), namespace, label_selector)
    return _parsed(texts)


def list_controlled(
    kind: Gvk, namespace: str | None, controller_uid: str
) -> builtins.list[dict]:
    """Every cached object of ``kind`` in ``namespace`` (``None``: all namespaces) whose
    controller reference (the ``ownerReferences`` entry with ``controller: true``) has the uid
    ``controller_uid``: the objects that owner controls, e.g. the pods of a ReplicaSet. Objects
    that merely list the owner among other owners are not included. Ordered by namespace, then
    name. Served from the host's index, so it costs the objects found, however many others the
    namespace holds."""
    texts = _host.call(_host.cache.list_controlled, _host.gvk(kind), namespace, controller_uid)
    return _parsed(texts)


def _parsed(texts: builtins.list[str]) -> builtins.list[dict]:
    """The objects of ``texts``, each text dropped as soon as it is parsed."""
    objects = []
    for index, text in enumerate(texts):
        objects.append(json.loads(text))
        texts[index] = (
            None  # frees the text as soon as it is parsed: large lists fit in less memory
        )
    return objects
