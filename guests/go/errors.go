package guest

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrorKind says why a host call failed.
type ErrorKind uint8

const (
	// APIFailure: the API server refused the request; see Error.Code and Error.Reason.
	APIFailure ErrorKind = iota
	// Denied: this guest may not do this, because the kind, verb or namespace is not declared
	// or not granted.
	Denied
	// Invalid: the request was malformed (invalid JSON, a missing field, a wrong kind).
	Invalid
	// Unavailable: the API server could not be reached in time; retrying later may succeed.
	Unavailable
)

// Error is a failed host call (cache read, write, event).
type Error struct {
	Kind ErrorKind
	// Code is the HTTP status of an APIFailure (404, 409, ...), 0 otherwise.
	Code int
	// Reason is the machine-readable reason of an APIFailure (NotFound, Conflict, ...).
	Reason  string
	Message string
}

func (e *Error) Error() string {
	switch e.Kind {
	case APIFailure:
		return fmt.Sprintf("API server answered %d %s: %s", e.Code, e.Reason, e.Message)
	case Denied:
		return "denied: " + e.Message
	case Invalid:
		return "invalid request: " + e.Message
	default:
		return "API server unavailable: " + e.Message
	}
}

// Transient reports whether retrying the same call later may succeed: false for Denied,
// Invalid and API statuses that describe a bad request (400, 405, 406, 413, 415, 422), true
// otherwise (conflicts, not found, throttling, server errors, an unreachable API server).
func (e *Error) Transient() bool {
	switch e.Kind {
	case APIFailure:
		switch e.Code {
		case 400, 405, 406, 413, 415, 422:
			return false
		}
		return true
	case Unavailable:
		return true
	default:
		return false
	}
}

// apiFailure is the APIFailure err is or wraps, or nil.
func apiFailure(err error) *Error {
	var e *Error
	if errors.As(err, &e) && e.Kind == APIFailure {
		return e
	}
	return nil
}

func statusCode(err error) int {
	if e := apiFailure(err); e != nil {
		return e.Code
	}
	return 0
}

// IsNotFound reports whether err is (or wraps) a 404 from the API server.
func IsNotFound(err error) bool {
	return statusCode(err) == 404
}

// IsConflict reports whether err is (or wraps) a 409 from the API server: a conflicting write,
// a failed precondition (uid, resourceVersion) or an object that already exists.
func IsConflict(err error) bool {
	return statusCode(err) == 409
}

// IsAlreadyExists reports whether err is (or wraps) a 409 with reason AlreadyExists: a create
// of an object that exists, or an owned [Apply] refused because the object exists and is not
// controlled by the reconciled object (see [ApplyOptions.Adopt]).
func IsAlreadyExists(err error) bool {
	e := apiFailure(err)
	return e != nil && e.Code == 409 && e.Reason == "AlreadyExists"
}

// IgnoreNotFound returns nil for a 404 and err otherwise, e.g.
// guest.IgnoreNotFound(guest.Delete(...)).
func IgnoreNotFound(err error) error {
	if IsNotFound(err) {
		return nil
	}
	return err
}

// ReconcileError is how a failed reconcile ends. Reconcile and Finalize may return any error;
// it is classified by [IsTransient] unless it is (or wraps) a ReconcileError.
type ReconcileError struct {
	// Permanent errors are not retried until the object changes; the others are retried with
	// per-key exponential backoff.
	Permanent bool
	Err       error
}

func (e *ReconcileError) Error() string {
	return e.Err.Error()
}

func (e *ReconcileError) Unwrap() error {
	return e.Err
}

// Transient marks err to be retried with backoff.
func Transient(err error) error {
	return &ReconcileError{Err: err}
}

// Permanent marks err not to be retried until the object changes.
func Permanent(err error) error {
	return &ReconcileError{Permanent: true, Err: err}
}

// IsTransient reports whether retrying may help, by the first of these that applies to err or
// an error it wraps: a [ReconcileError] says so; an error with a `Transient() bool` method
// (like [*Error]) says so; JSON syntax and type errors are permanent. Any other error is
// transient, so that unknown failures are retried with backoff.
func IsTransient(err error) bool {
	var reconcileError *ReconcileError
	if errors.As(err, &reconcileError) {
		return !reconcileError.Permanent
	}
	var classified interface{ Transient() bool }
	if errors.As(err, &classified) {
		return classified.Transient()
	}
	var syntax *json.SyntaxError
	var typeError *json.UnmarshalTypeError
	var unsupported *json.UnsupportedValueError
	var unsupportedType *json.UnsupportedTypeError
	return !errors.As(err, &syntax) && !errors.As(err, &typeError) &&
		!errors.As(err, &unsupported) && !errors.As(err, &unsupportedType)
}
