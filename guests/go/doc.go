// Package guest is the Go SDK for kubewasm controller guests: Kubernetes controllers compiled
// to WebAssembly components of the kubewasm:controller@0.2.1 world (wit/controller.wit).
//
// A guest implements [Controller] and registers it with [Export] from an init function of
// package main:
//
//	type Hello struct{}
//
//	func (Hello) Metadata() guest.Metadata {
//		return guest.NewMetadata("hello", guest.Select(guest.KindOf("v1", "ConfigMap")))
//	}
//
//	func (Hello) Reconcile(req guest.Request) (guest.Action, error) {
//		log.Info("reconciling", "key", req.Key)
//		return guest.Done, nil
//	}
//
//	func init() { guest.Export(Hello{}) }
//
//	func main() {}
//
// What the host guarantees:
//   - Metadata is called once when the module is loaded.
//   - Every Reconcile, Finalize and MapKeys call runs in a fresh instance: nothing (package
//     variables, caches, counters) survives from one call to the next.
//   - Reads ([Get], [List], [ListControlled]) come from the host's informer cache and never reach
//     the API server.
//   - Writes ([Apply], [PatchMerge], [Delete], ...) are executed by the host with the field
//     manager kubewasm-<name>; an apply that would change nothing is not sent.
//   - An owned [Apply] never takes over an existing object the reconciled object does not
//     control, unless [ApplyOptions.Adopt] asks to adopt one without a controller owner.
//   - With [Metadata.WithReconcileOn] only the chosen updates of a primary object enqueue it.
//   - With [Metadata.WithFinalizer] the host adds and removes the finalizer itself.
//
// Host calls panic outside the host (any GOOS but wasip1), so native unit tests cover pure
// logic; the packages meta, owner, conditions and selector are pure and work everywhere.
package guest
