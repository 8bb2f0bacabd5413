package selector

import (
	"encoding/json"
	"errors"
	"testing"

	"kubewasm.dev/guest/internal/vectors"
)

// vector is a selector and what apimachinery makes of it (guests/vectors/selectors.json).
type vector struct {
	Name     string
	Selector *LabelSelector
	Error    bool
	Empty    bool
	Query    string
	Matches  []struct {
		Labels map[string]string
		Match  bool
	}
}

func TestAgreesWithApimachinery(t *testing.T) {
	for _, v := range vectors.Load[vector](t, "selectors.json") {
		if v.Selector == nil {
			// A LabelSelector is a value, never nil: a *LabelSelector field tells an absent
			// selector (which matches nothing) from an empty one.
			continue
		}
		t.Run(v.Name, func(t *testing.T) {
			s := *v.Selector
			shown, _ := json.Marshal(s)
			_, queryErr := s.Query()
			_, matchErr := s.Matches(nil)
			for _, err := range []error{s.Validate(), queryErr, matchErr} {
				var invalid *Error
				if errors.As(err, &invalid) != v.Error || (err != nil) != v.Error {
					t.Fatalf("%s: error %v, apimachinery's %v", shown, err, v.Error)
				}
			}
			if v.Error {
				return
			}
			if query, _ := s.Query(); s.Empty() != v.Empty || query != v.Query {
				t.Errorf("%s: empty %v, query %q; apimachinery's %v, %q", shown, s.Empty(), query, v.Empty, v.Query)
			}
			for _, c := range v.Matches {
				if got, _ := s.Matches(c.Labels); got != c.Match {
					t.Errorf("%s on %q: %v, apimachinery's %v", shown, c.Labels, got, c.Match)
				}
			}
		})
	}
}
