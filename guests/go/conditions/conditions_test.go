package conditions

import (
	"encoding/json"
	"testing"
	"time"
)

func TestFormatsRFC3339(t *testing.T) {
	cases := map[string]time.Time{
		"1970-01-01T00:00:00Z": time.Unix(0, 0),
		"2000-02-29T00:00:00Z": time.Unix(951_782_400, 0),
		"2024-05-01T12:00:00Z": time.UnixMilli(1_714_564_800_999),
		"2099-12-31T23:59:59Z": time.Unix(4_102_444_799, 0).In(time.FixedZone("x", 3600)),
	}
	for want, at := range cases {
		if got := Format(at); got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
	if len(Now()) != 20 {
		t.Errorf("Now: %s", Now())
	}
}

func TestKeepsTransitionTimeWhileStatusHolds(t *testing.T) {
	conditions := []Condition{{Type: "Ready", Status: True, ObservedGeneration: 1, LastTransitionTime: "2020-01-01T00:00:00Z", Reason: "Ok"}}
	if Set(&conditions, Condition{Type: "Ready", Status: True, Reason: "Ok", ObservedGeneration: 1}) {
		t.Fatal("the same condition changed something")
	}
	if !Set(&conditions, Condition{Type: "Ready", Status: StatusOf(true), Reason: "Ok", Message: "newer", ObservedGeneration: 2}) {
		t.Fatal("a new message changed nothing")
	}
	if c := conditions[0]; c.LastTransitionTime != "2020-01-01T00:00:00Z" || c.ObservedGeneration != 2 {
		t.Fatalf("got %+v", c)
	}
	if !Set(&conditions, Condition{Type: "Ready", Status: StatusOf(false), ObservedGeneration: 2}) {
		t.Fatal("a new status changed nothing")
	}
	if c := conditions[0]; c.LastTransitionTime == "2020-01-01T00:00:00Z" || c.Reason != "Unspecified" {
		t.Fatalf("got %+v", c)
	}
	if !Set(&conditions, Condition{Type: "Synced", Status: Unknown, Reason: "Wait"}) || len(conditions) != 2 {
		t.Fatalf("got %+v", conditions)
	}
	if c := Find(conditions, "Synced"); c == nil || c.Status != Unknown {
		t.Fatalf("Find: %+v", c)
	}
	if !Remove(&conditions, "Synced") || Remove(&conditions, "Synced") || len(conditions) != 1 {
		t.Fatalf("Remove: %+v", conditions)
	}
}

func TestRoundTripsAPIJSON(t *testing.T) {
	text := `{"type":"Ready","status":"False","observedGeneration":4,"lastTransitionTime":"2024-05-01T12:00:00Z","reason":"Failed","message":"m"}`
	var c Condition
	if err := json.Unmarshal([]byte(text), &c); err != nil || c.Status != False {
		t.Fatalf("got %+v %v", c, err)
	}
	again, _ := json.Marshal(c)
	if string(again) != text {
		t.Fatalf("got %s", again)
	}
}
