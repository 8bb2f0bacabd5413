// Package conditions keeps status conditions in the shape of metav1.Condition. It agrees with
// k8s.io/apimachinery/pkg/api/meta (checked against its vectors in guests/vectors), except that
// Set gives an empty Reason one.
//
//	conditions.Set(&status.Conditions, conditions.Condition{
//		Type: "Ready", Status: conditions.True, Reason: "ChildrenApplied", ObservedGeneration: 2,
//	})
package conditions

import "time"

// Status is whether a condition holds.
type Status string

// The condition statuses.
const (
	True    Status = "True"
	False   Status = "False"
	Unknown Status = "Unknown"
)

// StatusOf is True when holds, else False.
func StatusOf(holds bool) Status {
	if holds {
		return True
	}
	return False
}

// Condition is one condition, encoded like metav1.Condition.
type Condition struct {
	// Type is the condition's type, CamelCase ("Ready").
	Type   string `json:"type"`
	Status Status `json:"status"`
	// ObservedGeneration is the metadata.generation the condition was computed from; 0 for
	// none.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// LastTransitionTime is when Status last changed (RFC 3339, seconds).
	LastTransitionTime string `json:"lastTransitionTime"`
	// Reason is a machine-readable CamelCase reason for the last transition.
	Reason string `json:"reason"`
	// Message is human-readable details (may be empty).
	Message string `json:"message"`
}

// Find returns the condition of type conditionType, or nil.
func Find(conditions []Condition, conditionType string) *Condition {
	for i := range conditions {
		if conditions[i].Type == conditionType {
			return &conditions[i]
		}
	}
	return nil
}

// Set adds condition, or updates the condition of the same type, and reports whether anything
// changed.
//
// As in meta.SetStatusCondition, LastTransitionTime is kept while the status holds (so
// re-applying the same status is a no-op for the API server); when the condition is new or its
// status changes, it becomes the one in condition, or now when that is empty. An empty Reason
// becomes "Unspecified", since the API requires one.
func Set(conditions *[]Condition, condition Condition) bool {
	if condition.Reason == "" {
		condition.Reason = "Unspecified"
	}
	if condition.LastTransitionTime == "" {
		condition.LastTransitionTime = Now()
	}
	existing := Find(*conditions, condition.Type)
	if existing == nil {
		*conditions = append(*conditions, condition)
		return true
	}
	if existing.Status == condition.Status && existing.LastTransitionTime != "" {
		condition.LastTransitionTime = existing.LastTransitionTime
	}
	changed := *existing != condition
	*existing = condition
	return changed
}

// IsTrue reports whether the condition of type conditionType is present with status True.
func IsTrue(conditions []Condition, conditionType string) bool {
	return IsPresentAndEqual(conditions, conditionType, True)
}

// IsFalse reports whether the condition of type conditionType is present with status False.
func IsFalse(conditions []Condition, conditionType string) bool {
	return IsPresentAndEqual(conditions, conditionType, False)
}

// IsPresentAndEqual reports whether the condition of type conditionType is present with this
// status.
func IsPresentAndEqual(conditions []Condition, conditionType string, status Status) bool {
	c := Find(conditions, conditionType)
	return c != nil && c.Status == status
}

// Remove removes the condition of type conditionType and reports whether it was there.
func Remove(conditions *[]Condition, conditionType string) bool {
	kept := (*conditions)[:0]
	for _, c := range *conditions {
		if c.Type != conditionType {
			kept = append(kept, c)
		}
	}
	removed := len(kept) != len(*conditions)
	*conditions = kept
	return removed
}

// Now is the current time as RFC 3339 in UTC with second precision, as Kubernetes prints
// metav1.Time ("2024-05-01T12:00:00Z"). Inside a guest it reads the WASI wall clock.
func Now() string {
	return Format(time.Now())
}

// Format is t as RFC 3339 in UTC with second precision.
func Format(t time.Time) string {
	return t.UTC().Truncate(time.Second).Format(time.RFC3339)
}
