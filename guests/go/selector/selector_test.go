package selector

import (
	"encoding/json"
	"testing"
)

func parse(t *testing.T, text string) LabelSelector {
	t.Helper()
	var s LabelSelector
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func matches(t *testing.T, s LabelSelector, labels map[string]string) bool {
	t.Helper()
	ok, err := s.Matches(labels)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestEmptySelectorMatchesEverything(t *testing.T) {
	empty := parse(t, `{}`)
	if !empty.Empty() || !matches(t, empty, nil) || !parse(t, `{"matchLabels": {}, "matchExpressions": []}`).Empty() {
		t.Fatal("empty selector")
	}
	if query, err := empty.Query(); query != "" || err != nil {
		t.Fatalf("query %q %v", query, err)
	}
}

func TestMatchLabelsNeedExactValues(t *testing.T) {
	s := parse(t, `{"matchLabels": {"app": "web", "tier": "fe"}}`)
	if !matches(t, s, map[string]string{"app": "web", "tier": "fe", "x": "y"}) {
		t.Fatal("superset of labels")
	}
	if matches(t, s, map[string]string{"app": "web"}) || matches(t, s, map[string]string{"app": "db", "tier": "fe"}) {
		t.Fatal("missing or different label")
	}
}

func TestMatchExpressions(t *testing.T) {
	s := parse(t, `{"matchExpressions": [
		{"key": "env", "operator": "In", "values": ["prod", "staging"]},
		{"key": "track", "operator": "NotIn", "values": ["canary"]},
		{"key": "app", "operator": "Exists"},
		{"key": "legacy", "operator": "DoesNotExist", "values": []}]}`)
	cases := []struct {
		labels map[string]string
		want   bool
	}{
		{map[string]string{"env": "prod", "app": "a"}, true},
		{map[string]string{"env": "staging", "app": "a", "track": "stable"}, true},
		{map[string]string{"env": "dev", "app": "a"}, false},
		{map[string]string{"env": "prod", "app": "a", "track": "canary"}, false},
		{map[string]string{"env": "prod"}, false},
		{map[string]string{"env": "prod", "app": "a", "legacy": ""}, false},
	}
	for _, c := range cases {
		if got := matches(t, s, c.labels); got != c.want {
			t.Errorf("%v: got %v", c.labels, got)
		}
	}
	if query, _ := s.Query(); query != "app,env in (prod,staging),!legacy,track notin (canary)" {
		t.Fatalf("query %q", query)
	}
	mixed := parse(t, `{"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a", "b"]}]}`)
	if query, _ := mixed.Query(); query != "app=web,tier in (a,b,b)" {
		t.Fatalf("query %q", query)
	}
}

func TestRejectsInvalidSelectors(t *testing.T) {
	for _, text := range []string{
		`{"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["x"]}]}`,
		`{"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}`,
		`{"matchExpressions": [{"key": "a", "operator": "NotIn"}]}`,
		`{"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}`,
	} {
		s := parse(t, text)
		if _, err := s.Matches(map[string]string{"a": "x"}); err == nil {
			t.Errorf("%s matches", text)
		}
		if _, err := s.Query(); err == nil {
			t.Errorf("%s has a query", text)
		}
	}
	err := parse(t, `{"matchExpressions": [{"key": "app", "operator": "Near", "values": ["x"]}]}`).Validate()
	if err == nil || err.Error() != `invalid label selector: key "app": unknown operator "Near"` {
		t.Fatalf("got %v", err)
	}
}

func TestSerialisesInAPIShape(t *testing.T) {
	text := `{"matchLabels":{"app":"web"},"matchExpressions":[{"key":"a","operator":"Exists"}]}`
	again, err := json.Marshal(parse(t, text))
	if err != nil || string(again) != text {
		t.Fatalf("got %s %v", again, err)
	}
}
