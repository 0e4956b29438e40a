package nodestatus

import "fmt"

// bumpArena is the memory cabi_realloc hands out (abi_wasip1.go): a bump
// allocator over a fixed buffer, off Go's heap, so that no garbage
// collection runs while the host allocates. What it hands out before Go's
// runtime has started (the WASI adapter's state) stays for the instance's
// life; what it hands out later (the node of a call, the results of host
// functions) is released when the call ends.
type bumpArena struct {
	size uintptr
	// forever is the end of what stays; top the end of what is handed out.
	forever, top uintptr
	// last is the offset of the latest allocation, which a realloc may grow
	// in place; noAlloc when there is none.
	last    uintptr
	started bool
}

const noAlloc = ^uintptr(0)

func newBumpArena(size uintptr) bumpArena { return bumpArena{size: size, last: noAlloc} }

// realloc hands out newSize bytes aligned to align, for an arena whose
// first byte is at address base: the latest allocation (old, its offset)
// grown in place when it can be, else new memory (moved: the caller copies
// the old bytes). It panics, with a message that says so, when the arena
// is full.
func (a *bumpArena) realloc(old, oldSize, align, newSize, base uintptr) (off uintptr, moved bool) {
	if old != noAlloc && old == a.last && newSize >= oldSize && old+newSize <= a.size {
		a.commit(old + newSize)
		return old, false
	}
	if align == 0 {
		align = 1
	}
	off = (base+a.top+align-1)&^(align-1) - base
	if off+newSize > a.size || off+newSize < off {
		panic(fmt.Sprintf("nodestatus: the host passed %d bytes, more than the SDK's %d-byte arena holds", newSize, a.size))
	}
	a.commit(off + newSize)
	a.last = off
	return off, old != noAlloc
}

func (a *bumpArena) commit(top uintptr) {
	a.top = top
	if !a.started {
		a.forever = top
	}
}

// start marks Go's runtime as started: from now on a call's allocations
// are released by release.
func (a *bumpArena) start() { a.started = true; a.top = a.forever }

// release frees what the call that ended allocated.
func (a *bumpArena) release() { a.top = a.forever; a.last = noAlloc }
