package main

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func source(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: "s1", Namespace: "bench", UID: "source-uid", ResourceVersion: "7",
			Labels:      map[string]string{roleLabel: sourceRole, "other": "x"},
			Annotations: map[string]string{"a": "b"},
		},
		Data: data,
	}
}

// asJSON is the apply configuration of source's child as the API server receives it.
func asJSON(t *testing.T, source *corev1.ConfigMap) map[string]any {
	t.Helper()
	text, err := json.Marshal(child(source))
	if err != nil {
		t.Fatal(err)
	}
	var object map[string]any
	if err := json.Unmarshal(text, &object); err != nil {
		t.Fatal(err)
	}
	return object
}

func TestChildCopiesEveryDataKeyAndIsControlledByTheSource(t *testing.T) {
	got, err := json.Marshal(asJSON(t, source(map[string]string{"a": "1", "b": "two"})))
	if err != nil {
		t.Fatal(err)
	}
	// encoding/json sorts map keys, so equal objects give equal text.
	want := `{"apiVersion":"v1","data":{"a":"1","b":"two"},"kind":"ConfigMap","metadata":{` +
		`"labels":{"bench.kubewasm.dev/role":"copy","bench.kubewasm.dev/source":"s1"},` +
		`"name":"s1-copy","namespace":"bench","ownerReferences":[{"apiVersion":"v1",` +
		`"blockOwnerDeletion":true,"controller":true,"kind":"ConfigMap","name":"s1","uid":"source-uid"}]}}`
	if string(got) != want {
		t.Fatalf("child:\n got %s\nwant %s", got, want)
	}
}

func TestChildOfASourceWithoutDataHasNoData(t *testing.T) {
	for _, data := range []map[string]string{nil, {}} {
		got := asJSON(t, source(data))
		if _, ok := got["data"]; ok {
			t.Errorf("child of a source with data %v has data: %v", data, got)
		}
	}
}
