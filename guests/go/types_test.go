package guest

import (
	"testing"
	"time"

	"kubewasm.dev/guest/internal/wit"
)

func TestAPIVersionsRoundTrip(t *testing.T) {
	deployment := KindOf("apps/v1", "Deployment")
	if deployment != (GVK{"apps", "v1", "Deployment"}) || deployment.APIVersion() != "apps/v1" {
		t.Fatalf("got %+v", deployment)
	}
	if got := deployment.String(); got != "apps/v1, Kind=Deployment" {
		t.Fatalf("String: %q", got)
	}
	pod := KindOf("v1", "Pod")
	if pod.Group != "" || pod.APIVersion() != "v1" {
		t.Fatalf("got %+v", pod)
	}
}

func TestMetadataBuilder(t *testing.T) {
	base := NewMetadata("x", Select(GVK{"a.io", "v1", "Thing"}))
	m := base.
		WithOwns(KindOf("v1", "Pod")).
		WithWatch(Select(KindOf("v1", "Secret")).InNamespace("ns"), MapLabel("thing")).
		WithFinalizer("a.io/cleanup").
		WithMaxConcurrency(0).
		WithResync(1500 * time.Millisecond)
	if len(base.Owns) != 0 || len(base.Watches) != 0 {
		t.Fatal("the builder changed its receiver")
	}
	raw := adapter{static(m)}.Metadata()
	if raw.MaxConcurrency != 1 || raw.ResyncSeconds != 1 || len(raw.Owns) != 1 {
		t.Fatalf("got %+v", raw)
	}
	if w := raw.Watches[0]; w.Selection.Namespace != "ns" || w.Mapping.Case != 1 || w.Mapping.Label != "thing" {
		t.Fatalf("watch: %+v", w)
	}
	if raw.Finalizer != "a.io/cleanup" {
		t.Fatalf("finalizer: %q", raw.Finalizer)
	}
	if raw.ReconcileOn != wit.ChangesAny {
		t.Fatalf("reconcile-on defaults to %04b", raw.ReconcileOn)
	}
	if (ObjectKey{"ns", "n"}).String() != "ns/n" || (ObjectKey{Name: "n"}).String() != "n" {
		t.Fatal("ObjectKey.String")
	}
}

func TestReconcileOnIsTheFlagsOfTheWorld(t *testing.T) {
	base := NewMetadata("x", Select(KindOf("v1", "ConfigMap")))
	checks := []struct {
		changes Changes
		want    uint8
	}{
		{ReconcileOnGeneration, 0b0001},
		{ReconcileOnLabels, 0b0010},
		{ReconcileOnAnnotations, 0b0100},
		{ReconcileOnAny, 0b1000},
		{ReconcileOnGeneration | ReconcileOnAnnotations, 0b0101},
		{0, 0b1000},
		{ReconcileOnLabels | 0b1_0000, 0b0010},
	}
	for _, check := range checks {
		raw := adapter{static(base.WithReconcileOn(check.changes))}.Metadata()
		if raw.ReconcileOn != check.want {
			t.Errorf("%04b: got %04b, want %04b", check.changes, raw.ReconcileOn, check.want)
		}
	}
	if raw := (adapter{static(Metadata{Name: "literal", MaxConcurrency: 1})}).Metadata(); raw.ReconcileOn != wit.ChangesAny {
		t.Errorf("a literal Metadata reconciles on %04b", raw.ReconcileOn)
	}
}

// static is a controller declaring m and reconciling nothing.
type static Metadata

func (s static) Metadata() Metadata              { return Metadata(s) }
func (static) Reconcile(Request) (Action, error) { return Done, nil }
