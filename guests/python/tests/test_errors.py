from kubewasm import (
    ApiError,
    DeniedError,
    InvalidError,
    Permanent,
    ReconcileError,
    Transient,
    UnavailableError,
)


def test_classifies_api_statuses():
    assert ApiError(404, "NotFound", "m").is_not_found
    assert ApiError(409, "Conflict", "m").is_conflict
    assert not ApiError(409, "Conflict", "m").is_not_found
    assert ApiError(409, "AlreadyExists", "m").is_already_exists
    assert ApiError(409, "AlreadyExists", "m").is_conflict
    assert not ApiError(409, "Conflict", "m").is_already_exists
    assert not DeniedError("AlreadyExists").is_already_exists
    assert ApiError(409, "Conflict", "m").transient
    assert ApiError(503, "ServiceUnavailable", "m").transient
    assert not ApiError(422, "Invalid", "m").transient
    assert not DeniedError("no").transient
    assert not InvalidError("bad").transient
    assert UnavailableError("timeout").transient
    assert DeniedError("no").status_code is None


def test_messages_match_the_rust_sdk():
    assert str(ApiError(404, "NotFound", "m")) == "API server answered 404 NotFound: m"
    assert str(DeniedError("no")) == "denied: no"
    assert str(UnavailableError("t")) == "API server unavailable: t"


def test_converts_into_reconcile_errors():
    conflict = ReconcileError.from_host_error(ApiError(409, "Conflict", "m"))
    assert isinstance(conflict, Transient) and conflict.transient
    invalid = ReconcileError.from_host_error(ApiError(422, "Invalid", "m"))
    assert isinstance(invalid, Permanent) and not invalid.transient
    context = ReconcileError.from_host_error(ApiError(404, "NotFound", "m"), "get pod")
    assert str(context) == "get pod: API server answered 404 NotFound: m"
