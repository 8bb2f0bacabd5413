// Package logic is the pure decision logic of the PodSet controller: which pods belong to a
// PodSet, which orphans to adopt, how many pods to create, which to delete, and the resulting
// status. Nothing here calls the host, so it is unit-tested natively with go test.
package logic

import (
	"cmp"
	"encoding/json"
	"slices"

	"kubewasm.dev/guest"
	"kubewasm.dev/guest/conditions"
	"kubewasm.dev/guest/owner"
	"kubewasm.dev/guest/selector"
)

const (
	// Group is the API group of the PodSet kind.
	Group = "kubewasm.dev"
	// Version is the API version of the PodSet kind.
	Version = "v1alpha1"
	// Kind is the PodSet kind.
	Kind = "PodSet"
	// ReplicaFailure is the condition set while creating or deleting pods fails, as on
	// ReplicaSets.
	ReplicaFailure = "ReplicaFailure"
	// MaxBurst is the most pods created or deleted by one reconcile, like the ReplicaSet
	// controller's burst limit.
	MaxBurst = 500
)

var (
	// PodSetKind is the PodSet kind.
	PodSetKind = guest.GVK{Group: Group, Version: Version, Kind: Kind}
	// PodKind is the core Pod kind.
	PodKind = guest.KindOf("v1", "Pod")
)

// PodSet is a PodSet as read from the cache.
type PodSet struct {
	Metadata ObjectMeta `json:"metadata"`
	// Spec is the desired state.
	Spec PodSetSpec `json:"spec"`
	// Status is the observed state, as last written by this controller.
	Status *PodSetStatus `json:"status,omitempty"`
}

// ObjectMeta is the metadata the controller reads.
type ObjectMeta struct {
	Name              string `json:"name"`
	Namespace         string `json:"namespace"`
	UID               string `json:"uid"`
	Generation        int64  `json:"generation"`
	DeletionTimestamp string `json:"deletionTimestamp"`
}

// PodSetSpec is the desired state of a PodSet.
type PodSetSpec struct {
	// Replicas is the number of pods to keep running (absent: 1; negative values count as 0).
	Replicas *int32 `json:"replicas"`
	// Selector says which pods count towards Replicas when adopting orphans; it must match the
	// template.
	Selector selector.LabelSelector `json:"selector"`
	// Template is what new pods look like.
	Template PodTemplate `json:"template"`
}

// Want is the number of pods to keep running.
func (s PodSetSpec) Want() int {
	if s.Replicas == nil {
		return 1
	}
	return max(int(*s.Replicas), 0)
}

// PodTemplate holds the labels and annotations of new pods and their spec, kept as raw JSON.
type PodTemplate struct {
	Metadata struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	// Spec is the pod spec, passed through untouched.
	Spec json.RawMessage `json:"spec"`
}

// PodSetStatus is the observed state of a PodSet.
type PodSetStatus struct {
	// Replicas counts the pods the PodSet controls that are neither terminated nor being
	// deleted.
	Replicas int32 `json:"replicas"`
	// ReadyReplicas counts how many of those are ready.
	ReadyReplicas int32 `json:"readyReplicas"`
	// ObservedGeneration is the metadata.generation this status was computed from.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Selector is the selector in string form, for the scale subresource.
	Selector *string `json:"selector,omitempty"`
	// Conditions holds ReplicaFailure while pods cannot be created or deleted.
	Conditions []conditions.Condition `json:"conditions,omitempty"`
}

// Pod is the part of a pod's JSON the controller reads.
type Pod struct {
	Metadata struct {
		Name              string            `json:"name"`
		UID               string            `json:"uid"`
		ResourceVersion   string            `json:"resourceVersion"`
		Labels            map[string]string `json:"labels"`
		OwnerReferences   []owner.Reference `json:"ownerReferences"`
		DeletionTimestamp string            `json:"deletionTimestamp"`
		CreationTimestamp string            `json:"creationTimestamp"`
	} `json:"metadata"`
	Spec struct {
		NodeName string `json:"nodeName"`
	} `json:"spec"`
	Status struct {
		Phase      string `json:"phase"`
		Conditions []struct {
			Type               string `json:"type"`
			Status             string `json:"status"`
			LastTransitionTime string `json:"lastTransitionTime"`
		} `json:"conditions"`
		ContainerStatuses []struct {
			RestartCount int64 `json:"restartCount"`
		} `json:"containerStatuses"`
	} `json:"status"`
}

// PodView is what the controller needs to know about one pod.
type PodView struct {
	Name string
	UID  string
	// ResourceVersion is the precondition of adoption.
	ResourceVersion string
	Labels          map[string]string
	OwnerReferences []owner.Reference
	// Deleting is whether metadata.deletionTimestamp is set.
	Deleting bool
	// Phase is status.phase (empty when unknown).
	Phase string
	// NodeName is spec.nodeName (empty when unscheduled).
	NodeName string
	// Ready is whether the Ready condition is True.
	Ready bool
	// ReadySince is when the pod last became ready (RFC 3339), if ready.
	ReadySince string
	// Restarts is the highest restart count among its containers.
	Restarts int64
	// Created is metadata.creationTimestamp (RFC 3339).
	Created string
}

// View reads a pod; false if it has no name or uid.
func View(pod Pod) (PodView, bool) {
	view := PodView{
		Name:            pod.Metadata.Name,
		UID:             pod.Metadata.UID,
		ResourceVersion: pod.Metadata.ResourceVersion,
		Labels:          pod.Metadata.Labels,
		OwnerReferences: pod.Metadata.OwnerReferences,
		Deleting:        pod.Metadata.DeletionTimestamp != "",
		Phase:           pod.Status.Phase,
		NodeName:        pod.Spec.NodeName,
		Created:         pod.Metadata.CreationTimestamp,
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == "Ready" {
			view.Ready = c.Status == "True"
			if view.Ready {
				view.ReadySince = c.LastTransitionTime
			}
			break
		}
	}
	for _, c := range pod.Status.ContainerStatuses {
		view.Restarts = max(view.Restarts, c.RestartCount)
	}
	return view, view.Name != "" && view.UID != ""
}

// Views reads every pod with a name and a uid.
func Views(pods []Pod) []PodView {
	views := make([]PodView, 0, len(pods))
	for _, pod := range pods {
		if view, ok := View(pod); ok {
			views = append(views, view)
		}
	}
	return views
}

// Union reads the pods of every list, each pod once (by name, the first read kept), in name
// order, as the cache lists a namespace. A reconcile reads two lists that overlap: the pods
// the PodSet controls and the pods its selector matches.
func Union(lists ...[]Pod) []PodView {
	var views []PodView
	for _, pods := range lists {
		views = append(views, Views(pods)...)
	}
	slices.SortStableFunc(views, func(a, b PodView) int { return cmp.Compare(a.Name, b.Name) })
	return slices.CompactFunc(views, func(a, b PodView) bool { return a.Name == b.Name })
}

func (p PodView) controller() (owner.Reference, bool) {
	return owner.ControllerOf(p.OwnerReferences)
}

// Active reports whether the pod is neither terminated (Succeeded, Failed) nor being deleted.
func (p PodView) Active() bool {
	return !p.Deleting && p.Phase != "Succeeded" && p.Phase != "Failed"
}

// InvalidSpec is a PodSet spec the controller refuses to act on.
type InvalidSpec struct {
	Message string
}

func (e *InvalidSpec) Error() string {
	return e.Message
}

// Validate checks what the API server checks for ReplicaSets: a valid, non-empty selector that
// matches the template's labels.
func Validate(spec PodSetSpec) error {
	if spec.Selector.Empty() {
		return &InvalidSpec{"spec.selector must not be empty"}
	}
	matches, err := spec.Selector.Matches(spec.Template.Metadata.Labels)
	if err != nil {
		return &InvalidSpec{err.Error()}
	}
	if !matches {
		return &InvalidSpec{"spec.selector does not match spec.template.metadata.labels"}
	}
	return nil
}

// ControlledPods returns the active pods controlled by the PodSet with uid ownerUID.
func ControlledPods(ownerUID string, pods []PodView) []PodView {
	var controlled []PodView
	for _, pod := range pods {
		if c, ok := pod.controller(); ok && pod.Active() && c.UID == ownerUID {
			controlled = append(controlled, pod)
		}
	}
	return controlled
}

// Adopters returns the PodSets that would adopt an orphan pod with these labels: those not
// being deleted whose valid selector matches. podsets are the PodSets of the pod's namespace.
func Adopters(podsets []PodSet, labels map[string]string) []guest.ObjectKey {
	var keys []guest.ObjectKey
	for _, podset := range podsets {
		if podset.Metadata.DeletionTimestamp != "" || podset.Metadata.Name == "" || Validate(podset.Spec) != nil {
			continue
		}
		if matches, _ := podset.Spec.Selector.Matches(labels); matches {
			keys = append(keys, guest.ObjectKey{Namespace: podset.Metadata.Namespace, Name: podset.Metadata.Name})
		}
	}
	return keys
}

// Plan is what one reconcile should do.
type Plan struct {
	// Adopt are active orphans matching the selector, to adopt with [AdoptionPatch].
	Adopt []PodView
	// Owned are the PodSet's pods once the adoptions succeed (controlled and adopted, all
	// active).
	Owned []PodView
	// Create is how many pods to create.
	Create int
	// Delete are the pods to delete, in order of preference.
	Delete []PodView
}

// MakePlan decides what to adopt, create and delete, given the PodSet and the pods of its
// namespace: at least those it controls and those its selector matches (the other pods of the
// namespace change nothing), in name order.
//
// Pods controlled by something else are ignored, as are orphans that are being deleted or
// terminated. At most [MaxBurst] pods are created or deleted at once.
func MakePlan(podset PodSet, pods []PodView) (Plan, error) {
	if err := Validate(podset.Spec); err != nil {
		return Plan{}, err
	}
	var plan Plan
	for _, pod := range pods {
		if _, controlled := pod.controller(); pod.Active() && !controlled {
			if matches, _ := podset.Spec.Selector.Matches(pod.Labels); matches {
				plan.Adopt = append(plan.Adopt, pod)
			}
		}
	}
	plan.Owned = append(ControlledPods(podset.Metadata.UID, pods), plan.Adopt...)
	want := podset.Spec.Want()
	plan.Create = min(max(want-len(plan.Owned), 0), MaxBurst)
	surplus := min(max(len(plan.Owned)-want, 0), MaxBurst)
	candidates := slices.Clone(plan.Owned)
	slices.SortStableFunc(candidates, DeletionOrder)
	plan.Delete = candidates[:surplus]
	return plan, nil
}

// afterOrZero reports whether a is newer than b, a missing time counting as newest
// (Kubernetes' afterOrZero).
func afterOrZero(a, b string) bool {
	if a == "" || b == "" {
		return a == ""
	}
	return a > b
}

func phaseRank(phase string) int {
	switch phase {
	case "Unknown":
		return 1
	case "Running":
		return 2
	}
	return 0
}

// deleteFirst reports whether a should be deleted before b, as in Kubernetes'
// ActivePods.Less.
func deleteFirst(a, b PodView) bool {
	// Unscheduled before scheduled.
	if a.NodeName != b.NodeName && (a.NodeName == "" || b.NodeName == "") {
		return a.NodeName == ""
	}
	// Pending < Unknown < Running.
	if phaseRank(a.Phase) != phaseRank(b.Phase) {
		return phaseRank(a.Phase) < phaseRank(b.Phase)
	}
	// Not ready before ready.
	if a.Ready != b.Ready {
		return !a.Ready
	}
	// Ready for a shorter time first.
	if a.Ready && a.ReadySince != b.ReadySince {
		return afterOrZero(a.ReadySince, b.ReadySince)
	}
	// More restarts first.
	if a.Restarts != b.Restarts {
		return a.Restarts > b.Restarts
	}
	// Newer first.
	if a.Created != b.Created {
		return afterOrZero(a.Created, b.Created)
	}
	return false
}

// DeletionOrder is the deletion preference, as a comparison for slices.SortFunc: negative when
// a goes first. Ties break by name.
func DeletionOrder(a, b PodView) int {
	switch {
	case deleteFirst(a, b):
		return -1
	case deleteFirst(b, a):
		return 1
	}
	return cmp.Compare(a.Name, b.Name)
}

// OwnerReference is the controller owner reference of a pod adopted by podset.
func OwnerReference(podset PodSet) owner.Reference {
	yes := true
	return owner.Reference{
		APIVersion:         Group + "/" + Version,
		Kind:               Kind,
		Name:               podset.Metadata.Name,
		UID:                podset.Metadata.UID,
		Controller:         &yes,
		BlockOwnerDeletion: &yes,
	}
}

// AdoptionPatch is the JSON patch adopting pod: it adds a controller owner reference to podset,
// with the resourceVersion the cache saw as precondition, so that a concurrent change (another
// controller adopting it first) fails with 409 Conflict instead of overwriting it.
func AdoptionPatch(podset PodSet, pod PodView) []map[string]any {
	ours := OwnerReference(podset)
	references := []owner.Reference{}
	for _, r := range pod.OwnerReferences {
		if r.UID != ours.UID {
			references = append(references, r)
		}
	}
	references = append(references, ours)
	return []map[string]any{
		{"op": "replace", "path": "/metadata/resourceVersion", "value": pod.ResourceVersion},
		{"op": "add", "path": "/metadata/ownerReferences", "value": references},
	}
}

// PodManifest is the pod to server-side apply for a new replica called name. The host adds
// the controller owner reference (owned apply).
func PodManifest(podset PodSet, name string) guest.Object {
	template := podset.Spec.Template
	metadata := map[string]any{"name": name}
	if podset.Metadata.Namespace != "" {
		metadata["namespace"] = podset.Metadata.Namespace
	}
	if len(template.Metadata.Labels) > 0 {
		metadata["labels"] = template.Metadata.Labels
	}
	if len(template.Metadata.Annotations) > 0 {
		metadata["annotations"] = template.Metadata.Annotations
	}
	return guest.Object{"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template.Spec}
}

// Failure is why creating or deleting pods failed, for the ReplicaFailure condition.
type Failure struct {
	// Reason is FailedCreate, FailedDelete or InvalidSpec.
	Reason  string
	Message string
}

// Status is the status after a reconcile: live are the PodSet's pods still there after the
// deletions, created how many pods were created. ReplicaFailure is set when failure is not nil
// and removed otherwise; other conditions are kept.
func Status(podset PodSet, live []PodView, created int, failure *Failure) PodSetStatus {
	var kept []conditions.Condition
	if podset.Status != nil {
		kept = slices.Clone(podset.Status.Conditions)
	}
	generation := podset.Metadata.Generation
	if failure != nil {
		conditions.Set(&kept, conditions.Condition{
			Type:               ReplicaFailure,
			Status:             conditions.True,
			Reason:             failure.Reason,
			Message:            failure.Message,
			ObservedGeneration: generation,
		})
	} else {
		conditions.Remove(&kept, ReplicaFailure)
	}
	ready := 0
	for _, pod := range live {
		if pod.Ready {
			ready++
		}
	}
	status := PodSetStatus{
		Replicas:           int32(min(len(live)+created, 1<<31-1)),
		ReadyReplicas:      int32(min(ready, 1<<31-1)),
		ObservedGeneration: generation,
		Conditions:         kept,
	}
	if query, err := podset.Spec.Selector.Query(); err == nil {
		status.Selector = &query
	}
	return status
}

// StatusObject is the object to apply to the status subresource.
func StatusObject(podset PodSet, status PodSetStatus) guest.Object {
	return guest.Object{
		"apiVersion": Group + "/" + Version,
		"kind":       Kind,
		"metadata":   map[string]any{"name": podset.Metadata.Name, "namespace": podset.Metadata.Namespace},
		"status":     status,
	}
}
