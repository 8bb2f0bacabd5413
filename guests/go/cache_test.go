//go:build !wasip1

// The fake cache exists in native builds only (internal/wit/imports_other.go).

package guest

import (
	"reflect"
	"testing"

	"kubewasm.dev/guest/internal/wit"
)

// fakeCache answers every cache read with objects (or err) and records the calls.
type fakeCache struct {
	calls   []string
	objects []string
	err     *wit.Error
}

func (f *fakeCache) Get(kind wit.Gvk, namespace, name string) (string, bool, *wit.Error) {
	f.calls = append(f.calls, "get "+kind.Kind+" "+namespace+" "+name)
	if len(f.objects) == 0 || f.err != nil {
		return "", false, f.err
	}
	return f.objects[0], true, nil
}

func (f *fakeCache) List(kind wit.Gvk, namespace, labelSelector string) ([]string, *wit.Error) {
	f.calls = append(f.calls, "list "+kind.Kind+" "+namespace+" "+labelSelector)
	return f.objects, f.err
}

func (f *fakeCache) ListControlled(kind wit.Gvk, namespace, controllerUID string) ([]string, *wit.Error) {
	f.calls = append(f.calls, "list-controlled "+kind.Group+"/"+kind.Version+"/"+kind.Kind+" "+namespace+" "+controllerUID)
	return f.objects, f.err
}

// withCache makes the cache imports of this test answer from f.
func withCache(t *testing.T, f *fakeCache) *fakeCache {
	wit.FakeCache = f
	t.Cleanup(func() { wit.FakeCache = nil })
	return f
}

func TestListControlledPassesTheOwnerUIDAndDecodes(t *testing.T) {
	f := withCache(t, &fakeCache{objects: []string{`{"metadata":{"name":"a"}}`, `{"metadata":{"name":"b"}}`}})
	objects, err := ListControlled(KindOf("apps/v1", "ReplicaSet"), "ns", "owner-uid")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"list-controlled apps/v1/ReplicaSet ns owner-uid"}; !reflect.DeepEqual(f.calls, want) {
		t.Fatalf("calls: %q", f.calls)
	}
	if len(objects) != 2 || objects[1]["metadata"].(Object)["name"] != "b" {
		t.Fatalf("objects: %v", objects)
	}

	type named struct{ Metadata struct{ Name string } }
	typed, err := ListControlledAs[named](KindOf("v1", "Pod"), "", "owner-uid")
	if err != nil || len(typed) != 2 || typed[0].Metadata.Name != "a" {
		t.Fatalf("typed: %+v %v", typed, err)
	}
	if f.calls[1] != "list-controlled /v1/Pod  owner-uid" {
		t.Fatalf("all namespaces: %q", f.calls[1])
	}
}

func TestListControlledReturnsHostErrors(t *testing.T) {
	withCache(t, &fakeCache{err: &wit.Error{Case: wit.ErrorDenied, Message: "pods are not declared"}})
	objects, err := ListControlled(KindOf("v1", "Pod"), "ns", "owner-uid")
	if objects != nil || IsTransient(err) || err.Error() != "denied: pods are not declared" {
		t.Fatalf("got %v, %v", objects, err)
	}
}

func TestListControlledRefusesUndecodableObjects(t *testing.T) {
	withCache(t, &fakeCache{objects: []string{`{"metadata":{"name":"a"}}`, `{`}})
	if _, err := ListControlled(KindOf("v1", "Pod"), "ns", "owner-uid"); err == nil || IsTransient(err) {
		t.Fatalf("got %v", err)
	}
}

func TestListAndGetReachTheCache(t *testing.T) {
	f := withCache(t, &fakeCache{objects: []string{`{"metadata":{"name":"a"}}`}})
	if objects, err := List(KindOf("v1", "Pod"), "ns", "app=web"); err != nil || len(objects) != 1 {
		t.Fatalf("list: %v %v", objects, err)
	}
	if object, found, err := Get(KindOf("v1", "Pod"), "ns", "a"); err != nil || !found || object["metadata"] == nil {
		t.Fatalf("get: %v %v %v", object, found, err)
	}
	if want := []string{"list Pod ns app=web", "get Pod ns a"}; !reflect.DeepEqual(f.calls, want) {
		t.Fatalf("calls: %q", f.calls)
	}
}
