package owner

import (
	"encoding/json"
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

func TestFindsTheController(t *testing.T) {
	owner := object(t, `{"apiVersion": "kubewasm.dev/v1alpha1", "kind": "PodSet",
		"metadata": {"name": "web", "namespace": "ns", "uid": "u1"}}`)
	reference, ok := ControllerReference(owner)
	if !ok {
		t.Fatal("no reference")
	}
	child := guest.Object{"metadata": map[string]any{"namespace": "ns", "ownerReferences": []any{
		map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": "u0"},
		map[string]any{"bogus": true},
		reference,
	}}}
	if n := len(References(child)); n != 2 {
		t.Fatalf("%d references", n)
	}
	if r, ok := ControllerRef(child); !ok || r.Name != "web" {
		t.Fatalf("controller %+v", r)
	}
	if key, ok := ControllerKey(child); !ok || key != (guest.ObjectKey{Namespace: "ns", Name: "web"}) {
		t.Fatalf("key %v", key)
	}
	if !IsControlledBy(child, "u1") || IsControlledBy(child, "u0") {
		t.Fatal("IsControlledBy")
	}
}

func TestOrphansHaveNoController(t *testing.T) {
	orphan := object(t, `{"metadata": {"ownerReferences": [
		{"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": "u0", "controller": false}]}}`)
	if _, ok := ControllerRef(orphan); ok {
		t.Fatal("controller: false is no controller")
	}
	if _, ok := ControllerKey(guest.Object{}); ok {
		t.Fatal("an empty object has a controller")
	}
	if _, ok := ControllerReference(guest.Object{"kind": "X"}); ok {
		t.Fatal("a reference to an incomplete owner")
	}
}

func TestSerialisesInAPIShape(t *testing.T) {
	yes := true
	text, err := json.Marshal(Reference{APIVersion: "kubewasm.dev/v1alpha1", Kind: "PodSet", Name: "web", UID: "u1", Controller: &yes, BlockOwnerDeletion: &yes})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"apiVersion":"kubewasm.dev/v1alpha1","kind":"PodSet","name":"web","uid":"u1","controller":true,"blockOwnerDeletion":true}`
	if string(text) != want {
		t.Fatalf("got %s", text)
	}
	text, _ = json.Marshal(Reference{APIVersion: "v1", Kind: "ConfigMap", Name: "cm", UID: "u"})
	if string(text) != `{"apiVersion":"v1","kind":"ConfigMap","name":"cm","uid":"u"}` {
		t.Fatalf("got %s", text)
	}
}
