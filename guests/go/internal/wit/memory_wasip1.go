//go:build wasip1

package wit

import (
	"encoding/binary"
	"runtime"
	"unsafe"
)

// The host copies strings and lists into the guest through cabi_realloc, while it lowers an
// import's results or an export's arguments. No import may be called then (the component model
// traps), and Go's allocator may read the clock, an import: cabi_realloc cannot use Go's heap.
// It hands out the arena instead: pages grown with memory.grow, outside Go's heap (Go's runtime
// skips them, see internal/runtimepatch), reused by every call once its values are lifted and
// copied to Go's heap.
var arena struct {
	// base and end delimit the arena's pages (both 0 before the first call); next is the
	// first free byte.
	base, next, end uint32
}

const pageSize = 64 << 10

// memorySize returns the size of linear memory in pages (memory_wasm.s).
func memorySize() int32

// memoryGrow grows linear memory by pages and returns its previous size in pages, or -1
// (memory_wasm.s).
func memoryGrow(pages int32) int32

func alignUp(n, align uint32) uint32 {
	return (n + align - 1) &^ (align - 1)
}

// cabiRealloc is the canonical ABI's allocator for the host.
//
//go:wasmexport cabi_realloc
func cabiRealloc(old, oldSize, align, size uint32) uint32 {
	if size == 0 {
		return align
	}
	start := alignUp(arena.next, align)
	if start+size > arena.end {
		// Extend the arena if nothing else grew memory since, else start a new one at least
		// as large (the old pages hold values not lifted yet; they are lost afterwards).
		contiguous := arena.end != 0 && uint32(memorySize())*pageSize == arena.end
		want := size + align
		if contiguous {
			want = start + size - arena.end
		}
		pages := int32(alignUp(max(want, arena.end-arena.base), pageSize) / pageSize)
		first := memoryGrow(pages)
		if first < 0 {
			return 0
		}
		if !contiguous {
			arena.base = uint32(first) * pageSize
			start = alignUp(arena.base, align)
		}
		arena.end = uint32(first+pages) * pageSize
	}
	arena.next = start + size
	if old != 0 {
		n := min(oldSize, size)
		copy(bytesAt(start, n), bytesAt(old, n))
	}
	return start
}

// bytesAt is the n bytes at address, which the host wrote into the arena.
func bytesAt(address, n uint32) []byte {
	if n == 0 {
		return nil
	}
	// The arena lies outside Go's heap: its addresses are not Go pointers to anything.
	return unsafe.Slice((*byte)(unsafe.Add(nil, address)), n)
}

// release makes the arena's memory available again once the values the host passed in are
// lifted.
func release() {
	arena.next = arena.base
}

// liftString copies the string of n bytes at address out of the arena.
func liftString(address, n uint32) string {
	return string(bytesAt(address, n))
}

func addressOf(p unsafe.Pointer) uint32 {
	return uint32(uintptr(p))
}

// alloc returns size zeroed bytes of Go's heap, aligned to 8 (the world's largest alignment).
func alloc(size uint32) []byte {
	words := make([]uint64, (size+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), size)
}

// lowerString returns the address and length of s, which the caller keeps alive until the host
// has read it.
func lowerString(s string) (uint32, uint32) {
	if s == "" {
		return 0, 0
	}
	return addressOf(unsafe.Pointer(unsafe.StringData(s))), uint32(len(s))
}

// lowerOption returns the flat `option<string>` of s: `none` when s is empty.
func lowerOption(s string) (uint32, uint32, uint32) {
	if s == "" {
		return 0, 0, 0
	}
	address, n := lowerString(s)
	return 1, address, n
}

// reader lifts values from memory laid out by the canonical ABI.
type reader []byte

func (r reader) u8(offset uint32) uint8   { return r[offset] }
func (r reader) u16(offset uint32) uint16 { return binary.LittleEndian.Uint16(r[offset:]) }
func (r reader) u32(offset uint32) uint32 { return binary.LittleEndian.Uint32(r[offset:]) }

func (r reader) string(offset uint32) string {
	return liftString(r.u32(offset), r.u32(offset+4))
}

// list returns the bytes of the list at offset, whose elements are size bytes, and its length.
func (r reader) list(offset, size uint32) (reader, uint32) {
	n := r.u32(offset + 4)
	return reader(bytesAt(r.u32(offset), n*size)), n
}

// error lifts the WIT `error` variant at offset.
func (r reader) error(offset uint32) *Error {
	e := &Error{Case: r.u8(offset)}
	payload := offset + 4
	if e.Case == ErrorAPI {
		e.Code = r.u16(payload)
		e.Reason = r.string(payload + 4)
		e.Message = r.string(payload + 12)
	} else {
		e.Message = r.string(payload)
	}
	return e
}

// writer lowers values into memory laid out by the canonical ABI. The strings and buffers it
// refers to are held in keep until the host has read them.
type writer struct {
	keep *[]any
	b    []byte
}

func (w writer) u8(offset uint32, v uint8)   { w.b[offset] = v }
func (w writer) u32(offset uint32, v uint32) { binary.LittleEndian.PutUint32(w.b[offset:], v) }
func (w writer) u64(offset uint32, v uint64) { binary.LittleEndian.PutUint64(w.b[offset:], v) }

func (w writer) bool(offset uint32, v bool) {
	if v {
		w.u8(offset, 1)
	}
}

func (w writer) string(offset uint32, s string) {
	*w.keep = append(*w.keep, s)
	address, n := lowerString(s)
	w.u32(offset, address)
	w.u32(offset+4, n)
}

// option writes an `option<string>` that is `none` when s is empty.
func (w writer) option(offset uint32, s string) {
	if s != "" {
		w.u8(offset, 1)
		w.string(offset+4, s)
	}
}

// list allocates n elements of size bytes, points the list at offset to them and returns a
// writer for them.
func (w writer) list(offset, n, size uint32) writer {
	if n == 0 {
		return writer{keep: w.keep}
	}
	elements := w.buffer(n * size)
	w.u32(offset, addressOf(unsafe.Pointer(&elements.b[0])))
	w.u32(offset+4, n)
	return elements
}

// buffer allocates size bytes that live as long as w's.
func (w writer) buffer(size uint32) writer {
	b := alloc(size)
	*w.keep = append(*w.keep, b)
	return writer{keep: w.keep, b: b}
}

func (w writer) address() uint32 {
	return addressOf(unsafe.Pointer(&w.b[0]))
}

// gvk writes the WIT record `gvk` (24 bytes).
func (w writer) gvk(offset uint32, kind Gvk) {
	w.string(offset, kind.Group)
	w.string(offset+8, kind.Version)
	w.string(offset+16, kind.Kind)
}

// selection writes the WIT record `selection` (48 bytes).
func (w writer) selection(offset uint32, s Selection) {
	w.gvk(offset, s.Kind)
	w.option(offset+24, s.Namespace)
	w.option(offset+36, s.LabelSelector)
}

// objectKey writes the WIT record `object-key` (20 bytes).
func (w writer) objectKey(offset uint32, key ObjectKey) {
	w.option(offset, key.Namespace)
	w.string(offset+12, key.Name)
}

// scratch is the return area of import calls: the largest import result, `result<_, error>`
// and friends, takes 28 bytes. Host calls do not nest, so one area serves them all.
var scratch [4]uint64

func scratchAddress() uint32 {
	return addressOf(unsafe.Pointer(&scratch))
}

func scratchReader() reader {
	return reader(unsafe.Slice((*byte)(unsafe.Pointer(&scratch)), len(scratch)*8))
}

// lifted ends an import call: keep stays alive until here, and the arena is released.
func lifted(keep ...any) {
	runtime.KeepAlive(keep)
	release()
}
