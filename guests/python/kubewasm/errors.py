"""Errors of host calls (:class:`HostError` and its subclasses) and of reconciles
(:class:`Transient`, :class:`Permanent`)."""

from __future__ import annotations

# API statuses describing a request that will fail the same way when retried.
_BAD_REQUEST_CODES = frozenset({400, 405, 406, 413, 415, 422})


class HostError(Exception):
    """A host call (cache read, write, event) failed.

    Raised out of ``reconcile``, it ends the reconcile as :class:`Transient` when
    :attr:`transient`, as :class:`Permanent` otherwise."""

    #: Whether retrying the same call later may succeed.
    transient = False

    @property
    def status_code(self) -> int | None:
        """The HTTP status code, for :class:`ApiError`."""
        return None

    @property
    def is_not_found(self) -> bool:
        """The API server answered 404: the object (or its namespace) does not exist."""
        return self.status_code == 404

    @property
    def is_conflict(self) -> bool:
        """The API server answered 409: a conflicting write, a failed precondition (uid,
        resourceVersion) or an object that already exists."""
        return self.status_code == 409

    @property
    def is_already_exists(self) -> bool:
        """The API server answered 409 ``AlreadyExists``: the object exists, or an owned
        :func:`~kubewasm.apply` was refused because the object exists and the reconciled object
        does not control it (see its ``adopt``)."""
        return False


class ApiError(HostError):
    """The API server refused the request."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(f"API server answered {code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message

    @property
    def status_code(self) -> int:
        return self.code

    @property
    def is_already_exists(self) -> bool:
        return self.code == 409 and self.reason == "AlreadyExists"

    @property
    def transient(self) -> bool:  # type: ignore[override]
        """False for statuses that describe a bad request (400, 405, 406, 413, 415, 422);
        true otherwise (conflicts, not found, throttling, server errors)."""
        return self.code not in _BAD_REQUEST_CODES


class DeniedError(HostError):
    """This controller may not do this: the kind, verb or namespace is not declared or not
    granted."""

    def __init__(self, message: str) -> None:
        super().__init__(f"denied: {message}")


class InvalidError(HostError):
    """The request was malformed: invalid JSON, a missing field, a wrong kind."""

    def __init__(self, message: str) -> None:
        super().__init__(f"invalid request: {message}")


class UnavailableError(HostError):
    """The API server could not be reached in time; retrying later may succeed."""

    transient = True

    def __init__(self, message: str) -> None:
        super().__init__(f"API server unavailable: {message}")


class ReconcileError(Exception):
    """Ends a reconcile or finalize with an error; raise :class:`Transient` or
    :class:`Permanent`."""

    transient = False

    @classmethod
    def from_host_error(cls, error: HostError, context: str = "") -> ReconcileError:
        """``error`` as :class:`Transient` or :class:`Permanent`, by
        :attr:`HostError.transient`, its message prefixed with ``context: `` if given."""
        kind = Transient if error.transient else Permanent
        return kind(f"{context}: {error}" if context else str(error))


class Transient(ReconcileError):
    """The host retries the key with per-key exponential backoff."""

    transient = True


class Permanent(ReconcileError):
    """The host does not retry until the object changes; it logs and counts the error."""
