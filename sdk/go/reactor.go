package nodestatus

import (
	"runtime"
	"time"
)

// SourceKind says where a stream's lines come from (WIT reactor.source).
type SourceKind uint8

// The sources, in the WIT's order.
const (
	// SourceKmsg is the kernel log (/dev/kmsg), one line per message, its
	// level and facility prefix taken off.
	SourceKmsg SourceKind = iota
	// SourceFile is a text file that grows, followed across rotation and
	// truncation as `tail -F` follows it.
	SourceFile
	// SourceJournal is the systemd journal: the MESSAGE of each entry of
	// the units or identifiers given (all entries when none).
	SourceJournal
)

// Source is where a stream's lines come from: KmsgSource, FileSource or
// JournalSource. The operator must grant it in the plugin's `streams`
// (kmsg, journal, or the file's path).
type Source struct {
	Kind SourceKind
	// Path is the file's absolute path (SourceFile).
	Path string
	// Units are the journal's units or identifiers (SourceJournal).
	Units []string
}

// KmsgSource is the kernel log.
func KmsgSource() Source { return Source{Kind: SourceKmsg} }

// FileSource is the log file at path (absolute).
func FileSource(path string) Source { return Source{Kind: SourceFile, Path: path} }

// JournalSource is the journal's entries of these units or identifiers
// (all entries when none).
func JournalSource(units ...string) Source { return Source{Kind: SourceJournal, Units: units} }

// Stream is one stream a plugin follows (WIT reactor.stream).
type Stream struct {
	// Name is the plugin's name for it (unique within the plugin); each
	// match names it.
	Name   string
	Source Source
	// Patterns are regular expressions (RE2's syntax), at most 256; a line
	// is handed over once for each pattern that matches, with its index.
	Patterns []string
	// Span is how many lines one pattern may span, 1 to 64; 0 is 1.
	Span uint32
	// LookbackSeconds is how far back to start; 0: from now on.
	LookbackSeconds uint64
	// Extract, when not "", takes each line's message out of it (its first
	// group, else its whole match) before the patterns see it.
	Extract string
}

// Subscriptions is what a plugin follows (WIT reactor.subscriptions).
type Subscriptions struct {
	Streams []Stream
	// Watch holds files or directories, inside the plugin's granted paths,
	// whose change calls Set at once instead of at the next pass.
	Watch []string
}

// Match is one matched line, or lines for a pattern that spans several
// (WIT reactor.match).
type Match struct {
	// Stream is the stream's name, as the plugin gave it.
	Stream string
	// Pattern is the index of the pattern that matched, in the stream's
	// Patterns.
	Pattern uint32
	// Text is what matched: the line, or the lines joined with "\n"; cut
	// at 64 KiB.
	Text string
	// TimeMs is when the line was written, in milliseconds since the Unix
	// epoch.
	TimeMs uint64
}

// Time is when the line was written.
func (m Match) Time() time.Time { return time.UnixMilli(int64(m.TimeMs)).UTC() }

// Lines are the matches of one call (WIT reactor.batch).
type Lines struct {
	// Matches, oldest first, at most 1,000.
	Matches []Match
	// Dropped counts the matches the host dropped since the last call
	// because the plugin's queue was full.
	Dropped uint64
}

// LinesOf is what the host would hand over for texts, each matched by
// pattern of stream, written now: a test helper for RunLines.
func LinesOf(stream string, pattern uint32, texts ...string) *Lines {
	now := uint64(time.Now().UnixMilli())
	l := &Lines{Matches: make([]Match, len(texts))}
	for i, t := range texts {
		l.Matches[i] = Match{Stream: stream, Pattern: pattern, Text: t, TimeMs: now}
	}
	return l
}

// Reactor is a setter that also reacts between passes.
type Reactor interface {
	Setter
	// Subscribe says what the plugin follows. Called once at load, after
	// Metadata, with the plugin's config readable (Config, DecodeConfig)
	// and nothing else granted.
	Subscribe() Subscriptions
	// OnLines handles matched lines with the node as Set gets it, and
	// returns the plugin's part, as Set does: everything it sets (a nil
	// part: the node holds it). Events it records reach the API server at
	// once.
	OnLines(node *Node, lines *Lines) (*Part, error)
}

// reactorExports is whether the reactor's exports are compiled in: true
// natively (go test) and in a WebAssembly build with the tag
// nodestatus_reactor (abi_reactor_wasip1.go).
var reactorExports = runtime.GOOS != "wasip1"

// ExportReactor makes r the plugin's setter and reactor. Call it from an
// init function of the plugin's main package, instead of Export.
func ExportReactor(r Reactor) {
	if !reactorExports {
		panic("nodestatus: ExportReactor in a build without the reactor's exports: build with " +
			"`-tags nodestatus_reactor` and embed the world reactor-plugin (scripts/guests/go.sh does both)")
	}
	Export(r)
}

func registeredReactor() Reactor {
	r, ok := registered().(Reactor)
	if !ok {
		panic("nodestatus: the setter is no Reactor: call nodestatus.ExportReactor with a type that has Subscribe and OnLines")
	}
	return r
}

// RunLines runs a reactor's OnLines over a Node's JSON, as the host's
// `on-lines` call does: parse, OnLines, and the part's JSON (nil for a nil
// part). Tests call it with LinesOf to feed lines.
func RunLines(r Reactor, nodeJSON string, lines *Lines) (part *string, err error) {
	return run([]byte(nodeJSON), func(n *Node) (*Part, error) { return r.OnLines(n, lines) })
}
