package main

import (
	"reflect"
	"testing"

	"kubewasm.dev/guest"
)

func TestDescribesTheConfigMap(t *testing.T) {
	req := guest.Request{
		Key: guest.ObjectKey{Namespace: "default", Name: "greeting"},
		Object: guest.Object{
			"metadata": map[string]any{"name": "greeting", "resourceVersion": "7"},
			"data":     map[string]any{"text": "hello", "language": "en"},
		},
	}
	want := []any{"key", "default/greeting", "resourceVersion", "7", "dataKeys", "2"}
	if got := describe(req); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
