package guest

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"kubewasm.dev/guest/internal/wit"
	"kubewasm.dev/guest/log"
)

// Object is a Kubernetes object as decoded from JSON: maps, slices, strings, float64 numbers,
// bools and nil. The packages meta and owner read its metadata.
type Object = map[string]any

// Controller is the reconcile logic of one controller.
//
// The host creates a fresh instance for every call, so a Controller keeps no state between
// calls. It may also implement [Finalizer] and [KeyMapper].
type Controller interface {
	// Metadata declares the controller; called once when the module is loaded. It must depend
	// on nothing but the module.
	Metadata() Metadata
	// Reconcile brings the world in line with the primary object named by req; req.Object is
	// nil when the object no longer exists. A returned error is retried with backoff or not,
	// as [IsTransient] decides.
	Reconcile(req Request) (Action, error)
}

// Finalizer is implemented by controllers that declare a finalizer ([Metadata.WithFinalizer]).
type Finalizer interface {
	// Finalize cleans up before a primary object carrying the finalizer is deleted; the host
	// removes the finalizer once it returns [Done]. Without this method, finalizing is done at
	// once.
	Finalize(req Request) (Action, error)
}

// KeyMapper is implemented by controllers that watch a kind with [MapGuest].
type KeyMapper interface {
	// MapKeys maps a changed object of a watched kind to the primary keys to reconcile.
	// Without this method, such changes map to nothing.
	MapKeys(kind GVK, object Object) []ObjectKey
}

// Action is how a successful reconcile ends: the zero value ([Done]) waits for the next
// change, a positive RequeueAfter reconciles the key again after that delay (millisecond
// precision).
type Action struct {
	RequeueAfter time.Duration
}

// Done ends a reconcile with nothing more to do until the next change.
var Done = Action{}

// RequeueAfter ends a reconcile asking for another one after delay.
func RequeueAfter(delay time.Duration) Action {
	return Action{RequeueAfter: delay}
}

// Reason is why a key was queued; when several reasons arrive before the key is handed out,
// the first one is kept.
type Reason uint8

// The reasons, in the order of the WIT enum `reason`.
const (
	Added Reason = iota
	Changed
	Deleted
	OwnedChanged
	WatchedChanged
	Resync
	Requeue
	Reload
)

var reasonNames = [...]string{"added", "changed", "deleted", "owned-changed", "watched-changed", "resync", "requeue", "reload"}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// Request is one reconcile request, with the primary object already decoded.
type Request struct {
	// Key names the primary object.
	Key ObjectKey
	// Reason is why the key was queued.
	Reason Reason
	// Attempt is 1 on the first try, counting up while reconciles of this key keep failing.
	Attempt uint32
	// Object is the primary object as the cache holds it now (without
	// metadata.managedFields), or nil when it no longer exists.
	Object Object
	raw    string
}

// Name is the name of the primary object.
func (r Request) Name() string { return r.Key.Name }

// Namespace is the namespace of the primary object; empty for a cluster-scoped kind.
func (r Request) Namespace() string { return r.Key.Namespace }

// Decode decodes the primary object into v (a pointer to a struct of your own, say); it returns
// false, and leaves v alone, when the object no longer exists.
func (r Request) Decode(v any) (bool, error) {
	if r.Object == nil {
		return false, nil
	}
	return true, json.Unmarshal([]byte(r.raw), v)
}

// Export makes c the controller this component exports. Call it once, from an init function
// of package main.
func Export(c Controller) {
	wit.Export(adapter{c})
}

// adapter turns a Controller into the world's guest interface.
type adapter struct {
	c Controller
}

func (a adapter) Metadata() wit.ControllerMetadata {
	m := a.c.Metadata()
	out := wit.ControllerMetadata{
		Name:           m.Name,
		Primary:        toSelection(m.Primary),
		Finalizer:      m.Finalizer,
		MaxConcurrency: max(m.MaxConcurrency, 1),
	}
	for _, kind := range m.Owns {
		out.Owns = append(out.Owns, toGvk(kind))
	}
	for _, w := range m.Watches {
		out.Watches = append(out.Watches, wit.Watch{
			Selection: toSelection(w.Selection),
			Mapping:   wit.Mapping{Case: uint8(w.Mapping.c), Label: w.Mapping.label},
		})
	}
	if m.Resync > 0 {
		out.ResyncSeconds = uint32(min(max(m.Resync/time.Second, 1), math.MaxUint32))
	}
	out.ReconcileOn = uint8(m.ReconcileOn & knownChanges)
	if out.ReconcileOn == 0 {
		out.ReconcileOn = wit.ChangesAny
	}
	return out
}

func (a adapter) Reconcile(raw wit.Request) (wit.Outcome, *wit.ReconcileError) {
	return run(raw, a.c.Reconcile)
}

func (a adapter) Finalize(raw wit.Request) (wit.Outcome, *wit.ReconcileError) {
	if f, ok := a.c.(Finalizer); ok {
		return run(raw, f.Finalize)
	}
	return wit.Outcome{}, nil
}

func (a adapter) MapKeys(kind wit.Gvk, text string) []wit.ObjectKey {
	mapper, ok := a.c.(KeyMapper)
	if !ok {
		return nil
	}
	gvk := GVK(kind)
	var object Object
	if err := json.Unmarshal([]byte(text), &object); err != nil {
		log.Warn("map-keys received an object that is not JSON", "kind", gvk, "error", err)
		return nil
	}
	var keys []wit.ObjectKey
	for _, key := range mapper.MapKeys(gvk, object) {
		keys = append(keys, wit.ObjectKey(key))
	}
	return keys
}

func run(raw wit.Request, f func(Request) (Action, error)) (wit.Outcome, *wit.ReconcileError) {
	req := Request{Key: ObjectKey(raw.Key), Reason: Reason(raw.Reason), Attempt: raw.Attempt}
	if raw.HasObject {
		if err := json.Unmarshal([]byte(raw.Object), &req.Object); err != nil {
			return wit.Outcome{}, &wit.ReconcileError{Permanent: true, Message: "primary object is not JSON: " + err.Error()}
		}
		req.raw = raw.Object
	}
	action, err := f(req)
	if err != nil {
		return wit.Outcome{}, &wit.ReconcileError{Permanent: !IsTransient(err), Message: err.Error()}
	}
	if action.RequeueAfter <= 0 {
		return wit.Outcome{}, nil
	}
	return wit.Outcome{Requeue: true, RequeueAfter: uint64(action.RequeueAfter.Milliseconds())}, nil
}

func toGvk(k GVK) wit.Gvk {
	return wit.Gvk(k)
}

func toSelection(s Selection) wit.Selection {
	return wit.Selection{Kind: toGvk(s.Kind), Namespace: s.Namespace, LabelSelector: s.LabelSelector}
}
