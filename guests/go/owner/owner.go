// Package owner reads and builds owner references of objects held as [guest.Object].
package owner

import (
	"encoding/json"

	"kubewasm.dev/guest"
	"kubewasm.dev/guest/meta"
)

// Reference is one entry of metadata.ownerReferences.
type Reference struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Name of the owner, in the owned object's namespace or cluster-scoped.
	Name string `json:"name"`
	UID  string `json:"uid"`
	// Controller marks the managing controller; at most one reference has it.
	Controller *bool `json:"controller,omitempty"`
	// BlockOwnerDeletion makes the owner's foreground deletion wait for this object.
	BlockOwnerDeletion *bool `json:"blockOwnerDeletion,omitempty"`
}

// IsController reports whether r is a controller reference.
func (r Reference) IsController() bool {
	return r.Controller != nil && *r.Controller
}

// References is metadata.ownerReferences of object; malformed entries are skipped.
func References(object guest.Object) []Reference {
	entries, _ := meta.Metadata(object)["ownerReferences"].([]any)
	var references []Reference
	for _, entry := range entries {
		text, err := json.Marshal(entry)
		if err != nil {
			continue
		}
		var r Reference
		if json.Unmarshal(text, &r) == nil && r.APIVersion != "" && r.Kind != "" && r.Name != "" && r.UID != "" {
			references = append(references, r)
		}
	}
	return references
}

// ControllerOf returns the controller reference among references, and false if there is none.
func ControllerOf(references []Reference) (Reference, bool) {
	for _, r := range references {
		if r.IsController() {
			return r, true
		}
	}
	return Reference{}, false
}

// ControllerRef returns object's controller reference, and false if it has none.
func ControllerRef(object guest.Object) (Reference, bool) {
	return ControllerOf(References(object))
}

// ControllerKey returns the key of object's controller owner (its name, in object's
// namespace), and false if it has none. Handy in MapKeys.
func ControllerKey(object guest.Object) (guest.ObjectKey, bool) {
	r, ok := ControllerRef(object)
	if !ok {
		return guest.ObjectKey{}, false
	}
	return guest.ObjectKey{Namespace: meta.Namespace(object), Name: r.Name}, true
}

// IsControlledBy reports whether child's controller reference points at the object with uid
// ownerUID.
func IsControlledBy(child guest.Object, ownerUID string) bool {
	r, ok := ControllerRef(child)
	return ok && r.UID == ownerUID
}

// ControllerReference is a controller reference to owner (controller and blockOwnerDeletion
// true), as the host adds it for owned applies; false if owner lacks apiVersion, kind, name or
// uid.
func ControllerReference(owner guest.Object) (Reference, bool) {
	apiVersion, _ := owner["apiVersion"].(string)
	kind, _ := owner["kind"].(string)
	yes := true
	r := Reference{
		APIVersion:         apiVersion,
		Kind:               kind,
		Name:               meta.Name(owner),
		UID:                meta.UID(owner),
		Controller:         &yes,
		BlockOwnerDeletion: &yes,
	}
	return r, r.APIVersion != "" && r.Kind != "" && r.Name != "" && r.UID != ""
}
