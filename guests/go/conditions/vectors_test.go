package conditions

import (
	"encoding/json"
	"slices"
	"testing"

	"kubewasm.dev/guest/internal/vectors"
)

// vector is a list of conditions and steps on it, with apimachinery's answers
// (guests/vectors/conditions.json).
type vector struct {
	Name       string
	Conditions []Condition
	Steps      []struct {
		Op, Type   string
		Condition  *Condition
		Status     Status
		Changed    *bool
		Removed    *bool
		Found      *Condition
		Result     *bool
		Conditions []Condition
	}
}

func TestAgreesWithApimachinery(t *testing.T) {
	for _, v := range vectors.Load[vector](t, "conditions.json") {
		t.Run(v.Name, func(t *testing.T) {
			list := slices.Clone(v.Conditions)
			for i, s := range v.Steps {
				var agrees bool
				switch s.Op {
				case "set":
					agrees = Set(&list, *s.Condition) == *s.Changed && slices.Equal(list, s.Conditions)
				case "remove":
					agrees = Remove(&list, s.Type) == *s.Removed && slices.Equal(list, s.Conditions)
				case "find":
					found := Find(list, s.Type)
					agrees = (found == nil) == (s.Found == nil) && (found == nil || *found == *s.Found)
				case "isTrue":
					agrees = IsTrue(list, s.Type) == *s.Result
				case "isFalse":
					agrees = IsFalse(list, s.Type) == *s.Result
				case "isPresentAndEqual":
					agrees = IsPresentAndEqual(list, s.Type, s.Status) == *s.Result
				default:
					t.Fatalf("unknown step %s", s.Op)
				}
				if !agrees {
					want, _ := json.Marshal(s)
					t.Fatalf("step %d disagrees with apimachinery's %s; conditions now %+v", i, want, list)
				}
			}
		})
	}
}
