"""Label selectors (``matchLabels`` / ``matchExpressions``) held as dicts, as in
``metav1.LabelSelector``::

    selector = {"matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}
    matches(selector, {"app": "web", "tier": "a"})  # True
    to_query(selector)                              # "app=web,tier in (a,b)"

The helpers agree with ``metav1.LabelSelectorAsSelector`` (checked against its vectors in
``guests/vectors``). All requirements must hold (logical AND). A selector with neither
``matchLabels`` nor ``matchExpressions`` matches every object; no selector (``None``) matches
none."""

from __future__ import annotations

import json
import re
from typing import Any

_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
#: A label name, or the name part of a key: at most 63 of these characters.
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
#: The prefix of a label key: a DNS subdomain of at most 253 characters.
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


class SelectorError(ValueError):
    """A selector Kubernetes would reject: an unknown operator, a wrong number of values, an
    invalid label key or value, or a malformed field."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"invalid label selector: {reason}")


def _is_label_key(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    if slash and not (len(prefix) <= 253 and _SUBDOMAIN.fullmatch(prefix)):
        return False
    return len(name) <= 63 and _NAME.fullmatch(name) is not None


def _is_label_value(value: str) -> bool:
    return value == "" or (len(value) <= 63 and _NAME.fullmatch(value) is not None)


def _checked(key: str, operator: str, values: list[str]) -> tuple[str, str, list[str]]:
    """The requirement, if Kubernetes would accept it."""
    if not _is_label_key(key):
        raise SelectorError(f"invalid key {json.dumps(key)}")
    if operator in ("Exists", "DoesNotExist") and values:
        raise SelectorError(f"key {json.dumps(key)}: operator {operator} takes no values")
    if operator not in ("Exists", "DoesNotExist") and not values:
        raise SelectorError(f"key {json.dumps(key)}: operator {operator} needs at least one value")
    for value in values:
        if not _is_label_value(value):
            raise SelectorError(f"key {json.dumps(key)}: invalid value {json.dumps(value)}")
    return key, operator, values


def _requirements(selector: Any) -> list[tuple[str, str, list[str]]]:
    """The requirements as (key, operator, values), checked as the API server does:
    ``matchLabels`` (as ``Equals``) first, as apimachinery lists them."""
    if selector is None:
        return []
    if not isinstance(selector, dict):
        raise SelectorError("a selector must be an object")
    labels = selector.get("matchLabels") or {}
    if not isinstance(labels, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise SelectorError("matchLabels must map strings to strings")
    requirements = [_checked(key, "Equals", [value]) for key, value in labels.items()]
    expressions = selector.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise SelectorError("matchExpressions must be a list")
    for expression in expressions:
        if not isinstance(expression, dict) or not isinstance(expression.get("key"), str):
            raise SelectorError(f"{json.dumps(expression)} has no key")
        key, operator = expression["key"], expression.get("operator")
        values = expression.get("values") or []
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise SelectorError(f"key {json.dumps(key)}: values must be strings")
        if operator not in _OPERATORS:
            raise SelectorError(f"key {json.dumps(key)}: unknown operator {json.dumps(operator)}")
        requirements.append(_checked(key, operator, values))
    return requirements


def validate(selector: dict | None) -> None:
    """Raises :class:`SelectorError` unless Kubernetes would accept ``selector``."""
    _requirements(selector)


def is_empty(selector: dict | None) -> bool:
    """Whether the selector is present and has no requirement at all (and so matches
    everything)."""
    return selector is not None and not (
        selector.get("matchLabels") or selector.get("matchExpressions")
    )


def matches(selector: dict | None, labels: dict[str, str]) -> bool:
    """Whether ``labels`` satisfy every requirement of ``selector``; never for no selector.
    Raises :class:`SelectorError` on an invalid selector, whatever the labels."""
    requirements = _requirements(selector)
    if selector is None:
        return False
    for key, operator, values in requirements:
        value = labels.get(key)
        if operator == "NotIn" and value is not None and value in values:
            return False
        if operator in ("In", "Equals") and value not in values:
            return False
        if operator == "Exists" and value is None:
            return False
        if operator == "DoesNotExist" and value is not None:
            return False
    return True


def to_query(selector: dict | None) -> str:
    """The selector in the API server's string syntax (``app=web,tier in (a,b),!legacy``), as
    apimachinery prints it, e.g. for :func:`kubewasm.cache.list`: requirements sorted by key
    (those on one key in the order given, ``matchLabels`` first), values sorted. Empty for an
    empty selector, and also for no selector, which matches nothing: tell them apart before
    listing. Raises :class:`SelectorError` on an invalid selector."""
    parts = []
    for key, operator, values in sorted(_requirements(selector), key=lambda r: r[0]):
        listed = ",".join(sorted(values))
        parts.append(
            {
                "Equals": f"{key}={listed}",
                "In": f"{key} in ({listed})",
                "NotIn": f"{key} notin ({listed})",
                "Exists": key,
                "DoesNotExist": f"!{key}",
            }[operator]
        )
    return ",".join(parts)
