package guest

import (
	"errors"
	"testing"
	"time"

	"kubewasm.dev/guest/internal/wit"
)

func request(object string) wit.Request {
	return wit.Request{Key: wit.ObjectKey{Namespace: "ns", Name: "web"}, Reason: 1, Attempt: 2, HasObject: true, Object: object}
}

func TestRunDecodesTheRequest(t *testing.T) {
	var seen Request
	var decoded struct {
		Metadata struct{ Name string }
	}
	outcome, err := run(request(`{"metadata":{"name":"web"}}`), func(req Request) (Action, error) {
		seen = req
		found, err := req.Decode(&decoded)
		if !found || err != nil {
			t.Fatalf("decode: %v %v", found, err)
		}
		return RequeueAfter(1500 * time.Millisecond), nil
	})
	if err != nil || !outcome.Requeue || outcome.RequeueAfter != 1500 {
		t.Fatalf("got %+v %+v", outcome, err)
	}
	if seen.Key.String() != "ns/web" || seen.Reason != Changed || seen.Attempt != 2 || decoded.Metadata.Name != "web" {
		t.Fatalf("request: %+v, decoded %+v", seen, decoded)
	}
	if seen.Object["metadata"].(Object)["name"] != "web" {
		t.Fatalf("object: %v", seen.Object)
	}
}

func TestRunWithoutAnObject(t *testing.T) {
	raw := request("")
	raw.HasObject = false
	outcome, err := run(raw, func(req Request) (Action, error) {
		if found, _ := req.Decode(new(Object)); found || req.Object != nil {
			t.Fatal("a deleted object decodes")
		}
		return Done, nil
	})
	if err != nil || outcome.Requeue {
		t.Fatalf("got %+v %+v", outcome, err)
	}
}

func TestRunClassifiesErrors(t *testing.T) {
	_, err := run(request(`{`), func(Request) (Action, error) { return Done, nil })
	if err == nil || !err.Permanent {
		t.Fatalf("invalid JSON: %+v", err)
	}
	_, err = run(request(`{}`), func(Request) (Action, error) { return Done, errors.New("later") })
	if err == nil || err.Permanent || err.Message != "later" {
		t.Fatalf("plain error: %+v", err)
	}
	_, err = run(request(`{}`), func(Request) (Action, error) { return Done, Permanent(errors.New("never")) })
	if err == nil || !err.Permanent || err.Message != "never" {
		t.Fatalf("permanent error: %+v", err)
	}
}
