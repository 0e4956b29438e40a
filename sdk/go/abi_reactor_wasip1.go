//go:build wasip1 && nodestatus_reactor

// The canonical ABI glue of the exports that the WIT world
// nodestatus:plugin/reactor-plugin@0.2.1 adds to plugin's: reactor@0.2.1's
// subscribe and on-lines. Compiled in with the build tag
// nodestatus_reactor only, so that a plain setter's module exports exactly
// the world plugin; the helpers, the memory rules and the check against
// wit-bindgen's bindings (abi_test.go) are abi_wasip1.go's.
package nodestatus

import "unsafe"

func init() { reactorExports = true }

// The return areas: subscriptions (16 bytes) and on-lines'
// result<option<string>, string> (16 bytes).
var (
	subscribeRet [4]uint32
	linesRet     [4]uint32
)

// lowerStreams hands the list<stream> to the host: records of 56 bytes,
// 8-aligned (name, source, patterns, span, extract, lookback-seconds).
func lowerStreams(streams []Stream) (uint32, uint32) {
	base := hostMemory(56 * len(streams))
	for i, s := range streams {
		e := unsafe.Add(base, uintptr(i)*56)
		putString(e, 0, s.Name)
		put8(e, 8, uint8(s.Source.Kind))
		switch s.Source.Kind {
		case SourceFile:
			putString(e, 12, s.Source.Path)
		case SourceJournal:
			putStrings(e, 12, s.Source.Units)
		}
		putStrings(e, 20, s.Patterns)
		put32(e, 28, max(s.Span, 1))
		if s.Extract != "" {
			put8(e, 32, 1)
			putString(e, 36, s.Extract)
		}
		put64(e, 48, s.LookbackSeconds)
	}
	return addr(base), uint32(len(streams))
}

//go:wasmexport nodestatus:plugin/reactor@0.2.1#subscribe
func exportSubscribe() uint32 {
	s := registeredReactor().Subscribe()
	r := &subscribeRet
	r[0], r[1] = lowerStreams(s.Streams)
	r[2], r[3] = lowerList(s.Watch)
	return addr(unsafe.Pointer(r))
}

//go:wasmexport cabi_post_nodestatus:plugin/reactor@0.2.1#subscribe
func postSubscribe(uint32) { keep = nil; releaseCall() }

//go:wasmexport nodestatus:plugin/reactor@0.2.1#on-lines
func exportOnLines(nodePtr, nodeLen, matchesPtr, matchesLen uint32, dropped uint64) uint32 {
	node := hostBytes(nodePtr, nodeLen)
	lines := &Lines{Matches: make([]Match, matchesLen), Dropped: dropped}
	base := mem(matchesPtr)
	for i := range lines.Matches {
		e := unsafe.Add(base, uintptr(i)*32)
		lines.Matches[i] = Match{Stream: stringAt(e, 0), Pattern: le32(e, 8), Text: stringAt(e, 12), TimeMs: le64(e, 24)}
	}
	part, err := run(node, func(n *Node) (*Part, error) { return registeredReactor().OnLines(n, lines) })
	lowerResult(&linesRet, part, err)
	return addr(unsafe.Pointer(&linesRet))
}

//go:wasmexport cabi_post_nodestatus:plugin/reactor@0.2.1#on-lines
func postOnLines(uint32) { keep = nil; releaseCall() }
