//go:build !wasip1

package wit

// Outside the host there is no one to call: the imports panic, like calling the host from a
// native unit test would be a bug in the test.

const native = "kubewasm: host calls only work inside the kubewasm host (GOOS=wasip1)"

// Get calls `cache.get`.
func Get(Gvk, string, string) (string, bool, *Error) { panic(native) }

// List calls `cache.list`.
func List(Gvk, string, string) ([]string, *Error) { panic(native) }

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
