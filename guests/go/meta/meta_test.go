package meta

import (
	"encoding/json"
	"reflect"
	"testing"

	"kubewasm.dev/guest"
)

func object(t *testing.T, text string) guest.Object {
	t.Helper()
	var o guest.Object
	if err := json.Unmarshal([]byte(text), &o); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestReadsMetadata(t *testing.T) {
	pod := object(t, `{"metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "7",
		"generation": 3, "creationTimestamp": "2024-01-01T00:00:00Z",
		"labels": {"app": "web", "bad": 1}, "annotations": {"a": "b"}}}`)
	got := []string{Name(pod), Namespace(pod), UID(pod), ResourceVersion(pod), CreationTimestamp(pod)}
	if !reflect.DeepEqual(got, []string{"p", "ns", "u", "7", "2024-01-01T00:00:00Z"}) {
		t.Fatalf("got %v", got)
	}
	if generation, ok := Generation(pod); generation != 3 || !ok {
		t.Fatalf("generation %d %v", generation, ok)
	}
	if IsDeleting(pod) {
		t.Fatal("not deleting")
	}
	if !reflect.DeepEqual(Labels(pod), map[string]string{"app": "web"}) || Annotations(pod)["a"] != "b" {
		t.Fatalf("labels %v annotations %v", Labels(pod), Annotations(pod))
	}
	if key, ok := Key(pod); !ok || key != (guest.ObjectKey{Namespace: "ns", Name: "p"}) {
		t.Fatalf("key %v", key)
	}
}

func TestMissingFieldsReadAsAbsent(t *testing.T) {
	for _, o := range []guest.Object{nil, {}, {"metadata": "nonsense"}} {
		if _, ok := Key(o); ok || Labels(o) == nil || len(Labels(o)) != 0 {
			t.Fatalf("%v: has a key or labels", o)
		}
		if _, ok := Generation(o); ok {
			t.Fatalf("%v: has a generation", o)
		}
	}
	if IsDeleting(object(t, `{"metadata": {"deletionTimestamp": "2024-01-02T00:00:00Z"}}`)) != true {
		t.Fatal("deleting")
	}
	if _, ok := Int(1.5); ok {
		t.Fatal("1.5 is not an integer")
	}
}
