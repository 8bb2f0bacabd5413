//go:build !wasip1

package wit

// Outside the host there is no one to call: the imports panic, like calling the host from a
// native unit test would be a bug in the test. The SDK's own tests may set [FakeCache] to
// answer the cache reads instead.

const native = "kubewasm: host calls only work inside the kubewasm host (GOOS=wasip1)"

// Cache answers the `cache` imports in place of the host.
type Cache interface {
	Get(kind Gvk, namespace, name string) (string, bool, *Error)
	List(kind Gvk, namespace, labelSelector string) ([]string, *Error)
	ListControlled(kind Gvk, namespace, controllerUID string) ([]string, *Error)
}

// FakeCache, when set (by a test of the SDK), answers the `cache` imports of a native build;
// while it is nil they panic like the other imports.
var FakeCache Cache

func fakeCache() Cache {
	if FakeCache == nil {
		panic(native)
	}
	return FakeCache
}

// Get calls `cache.get`.
func Get(kind Gvk, namespace, name string) (string, bool, *Error) {
	return fakeCache().Get(kind, namespace, name)
}

// List calls `cache.list`.
func List(kind Gvk, namespace, labelSelector string) ([]string, *Error) {
	return fakeCache().List(kind, namespace, labelSelector)
}

// ListControlled calls `cache.list-controlled`.
func ListControlled(kind Gvk, namespace, controllerUID string) ([]string, *Error) {
	return fakeCache().ListControlled(kind, namespace, controllerUID)
}

// Apply calls `writes.apply`.
func Apply(string, ApplyOptions) (string, *Error) { panic(native) }

// ApplyStatus calls `writes.apply-status`.
func ApplyStatus(string, StatusOptions) (string, *Error) { panic(native) }

// Delete calls `writes.delete`.
func Delete(Gvk, string, string, Preconditions) *Error { panic(native) }

// Patch calls `writes.patch`.
func Patch(Gvk, string, string, uint8, string) (string, *Error) { panic(native) }

// RecordEvent calls `events.record-event`.
func RecordEvent(Event) *Error { panic(native) }

// Log calls `log.log`.
func Log(uint8, string, []Field) { panic(native) }
