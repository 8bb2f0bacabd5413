//go:build wasip1

package wit

// The world's exports. Each returns the address of its result in memory; the result and what
// it points to stay alive until the next export call, after the host has read them.

// returned holds the result of the last export call.
var returned []any

// result starts an export call's result of size bytes.
func result(size uint32) writer {
	returned = nil
	release()
	return writer{keep: &returned}.buffer(size)
}

func liftOption(has, address, n uint32) string {
	if has == 0 {
		return ""
	}
	return liftString(address, n)
}

// exportMetadata writes a `controller-metadata` (100 bytes, 4-aligned): name, primary (48
// bytes), owns and watches (lists of 24- and 60-byte elements), finalizer, max-concurrency,
// resync-seconds (an `option<u32>` at 88) and reconcile-on (the `changes` flags, one byte at 96).
//
//go:wasmexport kubewasm:controller/guest@0.2.1#metadata
func exportMetadata() uint32 {
	m := guest.Metadata()
	w := result(100)
	w.string(0, m.Name)
	w.selection(8, m.Primary)
	owns := w.list(56, uint32(len(m.Owns)), 24)
	for i, kind := range m.Owns {
		owns.gvk(uint32(i)*24, kind)
	}
	watches := w.list(64, uint32(len(m.Watches)), 60)
	for i, watch := range m.Watches {
		offset := uint32(i) * 60
		watches.selection(offset, watch.Selection)
		watches.u8(offset+48, watch.Mapping.Case)
		if watch.Mapping.Case == MappingLabel {
			watches.string(offset+52, watch.Mapping.Label)
		}
	}
	w.option(72, m.Finalizer)
	w.u32(84, m.MaxConcurrency)
	if m.ResyncSeconds != 0 {
		w.u8(88, 1)
		w.u32(92, m.ResyncSeconds)
	}
	w.u8(96, m.ReconcileOn)
	return w.address()
}

func liftRequest(hasNamespace, namespace, namespaceLen, name, nameLen, reason, attempt, hasObject, object, objectLen uint32) Request {
	request := Request{
		Key: ObjectKey{
			Namespace: liftOption(hasNamespace, namespace, namespaceLen),
			Name:      liftString(name, nameLen),
		},
		Reason:    uint8(reason),
		Attempt:   attempt,
		HasObject: hasObject != 0,
		Object:    liftOption(hasObject, object, objectLen),
	}
	release()
	return request
}

// reconcileResult writes a `result<outcome, reconcile-error>` (24 bytes, 8-aligned).
func reconcileResult(outcome Outcome, err *ReconcileError) uint32 {
	w := result(24)
	if err != nil {
		w.u8(0, 1)
		w.bool(8, err.Permanent)
		w.string(12, err.Message)
	} else if outcome.Requeue {
		w.u8(8, 1)
		w.u64(16, outcome.RequeueAfter)
	}
	return w.address()
}

//go:wasmexport kubewasm:controller/guest@0.2.1#reconcile
func exportReconcile(hasNamespace, namespace, namespaceLen, name, nameLen, reason, attempt, hasObject, object, objectLen uint32) uint32 {
	request := liftRequest(hasNamespace, namespace, namespaceLen, name, nameLen, reason, attempt, hasObject, object, objectLen)
	return reconcileResult(guest.Reconcile(request))
}

//go:wasmexport kubewasm:controller/guest@0.2.1#finalize
func exportFinalize(hasNamespace, namespace, namespaceLen, name, nameLen, reason, attempt, hasObject, object, objectLen uint32) uint32 {
	request := liftRequest(hasNamespace, namespace, namespaceLen, name, nameLen, reason, attempt, hasObject, object, objectLen)
	return reconcileResult(guest.Finalize(request))
}

//go:wasmexport kubewasm:controller/guest@0.2.1#map-keys
func exportMapKeys(group, groupLen, version, versionLen, kind, kindLen, object, objectLen uint32) uint32 {
	gvk := Gvk{
		Group:   liftString(group, groupLen),
		Version: liftString(version, versionLen),
		Kind:    liftString(kind, kindLen),
	}
	text := liftString(object, objectLen)
	release()
	keys := guest.MapKeys(gvk, text)
	w := result(8)
	elements := w.list(0, uint32(len(keys)), 20)
	for i, key := range keys {
		elements.objectKey(uint32(i)*20, key)
	}
	return w.address()
}
