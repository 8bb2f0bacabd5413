// The Kubernetes ReplicaSet controller rebuilt as a kubewasm guest in Go.
//
// A PodSet (kubewasm.dev/v1alpha1) keeps spec.replicas pods built from spec.template running:
// it adopts orphan pods matching spec.selector, creates missing pods, deletes surplus ones
// (unscheduled, pending and unready pods first, then the newest) and reports status.replicas,
// status.readyReplicas and a ReplicaFailure condition. The decisions are made by the pure
// functions of package logic; this file only calls the host.
package main

import (
	"encoding/json"
	"fmt"

	"kubewasm.dev/examples/podset/logic"
	"kubewasm.dev/guest"
	"kubewasm.dev/guest/log"
	"kubewasm.dev/guest/meta"
	"kubewasm.dev/guest/owner"
)

// PodSets is the PodSet controller.
type PodSets struct{}

// Metadata declares the controller.
func (PodSets) Metadata() guest.Metadata {
	return guest.NewMetadata("podset", guest.Select(logic.PodSetKind)).
		WithOwns(logic.PodKind).
		// Orphans have no owner to enqueue; MapKeys finds the PodSets that would adopt them, as
		// the ReplicaSet controller does on pod events.
		WithWatch(guest.Select(logic.PodKind), guest.MapGuest).
		WithMaxConcurrency(4)
}

// MapKeys maps an orphan pod to the PodSets of its namespace whose selector matches it.
func (PodSets) MapKeys(_ guest.GVK, pod guest.Object) []guest.ObjectKey {
	// Controlled pods reach their PodSet through Owns; deleting pods are not adopted.
	if _, controlled := owner.ControllerRef(pod); controlled || meta.IsDeleting(pod) {
		return nil
	}
	texts, err := guest.ListAs[json.RawMessage](logic.PodSetKind, meta.Namespace(pod), "")
	if err != nil {
		log.Warn("cannot list PodSets", "error", err)
		return nil
	}
	// A PodSet that does not decode adopts nothing; its own reconcile reports why.
	podsets := make([]logic.PodSet, 0, len(texts))
	for _, text := range texts {
		var podset logic.PodSet
		if json.Unmarshal(text, &podset) == nil {
			podsets = append(podsets, podset)
		}
	}
	return logic.Adopters(podsets, meta.Labels(pod))
}

// Reconcile adopts, creates and deletes pods until the PodSet has its replicas, then writes
// its status.
func (PodSets) Reconcile(req guest.Request) (guest.Action, error) {
	var podset logic.PodSet
	// Gone: the garbage collector deletes the pods it owned.
	if found, err := req.Decode(&podset); !found || err != nil {
		return guest.Done, err
	}
	if podset.Metadata.DeletionTimestamp != "" {
		return guest.Done, nil
	}
	namespace := req.Namespace()
	pods, err := readPods(hostPods{}, podset, namespace)
	if err != nil {
		return guest.Done, err
	}

	plan, err := logic.MakePlan(podset, pods)
	if err != nil {
		failure := &logic.Failure{Reason: "InvalidSpec", Message: err.Error()}
		live := logic.ControlledPods(podset.Metadata.UID, pods)
		if err := writeStatus(podset, logic.Status(podset, live, 0, failure)); err != nil {
			return guest.Done, err
		}
		return guest.Done, guest.Permanent(err)
	}

	for _, pod := range plan.Adopt {
		if _, err := guest.PatchJSON(logic.PodKind, namespace, pod.Name, logic.AdoptionPatch(podset, pod)); err != nil {
			return guest.Done, fmt.Errorf("adopting pod %s: %w", pod.Name, err)
		}
		log.Info("adopted pod", "pod", pod.Name)
	}

	var failure *logic.Failure
	var failed error
	taken := make(map[string]bool, len(pods))
	for _, pod := range pods {
		taken[pod.Name] = true
	}
	generate := func() string { return guest.GenerateName(req.Name() + "-") }
	created := 0
	for range plan.Create {
		name, err := freeName(hostPods{}, namespace, taken, generate)
		if err != nil {
			return guest.Done, err
		}
		if _, err := guest.Apply(logic.PodManifest(podset, name), guest.Owned); err != nil {
			message := fmt.Sprintf("Error creating pod %s: %v", name, err)
			record(req, guest.Warning, "FailedCreate", "Create", message)
			failure, failed = &logic.Failure{Reason: "FailedCreate", Message: message}, err
			// Like the ReplicaSet controller's slow start: stop at the first failure.
			break
		}
		created++
		record(req, guest.Normal, "SuccessfulCreate", "Create", "Created pod: "+name)
	}

	deleted := map[string]bool{}
	for _, pod := range plan.Delete {
		err := guest.IgnoreNotFound(guest.Delete(logic.PodKind, namespace, pod.Name, guest.Preconditions{UID: pod.UID}))
		if err != nil {
			message := fmt.Sprintf("Error deleting pod %s: %v", pod.Name, err)
			record(req, guest.Warning, "FailedDelete", "Delete", message)
			if failure == nil {
				failure, failed = &logic.Failure{Reason: "FailedDelete", Message: message}, err
			}
			continue
		}
		deleted[pod.UID] = true
		record(req, guest.Normal, "SuccessfulDelete", "Delete", "Deleted pod: "+pod.Name)
	}

	var live []logic.PodView
	for _, pod := range plan.Owned {
		if !deleted[pod.UID] {
			live = append(live, pod)
		}
	}
	if err := writeStatus(podset, logic.Status(podset, live, created, failure)); err != nil {
		return guest.Done, err
	}
	return guest.Done, failed
}

// podReads are the reads of pods a reconcile makes: [hostPods] asks the host's cache, tests
// answer them themselves.
type podReads interface {
	// controlled lists the pods of namespace whose controller reference has uid.
	controlled(namespace, uid string) ([]logic.Pod, error)
	// matching lists the pods of namespace that labelSelector matches (empty: every pod).
	matching(namespace, labelSelector string) ([]logic.Pod, error)
	// exists reports whether the cache holds a pod namespace/name.
	exists(namespace, name string) (bool, error)
}

// hostPods reads pods from the host's cache.
type hostPods struct{}

func (hostPods) controlled(namespace, uid string) ([]logic.Pod, error) {
	return guest.ListControlledAs[logic.Pod](logic.PodKind, namespace, uid)
}

func (hostPods) matching(namespace, labelSelector string) ([]logic.Pod, error) {
	return guest.ListAs[logic.Pod](logic.PodKind, namespace, labelSelector)
}

func (hostPods) exists(namespace, name string) (bool, error) {
	_, found, err := guest.GetAs[json.RawMessage](logic.PodKind, namespace, name)
	return found, err
}

// readPods returns the pods the PodSet controls and the orphans its selector may adopt, in
// name order: both lists come from the host's indexes, so a reconcile costs its own pods, not
// its namespace. A selector without a string form (the plan refuses it anyway) reads the whole
// namespace.
func readPods(reads podReads, podset logic.PodSet, namespace string) ([]logic.PodView, error) {
	controlled, err := reads.controlled(namespace, podset.Metadata.UID)
	if err != nil {
		return nil, err
	}
	query, err := podset.Spec.Selector.Query()
	if err != nil {
		query = ""
	}
	candidates, err := reads.matching(namespace, query)
	if err != nil {
		return nil, err
	}
	return logic.Union(controlled, candidates), nil
}

// freeName returns a name from generate that no pod has, and adds it to taken: neither a pod
// read for this reconcile (taken) nor any other pod of the cache, since an apply to a taken
// name would change that pod.
func freeName(reads podReads, namespace string, taken map[string]bool, generate func() string) (string, error) {
	for {
		name := generate()
		if taken[name] {
			continue
		}
		taken[name] = true
		exists, err := reads.exists(namespace, name)
		if err != nil {
			return "", fmt.Errorf("looking for pod %s: %w", name, err)
		}
		if !exists {
			return name, nil
		}
	}
}

func writeStatus(podset logic.PodSet, status logic.PodSetStatus) error {
	if _, err := guest.ApplyStatus(logic.StatusObject(podset, status)); err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	return nil
}

// record records an event about the PodSet; events are best effort, so failures are only
// logged.
func record(req guest.Request, eventType guest.EventType, reason, action, note string) {
	if err := guest.RecordEvent(logic.PodSetKind, req.Key, eventType, reason, action, note); err != nil {
		log.Debug("could not record event", "reason", reason, "error", err)
	}
}

func init() {
	guest.Export(PodSets{})
}

func main() {}
