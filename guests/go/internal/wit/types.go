// Package wit is the canonical-ABI glue between Go and the kubewasm:controller@0.2.1 world of
// wit/controller.wit: its types as Go values, its imports as Go functions and its exports as
// wasm exports calling the [Guest] registered with [Export].
//
// Mainline Go's wasm port has 64-bit pointers and strings, so Go values cannot share the
// canonical ABI's 32-bit memory layout; every value is copied in and out explicitly. A WIT
// `option<string>` is a Go string that is empty for `none`, except where the difference is
// observable (the primary object of a request).
//
// Outside GOOS=wasip1 the imports panic and [Export] only records the guest, so packages using
// this one build and test natively.
package wit

// Digest is the SHA-256 of the wit/controller.wit this glue implements; digest_test.go and
// the build scripts fail when the file changes, so the glue is updated with it.
const Digest = "fa17b6702f2769439b5fa35fd133bff8061b40e2507ad40ed2a289ab31e95b59"

// Gvk is the WIT record `gvk`.
type Gvk struct {
	Group, Version, Kind string
}

// Selection is the WIT record `selection`; empty strings stand for `none`.
type Selection struct {
	Kind          Gvk
	Namespace     string
	LabelSelector string
}

// Mapping cases of the WIT variant `mapping`.
const (
	MappingOwner uint8 = iota
	MappingLabel
	MappingGuest
)

// Mapping is the WIT variant `mapping`: a case and, for [MappingLabel], the label.
type Mapping struct {
	Case  uint8
	Label string
}

// Watch is the WIT record `watch`.
type Watch struct {
	Selection Selection
	Mapping   Mapping
}

// Flags of the WIT flags `changes`, as bits of [ControllerMetadata.ReconcileOn].
const (
	ChangesGeneration uint8 = 1 << iota
	ChangesLabels
	ChangesAnnotations
	ChangesAny
)

// ControllerMetadata is the WIT record `controller-metadata`; an empty finalizer and a zero
// resync stand for `none`. ReconcileOn holds the `Changes*` bits.
type ControllerMetadata struct {
	Name           string
	Primary        Selection
	Owns           []Gvk
	Watches        []Watch
	Finalizer      string
	MaxConcurrency uint32
	ResyncSeconds  uint32
	ReconcileOn    uint8
}

// ObjectKey is the WIT record `object-key`; an empty namespace stands for `none`.
type ObjectKey struct {
	Namespace, Name string
}

// Request is the WIT record `request`; the reason is the WIT enum's index. HasObject tells
// `some` from `none`.
type Request struct {
	Key       ObjectKey
	Reason    uint8
	Attempt   uint32
	HasObject bool
	Object    string
}

// Outcome is the WIT variant `outcome`: `requeue-after` when Requeue is set, else `done`.
type Outcome struct {
	Requeue      bool
	RequeueAfter uint64
}

// ReconcileError is the WIT variant `reconcile-error`.
type ReconcileError struct {
	Permanent bool
	Message   string
}

// Error cases of the WIT variant `error`.
const (
	ErrorAPI uint8 = iota
	ErrorDenied
	ErrorInvalid
	ErrorUnavailable
)

// Error is the WIT variant `error`: Code, Reason and Message of the `api-status` for
// [ErrorAPI], Message alone for the other cases.
type Error struct {
	Case    uint8
	Code    uint16
	Reason  string
	Message string
}

// ApplyOptions is the WIT record `apply-options`.
type ApplyOptions struct {
	Owned, Force, Adopt bool
}

// StatusOptions is the WIT record `status-options`.
type StatusOptions struct {
	Force bool
}

// Preconditions is the WIT record `preconditions`; empty strings stand for `none`.
type Preconditions struct {
	UID, ResourceVersion string
}

// Event is the WIT record `event`; EventType is the WIT enum's index.
type Event struct {
	Kind      Gvk
	Namespace string
	Name      string
	EventType uint8
	Reason    string
	Action    string
	Note      string
}

// Field is one `tuple<string, string>` of a log line.
type Field struct {
	Key, Value string
}

// Guest is what the component exports: the WIT interface `guest`.
type Guest interface {
	Metadata() ControllerMetadata
	Reconcile(Request) (Outcome, *ReconcileError)
	Finalize(Request) (Outcome, *ReconcileError)
	MapKeys(kind Gvk, object string) []ObjectKey
}

var guest Guest

// Export makes g the implementation of the component's exports. Call it once, from an init
// function: the host may call an export right after the module's initialisation.
func Export(g Guest) {
	guest = g
}
