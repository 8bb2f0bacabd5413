package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

const selectorsAbout = "metav1.LabelSelectorAsSelector on each selector (JSON; null is a nil " +
	"selector): error is whether it fails; otherwise empty is the selector's Empty(), query its " +
	"String() and matches whether it matches each set of labels. A nil selector matches nothing " +
	"and an empty one everything; both have the query \"\"."

// selectorVector is one selector and what apimachinery makes of it.
type selectorVector struct {
	Name     string          `json:"name"`
	Selector json.RawMessage `json:"selector"`
	Error    bool            `json:"error"`
	Empty    *bool           `json:"empty,omitempty"`
	Query    *string         `json:"query,omitempty"`
	Matches  []labelsMatch   `json:"matches,omitempty"`
}

// labelsMatch is whether a selector matches a set of labels.
type labelsMatch struct {
	Labels map[string]string `json:"labels"`
	Match  bool              `json:"match"`
}

// Label keys and values that apimachinery accepts, and ones it rejects.
var (
	validKeys = []string{
		"app", "tier", "env", "a", "b.c", "A_b-9", "example.com/app", "k8s.io/name",
	}
	invalidKeys = []string{
		"", "-app", "app-", "_app", "a b", "a/b/c", "/app", "example.com/", "Example.com/app",
		"exa_mple.com/app", "example..com/app", "app\n", "ä", strings.Repeat("k", 64),
		strings.Repeat("p.", 126) + "pp/app",
	}
	validValues = []string{
		"", "web", "db", "x", "1", "a.b", "A_b-9",
	}
	invalidValues = []string{
		"-web", "web-", ".x", "a b", "a/b", "web\n", "é", strings.Repeat("v", 64),
	}
	operators        = []string{"In", "NotIn", "Exists", "DoesNotExist"}
	invalidOperators = []string{"in", "Equals", "", "Gt", "NotEquals"}
)

// handPicked are the edge cases, as JSON, each checked against handPickedLabels.
var handPicked = []struct{ name, selector string }{
	{"nil selector", `null`},
	{"empty selector", `{}`},
	{"empty lists", `{"matchLabels": {}, "matchExpressions": []}`},
	{"null lists", `{"matchLabels": null, "matchExpressions": null}`},
	{"one label", `{"matchLabels": {"app": "web"}}`},
	{"two labels", `{"matchLabels": {"tier": "fe", "app": "web"}}`},
	{"empty label value", `{"matchLabels": {"app": ""}}`},
	{"prefixed label", `{"matchLabels": {"example.com/app": "web"}}`},
	{"In", `{"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}`},
	{"In unsorted", `{"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "db", "a.b"]}]}`},
	{"In duplicate values", `{"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "db", "web"]}]}`},
	{"In empty value", `{"matchExpressions": [{"key": "app", "operator": "In", "values": [""]}]}`},
	{"In empty and other value", `{"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", ""]}]}`},
	{"NotIn", `{"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}`},
	{"NotIn duplicate values", `{"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["x", "db", "x"]}]}`},
	{"NotIn empty value", `{"matchExpressions": [{"key": "app", "operator": "NotIn", "values": [""]}]}`},
	{"Exists", `{"matchExpressions": [{"key": "app", "operator": "Exists"}]}`},
	{"Exists empty values", `{"matchExpressions": [{"key": "app", "operator": "Exists", "values": []}]}`},
	{"DoesNotExist", `{"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}`},
	{"DoesNotExist null values", `{"matchExpressions": [{"key": "app", "operator": "DoesNotExist", "values": null}]}`},
	{"every operator", `{"matchExpressions": [
		{"key": "env", "operator": "In", "values": ["prod", "staging"]},
		{"key": "track", "operator": "NotIn", "values": ["canary"]},
		{"key": "app", "operator": "Exists"},
		{"key": "legacy", "operator": "DoesNotExist"}]}`},
	{"labels and expressions", `{"matchLabels": {"tier": "fe"}, "matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "db"]}]}`},
	{"keys sorted", `{"matchExpressions": [{"key": "b.c", "operator": "Exists"}, {"key": "a", "operator": "Exists"}, {"key": "A_b-9", "operator": "Exists"}]}`},
	{"label and expression on one key", `{"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}]}`},
	{"label and agreeing expression on one key", `{"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]}`},
	{"expressions on one key, In first", `{"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}, {"key": "app", "operator": "Exists"}]}`},
	{"expressions on one key, Exists first", `{"matchExpressions": [{"key": "app", "operator": "Exists"}, {"key": "app", "operator": "In", "values": ["web"]}]}`},
	{"expressions on one key, DoesNotExist first", `{"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}, {"key": "app", "operator": "NotIn", "values": ["web"]}, {"key": "app", "operator": "Exists"}]}`},
	{"same expression twice", `{"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}, {"key": "app", "operator": "In", "values": ["web"]}]}`},
	{"fourteen requirements", `{"matchLabels": {"k1": "a", "k2": "b", "k3": "c", "k4": "d", "k5": "e", "k6": "f", "k7": "g"},
		"matchExpressions": [{"key": "k8", "operator": "Exists"}, {"key": "k9", "operator": "DoesNotExist"},
		{"key": "k10", "operator": "In", "values": ["x"]}, {"key": "k11", "operator": "NotIn", "values": ["x"]},
		{"key": "k12", "operator": "Exists"}, {"key": "k13", "operator": "Exists"}, {"key": "k14", "operator": "Exists"}]}`},
	{"longest name", `{"matchLabels": {"` + strings.Repeat("k", 63) + `": "` + strings.Repeat("v", 63) + `"}}`},
	{"longest prefix", `{"matchExpressions": [{"key": "` + strings.Repeat("p.", 126) + `p/app", "operator": "Exists"}]}`},
	{"unknown operator", `{"matchExpressions": [{"key": "app", "operator": "Equals", "values": ["web"]}]}`},
	{"lowercase operator", `{"matchExpressions": [{"key": "app", "operator": "in", "values": ["web"]}]}`},
	{"no operator", `{"matchExpressions": [{"key": "app", "values": ["web"]}]}`},
	{"Gt operator", `{"matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]}`},
	{"In without values", `{"matchExpressions": [{"key": "app", "operator": "In"}]}`},
	{"In with empty values", `{"matchExpressions": [{"key": "app", "operator": "In", "values": []}]}`},
	{"NotIn without values", `{"matchExpressions": [{"key": "app", "operator": "NotIn"}]}`},
	{"Exists with values", `{"matchExpressions": [{"key": "app", "operator": "Exists", "values": ["web"]}]}`},
	{"DoesNotExist with values", `{"matchExpressions": [{"key": "app", "operator": "DoesNotExist", "values": [""]}]}`},
	{"invalid after valid", `{"matchExpressions": [{"key": "app", "operator": "Exists"}, {"key": "tier", "operator": "Near"}]}`},
	{"no key", `{"matchExpressions": [{"operator": "Exists"}]}`},
	{"name too long", `{"matchLabels": {"` + strings.Repeat("k", 64) + `": "web"}}`},
	{"prefix too long", `{"matchExpressions": [{"key": "` + strings.Repeat("p.", 126) + `pp/app", "operator": "Exists"}]}`},
	{"value too long", `{"matchLabels": {"app": "` + strings.Repeat("v", 64) + `"}}`},
	{"invalid label key", `{"matchLabels": {"a b": "web"}}`},
	{"empty label key", `{"matchLabels": {"": "web"}}`},
	{"invalid label value", `{"matchLabels": {"app": "-web"}}`},
	{"label value with a newline", `{"matchLabels": {"app": "web\n"}}`},
	{"label key with a newline", `{"matchLabels": {"app\n": "web"}}`},
	{"expression key with a newline", `{"matchExpressions": [{"key": "app\n", "operator": "Exists"}]}`},
	{"invalid In value", `{"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "a/b"]}]}`},
	{"invalid NotIn value", `{"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web\n"]}]}`},
	{"two slashes", `{"matchExpressions": [{"key": "a/b/c", "operator": "Exists"}]}`},
	{"empty prefix", `{"matchExpressions": [{"key": "/app", "operator": "Exists"}]}`},
	{"empty name", `{"matchExpressions": [{"key": "example.com/", "operator": "Exists"}]}`},
	{"uppercase prefix", `{"matchExpressions": [{"key": "Example.com/app", "operator": "Exists"}]}`},
	{"underscore in prefix", `{"matchExpressions": [{"key": "exa_mple.com/app", "operator": "Exists"}]}`},
	{"name starting with a dash", `{"matchExpressions": [{"key": "-app", "operator": "Exists"}]}`},
	{"name ending with a dot", `{"matchExpressions": [{"key": "app.", "operator": "Exists"}]}`},
	{"non-ASCII name", `{"matchExpressions": [{"key": "äpp", "operator": "Exists"}]}`},
	{"non-ASCII value", `{"matchLabels": {"app": "wéb"}}`},
}

// handPickedLabels are the labels each hand-picked selector is matched against.
var handPickedLabels = []map[string]string{
	{},
	{"app": "web"},
	{"app": "db"},
	{"app": ""},
	{"app": "web", "tier": "fe"},
	{"app": "web", "tier": "be"},
	{"tier": "fe"},
	{"example.com/app": "web"},
	{"env": "prod", "app": "a"},
	{"env": "staging", "app": "a", "track": "stable"},
	{"env": "prod", "app": "a", "track": "canary"},
	{"env": "prod", "app": "a", "legacy": ""},
	{"a": "x", "b.c": "x", "A_b-9": "x"},
	{strings.Repeat("k", 63): strings.Repeat("v", 63)},
	{strings.Repeat("p.", 126) + "p/app": "x"},
	{"k1": "a", "k2": "b", "k3": "c", "k4": "d", "k5": "e", "k6": "f", "k7": "g", "k8": "", "k10": "x", "k12": "", "k13": "", "k14": ""},
}

// generatedSelectors is how many selectors the seeded generator adds to the hand-picked ones.
const generatedSelectors = 3000

func selectorVectors() []selectorVector {
	var vectors []selectorVector
	for _, c := range handPicked {
		vectors = append(vectors, evaluate(c.name, []byte(c.selector), handPickedLabels))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range generatedSelectors {
		selector := randomSelector(r)
		text, err := json.Marshal(selector)
		if err != nil {
			fatal(err)
		}
		labelSets := make([]map[string]string, 3)
		for j := range labelSets {
			labelSets[j] = randomLabels(r, selector)
		}
		vectors = append(vectors, evaluate(fmt.Sprintf("generated %d", i+1), text, labelSets))
	}
	return vectors
}

// evaluate is what metav1.LabelSelectorAsSelector makes of the selector in text.
func evaluate(name string, text []byte, labelSets []map[string]string) selectorVector {
	var parsed *metav1.LabelSelector
	if err := json.Unmarshal(text, &parsed); err != nil {
		fatal(fmt.Errorf("%s: %w", name, err))
	}
	vector := selectorVector{Name: name, Selector: compact(text)}
	selector, err := metav1.LabelSelectorAsSelector(parsed)
	if err != nil {
		vector.Error = true
		return vector
	}
	empty, query := selector.Empty(), selector.String()
	vector.Empty, vector.Query = &empty, &query
	for _, set := range labelSets {
		vector.Matches = append(vector.Matches, labelsMatch{set, selector.Matches(labels.Set(set))})
	}
	return vector
}

func compact(text []byte) json.RawMessage {
	var value any
	if err := json.Unmarshal(text, &value); err != nil {
		fatal(err)
	}
	return marshal(value)
}

// randomSelector has up to three matchLabels and four matchExpressions, so at most seven
// requirements: apimachinery sorts requirements by key with an unstable sort, which keeps the
// given order of requirements on one key only up to twelve of them.
func randomSelector(r *rand.Rand) metav1.LabelSelector {
	var s metav1.LabelSelector
	if n := r.IntN(4); n > 0 {
		s.MatchLabels = map[string]string{}
		for range n {
			s.MatchLabels[pickRarely(r, validKeys, invalidKeys)] = pickRarely(r, validValues, invalidValues)
		}
	}
	for range r.IntN(5) {
		requirement := metav1.LabelSelectorRequirement{
			Key:      pickRarely(r, validKeys, invalidKeys),
			Operator: metav1.LabelSelectorOperator(pickRarely(r, operators, invalidOperators)),
		}
		count := 0
		if requirement.Operator == metav1.LabelSelectorOpIn || requirement.Operator == metav1.LabelSelectorOpNotIn {
			count = 1 + r.IntN(3)
		}
		if r.IntN(20) == 0 {
			count = 1 - min(count, 1)
		}
		for range count {
			requirement.Values = append(requirement.Values, pickRarely(r, validValues, invalidValues))
		}
		s.MatchExpressions = append(s.MatchExpressions, requirement)
	}
	return s
}

// randomLabels has some of the valid keys, each with a valid value, often one that s names.
func randomLabels(r *rand.Rand, s metav1.LabelSelector) map[string]string {
	named := map[string][]string{}
	for key, value := range s.MatchLabels {
		named[key] = append(named[key], value)
	}
	for _, requirement := range s.MatchExpressions {
		named[requirement.Key] = append(named[requirement.Key], requirement.Values...)
	}
	set := map[string]string{}
	for _, key := range validKeys {
		switch candidates := validOnly(named[key]); {
		case r.IntN(2) == 0:
		case len(candidates) > 0 && r.IntN(3) > 0:
			set[key] = candidates[r.IntN(len(candidates))]
		default:
			set[key] = validValues[r.IntN(len(validValues))]
		}
	}
	return set
}

func validOnly(values []string) []string {
	return slices.DeleteFunc(slices.Clone(values), func(v string) bool {
		return !slices.Contains(validValues, v)
	})
}

// pickRarely is one of valid, or one of invalid once in 40 times.
func pickRarely(r *rand.Rand, valid, invalid []string) string {
	if r.IntN(40) == 0 {
		return invalid[r.IntN(len(invalid))]
	}
	return valid[r.IntN(len(valid))]
}
