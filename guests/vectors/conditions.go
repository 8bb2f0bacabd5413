package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const conditionsAbout = "Each vector applies its steps in order to its list of conditions with " +
	"k8s.io/apimachinery/pkg/api/meta: set is SetStatusCondition, changed what it returns; the " +
	"lastTransitionTime of the condition set is the time to record if it transitions (the clock). " +
	"remove is RemoveStatusCondition, removed what it returns; after a set or a remove, conditions " +
	"is the list. find is FindStatusCondition (null when absent); isTrue, isFalse and " +
	"isPresentAndEqual are IsStatusConditionTrue, IsStatusConditionFalse and " +
	"IsStatusConditionPresentAndEqual, result what they return. Every condition is one the API " +
	"accepts: it has a reason and a lastTransitionTime."

// conditionVector is a list of conditions and the steps applied to it.
type conditionVector struct {
	Name       string             `json:"name"`
	Conditions []metav1.Condition `json:"conditions"`
	Steps      []step             `json:"steps"`
}

// step is one operation on the list (op with type, condition or status) and its answers.
type step struct {
	Op         string                 `json:"op"`
	Type       string                 `json:"type,omitempty"`
	Condition  *metav1.Condition      `json:"condition,omitempty"`
	Status     metav1.ConditionStatus `json:"status,omitempty"`
	Changed    *bool                  `json:"changed,omitempty"`
	Removed    *bool                  `json:"removed,omitempty"`
	Found      json.RawMessage        `json:"found,omitempty"`
	Result     *bool                  `json:"result,omitempty"`
	Conditions *[]metav1.Condition    `json:"conditions,omitempty"`
}

// The operations of a step.
const (
	opSet               = "set"
	opRemove            = "remove"
	opFind              = "find"
	opIsTrue            = "isTrue"
	opIsFalse           = "isFalse"
	opIsPresentAndEqual = "isPresentAndEqual"
)

// at is the time minute minutes after 2024-05-01T12:00:00Z.
func at(minute int) metav1.Time {
	return metav1.NewTime(time.Date(2024, 5, 1, 12, minute, 0, 0, time.UTC))
}

func condition(type_ string, status metav1.ConditionStatus, reason, message string, generation int64, minute int) metav1.Condition {
	return metav1.Condition{
		Type: type_, Status: status, ObservedGeneration: generation,
		LastTransitionTime: at(minute), Reason: reason, Message: message,
	}
}

func set(c metav1.Condition) step { return step{Op: opSet, Condition: &c} }
func remove(type_ string) step    { return step{Op: opRemove, Type: type_} }
func find(type_ string) step      { return step{Op: opFind, Type: type_} }
func isTrue(type_ string) step    { return step{Op: opIsTrue, Type: type_} }
func isFalse(type_ string) step   { return step{Op: opIsFalse, Type: type_} }
func isPresentAndEqual(type_ string, status metav1.ConditionStatus) step {
	return step{Op: opIsPresentAndEqual, Type: type_, Status: status}
}

const (
	yes     = metav1.ConditionTrue
	no      = metav1.ConditionFalse
	unknown = metav1.ConditionUnknown
)

// handPickedSequences are the edge cases.
func handPickedSequences() []conditionVector {
	ready := condition("Ready", yes, "Ok", "", 1, 0)
	synced := condition("Synced", no, "Waiting", "pulling", 2, 1)
	return []conditionVector{
		{"new condition takes the given time", nil, []step{
			set(condition("Ready", yes, "Ok", "", 1, 5)), find("Ready"), isTrue("Ready"), isFalse("Ready"),
		}},
		{"the same condition again changes nothing", []metav1.Condition{ready}, []step{
			set(condition("Ready", yes, "Ok", "", 1, 5)),
		}},
		{"a new message keeps the time", []metav1.Condition{ready}, []step{
			set(condition("Ready", yes, "Ok", "all 3 ready", 1, 5)),
		}},
		{"a new reason keeps the time", []metav1.Condition{ready}, []step{
			set(condition("Ready", yes, "Converged", "", 1, 5)),
		}},
		{"a new generation keeps the time", []metav1.Condition{ready}, []step{
			set(condition("Ready", yes, "Ok", "", 2, 5)),
		}},
		{"no generation drops it", []metav1.Condition{ready}, []step{
			set(condition("Ready", yes, "Ok", "", 0, 5)),
		}},
		{"an earlier time with the same status is ignored", []metav1.Condition{condition("Ready", yes, "Ok", "", 1, 30)}, []step{
			set(condition("Ready", yes, "Ok", "", 1, 5)),
		}},
		{"a new status takes the given time", []metav1.Condition{ready, synced}, []step{
			set(condition("Ready", no, "Failed", "pod crashed", 1, 5)), isFalse("Ready"), isTrue("Ready"),
			set(condition("Ready", unknown, "Failed", "pod crashed", 1, 6)),
			isPresentAndEqual("Ready", unknown), isTrue("Ready"), isFalse("Ready"),
			set(condition("Ready", yes, "Ok", "", 2, 7)), isTrue("Ready"),
		}},
		{"a new status with the old time", []metav1.Condition{ready}, []step{
			set(condition("Ready", no, "Failed", "", 1, 0)),
		}},
		{"updates in place, appends new types", []metav1.Condition{ready, synced, condition("Available", yes, "Ok", "", 2, 2)}, []step{
			set(condition("Synced", yes, "Pulled", "", 2, 5)), set(condition("Degraded", no, "Ok", "", 2, 6)),
			find("Synced"), find("Degraded"),
		}},
		{"remove", []metav1.Condition{ready, synced}, []step{
			remove("Ready"), find("Ready"), isTrue("Ready"), remove("Ready"), remove("Synced"), remove("Synced"),
			set(condition("Ready", yes, "Ok", "", 3, 5)),
		}},
		{"remove from an empty list", nil, []step{remove("Ready")}},
		{"queries of an empty list", nil, []step{
			find("Ready"), isTrue("Ready"), isFalse("Ready"), isPresentAndEqual("Ready", unknown),
		}},
		{"queries are by exact type", []metav1.Condition{ready}, []step{
			find("ready"), isTrue("ready"), isPresentAndEqual("Ready", yes), isPresentAndEqual("Ready", no),
			remove("ready"),
		}},
		{"duplicate types: find and set use the first, remove removes all", []metav1.Condition{
			ready, synced, condition("Ready", no, "Failed", "", 1, 2),
		}, []step{
			find("Ready"), isTrue("Ready"), isFalse("Ready"),
			set(condition("Ready", no, "Failed", "", 2, 5)), isFalse("Ready"),
			remove("Ready"), find("Ready"),
		}},
	}
}

// generatedSequences is how many sequences the seeded generator adds to the hand-picked ones.
const generatedSequences = 500

var (
	conditionTypes = []string{"Ready", "Available", "Progressing", "Degraded"}
	statuses       = []metav1.ConditionStatus{yes, no, unknown}
	reasons        = []string{"Ok", "Failed", "Waiting"}
	messages       = []string{"", "done", "2 of 3 ready"}
)

func conditionVectors() []conditionVector {
	vectors := handPickedSequences()
	r := rand.New(rand.NewPCG(3, 4))
	for i := range generatedSequences {
		vectors = append(vectors, randomSequence(r, fmt.Sprintf("generated %d", i+1)))
	}
	for i := range vectors {
		vectors[i].Steps = run(vectors[i].Conditions, vectors[i].Steps)
		if vectors[i].Conditions == nil {
			vectors[i].Conditions = []metav1.Condition{}
		}
	}
	return vectors
}

// run applies steps to a copy of conditions with apimachinery and returns them with its answers.
func run(conditions []metav1.Condition, steps []step) []step {
	list := slices.Clone(conditions)
	if list == nil {
		list = []metav1.Condition{}
	}
	answered := make([]step, len(steps))
	for i, s := range steps {
		switch s.Op {
		case opSet:
			changed := meta.SetStatusCondition(&list, *s.Condition)
			s.Changed = &changed
		case opRemove:
			removed := meta.RemoveStatusCondition(&list, s.Type)
			s.Removed = &removed
		case opFind:
			s.Found = marshal(meta.FindStatusCondition(list, s.Type))
		case opIsTrue:
			s.Result = ptr(meta.IsStatusConditionTrue(list, s.Type))
		case opIsFalse:
			s.Result = ptr(meta.IsStatusConditionFalse(list, s.Type))
		case opIsPresentAndEqual:
			s.Result = ptr(meta.IsStatusConditionPresentAndEqual(list, s.Type, s.Status))
		}
		if s.Op == opSet || s.Op == opRemove {
			after := slices.Clone(list)
			s.Conditions = &after
		}
		answered[i] = s
	}
	return answered
}

func ptr[T any](v T) *T { return &v }

// randomSequence starts from up to three conditions of distinct types and applies three to
// eight steps; the clock moves on a minute at each step. Half the sets start from the
// condition already there, so that many keep its status or change nothing.
func randomSequence(r *rand.Rand, name string) conditionVector {
	var conditions []metav1.Condition
	for _, i := range r.Perm(len(conditionTypes))[:r.IntN(4)] {
		conditions = append(conditions, randomCondition(r, conditionTypes[i], r.IntN(10)))
	}
	list := slices.Clone(conditions)
	steps := make([]step, 3+r.IntN(6))
	for i := range steps {
		type_ := conditionTypes[r.IntN(len(conditionTypes))]
		switch op := r.IntN(20); {
		case op < 10:
			c := randomCondition(r, type_, 10+i)
			if existing := meta.FindStatusCondition(list, type_); existing != nil && r.IntN(2) == 0 {
				c = *existing
				c.LastTransitionTime = at(10 + i)
				vary(r, &c)
			}
			steps[i] = set(c)
			meta.SetStatusCondition(&list, c)
		case op < 13:
			steps[i] = remove(type_)
			meta.RemoveStatusCondition(&list, type_)
		case op < 15:
			steps[i] = find(type_)
		case op < 17:
			steps[i] = isTrue(type_)
		case op < 18:
			steps[i] = isFalse(type_)
		default:
			steps[i] = isPresentAndEqual(type_, statuses[r.IntN(len(statuses))])
		}
	}
	return conditionVector{name, conditions, steps}
}

func randomCondition(r *rand.Rand, type_ string, minute int) metav1.Condition {
	return condition(type_, statuses[r.IntN(len(statuses))], reasons[r.IntN(len(reasons))],
		messages[r.IntN(len(messages))], int64(r.IntN(4)), minute)
}

// vary changes one field of c, or none.
func vary(r *rand.Rand, c *metav1.Condition) {
	switch r.IntN(5) {
	case 0:
		c.Status = statuses[r.IntN(len(statuses))]
	case 1:
		c.Reason = reasons[r.IntN(len(reasons))]
	case 2:
		c.Message = messages[r.IntN(len(messages))]
	case 3:
		c.ObservedGeneration = int64(r.IntN(4))
	}
}
