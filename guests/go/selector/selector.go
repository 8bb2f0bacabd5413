// Package selector evaluates label selectors (matchLabels and matchExpressions), as in
// metav1.LabelSelector.
//
//	var s selector.LabelSelector // decoded from {"matchLabels": {"app": "web"}, ...}
//	ok, err := s.Matches(map[string]string{"app": "web"})
//	query, err := s.Query() // "app=web", for guest.List
package selector

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// LabelSelector is a label selector; all its requirements must hold. A selector with neither
// matchLabels nor matchExpressions matches every object, as in Kubernetes.
type LabelSelector struct {
	// MatchLabels are labels that must be present with exactly these values.
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
	// MatchExpressions are set-based requirements.
	MatchExpressions []Requirement `json:"matchExpressions,omitempty"`
}

// Requirement is one set-based requirement: Key Operator Values.
type Requirement struct {
	Key string `json:"key"`
	// Operator is In, NotIn, Exists or DoesNotExist.
	Operator string `json:"operator"`
	// Values are non-empty for In and NotIn, empty for Exists and DoesNotExist.
	Values []string `json:"values,omitempty"`
}

// Error is a selector that Kubernetes would reject: an unknown operator or a wrong number of
// values.
type Error struct {
	Key, Problem string
}

func (e *Error) Error() string {
	return fmt.Sprintf("invalid label selector: key %q: %s", e.Key, e.Problem)
}

// Transient is false: an invalid selector stays invalid until its object changes, so a
// reconcile failing with it is not retried.
func (e *Error) Transient() bool {
	return false
}

func (r Requirement) validate() error {
	switch r.Operator {
	case "In", "NotIn":
		if len(r.Values) == 0 {
			return &Error{r.Key, "operator " + r.Operator + " needs at least one value"}
		}
	case "Exists", "DoesNotExist":
		if len(r.Values) != 0 {
			return &Error{r.Key, "operator " + r.Operator + " takes no values"}
		}
	default:
		return &Error{r.Key, fmt.Sprintf("unknown operator %q", r.Operator)}
	}
	return nil
}

// Empty reports whether s has no requirement at all (and so matches everything).
func (s LabelSelector) Empty() bool {
	return len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0
}

// Validate returns an [*Error] for the first invalid requirement.
func (s LabelSelector) Validate() error {
	for _, r := range s.MatchExpressions {
		if err := r.validate(); err != nil {
			return err
		}
	}
	return nil
}

// Matches reports whether labels satisfy every requirement. It fails on an invalid selector,
// whatever the labels.
func (s LabelSelector) Matches(labels map[string]string) (bool, error) {
	if err := s.Validate(); err != nil {
		return false, err
	}
	for key, value := range s.MatchLabels {
		if got, ok := labels[key]; !ok || got != value {
			return false, nil
		}
	}
	for _, r := range s.MatchExpressions {
		value, ok := labels[r.Key]
		var holds bool
		switch r.Operator {
		case "In":
			holds = ok && slices.Contains(r.Values, value)
		case "NotIn":
			holds = !ok || !slices.Contains(r.Values, value)
		case "Exists":
			holds = ok
		case "DoesNotExist":
			holds = !ok
		}
		if !holds {
			return false, nil
		}
	}
	return true, nil
}

// Query is s in the API server's string syntax ("app=web,tier in (a,b),!legacy"), sorted by
// key, e.g. for guest.List; empty for an empty selector.
func (s LabelSelector) Query() (string, error) {
	if err := s.Validate(); err != nil {
		return "", err
	}
	type part struct{ key, text string }
	var parts []part
	for key, value := range s.MatchLabels {
		parts = append(parts, part{key, key + "=" + value})
	}
	for _, r := range s.MatchExpressions {
		values := slices.Compact(slices.Sorted(slices.Values(r.Values)))
		set := strings.Join(values, ",")
		text := map[string]string{
			"In":           r.Key + " in (" + set + ")",
			"NotIn":        r.Key + " notin (" + set + ")",
			"Exists":       r.Key,
			"DoesNotExist": "!" + r.Key,
		}[r.Operator]
		parts = append(parts, part{r.Key, text})
	}
	sort.Slice(parts, func(i, j int) bool {
		if parts[i].key != parts[j].key {
			return parts[i].key < parts[j].key
		}
		return parts[i].text < parts[j].text
	})
	texts := make([]string, len(parts))
	for i, p := range parts {
		texts[i] = p.text
	}
	return strings.Join(texts, ","), nil
}
