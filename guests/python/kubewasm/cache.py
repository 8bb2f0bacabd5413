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
    ordered by namespace, then name."""
    texts = _host.call(_host.cache.list, _host.gvk(kind), namespace, label_selector)
    objects = []
    for index, text in enumerate(texts):
        objects.append(json.loads(text))
        texts[index] = (
            None  # frees the text as soon as it is parsed: large lists fit in less memory
        )
    return objects
