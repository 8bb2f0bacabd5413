"""Random object names, like the API server's ``generateName``."""

from __future__ import annotations

import secrets

#: The API server's alphabet for generated names: no vowels (no words), no look-alikes.
ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_MAX_BASE = 58
_SUFFIX = 5


def generate_name(base: str) -> str:
    """``base`` followed by 5 random characters, e.g. ``generate_name("web-")`` → ``web-x7k2p``.

    Server-side apply has no ``generateName``, so controllers name new objects themselves.
    ``base`` is cut to 58 bytes (at a character boundary) as the API server does. Randomness
    comes from the WASI random source on every call (never from a seed frozen into the
    component's snapshot). Check the cache for an object of the same name before applying,
    since an apply to an existing name updates that object."""
    cut = base.encode()[:_MAX_BASE].decode(errors="ignore")
    return cut + "".join(secrets.choice(ALPHABET) for _ in range(_SUFFIX))
