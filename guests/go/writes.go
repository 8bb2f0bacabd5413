package guest

import (
	"encoding/json"

	"kubewasm.dev/guest/internal/wit"
)

// Writes, executed by the host with the field manager kubewasm-<name>. Objects and patches are
// anything encoding/json encodes: an [Object], a struct of your own, a JSON-shaped map or slice.

// ApplyOptions are the options of a server-side apply.
type ApplyOptions struct {
	// Owned makes the object being reconciled the controller owner of the applied object
	// (ownerReferences with controller and blockOwnerDeletion true).
	Owned bool
	// Force takes over fields another manager owns instead of failing with a conflict.
	Force bool
	// Adopt, with Owned, takes control of an existing object that has no controller owner.
	// Without it, an owned apply to an existing object that the reconciled object does not
	// control fails with a 409 AlreadyExists (see [IsAlreadyExists]) and nothing is sent. An
	// object controlled by another owner is never taken over.
	Adopt bool
}

var (
	// Owned applies an object owned by the object being reconciled, taking over conflicting
	// fields, without adopting an existing object it does not control: what most controllers
	// want.
	Owned = ApplyOptions{Owned: true, Force: true}
	// NotOwned applies an object outside the reconciled object's owner tree, taking over
	// conflicting fields.
	NotOwned = ApplyOptions{Force: true}
)

// StatusOptions are the options of a server-side apply of the status subresource.
type StatusOptions struct {
	// Force takes over status fields another manager owns instead of failing with a conflict.
	Force bool
}

// Preconditions of a delete; empty fields are not checked.
type Preconditions struct {
	// UID deletes only the object with this uid, not a newer one with the same name.
	UID string
	// ResourceVersion deletes only if the object still has this resourceVersion.
	ResourceVersion string
}

func encode(value any) (string, error) {
	text, err := json.Marshal(value)
	return string(text), err
}

func decode(text string, err *wit.Error) (Object, error) {
	if err != nil {
		return nil, hostError(err)
	}
	var object Object
	if err := json.Unmarshal([]byte(text), &object); err != nil {
		return nil, err
	}
	return object, nil
}

// Apply server-side applies object, which must carry apiVersion, kind and metadata.name;
// metadata.namespace defaults to the reconciled object's. Include only the fields this
// controller manages. It returns the object as the API server holds it afterwards; an apply
// that would change nothing is not sent.
func Apply(object any, options ApplyOptions) (Object, error) {
	text, err := encode(object)
	if err != nil {
		return nil, err
	}
	return decode(wit.Apply(text, wit.ApplyOptions(options)))
}

// ApplyStatus server-side applies the status subresource of object (apiVersion, kind,
// metadata.name and status), with the same rules as [Apply]. It is forced only if one of
// options asks: by default a status field another manager owns fails with a 409 Conflict.
func ApplyStatus(object any, options ...StatusOptions) (Object, error) {
	text, err := encode(object)
	if err != nil {
		return nil, err
	}
	return decode(wit.ApplyStatus(text, statusOptions(options)))
}

// statusOptions merges the options of an [ApplyStatus]: forced if any of them asks.
func statusOptions(options []StatusOptions) wit.StatusOptions {
	var merged wit.StatusOptions
	for _, o := range options {
		merged.Force = merged.Force || o.Force
	}
	return merged
}

// Delete deletes an object with background propagation. An object that is already gone yields
// a 404 (see [IgnoreNotFound]); a failed precondition a 409.
func Delete(kind GVK, namespace, name string, preconditions Preconditions) error {
	return hostError(wit.Delete(toGvk(kind), namespace, name, wit.Preconditions(preconditions)))
}

// PatchMerge applies an RFC 7386 JSON merge patch (nil removes a key) and returns the patched
// object.
func PatchMerge(kind GVK, namespace, name string, patch any) (Object, error) {
	return sendPatch(kind, namespace, name, 0, patch)
}

// PatchJSON applies an RFC 6902 JSON patch (a list of operations) and returns the patched
// object. A "replace" of /metadata/resourceVersion with the resourceVersion the guest read
// makes it an optimistic-concurrency write: it fails with a 409 if the object changed since.
func PatchJSON(kind GVK, namespace, name string, patch any) (Object, error) {
	return sendPatch(kind, namespace, name, 1, patch)
}

func sendPatch(kind GVK, namespace, name string, patchType uint8, patch any) (Object, error) {
	text, err := encode(patch)
	if err != nil {
		return nil, err
	}
	return decode(wit.Patch(toGvk(kind), namespace, name, patchType, text))
}
