package guest

import (
	"encoding/json"
	"fmt"

	"kubewasm.dev/guest/internal/wit"
)

// Reads from the host's informer cache. They never reach the API server and only cover the
// kinds the controller declared (primary, owned and watched). Cached objects have
// metadata.managedFields stripped.

// Get returns the object namespace/name of kind (namespace empty for a cluster-scoped kind),
// and false if the cache does not hold it.
func Get(kind GVK, namespace, name string) (Object, bool, error) {
	return GetAs[Object](kind, namespace, name)
}

// GetAs is [Get] decoding the object into a T, e.g. a struct of your own.
func GetAs[T any](kind GVK, namespace, name string) (T, bool, error) {
	var object T
	text, found, err := wit.Get(toGvk(kind), namespace, name)
	if err != nil || !found {
		return object, false, hostError(err)
	}
	if err := json.Unmarshal([]byte(text), &object); err != nil {
		return object, false, fmt.Errorf("decoding %s %s: %w", kind.Kind, name, err)
	}
	return object, true, nil
}

// List returns every cached object of kind in namespace (empty: all namespaces), optionally
// filtered by a label selector in the API server's syntax ("app=web,tier in (a,b),!legacy"),
// ordered by namespace, then name.
func List(kind GVK, namespace, labelSelector string) ([]Object, error) {
	return ListAs[Object](kind, namespace, labelSelector)
}

// ListAs is [List] decoding the objects into Ts.
func ListAs[T any](kind GVK, namespace, labelSelector string) ([]T, error) {
	texts, err := wit.List(toGvk(kind), namespace, labelSelector)
	if err != nil {
		return nil, hostError(err)
	}
	objects := make([]T, len(texts))
	for i, text := range texts {
		if err := json.Unmarshal([]byte(text), &objects[i]); err != nil {
			return nil, fmt.Errorf("decoding a %s: %w", kind.Kind, err)
		}
	}
	return objects, nil
}
