// Package meta reads the metadata of objects held as [guest.Object]. Missing or mistyped fields
// read as absent (the zero value); nothing here panics.
package meta

import (
	"encoding/json"
	"math"

	"kubewasm.dev/guest"
)

// Metadata is the object's metadata map, or nil.
func Metadata(object guest.Object) map[string]any {
	metadata, _ := object["metadata"].(map[string]any)
	return metadata
}

func str(object guest.Object, field string) string {
	value, _ := Metadata(object)[field].(string)
	return value
}

// Name is metadata.name.
func Name(object guest.Object) string { return str(object, "name") }

// Namespace is metadata.namespace; empty for a cluster-scoped object.
func Namespace(object guest.Object) string { return str(object, "namespace") }

// UID is metadata.uid.
func UID(object guest.Object) string { return str(object, "uid") }

// ResourceVersion is metadata.resourceVersion.
func ResourceVersion(object guest.Object) string { return str(object, "resourceVersion") }

// CreationTimestamp is metadata.creationTimestamp (RFC 3339).
func CreationTimestamp(object guest.Object) string { return str(object, "creationTimestamp") }

// IsDeleting reports whether metadata.deletionTimestamp is set: the object is being deleted.
func IsDeleting(object guest.Object) bool { return str(object, "deletionTimestamp") != "" }

// Generation is metadata.generation, and false when it is absent or not an integer.
func Generation(object guest.Object) (int64, bool) {
	return Int(Metadata(object)["generation"])
}

// Int reads a JSON integer decoded as float64 (encoding/json's default) or json.Number.
func Int(value any) (int64, bool) {
	switch n := value.(type) {
	case float64:
		if n != math.Trunc(n) || math.Abs(n) > 1<<53 {
			return 0, false
		}
		return int64(n), true
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	}
	return 0, false
}

// Labels is metadata.labels; entries whose value is not a string are skipped. Never nil.
func Labels(object guest.Object) map[string]string {
	return stringMap(Metadata(object)["labels"])
}

// Annotations is metadata.annotations; entries whose value is not a string are skipped. Never
// nil.
func Annotations(object guest.Object) map[string]string {
	return stringMap(Metadata(object)["annotations"])
}

func stringMap(value any) map[string]string {
	entries, _ := value.(map[string]any)
	out := make(map[string]string, len(entries))
	for key, value := range entries {
		if s, ok := value.(string); ok {
			out[key] = s
		}
	}
	return out
}

// Key is the object's namespace and name, and false if it has no name.
func Key(object guest.Object) (guest.ObjectKey, bool) {
	key := guest.ObjectKey{Namespace: Namespace(object), Name: Name(object)}
	return key, key.Name != ""
}
