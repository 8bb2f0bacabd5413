"""Label selectors (``matchLabels`` / ``matchExpressions``) held as dicts, as in
``metav1.LabelSelector``::

    selector = {"matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}
    matches(selector, {"app": "web", "tier": "a"})  # True
    to_query(selector)                              # "app=web,tier in (a,b)"

All requirements must hold (logical AND). A selector with neither ``matchLabels`` nor
``matchExpressions`` matches every object, as in Kubernetes."""

from __future__ import annotations

import json
from typing import Any

_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


class SelectorError(ValueError):
    """A selector Kubernetes would reject: an unknown operator, a wrong number of values or a
    malformed field."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"invalid label selector: {reason}")


def _match_labels(selector: Any) -> dict[str, str]:
    labels = selector.get("matchLabels") or {}
    if not isinstance(labels, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise SelectorError("matchLabels must map strings to strings")
    return labels


def _requirements(selector: Any) -> list[tuple[str, str, list[str]]]:
    """The ``matchExpressions`` as (key, operator, values), checked as the API server does."""
    expressions = selector.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise SelectorError("matchExpressions must be a list")
    requirements = []
    for expression in expressions:
        if not isinstance(expression, dict) or not isinstance(expression.get("key"), str):
            raise SelectorError(f"{json.dumps(expression)} has no key")
        key, operator = expression["key"], expression.get("operator")
        values = expression.get("values") or []
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise SelectorError(f"key {json.dumps(key)}: values must be strings")
        if operator not in _OPERATORS:
            raise SelectorError(f"key {json.dumps(key)}: unknown operator {json.dumps(operator)}")
        if operator in ("In", "NotIn") and not values:
            raise SelectorError(
                f"key {json.dumps(key)}: operator {operator} needs at least one value"
            )
        if operator in ("Exists", "DoesNotExist") and values:
            raise SelectorError(f"key {json.dumps(key)}: operator {operator} takes no values")
        requirements.append((key, operator, values))
    return requirements


def _checked(selector: Any) -> tuple[dict[str, str], list[tuple[str, str, list[str]]]]:
    if selector is None:
        selector = {}
    if not isinstance(selector, dict):
        raise SelectorError("a selector must be an object")
    return _match_labels(selector), _requirements(selector)


def validate(selector: dict | None) -> None:
    """Raises :class:`SelectorError` unless Kubernetes would accept ``selector``."""
    _checked(selector)


def is_empty(selector: dict | None) -> bool:
    """Whether the selector has no requirement at all (and so matches everything)."""
    return not selector or not (selector.get("matchLabels") or selector.get("matchExpressions"))


def matches(selector: dict | None, labels: dict[str, str]) -> bool:
    """Whether ``labels`` satisfy every requirement of ``selector``. Raises
    :class:`SelectorError` on an invalid selector, whatever the labels."""
    match_labels, requirements = _checked(selector)
    if any(labels.get(key) != value for key, value in match_labels.items()):
        return False
    for key, operator, values in requirements:
        value = labels.get(key)
        if operator == "In" and value not in values:
            return False
        if operator == "NotIn" and value is not None and value in values:
            return False
        if operator == "Exists" and value is None:
            return False
        if operator == "DoesNotExist" and value is not None:
            return False
    return True


def to_query(selector: dict | None) -> str:
    """The selector in the API server's string syntax (``app=web,tier in (a,b),!legacy``),
    sorted by key, e.g. for :func:`kubewasm.cache.list`. Empty for an empty selector. Raises
    :class:`SelectorError` on an invalid selector."""
    match_labels, requirements = _checked(selector)
    parts = [(key, f"{key}={value}") for key, value in match_labels.items()]
    for key, operator, values in requirements:
        listed = ",".join(sorted(set(values)))
        parts.append(
            (
                key,
                {
                    "In": f"{key} in ({listed})",
                    "NotIn": f"{key} notin ({listed})",
                    "Exists": key,
                    "DoesNotExist": f"!{key}",
                }[operator],
            )
        )
    return ",".join(part for _, part in sorted(parts))
