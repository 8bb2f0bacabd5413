package log

import (
	"reflect"
	"testing"

	"kubewasm.dev/guest/internal/wit"
)

func TestPairsKeysAndValues(t *testing.T) {
	got := fields("pod", "web-x7k2p", "replicas", 3, "dangling")
	want := []wit.Field{{Key: "pod", Value: "web-x7k2p"}, {Key: "replicas", Value: "3"}, {Key: "!BADKEY", Value: "dangling"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got := fields(); len(got) != 0 {
		t.Fatalf("no arguments: got %v", got)
	}
}
