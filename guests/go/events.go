package guest

import "kubewasm.dev/guest/internal/wit"

// EventType is the type of a Kubernetes Event.
type EventType uint8

// The event types, in the order of the WIT enum `event-type`.
const (
	Normal EventType = iota
	Warning
)

// RecordEvent records an Event about the object key of kind (its uid is filled in from the
// cache). reason is short CamelCase ("SuccessfulCreate"), action what the controller did
// ("Create"), note human-readable text. Events are best effort: repeated ones may be merged or
// dropped, so callers usually only log a failure.
func RecordEvent(kind GVK, key ObjectKey, eventType EventType, reason, action, note string) error {
	return hostError(wit.RecordEvent(wit.Event{
		Kind:      toGvk(kind),
		Namespace: key.Namespace,
		Name:      key.Name,
		EventType: uint8(eventType),
		Reason:    reason,
		Action:    action,
		Note:      note,
	}))
}
