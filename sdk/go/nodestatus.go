// Package nodestatus writes nodestatus node-status setters in Go.
//
// A setter is a WebAssembly component that the nodestatus host calls once
// per status pass with the whole Node as JSON; it returns only its part of
// the node, the fields it sets (WIT nodestatus:plugin@0.2.1, wit/plugin.wit).
// With this package a setter is one Go file:
//
//	package main
//
//	import (
//		"os"
//
//		"nodestatus.dev/sdk"
//	)
//
//	type maintenance struct{}
//
//	func (maintenance) Metadata() nodestatus.Metadata {
//		return nodestatus.Metadata{Name: "maintenance", Version: "0.1.0",
//			Description: "marks the node when /run/maintenance exists",
//			Paths:       []string{"/run"}}
//	}
//
//	func (maintenance) Set(node *nodestatus.Node) (*nodestatus.Part, error) {
//		_, err := os.Stat("/run/maintenance")
//		on := err == nil
//		part := node.Part()
//		part.SetLabel("example.com/maintenance", map[bool]string{true: "true", false: "false"}[on])
//		part.SetCondition("Maintenance", nodestatus.StatusFromBool(on), "Checked", "")
//		return part, nil
//	}
//
//	func init() { nodestatus.Export(maintenance{}) }
//
//	func main() {}
//
// Build it with stock Go for WASI (a reactor: -buildmode=c-shared), then
// make the core module a component with wasm-tools and the WASI reactor
// adapter; scripts/guests/go.sh does all of it.
//
// A setter that also reacts between passes to the kernel log, a log file
// or the journal (WIT 0.2.1, world reactor-plugin) implements Reactor
// (Subscribe and OnLines) and calls ExportReactor instead of Export; it
// builds with the tag nodestatus_reactor, which compiles in the reactor's
// exports, and scripts/guests/go.sh builds it so.
//
// The package has no dependency beyond Go's standard library. Natively (go
// test), the host functions answer from a FakeHost, so a setter's tests run
// its Set with Run.
package nodestatus

import (
	"errors"
	"fmt"
)

// Metadata is what a plugin is and what it asks the operator for (WIT
// setter.plugin-info).
type Metadata struct {
	// Name: lowercase letters, digits and '-', at most 63 bytes.
	Name string
	// Version: the plugin's own, ideally SemVer.
	Version string
	// Description: one line that says what the plugin sets.
	Description string
	// Paths: absolute host directories to read, each granted read-only by
	// the operator.
	Paths []string
	// Env: environment variables to read, each granted by the operator.
	Env []string
	// AffectsReadiness: whether the plugin's failure makes the node not
	// Ready.
	AffectsReadiness bool
}

// Setter is a node-status setter.
type Setter interface {
	// Metadata describes the plugin. Called once at load, with no grants.
	Metadata() Metadata
	// Set returns this plugin's part of the node (node.Part(), then its
	// writes). A nil part, with a nil error, says that the node already
	// holds the plugin's part (WIT ok(none)): nothing changes.
	Set(node *Node) (*Part, error)
}

var exported Setter

// Export makes s the plugin's setter. Call it from an init function of the
// plugin's main package.
func Export(s Setter) { exported = s }

func registered() Setter {
	if exported == nil {
		panic("nodestatus: no setter: call nodestatus.Export from an init function of package main")
	}
	return exported
}

// Run runs a setter over a Node's JSON, as the host's call does: parse,
// Set, and the part's JSON (nil for a nil part: ok(none)). A panic is not
// caught: in a component it stops the call, which the host reports as a
// trap, with Go's message in the plugin's log.
func Run(s Setter, nodeJSON string) (part *string, err error) {
	return run([]byte(nodeJSON), s.Set)
}

// run parses the node, calls f, and gives the part's JSON: Run's and
// RunLines' work, and the exports'.
func run(nodeJSON []byte, f func(*Node) (*Part, error)) (part *string, err error) {
	node, err := ParseNode(nodeJSON)
	if err != nil {
		return nil, fmt.Errorf("the host sent a node that does not parse: %w", err)
	}
	p, err := f(node)
	if err != nil {
		if err.Error() == "" {
			return nil, errors.New("setter failed")
		}
		return nil, err
	}
	if p == nil {
		return nil, nil
	}
	text, err := p.JSON()
	if err != nil {
		return nil, err
	}
	return &text, nil
}
