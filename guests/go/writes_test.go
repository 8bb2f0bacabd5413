package guest

import (
	"testing"

	"kubewasm.dev/guest/internal/wit"
)

// The options cross into the glue field by field.
func TestApplyOptionsAreTheRecordOfTheWorld(t *testing.T) {
	checks := []struct {
		options ApplyOptions
		want    wit.ApplyOptions
	}{
		{Owned, wit.ApplyOptions{Owned: true, Force: true}},
		{NotOwned, wit.ApplyOptions{Force: true}},
		{ApplyOptions{Owned: true, Adopt: true}, wit.ApplyOptions{Owned: true, Adopt: true}},
	}
	for _, check := range checks {
		if got := wit.ApplyOptions(check.options); got != check.want {
			t.Errorf("%+v: got %+v", check.options, got)
		}
	}
}

func TestStatusAppliesAreForcedOnlyWhenAsked(t *testing.T) {
	checks := []struct {
		options []StatusOptions
		force   bool
	}{
		{nil, false},
		{[]StatusOptions{{}}, false},
		{[]StatusOptions{{Force: true}}, true},
		{[]StatusOptions{{}, {Force: true}}, true},
	}
	for _, check := range checks {
		if got := statusOptions(check.options); got.Force != check.force {
			t.Errorf("%+v: got %+v", check.options, got)
		}
	}
}
