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
// ordered by namespace, then name. A selector with an equality ("app=web", "app==web" or
// "app in (web)") is served from the host's index of that label key, so it costs the objects
// with that label value rather than the namespace.
// [kubewasm.dev/guest/selector.LabelSelector.Query] renders the selector of an object's spec.
func List(kind GVK, namespace, labelSelector string) ([]Object, error) {
	return ListAs[Object](kind, namespace, labelSelector)
}

// ListAs is [List] decoding the objects into Ts.
func ListAs[T any](kind GVK, namespace, labelSelector string) ([]T, error) {
	texts, err := wit.List(toGvk(kind), namespace, labelSelector)
	return decodeAll[T](kind, texts, err)
}

// ListControlled returns every cached object of kind in namespace (empty: all namespaces)
// whose controller reference (the entry of metadata.ownerReferences with controller: true) has
// the uid controllerUID: the objects that owner controls, e.g. the pods of a ReplicaSet,
// ordered by namespace, then name. Objects that merely list the owner among other owners are
// not included. The host serves it from an index, so it costs the objects found, however many
// others the namespace holds.
func ListControlled(kind GVK, namespace, controllerUID string) ([]Object, error) {
	return ListControlledAs[Object](kind, namespace, controllerUID)
}

// ListControlledAs is [ListControlled] decoding the objects into Ts.
func ListControlledAs[T any](kind GVK, namespace, controllerUID string) ([]T, error) {
	texts, err := wit.ListControlled(toGvk(kind), namespace, controllerUID)
	return decodeAll[T](kind, texts, err)
}

// decodeAll decodes the objects of a list the host returned, or converts its error.
func decodeAll[T any](kind GVK, texts []string, err *wit.Error) ([]T, error) {
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
