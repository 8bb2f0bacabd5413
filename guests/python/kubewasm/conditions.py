"""Status conditions in the shape of ``metav1.Condition``, held as dicts in a list::

    conditions = status.setdefault("conditions", [])
    set_condition(conditions, "Ready", True, "ChildrenApplied", observed_generation=2)

The helpers change the list in place. They agree with those of
``k8s.io/apimachinery/pkg/api/meta`` (checked against its vectors in ``guests/vectors``), except
that :func:`set_condition` gives an empty ``reason`` one."""

from __future__ import annotations

import time

#: A condition's status: ``"True"``, ``"False"`` or ``"Unknown"``, or a bool.
Status = bool | str


def _status(status: Status) -> str:
    if isinstance(status, bool):
        return "True" if status else "False"
    if status not in ("True", "False", "Unknown"):
        raise ValueError(f"condition status {status!r} is not True, False or Unknown")
    return status


def find_condition(conditions: list[dict], type_: str) -> dict | None:
    """The condition of type ``type_``, if present."""
    return next((c for c in conditions if c.get("type") == type_), None)


def set_condition(
    conditions: list[dict],
    type_: str,
    status: Status,
    reason: str,
    message: str = "",
    observed_generation: int | None = None,
    last_transition_time: str | None = None,
) -> bool:
    """Adds or updates the condition of type ``type_`` in place; returns whether anything
    changed.

    As in ``meta.SetStatusCondition``, ``lastTransitionTime`` is kept while the status holds (so
    re-applying the same status is a no-op for the API server); when the condition is new or its
    status changes, it becomes ``last_transition_time`` (RFC 3339), or now when that is
    ``None``. An empty ``reason`` becomes ``Unspecified``, since the API requires one."""
    status = _status(status)
    existing = find_condition(conditions, type_)
    since = existing.get("lastTransitionTime") if existing is not None else None
    if not since or existing is None or existing.get("status") != status:
        since = last_transition_time or now_rfc3339()
    updated = {
        "type": type_,
        "status": status,
        "lastTransitionTime": since,
        "reason": reason or "Unspecified",
        "message": message,
    }
    if observed_generation is not None:
        updated["observedGeneration"] = observed_generation
    if existing is None:
        conditions.append(updated)
        return True
    changed = existing != updated
    existing.clear()
    existing.update(updated)
    return changed


def remove_condition(conditions: list[dict], type_: str) -> bool:
    """Removes the condition of type ``type_`` in place; returns whether it was present."""
    before = len(conditions)
    conditions[:] = [c for c in conditions if c.get("type") != type_]
    return len(conditions) != before


def is_condition_true(conditions: list[dict], type_: str) -> bool:
    """Whether the condition of type ``type_`` is present with status ``"True"``."""
    return is_condition_present_and_equal(conditions, type_, "True")


def is_condition_false(conditions: list[dict], type_: str) -> bool:
    """Whether the condition of type ``type_`` is present with status ``"False"``."""
    return is_condition_present_and_equal(conditions, type_, "False")


def is_condition_present_and_equal(conditions: list[dict], type_: str, status: Status) -> bool:
    """Whether the condition of type ``type_`` is present with this status."""
    found = find_condition(conditions, type_)
    return found is not None and found.get("status") == _status(status)


def now_rfc3339() -> str:
    """The current time as RFC 3339 in UTC with second precision, as Kubernetes prints
    ``metav1.Time`` (``2024-05-01T12:00:00Z``). Uses the WASI wall clock inside a component."""
    return rfc3339(time.time())


def rfc3339(seconds: float) -> str:
    """``seconds`` since the Unix epoch as RFC 3339 in UTC, rounded down to the second; times
    before 1970 print as the epoch."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(max(0, int(seconds))))
