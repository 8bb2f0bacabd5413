// A minimal kubewasm controller guest. It reconciles ConfigMaps labelled
// kubewasm.dev/greeter=true and only logs what it sees; replace the body of Reconcile with your
// own logic.
package main

import (
	"strconv"

	"kubewasm.dev/guest"
	"kubewasm.dev/guest/log"
	"kubewasm.dev/guest/meta"
)

// Greeter is the controller.
type Greeter struct{}

// Metadata declares what the controller reconciles.
func (Greeter) Metadata() guest.Metadata {
	return guest.NewMetadata("greeter",
		guest.Select(guest.KindOf("v1", "ConfigMap")).WithLabels("kubewasm.dev/greeter=true"),
	).WithMaxConcurrency(2)
}

// Reconcile logs the ConfigMap it is called for.
func (Greeter) Reconcile(req guest.Request) (guest.Action, error) {
	if req.Object == nil {
		// Deleted: owned objects are garbage-collected by Kubernetes.
		return guest.Done, nil
	}
	log.Info("reconciled", describe(req)...)
	return guest.Done, nil
}

// describe is what Reconcile logs about the ConfigMap: its key, resourceVersion and number of
// data keys.
func describe(req guest.Request) []any {
	data, _ := req.Object["data"].(map[string]any)
	return []any{
		"key", req.Key.String(),
		"resourceVersion", meta.ResourceVersion(req.Object),
		"dataKeys", strconv.Itoa(len(data)),
	}
}

func init() {
	guest.Export(Greeter{})
}

// main is not called: the host calls the exports registered by init.
func main() {}
