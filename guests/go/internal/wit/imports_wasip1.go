//go:build wasip1

package wit

// The world's imports. Each takes its parameters flattened to i32s (a pointer to them in
// memory when they flatten to more than 16 values) and the address of a return area.

//go:wasmimport kubewasm:controller/cache@0.2.1 get
func importGet(group, groupLen, version, versionLen, kind, kindLen, hasNamespace, namespace, namespaceLen, name, nameLen, ret uint32)

//go:wasmimport kubewasm:controller/cache@0.2.1 list
func importList(group, groupLen, version, versionLen, kind, kindLen, hasNamespace, namespace, namespaceLen, hasSelector, selector, selectorLen, ret uint32)

//go:wasmimport kubewasm:controller/cache@0.2.1 list-controlled
func importListControlled(group, groupLen, version, versionLen, kind, kindLen, hasNamespace, namespace, namespaceLen, controllerUID, controllerUIDLen, ret uint32)

//go:wasmimport kubewasm:controller/writes@0.2.1 apply
func importApply(object, objectLen, owned, force, adopt, ret uint32)

//go:wasmimport kubewasm:controller/writes@0.2.1 apply-status
func importApplyStatus(object, objectLen, force, ret uint32)

//go:wasmimport kubewasm:controller/writes@0.2.1 delete
func importDelete(params, ret uint32)

//go:wasmimport kubewasm:controller/writes@0.2.1 patch
func importPatch(group, groupLen, version, versionLen, kind, kindLen, hasNamespace, namespace, namespaceLen, name, nameLen, patchType, patch, patchLen, ret uint32)

//go:wasmimport kubewasm:controller/events@0.2.1 record-event
func importRecordEvent(event, ret uint32)

//go:wasmimport kubewasm:controller/log@0.2.1 log
func importLog(level, message, messageLen, fields, fieldsLen uint32)

func boolFlat(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// Get calls `cache.get`; ok is false when the cache does not hold the object.
func Get(kind Gvk, namespace, name string) (object string, ok bool, err *Error) {
	g, gl := lowerString(kind.Group)
	v, vl := lowerString(kind.Version)
	k, kl := lowerString(kind.Kind)
	hn, n, nl := lowerOption(namespace)
	m, ml := lowerString(name)
	importGet(g, gl, v, vl, k, kl, hn, n, nl, m, ml, scratchAddress())
	defer lifted(kind, namespace, name)
	r := scratchReader()
	if r.u8(0) != 0 {
		return "", false, r.error(4)
	}
	if r.u8(4) == 0 {
		return "", false, nil
	}
	return r.string(8), true, nil
}

// List calls `cache.list`.
func List(kind Gvk, namespace, labelSelector string) ([]string, *Error) {
	g, gl := lowerString(kind.Group)
	v, vl := lowerString(kind.Version)
	k, kl := lowerString(kind.Kind)
	hn, n, nl := lowerOption(namespace)
	hs, s, sl := lowerOption(labelSelector)
	importList(g, gl, v, vl, k, kl, hn, n, nl, hs, s, sl, scratchAddress())
	defer lifted(kind, namespace, labelSelector)
	return stringsResult()
}

// ListControlled calls `cache.list-controlled`.
func ListControlled(kind Gvk, namespace, controllerUID string) ([]string, *Error) {
	g, gl := lowerString(kind.Group)
	v, vl := lowerString(kind.Version)
	k, kl := lowerString(kind.Kind)
	hn, n, nl := lowerOption(namespace)
	u, ul := lowerString(controllerUID)
	importListControlled(g, gl, v, vl, k, kl, hn, n, nl, u, ul, scratchAddress())
	defer lifted(kind, namespace, controllerUID)
	return stringsResult()
}

// stringsResult lifts the `result<list<string>, error>` in the return area.
func stringsResult() ([]string, *Error) {
	r := scratchReader()
	if r.u8(0) != 0 {
		return nil, r.error(4)
	}
	elements, count := r.list(4, 8)
	objects := make([]string, count)
	for i := range objects {
		objects[i] = elements.string(uint32(i) * 8)
	}
	return objects, nil
}

// stringResult lifts the `result<string, error>` in the return area.
func stringResult() (string, *Error) {
	r := scratchReader()
	if r.u8(0) != 0 {
		return "", r.error(4)
	}
	return r.string(4), nil
}

// Apply calls `writes.apply`.
func Apply(object string, options ApplyOptions) (string, *Error) {
	o, ol := lowerString(object)
	importApply(o, ol, boolFlat(options.Owned), boolFlat(options.Force), boolFlat(options.Adopt), scratchAddress())
	defer lifted(object)
	return stringResult()
}

// ApplyStatus calls `writes.apply-status`.
func ApplyStatus(object string, options StatusOptions) (string, *Error) {
	o, ol := lowerString(object)
	importApplyStatus(o, ol, boolFlat(options.Force), scratchAddress())
	defer lifted(object)
	return stringResult()
}

// Delete calls `writes.delete`.
func Delete(kind Gvk, namespace, name string, preconditions Preconditions) *Error {
	var keep []any
	params := writer{keep: &keep}.buffer(68)
	params.gvk(0, kind)
	params.option(24, namespace)
	params.string(36, name)
	params.option(44, preconditions.UID)
	params.option(56, preconditions.ResourceVersion)
	importDelete(params.address(), scratchAddress())
	defer lifted(keep)
	r := scratchReader()
	if r.u8(0) != 0 {
		return r.error(4)
	}
	return nil
}

// Patch calls `writes.patch`; patchType is the index of the WIT enum `patch-type`.
func Patch(kind Gvk, namespace, name string, patchType uint8, patch string) (string, *Error) {
	g, gl := lowerString(kind.Group)
	v, vl := lowerString(kind.Version)
	k, kl := lowerString(kind.Kind)
	hn, n, nl := lowerOption(namespace)
	m, ml := lowerString(name)
	p, pl := lowerString(patch)
	importPatch(g, gl, v, vl, k, kl, hn, n, nl, m, ml, uint32(patchType), p, pl, scratchAddress())
	defer lifted(kind, namespace, name, patch)
	return stringResult()
}

// RecordEvent calls `events.record-event`.
func RecordEvent(event Event) *Error {
	var keep []any
	params := writer{keep: &keep}.buffer(72)
	params.gvk(0, event.Kind)
	params.option(24, event.Namespace)
	params.string(36, event.Name)
	params.u8(44, event.EventType)
	params.string(48, event.Reason)
	params.string(56, event.Action)
	params.string(64, event.Note)
	importRecordEvent(params.address(), scratchAddress())
	defer lifted(keep)
	r := scratchReader()
	if r.u8(0) != 0 {
		return r.error(4)
	}
	return nil
}

// Log calls `log.log`; level is the index of the WIT enum `level`.
func Log(level uint8, message string, fields []Field) {
	var keep []any
	var address uint32
	if len(fields) > 0 {
		elements := writer{keep: &keep}.buffer(uint32(len(fields)) * 16)
		for i, field := range fields {
			elements.string(uint32(i)*16, field.Key)
			elements.string(uint32(i)*16+8, field.Value)
		}
		address = elements.address()
	}
	m, ml := lowerString(message)
	importLog(uint32(level), m, ml, address, uint32(len(fields)))
	lifted(keep, message)
}
