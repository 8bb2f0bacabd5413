package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

func api(code int, reason string) error {
	return &Error{Kind: APIFailure, Code: code, Reason: reason, Message: "m"}
}

func TestClassifiesAPIStatuses(t *testing.T) {
	wrapped := fmt.Errorf("get pod: %w", api(404, "NotFound"))
	checks := []struct {
		name string
		got  bool
		want bool
	}{
		{"404 is not found", IsNotFound(wrapped), true},
		{"409 is a conflict", IsConflict(api(409, "Conflict")), true},
		{"a refused adoption already exists", IsAlreadyExists(fmt.Errorf("x: %w", api(409, "AlreadyExists"))), true},
		{"a refused adoption is a conflict", IsConflict(api(409, "AlreadyExists")), true},
		{"a conflict does not already exist", IsAlreadyExists(api(409, "Conflict")), false},
		{"a denial does not already exist", IsAlreadyExists(&Error{Kind: Denied, Reason: "AlreadyExists"}), false},
		{"409 is not not found", IsNotFound(api(409, "Conflict")), false},
		{"409 is transient", IsTransient(api(409, "Conflict")), true},
		{"503 is transient", IsTransient(api(503, "ServiceUnavailable")), true},
		{"422 is permanent", IsTransient(api(422, "Invalid")), false},
		{"denied is permanent", IsTransient(&Error{Kind: Denied}), false},
		{"unavailable is transient", IsTransient(&Error{Kind: Unavailable}), true},
		{"unknown errors are transient", IsTransient(errors.New("boom")), true},
		{"marked permanent", IsTransient(Permanent(api(503, "x"))), false},
		{"marked transient", IsTransient(fmt.Errorf("x: %w", Transient(api(422, "x")))), true},
	}
	for _, check := range checks {
		if check.got != check.want {
			t.Errorf("%s: got %v", check.name, check.got)
		}
	}
	if got := wrapped.Error(); got != "get pod: API server answered 404 NotFound: m" {
		t.Errorf("message: %q", got)
	}
}

func TestJSONErrorsArePermanent(t *testing.T) {
	var n int
	err := json.Unmarshal([]byte(`"x"`), &n)
	if IsTransient(err) || IsTransient(json.Unmarshal([]byte(`{`), &n)) {
		t.Fatal("JSON errors must be permanent")
	}
}

func TestIgnoresNotFoundOnly(t *testing.T) {
	if IgnoreNotFound(api(404, "NotFound")) != nil || IgnoreNotFound(nil) != nil {
		t.Fatal("404 and nil must become nil")
	}
	if IgnoreNotFound(api(409, "Conflict")) == nil {
		t.Fatal("409 must stay")
	}
}
