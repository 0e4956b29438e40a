//go:build wasip1

// The canonical ABI glue for the WIT world nodestatus:plugin/plugin@0.2.1
// (wit/plugin.wit): it exports setter@0.2.1 and imports host@0.1.1
// (wit/deps/plugin-0.1/setter.wit). Written by hand for the frozen WIT,
// without Go's allocator in the paths the host drives; abi_test.go checks
// every import, export and layout here against what wit-bindgen's Go
// generator writes for the same world.
//
// Memory:
//   - cabi_realloc serves every allocation from a static arena (a global
//     array, never on Go's heap, so no garbage collection runs inside it).
//     What is allocated before Go's runtime has started (the WASI adapter's
//     state) stays for the instance's life; what the host allocates for a
//     call (the node, the results of host functions) is released when the
//     call's post-return function runs.
//   - Results go back from static return areas and from Go memory that a
//     package variable holds until the post-return function runs.
package nodestatus

import (
	"unsafe"
)

// The arena of cabi_realloc (arena.go): a global array, never on Go's heap.
const arenaSize = 4 << 20

var (
	arena      [arenaSize]byte
	arenaState = newBumpArena(arenaSize)
)

// This package's init runs once Go's runtime has started.
func init() { arenaState.start() }

//go:wasmexport cabi_realloc
func cabiRealloc(oldPtr, oldSize, align, newSize uint32) uint32 {
	base := unsafe.Pointer(&arena[0])
	old := noAlloc
	if oldPtr != 0 && uintptr(oldPtr) >= uintptr(base) {
		old = uintptr(oldPtr) - uintptr(base)
	}
	off, moved := arenaState.realloc(old, uintptr(oldSize), uintptr(align), uintptr(newSize), uintptr(base))
	if oldPtr != 0 && oldSize != 0 && (moved || old == noAlloc) {
		n := min(oldSize, newSize)
		copy(unsafe.Slice((*byte)(unsafe.Add(base, off)), n), unsafe.Slice((*byte)(mem(oldPtr)), n))
	}
	return uint32(uintptr(base) + off)
}

// releaseCall frees what the host allocated for the call that ended.
func releaseCall() { arenaState.release() }

// mem is the address addr of the linear memory.
func mem(addr uint32) unsafe.Pointer { return unsafe.Add(unsafe.Pointer(nil), uintptr(addr)) }

// addr is p's address in the linear memory.
func addr(p unsafe.Pointer) uint32 { return uint32(uintptr(p)) }

// hostBytes copies bytes the host wrote (into the arena): the node, which
// ParseNode reads from a []byte (a string would be copied again).
func hostBytes(ptr, n uint32) []byte {
	return append([]byte(nil), unsafe.Slice((*byte)(mem(ptr)), n)...)
}

// hostString copies a string the host wrote (into the arena).
func hostString(ptr, n uint32) string {
	if n == 0 {
		return ""
	}
	return string(unsafe.Slice((*byte)(mem(ptr)), n))
}

func le32(p unsafe.Pointer, off uintptr) uint32 { return *(*uint32)(unsafe.Add(p, off)) }
func le64(p unsafe.Pointer, off uintptr) uint64 { return *(*uint64)(unsafe.Add(p, off)) }
func u8(p unsafe.Pointer, off uintptr) uint8    { return *(*uint8)(unsafe.Add(p, off)) }

// stringAt reads a string (pointer, length) at p+off.
func stringAt(p unsafe.Pointer, off uintptr) string {
	return hostString(le32(p, off), le32(p, off+4))
}

// stringsAt reads a list<string> (pointer, length) at p+off.
func stringsAt(p unsafe.Pointer, off uintptr) []string {
	base, n := mem(le32(p, off)), le32(p, off+4)
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = stringAt(base, uintptr(i)*8)
	}
	return out
}

// ---------------------------------------------------------------- exports

// The return areas of the exports: plugin-info (44 bytes) and
// result<option<string>, string> (16 bytes).
var (
	metadataRet [11]uint32
	setRet      [4]uint32
	// keep holds what the return areas point to until post-return.
	keep [][]byte
)

// lower hands s to the host from Go memory, kept until post-return.
func lower(s string) (uint32, uint32) {
	if len(s) == 0 {
		return 0, 0
	}
	b := []byte(s)
	keep = append(keep, b)
	return addr(unsafe.Pointer(&b[0])), uint32(len(b))
}

// hostMemory is n bytes of Go memory aligned to 8, kept until
// post-return, for the records of a result.
func hostMemory(n int) unsafe.Pointer {
	if n == 0 {
		return nil
	}
	words := make([]uint64, (n+7)/8)
	keep = append(keep, unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), 8*len(words)))
	return unsafe.Pointer(&words[0])
}

func put32(p unsafe.Pointer, off uintptr, v uint32) { *(*uint32)(unsafe.Add(p, off)) = v }
func put64(p unsafe.Pointer, off uintptr, v uint64) { *(*uint64)(unsafe.Add(p, off)) = v }
func put8(p unsafe.Pointer, off uintptr, v uint8)   { *(*uint8)(unsafe.Add(p, off)) = v }

// putString writes s (pointer, length) at p+off.
func putString(p unsafe.Pointer, off uintptr, s string) {
	ptr, n := lower(validUTF8(s))
	put32(p, off, ptr)
	put32(p, off+4, n)
}

// putStrings writes the list<string> items (pointer, length) at p+off.
func putStrings(p unsafe.Pointer, off uintptr, items []string) {
	ptr, n := lowerList(items)
	put32(p, off, ptr)
	put32(p, off+4, n)
}

func lowerList(items []string) (uint32, uint32) {
	base := hostMemory(8 * len(items))
	for i, s := range items {
		e := unsafe.Add(base, uintptr(i)*8)
		ptr, n := lower(validUTF8(s))
		put32(e, 0, ptr)
		put32(e, 4, n)
	}
	return addr(base), uint32(len(items))
}

// lowerResult writes a result<option<string>, string> (set's and
// on-lines') into r.
func lowerResult(r *[4]uint32, part *string, err error) {
	*r = [4]uint32{}
	switch {
	case err != nil:
		r[0] = 1
		r[1], r[2] = lower(validUTF8(err.Error()))
	case part == nil:
		// ok(none): the node holds this plugin's part already.
	default:
		r[1] = 1
		r[2], r[3] = lower(*part)
	}
}

//go:wasmexport nodestatus:plugin/setter@0.2.1#metadata
func exportMetadata() uint32 {
	m := registered().Metadata()
	r := &metadataRet
	r[0], r[1] = lower(validUTF8(m.Name))
	r[2], r[3] = lower(validUTF8(m.Version))
	r[4], r[5] = lower(validUTF8(m.Description))
	r[6], r[7] = lowerList(m.Paths)
	r[8], r[9] = lowerList(m.Env)
	r[10] = 0
	if m.AffectsReadiness {
		r[10] = 1
	}
	return addr(unsafe.Pointer(r))
}

//go:wasmexport cabi_post_nodestatus:plugin/setter@0.2.1#metadata
func postMetadata(uint32) { keep = nil; releaseCall() }

//go:wasmexport nodestatus:plugin/setter@0.2.1#set
func exportSet(ptr, n uint32) uint32 {
	part, err := run(hostBytes(ptr, n), registered().Set)
	lowerResult(&setRet, part, err)
	return addr(unsafe.Pointer(&setRet))
}

//go:wasmexport cabi_post_nodestatus:plugin/setter@0.2.1#set
func postSet(uint32) { keep = nil; releaseCall() }

// ---------------------------------------------------------------- imports

// The return area of the imports: the largest is statvfs's
// result<fs-stats, string> (56 bytes, 8-aligned).
var importRet [9]uint64

func retArea() unsafe.Pointer { importRet = [9]uint64{}; return unsafe.Pointer(&importRet) }

//go:wasmimport nodestatus:plugin/host@0.1.1 log
func hostLog(level uint32, ptr unsafe.Pointer, n uint32)

//go:wasmimport nodestatus:plugin/host@0.1.1 config
func hostConfig(ret unsafe.Pointer)

//go:wasmimport nodestatus:plugin/host@0.1.1 record-event
func hostRecordEvent(eventType uint32, reasonPtr unsafe.Pointer, reasonLen uint32, messagePtr unsafe.Pointer, messageLen uint32)

//go:wasmimport nodestatus:plugin/host@0.1.1 system
func hostSystem(ret unsafe.Pointer)

//go:wasmimport nodestatus:plugin/host@0.1.1 network-interfaces
func hostNetworkInterfaces(ret unsafe.Pointer)

//go:wasmimport nodestatus:plugin/host@0.1.1 statvfs
func hostStatvfs(ptr unsafe.Pointer, n uint32, ret unsafe.Pointer)

//go:wasmimport nodestatus:plugin/host@0.1.1 container-runtime
func hostContainerRuntime(ret unsafe.Pointer)

//go:wasmimport nodestatus:plugin/host@0.1.1 node-problems
func hostNodeProblems(ret unsafe.Pointer)

// wasmHost calls the host.
type wasmHost struct{}

func init() { theHost = wasmHost{} }

func strArg(s string) (unsafe.Pointer, uint32) {
	s = validUTF8(s)
	if len(s) == 0 {
		return nil, 0
	}
	return unsafe.Pointer(unsafe.StringData(s)), uint32(len(s))
}

func (wasmHost) Log(level Level, message string) {
	p, n := strArg(message)
	hostLog(uint32(level), p, n)
}

func (wasmHost) Config() string {
	r := retArea()
	hostConfig(r)
	return stringAt(r, 0)
}

func (wasmHost) RecordEvent(t EventType, reason, message string) {
	rp, rn := strArg(reason)
	mp, mn := strArg(message)
	hostRecordEvent(uint32(t), rp, rn, mp, mn)
}

func (wasmHost) System() SystemInfo {
	r := retArea()
	hostSystem(r)
	return SystemInfo{
		Hostname:      stringAt(r, 0),
		KernelRelease: stringAt(r, 8),
		KernelVersion: stringAt(r, 16),
		Machine:       stringAt(r, 24),
		OSRelease:     stringAt(r, 32),
		MachineID:     stringAt(r, 40),
		SystemUUID:    stringAt(r, 48),
		BootID:        stringAt(r, 56),
		CPUs:          le32(r, 64),
	}
}

func (wasmHost) NetworkInterfaces() []NetworkInterface {
	r := retArea()
	hostNetworkInterfaces(r)
	base, n := mem(le32(r, 0)), le32(r, 4)
	out := make([]NetworkInterface, n)
	for i := range out {
		e := unsafe.Add(base, uintptr(i)*20)
		addrs, an := mem(le32(e, 12)), le32(e, 16)
		ifc := NetworkInterface{Name: stringAt(e, 0), Up: u8(e, 8) != 0, Loopback: u8(e, 9) != 0}
		for j := uint32(0); j < an; j++ {
			a := unsafe.Add(addrs, uintptr(j)*12)
			ifc.Addresses = append(ifc.Addresses, IPAddress{Address: stringAt(a, 0), PrefixLen: u8(a, 8)})
		}
		out[i] = ifc
	}
	return out
}

func (wasmHost) Statvfs(path string) (FsStats, error) {
	p, n := strArg(path)
	r := retArea()
	hostStatvfs(p, n, r)
	if u8(r, 0) != 0 {
		return FsStats{}, hostError(stringAt(r, 8))
	}
	return FsStats{
		TotalBytes:     le64(r, 8),
		FreeBytes:      le64(r, 16),
		AvailableBytes: le64(r, 24),
		TotalInodes:    le64(r, 32),
		FreeInodes:     le64(r, 40),
		ReadOnly:       u8(r, 48) != 0,
	}, nil
}

func (wasmHost) ContainerRuntime() (ContainerRuntimeInfo, error) {
	r := retArea()
	hostContainerRuntime(r)
	if u8(r, 0) != 0 {
		return ContainerRuntimeInfo{}, &RuntimeError{Kind: RuntimeErrorKind(u8(r, 4)), Message: stringAt(r, 8)}
	}
	info := ContainerRuntimeInfo{
		Name:       stringAt(r, 4),
		Version:    stringAt(r, 12),
		APIVersion: stringAt(r, 20),
		Handlers:   stringsAt(r, 44),
	}
	conds, cn := mem(le32(r, 28)), le32(r, 32)
	for i := uint32(0); i < cn; i++ {
		c := unsafe.Add(conds, uintptr(i)*28)
		info.Conditions = append(info.Conditions, RuntimeCondition{
			Type: stringAt(c, 0), Status: u8(c, 8) != 0, Reason: stringAt(c, 12), Message: stringAt(c, 20),
		})
	}
	images, in := mem(le32(r, 36)), le32(r, 40)
	for i := uint32(0); i < in; i++ {
		m := unsafe.Add(images, uintptr(i)*32)
		info.Images = append(info.Images, RuntimeImage{
			ID: stringAt(m, 0), RepoTags: stringsAt(m, 8), RepoDigests: stringsAt(m, 16), Size: le64(m, 24),
		})
	}
	return info, nil
}

func (wasmHost) NodeProblems() []string {
	r := retArea()
	hostNodeProblems(r)
	return stringsAt(r, 0)
}
