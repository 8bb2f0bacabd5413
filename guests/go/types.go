package guest

import (
	"strings"
	"time"

	"kubewasm.dev/guest/internal/wit"
)

// GVK is a Kubernetes kind: its API group ("" for the core group), version and kind.
type GVK struct {
	Group, Version, Kind string
}

// KindOf is the kind of objects with this apiVersion ("apps/v1", or "v1" for the core group).
func KindOf(apiVersion, kind string) GVK {
	group, version, found := strings.Cut(apiVersion, "/")
	if !found {
		group, version = "", apiVersion
	}
	return GVK{Group: group, Version: version, Kind: kind}
}

// APIVersion is the apiVersion of objects of this kind: group/version, or the version alone for
// the core group.
func (k GVK) APIVersion() string {
	if k.Group == "" {
		return k.Version
	}
	return k.Group + "/" + k.Version
}

// String prints the kind as the API machinery does: "apps/v1, Kind=Deployment".
func (k GVK) String() string {
	return k.APIVersion() + ", Kind=" + k.Kind
}

// ObjectKey names one object; Namespace is empty for a cluster-scoped object.
type ObjectKey struct {
	Namespace, Name string
}

// String is "namespace/name", or the name alone for a cluster-scoped object.
func (k ObjectKey) String() string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}

// Selection is a set of objects of one kind.
type Selection struct {
	Kind GVK
	// Namespace restricts the set to one namespace; empty means every namespace (or a
	// cluster-scoped kind).
	Namespace string
	// LabelSelector restricts the set to matching objects, in the API server's syntax
	// ("app=web,tier in (a,b),!legacy"); empty means all.
	LabelSelector string
}

// Select is every object of kind, in all namespaces.
func Select(kind GVK) Selection {
	return Selection{Kind: kind}
}

// InNamespace restricts s to objects in namespace.
func (s Selection) InNamespace(namespace string) Selection {
	s.Namespace = namespace
	return s
}

// WithLabels restricts s to objects matching selector, in the API server's syntax.
func (s Selection) WithLabels(selector string) Selection {
	s.LabelSelector = selector
	return s
}

type mappingCase uint8

const (
	mapOwner mappingCase = iota
	mapLabel
	mapGuest
)

// Mapping is how a change to a watched object turns into keys of the primary kind.
type Mapping struct {
	c     mappingCase
	label string
}

var (
	// MapOwner enqueues every owner in the object's ownerReferences whose kind is the primary
	// kind.
	MapOwner = Mapping{c: mapOwner}
	// MapGuest calls the controller's MapKeys (see [KeyMapper]) with the changed object.
	MapGuest = Mapping{c: mapGuest}
)

// MapLabel enqueues the primary object, in the watched object's namespace, named by the value
// of this label.
func MapLabel(label string) Mapping {
	return Mapping{c: mapLabel, label: label}
}

// Watch is a kind the controller reads and reacts to without owning it.
type Watch struct {
	Selection Selection
	Mapping   Mapping
}

// Changes is a set of parts of a primary object, combined with |: an update of the object
// enqueues its key only if it changes one of them. Whatever the set, the key is enqueued when
// the object is created or deleted, when its deletion starts, when it lacks the controller's
// finalizer, on resync and on reload, and when an owned or watched object maps to it.
type Changes uint8

const (
	// ReconcileOnGeneration: metadata.generation changed, which for a kind with a status
	// subresource means the spec changed. Kinds without a generation never match.
	ReconcileOnGeneration = Changes(wit.ChangesGeneration)
	// ReconcileOnLabels: metadata.labels changed.
	ReconcileOnLabels = Changes(wit.ChangesLabels)
	// ReconcileOnAnnotations: metadata.annotations changed.
	ReconcileOnAnnotations = Changes(wit.ChangesAnnotations)
	// ReconcileOnAny: anything changed, status and finalizers included; every update matches.
	ReconcileOnAny = Changes(wit.ChangesAny)
)

// knownChanges are the bits of Changes the contract defines.
const knownChanges = ReconcileOnGeneration | ReconcileOnLabels | ReconcileOnAnnotations | ReconcileOnAny

// Metadata is what a controller declares about itself; the host reads it once per loaded
// module. Build it with [NewMetadata] and the With* methods, which return modified copies.
type Metadata struct {
	// Name is the controller's name (lowercase letters, digits and "-"): the controller label of
	// its metrics and the suffix of its field manager (kubewasm-<name>).
	Name string
	// Primary is the kind this controller reconciles; one key per object.
	Primary Selection
	// Owns are kinds this controller creates and owns; a change to one enqueues its controller
	// owner.
	Owns []GVK
	// Watches are other kinds whose changes enqueue keys through a mapping.
	Watches []Watch
	// Finalizer, when not empty, is added by the host to every primary object and removed once
	// Finalize returns done.
	Finalizer string
	// MaxConcurrency is how many keys may be reconciled at the same time (at least 1).
	MaxConcurrency uint32
	// Resync, when positive, enqueues every primary object again after this long without a
	// change (whole seconds, at least one).
	Resync time.Duration
	// ReconcileOn is which updates of a primary object enqueue its key; zero means
	// [ReconcileOnAny], every update. Bits other than the ReconcileOn* constants are ignored.
	ReconcileOn Changes
}

// NewMetadata declares a controller named name reconciling primary, with no owned or watched
// kinds, no finalizer, a concurrency of 1, no resync, reconciling on every update.
func NewMetadata(name string, primary Selection) Metadata {
	return Metadata{Name: name, Primary: primary, MaxConcurrency: 1}
}

// WithOwns adds kinds this controller creates and owns.
func (m Metadata) WithOwns(kinds ...GVK) Metadata {
	m.Owns = append(append([]GVK(nil), m.Owns...), kinds...)
	return m
}

// WithWatch adds a watched selection whose changes enqueue keys through mapping.
func (m Metadata) WithWatch(selection Selection, mapping Mapping) Metadata {
	m.Watches = append(append([]Watch(nil), m.Watches...), Watch{Selection: selection, Mapping: mapping})
	return m
}

// WithFinalizer sets the finalizer the host manages for this controller.
func (m Metadata) WithFinalizer(finalizer string) Metadata {
	m.Finalizer = finalizer
	return m
}

// WithMaxConcurrency sets how many keys may be reconciled at the same time (0 becomes 1).
func (m Metadata) WithMaxConcurrency(n uint32) Metadata {
	m.MaxConcurrency = max(n, 1)
	return m
}

// WithResync enqueues every primary object again after period without a change.
func (m Metadata) WithResync(period time.Duration) Metadata {
	m.Resync = period
	return m
}

// WithReconcileOn sets which updates of a primary object enqueue its key, e.g.
// ReconcileOnGeneration|ReconcileOnLabels to ignore updates of the status alone (0 restores the
// default, [ReconcileOnAny]).
func (m Metadata) WithReconcileOn(changes Changes) Metadata {
	m.ReconcileOn = changes
	return m
}
