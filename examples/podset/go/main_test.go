package main

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"

	"kubewasm.dev/examples/podset/logic"
	"kubewasm.dev/guest/selector"
)

// fakePods answers the reads of a reconcile from the pods of one namespace, as the host's
// indexes would, and records what was asked.
type fakePods struct {
	pods  []logic.Pod
	names []string // also in the cache, outside the lists
	asked []string
	err   error
}

func (f *fakePods) controlled(namespace, uid string) ([]logic.Pod, error) {
	f.asked = append(f.asked, "controlled "+namespace+" "+uid)
	var found []logic.Pod
	for _, pod := range f.pods {
		for _, r := range pod.Metadata.OwnerReferences {
			if r.Controller != nil && *r.Controller && r.UID == uid {
				found = append(found, pod)
			}
		}
	}
	return found, f.err
}

func (f *fakePods) matching(namespace, labelSelector string) ([]logic.Pod, error) {
	f.asked = append(f.asked, "matching "+namespace+" "+labelSelector)
	if labelSelector == "" {
		return f.pods, f.err
	}
	if labelSelector != "app=web" {
		return nil, errors.New("the fake serves no selector but app=web")
	}
	var found []logic.Pod
	for _, pod := range f.pods {
		if pod.Metadata.Labels["app"] == "web" {
			found = append(found, pod)
		}
	}
	return found, f.err
}

func (f *fakePods) exists(namespace, name string) (bool, error) {
	f.asked = append(f.asked, "exists "+namespace+" "+name)
	for _, pod := range f.pods {
		if pod.Metadata.Name == name {
			return true, f.err
		}
	}
	return slices.Contains(f.names, name), f.err
}

func decode[T any](t *testing.T, text string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func pod(t *testing.T, name, app, controllerUID string) logic.Pod {
	owners := "[]"
	if controllerUID != "" {
		owners = `[{"apiVersion": "kubewasm.dev/v1alpha1", "kind": "PodSet", "name": "x", "uid": "` + controllerUID + `", "controller": true}]`
	}
	return decode[logic.Pod](t, `{"metadata": {"name": "`+name+`", "uid": "uid-`+name+`",
		"labels": {"app": "`+app+`"}, "ownerReferences": `+owners+`}}`)
}

func webPodSet(t *testing.T) logic.PodSet {
	return decode[logic.PodSet](t, `{
		"metadata": {"name": "web", "namespace": "ns", "uid": "web-uid"},
		"spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}}}
	}`)
}

func names(pods []logic.PodView) []string {
	var out []string
	for _, pod := range pods {
		out = append(out, pod.Name)
	}
	return out
}

func TestReadsControlledPodsAndCandidatesOnly(t *testing.T) {
	f := &fakePods{pods: []logic.Pod{
		pod(t, "a-mine-relabelled", "db", "web-uid"),
		pod(t, "b-orphan", "web", ""),
		pod(t, "c-mine", "web", "web-uid"),
		pod(t, "d-other-app", "db", ""),
		pod(t, "e-foreign", "web", "other-uid"),
	}}
	pods, err := readPods(f, webPodSet(t), "ns")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"controlled ns web-uid", "matching ns app=web"}; !reflect.DeepEqual(f.asked, want) {
		t.Errorf("asked %q", f.asked)
	}
	// c-mine is in both lists and read once; d-other-app is in neither.
	if got, want := names(pods), []string{"a-mine-relabelled", "b-orphan", "c-mine", "e-foreign"}; !reflect.DeepEqual(got, want) {
		t.Errorf("read %q, want %q", got, want)
	}

	// The plan of what was read is the plan of the whole namespace.
	podset := webPodSet(t)
	fromReads, err := logic.MakePlan(podset, pods)
	if err != nil {
		t.Fatal(err)
	}
	fromNamespace, _ := logic.MakePlan(podset, logic.Views(f.pods))
	if !reflect.DeepEqual(fromReads, fromNamespace) {
		t.Errorf("plan %+v, from the namespace %+v", fromReads, fromNamespace)
	}
}

func TestReadsTheNamespaceForASelectorWithoutAString(t *testing.T) {
	f := &fakePods{pods: []logic.Pod{pod(t, "a", "db", ""), pod(t, "b", "web", "web-uid")}}
	podset := webPodSet(t)
	podset.Spec.Selector = decode[selector.LabelSelector](t, `{"matchExpressions": [{"key": "app", "operator": "Near"}]}`)
	pods, err := readPods(f, podset, "ns")
	if err != nil {
		t.Fatal(err)
	}
	if f.asked[1] != "matching ns " || !reflect.DeepEqual(names(pods), []string{"a", "b"}) {
		t.Errorf("asked %q, read %q", f.asked, names(pods))
	}
}

func TestReadErrorsEndTheReconcile(t *testing.T) {
	f := &fakePods{err: errors.New("unavailable")}
	if _, err := readPods(f, webPodSet(t), "ns"); err == nil {
		t.Fatal("no error")
	}
	if _, err := freeName(f, "ns", map[string]bool{}, func() string { return "web-x" }); !errors.Is(err, f.err) {
		t.Fatalf("got %v", err)
	}
}

func TestNewPodsGetNamesNoPodHas(t *testing.T) {
	f := &fakePods{pods: []logic.Pod{pod(t, "web-read", "web", "")}, names: []string{"web-cached"}}
	candidates := []string{"web-read", "web-taken", "web-cached", "web-free"}
	generate := func() string {
		name := candidates[0]
		candidates = candidates[1:]
		return name
	}
	taken := map[string]bool{"web-read": true, "web-taken": true}
	name, err := freeName(f, "ns", taken, generate)
	if err != nil || name != "web-free" {
		t.Fatalf("got %q, %v", name, err)
	}
	// Names read or created in this reconcile are not asked for again.
	if want := []string{"exists ns web-cached", "exists ns web-free"}; !reflect.DeepEqual(f.asked, want) {
		t.Errorf("asked %q", f.asked)
	}
	if !taken["web-free"] || !taken["web-cached"] {
		t.Errorf("taken: %v", taken)
	}
}
