// Package selector evaluates label selectors (matchLabels and matchExpressions), as in
// metav1.LabelSelector, and agrees with metav1.LabelSelectorAsSelector (checked against its
// vectors in guests/vectors).
//
//	var s selector.LabelSelector // decoded from {"matchLabels": {"app": "web"}, ...}
//	ok, err := s.Matches(map[string]string{"app": "web"})
//	query, err := s.Query() // "app=web", for guest.List
package selector

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// LabelSelector is a label selector; all its requirements must hold. A selector with neither
// matchLabels nor matchExpressions matches every object, as in Kubernetes. A LabelSelector is
// never nil: decoded from an absent or null field it is empty, where Kubernetes' nil selector
// matches nothing; a *LabelSelector field tells them apart.
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

// Error is a selector that Kubernetes would reject: an unknown operator, a wrong number of
// values, or an invalid label key or value.
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
	if !isLabelKey(r.Key) {
		return &Error{r.Key, "not a valid label key"}
	}
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
	for _, value := range r.Values {
		if !isLabelValue(value) {
			return &Error{r.Key, fmt.Sprintf("%q is not a valid label value", value)}
		}
	}
	return nil
}

// isLabelKey reports whether key is a name with an optional prefix and "/", the prefix a DNS
// subdomain: at most 253 characters, dot-separated parts of lowercase letters, digits and '-',
// each starting and ending with a letter or digit.
func isLabelKey(key string) bool {
	prefix, name, prefixed := strings.Cut(key, "/")
	if !prefixed {
		return isName(key)
	}
	if len(prefix) > 253 {
		return false
	}
	for _, part := range strings.Split(prefix, ".") {
		if part == "" || part[0] == '-' || part[len(part)-1] == '-' {
			return false
		}
		for i := range len(part) {
			if c := part[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
				return false
			}
		}
	}
	return isName(name)
}

// isLabelValue reports whether value is empty or a name.
func isLabelValue(value string) bool {
	return value == "" || isName(value)
}

// isName reports whether s has at most 63 letters, digits, '-', '_' or '.', starting and ending
// with a letter or digit.
func isName(s string) bool {
	if s == "" || len(s) > 63 || !isAlphanumeric(s[0]) || !isAlphanumeric(s[len(s)-1]) {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !isAlphanumeric(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func isAlphanumeric(c byte) bool {
	return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

// Empty reports whether s has no requirement at all (and so matches everything).
func (s LabelSelector) Empty() bool {
	return len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0
}

// Validate returns an [*Error] for the first invalid requirement, matchLabels first.
func (s LabelSelector) Validate() error {
	for _, key := range slices.Sorted(maps.Keys(s.MatchLabels)) {
		if err := (Requirement{key, "In", []string{s.MatchLabels[key]}}).validate(); err != nil {
			return err
		}
	}
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

// Query is s in the API server's string syntax ("app=web,tier in (a,b),!legacy"), as
// apimachinery prints it, e.g. for guest.List: requirements sorted by key (those on one key in
// the order given, matchLabels first), values sorted. Empty for an empty selector.
func (s LabelSelector) Query() (string, error) {
	if err := s.Validate(); err != nil {
		return "", err
	}
	type part struct{ key, text string }
	var parts []part
	for _, key := range slices.Sorted(maps.Keys(s.MatchLabels)) {
		parts = append(parts, part{key, key + "=" + s.MatchLabels[key]})
	}
	for _, r := range s.MatchExpressions {
		set := strings.Join(slices.Sorted(slices.Values(r.Values)), ",")
		text := map[string]string{
			"In":           r.Key + " in (" + set + ")",
			"NotIn":        r.Key + " notin (" + set + ")",
			"Exists":       r.Key,
			"DoesNotExist": "!" + r.Key,
		}[r.Operator]
		parts = append(parts, part{r.Key, text})
	}
	slices.SortStableFunc(parts, func(a, b part) int { return strings.Compare(a.key, b.key) })
	texts := make([]string, len(parts))
	for i, p := range parts {
		texts[i] = p.text
	}
	return strings.Join(texts, ","), nil
}
