package logic

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"kubewasm.dev/guest"
	"kubewasm.dev/guest/owner"
	"kubewasm.dev/guest/selector"
)

const uid = "podset-uid"

func decode[T any](t *testing.T, text string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func podset(t *testing.T, replicas int) PodSet {
	return decode[PodSet](t, `{
		"apiVersion": "kubewasm.dev/v1alpha1", "kind": "PodSet",
		"metadata": {"name": "web", "namespace": "ns", "uid": "`+uid+`", "generation": 2},
		"spec": {
			"replicas": `+itoa(replicas)+`,
			"selector": {"matchLabels": {"app": "web"}},
			"template": {
				"metadata": {"labels": {"app": "web", "tier": "fe"}},
				"spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
			}
		}
	}`)
}

func itoa(n int) string {
	text, _ := json.Marshal(n)
	return string(text)
}

// podBuilder builds the JSON of a pod, as the cache holds it.
type podBuilder map[string]any

func newPod(name string) podBuilder {
	return podBuilder{
		"metadata": map[string]any{
			"name": name, "uid": "uid-" + name, "resourceVersion": "10",
			"labels": map[string]any{"app": "web"}, "creationTimestamp": "2024-01-01T00:00:00Z",
		},
		"spec":   map[string]any{},
		"status": map[string]any{"phase": "Pending"},
	}
}

func (p podBuilder) field(section, key string, value any) podBuilder {
	p[section].(map[string]any)[key] = value
	return p
}

func (p podBuilder) controlledBy(ownerUID string) podBuilder {
	return p.field("metadata", "ownerReferences", []any{map[string]any{"apiVersion": "kubewasm.dev/v1alpha1",
		"kind": "PodSet", "name": "x", "uid": ownerUID, "controller": true}})
}

func (p podBuilder) owned() podBuilder { return p.controlledBy(uid) }

func (p podBuilder) running(node, readySince string) podBuilder {
	p.field("spec", "nodeName", node).field("status", "phase", "Running")
	if readySince != "" {
		p.field("status", "conditions", []any{map[string]any{"type": "Ready", "status": "True", "lastTransitionTime": readySince}})
	}
	return p
}

func (p podBuilder) restarts(n int) podBuilder {
	return p.field("status", "containerStatuses", []any{map[string]any{"restartCount": 0}, map[string]any{"restartCount": n}})
}

func (p podBuilder) deleting() podBuilder {
	return p.field("metadata", "deletionTimestamp", "2024-01-02T00:00:00Z")
}

func (p podBuilder) build(t *testing.T) PodView {
	t.Helper()
	text, _ := json.Marshal(p)
	view, ok := View(decode[Pod](t, string(text)))
	if !ok {
		t.Fatalf("%s has no name or uid", text)
	}
	return view
}

func names(pods []PodView) []string {
	out := []string{}
	for _, pod := range pods {
		out = append(out, pod.Name)
	}
	return out
}

func plan(t *testing.T, podset PodSet, pods ...PodView) Plan {
	t.Helper()
	p, err := MakePlan(podset, pods)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func equal[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: got %v, want %v", what, got, want)
	}
}

func TestReadsPods(t *testing.T) {
	pod := newPod("a").owned().running("node-1", "2024-01-01T00:01:00Z").restarts(3).build(t)
	equal(t, "uid", pod.UID, "uid-a")
	equal(t, "ready and active", pod.Ready && pod.Active(), true)
	equal(t, "ready since", pod.ReadySince, "2024-01-01T00:01:00Z")
	equal(t, "restarts", pod.Restarts, int64(3))
	controller, _ := pod.controller()
	equal(t, "controller", controller.UID, uid)
	if _, ok := View(decode[Pod](t, `{"metadata": {"name": "no-uid"}}`)); ok {
		t.Error("a pod without uid is read")
	}
}

func TestUnionReadsEachPodOnceInNameOrder(t *testing.T) {
	raw := func(b podBuilder) Pod {
		text, _ := json.Marshal(b)
		return decode[Pod](t, string(text))
	}
	controlled := []Pod{raw(newPod("b").owned()), raw(newPod("d").owned())}
	candidates := []Pod{raw(newPod("a")), raw(newPod("b").owned()), raw(newPod("c")), raw(newPod("d"))}
	union := Union(controlled, candidates)
	equal(t, "names", names(union), []string{"a", "b", "c", "d"})
	if _, controlled := union[3].controller(); !controlled {
		t.Error("a pod read twice is not the first read")
	}
	equal(t, "empty", len(Union(nil, nil)), 0)
}

func TestCreatesMissingReplicas(t *testing.T) {
	p := plan(t, podset(t, 3), newPod("a").owned().build(t))
	equal(t, "create", p.Create, 2)
	equal(t, "delete and adopt", len(p.Delete)+len(p.Adopt), 0)
	equal(t, "owned", names(p.Owned), []string{"a"})
}

func TestIgnoresDeletingTerminatedAndForeignPods(t *testing.T) {
	p := plan(t, podset(t, 2),
		newPod("deleting").owned().deleting().build(t),
		newPod("done").owned().field("status", "phase", "Succeeded").build(t),
		newPod("failed").owned().field("status", "phase", "Failed").build(t),
		newPod("foreign").controlledBy("other").build(t),
		newPod("mine").owned().build(t),
	)
	equal(t, "owned", names(p.Owned), []string{"mine"})
	equal(t, "adopt", len(p.Adopt), 0)
	equal(t, "create", p.Create, 1)
}

func TestAdoptsMatchingOrphansOnly(t *testing.T) {
	p := plan(t, podset(t, 2),
		newPod("orphan").build(t),
		newPod("other-app").field("metadata", "labels", map[string]any{"app": "db"}).build(t),
		newPod("orphan-deleting").deleting().build(t),
		newPod("mine").owned().build(t),
	)
	equal(t, "adopt", names(p.Adopt), []string{"orphan"})
	equal(t, "owned", names(p.Owned), []string{"mine", "orphan"})
	equal(t, "create", p.Create, 0)
	equal(t, "delete", len(p.Delete), 0)
}

func TestDeletesPendingAndUnreadyPodsFirst(t *testing.T) {
	p := plan(t, podset(t, 1),
		newPod("old-ready").owned().running("n1", "2024-01-01T00:00:00Z").build(t),
		newPod("new-ready").owned().running("n1", "2024-01-03T00:00:00Z").build(t),
		newPod("unready").owned().running("n1", "").build(t),
		newPod("pending").owned().build(t),
	)
	equal(t, "delete", names(p.Delete), []string{"pending", "unready", "new-ready"})
	equal(t, "create", p.Create, 0)
}

func TestDeletionPrefersUnscheduledRestartingAndNewerPods(t *testing.T) {
	unscheduled := newPod("unscheduled").build(t)
	scheduled := newPod("scheduled").field("spec", "nodeName", "n1").build(t)
	equal(t, "unscheduled first", DeletionOrder(unscheduled, scheduled), -1)

	crashy := newPod("crashy").restarts(5).build(t)
	calm := newPod("calm").build(t)
	equal(t, "restarting first", DeletionOrder(crashy, calm), -1)

	newer := newPod("newer").field("metadata", "creationTimestamp", "2024-02-01T00:00:00Z").build(t)
	older := newPod("older").field("metadata", "creationTimestamp", "2024-01-01T00:00:00Z").build(t)
	equal(t, "newer first", DeletionOrder(newer, older), -1)
	equal(t, "older last", DeletionOrder(older, newer), 1)

	unknownAge := newPod("unknown-age").build(t)
	unknownAge.Created = ""
	equal(t, "unknown age first", DeletionOrder(unknownAge, newer), -1)

	twin := newPod("twin").build(t)
	equal(t, "ties by name", DeletionOrder(calm, twin), -1)
}

func TestZeroReplicasDeletesEverything(t *testing.T) {
	p := plan(t, podset(t, 0), newPod("a").owned().build(t), newPod("b").build(t))
	equal(t, "adopt", names(p.Adopt), []string{"b"})
	equal(t, "delete", len(p.Delete), 2)
}

func TestCapsBursts(t *testing.T) {
	equal(t, "create", plan(t, podset(t, 10_000)).Create, MaxBurst)
}

func TestAbsentReplicasMeansOne(t *testing.T) {
	ps := podset(t, 0)
	ps.Spec.Replicas = nil
	equal(t, "create", plan(t, ps).Create, 1)
}

func TestRejectsInvalidSpecs(t *testing.T) {
	invalid := func(ps PodSet, want string) {
		t.Helper()
		_, err := MakePlan(ps, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
	empty := podset(t, 1)
	empty.Spec.Selector = selector.LabelSelector{}
	invalid(empty, "must not be empty")

	mismatch := podset(t, 1)
	mismatch.Spec.Template.Metadata.Labels = map[string]string{"app": "db"}
	invalid(mismatch, "does not match")

	bad := podset(t, 1)
	bad.Spec.Selector = decode[selector.LabelSelector](t, `{"matchExpressions": [{"key": "app", "operator": "Near", "values": ["x"]}]}`)
	invalid(bad, "unknown operator")
}

func TestFindsAdoptersOfOrphans(t *testing.T) {
	db := podset(t, 1)
	db.Metadata.Name = "db"
	db.Spec.Selector = decode[selector.LabelSelector](t, `{"matchLabels": {"app": "db"}}`)
	db.Spec.Template.Metadata.Labels = map[string]string{"app": "db"}
	deleting := podset(t, 1)
	deleting.Metadata.Name = "going"
	deleting.Metadata.DeletionTimestamp = "2024-01-02T00:00:00Z"
	invalid := podset(t, 1)
	invalid.Metadata.Name = "invalid"
	invalid.Spec.Selector = selector.LabelSelector{}
	podsets := []PodSet{podset(t, 1), db, deleting, invalid}
	equal(t, "web", Adopters(podsets, map[string]string{"app": "web"}), []guest.ObjectKey{{Namespace: "ns", Name: "web"}})
	equal(t, "cache", len(Adopters(podsets, map[string]string{"app": "cache"})), 0)
}

func TestAdoptionPatchSetsControllerWithPrecondition(t *testing.T) {
	orphan := newPod("orphan").build(t)
	orphan.OwnerReferences = append(orphan.OwnerReferences, owner.Reference{APIVersion: "v1", Kind: "ConfigMap", Name: "cm", UID: "cm-uid"})
	text, _ := json.Marshal(AdoptionPatch(podset(t, 1), orphan))
	want := `[{"op":"replace","path":"/metadata/resourceVersion","value":"10"},` +
		`{"op":"add","path":"/metadata/ownerReferences","value":[` +
		`{"apiVersion":"v1","kind":"ConfigMap","name":"cm","uid":"cm-uid"},` +
		`{"apiVersion":"kubewasm.dev/v1alpha1","kind":"PodSet","name":"web","uid":"podset-uid","controller":true,"blockOwnerDeletion":true}]}]`
	equal(t, "patch", string(text), want)
}

func TestPodManifestCopiesTheTemplate(t *testing.T) {
	text, _ := json.Marshal(PodManifest(podset(t, 1), "web-abcde"))
	want := `{"apiVersion":"v1","kind":"Pod","metadata":{"labels":{"app":"web","tier":"fe"},"name":"web-abcde","namespace":"ns"},` +
		`"spec":{"containers":[{"name":"c","image":"registry.k8s.io/pause:3.10"}]}}`
	equal(t, "manifest", string(text), want)
}

func TestStatusCountsLivePodsAndReportsFailures(t *testing.T) {
	live := []PodView{
		newPod("a").owned().running("n", "2024-01-01T00:00:00Z").build(t),
		newPod("b").owned().build(t),
	}
	ps := podset(t, 3)
	failed := Status(ps, live, 0, &Failure{Reason: "FailedCreate", Message: "quota exceeded"})
	equal(t, "counts", [2]int32{failed.Replicas, failed.ReadyReplicas}, [2]int32{2, 1})
	equal(t, "observed generation", failed.ObservedGeneration, int64(2))
	equal(t, "selector", *failed.Selector, "app=web")
	equal(t, "condition", failed.Conditions[0].Type+" "+failed.Conditions[0].Reason, ReplicaFailure+" FailedCreate")

	ps.Status = &failed
	healed := Status(ps, live, 1, nil)
	equal(t, "replicas", healed.Replicas, int32(3))
	equal(t, "conditions", len(healed.Conditions), 0)

	text, _ := json.Marshal(StatusObject(ps, healed))
	object := decode[struct {
		Metadata map[string]any
		Status   map[string]any
	}](t, string(text))
	equal(t, "metadata", object.Metadata, map[string]any{"name": "web", "namespace": "ns"})
	equal(t, "readyReplicas", object.Status["readyReplicas"], any(1.0))
	if _, ok := object.Status["conditions"]; ok {
		t.Error("empty conditions are written")
	}
}
