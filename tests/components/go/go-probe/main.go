// go-probe: a Go setter for the host's tests (tests/all/guests.rs and
// hostile.rs). By default it reports, as annotations go-probe.example.com/*,
// what the host's functions gave it through the SDK's ABI glue (the
// machine's facts, its interfaces, statvfs of the config's "statvfs" path,
// the node's problems, its own config, the container runtime's answer),
// logs a line and records an event. With {"do": ...} in its config it
// misbehaves instead: "loop" spins forever, "panic" panics, "alloc"
// allocates without end, "garbage" returns a label key that is not one,
// "huge" a part over the host's bound.
package main

import (
	"fmt"
	"strings"

	"nodestatus.dev/sdk"
)

const prefix = "go-probe.example.com/"

type probe struct{}

func (probe) Metadata() nodestatus.Metadata {
	return nodestatus.Metadata{Name: "go-probe", Version: "0.0.1",
		Description: "reports what the host's functions give it, or misbehaves on purpose", Paths: []string{"/tmp"}}
}

// sink keeps the allocations alive.
var sink [][]byte

func (probe) Set(node *nodestatus.Node) (*nodestatus.Part, error) {
	var cfg struct{ Do, Statvfs string }
	if err := nodestatus.DecodeConfig(&cfg); err != nil {
		return nil, err
	}
	part := node.Part()
	switch cfg.Do {
	case "loop":
		for n := 0; ; n++ {
		}
	case "panic":
		var m map[string]int
		m["boom"]++ // assignment to a nil map: a runtime panic
	case "alloc":
		for {
			sink = append(sink, make([]byte, 1<<20))
		}
	case "garbage":
		part.SetLabel("not a label key!", "x")
	case "huge":
		part.SetAnnotation(prefix+"huge", strings.Repeat("x", 2<<20))
	case "fail":
		return nil, fmt.Errorf("the device is on fire")
	default:
		facts(part, cfg.Statvfs)
	}
	return part, nil
}

func facts(part *nodestatus.Part, statvfs string) {
	sys := nodestatus.System()
	var ifs []string
	for _, i := range nodestatus.NetworkInterfaces() {
		var addrs []string
		for _, a := range i.Addresses {
			addrs = append(addrs, fmt.Sprintf("%s/%d", a.Address, a.PrefixLen))
		}
		ifs = append(ifs, fmt.Sprintf("%s:%t:%t=%s", i.Name, i.Up, i.Loopback, strings.Join(addrs, "+")))
	}
	fs := "not asked"
	if statvfs != "" {
		if st, err := nodestatus.Statvfs(statvfs); err != nil {
			fs = "error: " + err.Error()
		} else {
			fs = fmt.Sprintf("%d %d %d %d %d %t", st.TotalBytes, st.FreeBytes, st.AvailableBytes,
				st.TotalInodes, st.FreeInodes, st.ReadOnly)
		}
	}
	runtime := "ok"
	if rt, err := nodestatus.ContainerRuntime(); err != nil {
		runtime = fmt.Sprintf("error %d: %s", err.(*nodestatus.RuntimeError).Kind, err)
	} else {
		runtime = "ok " + rt.Name
	}
	for k, v := range map[string]string{
		"hostname":   sys.Hostname,
		"kernel":     sys.KernelRelease,
		"machine":    sys.Machine,
		"boot-id":    sys.BootID,
		"cpus":       fmt.Sprint(sys.CPUs),
		"interfaces": strings.Join(ifs, ","),
		"statvfs":    fs,
		"problems":   strings.Join(nodestatus.NodeProblems(), "|"),
		"config":     nodestatus.Config(),
		"runtime":    runtime,
	} {
		part.SetAnnotation(prefix+k, v)
	}
	nodestatus.Log(nodestatus.Warn, "go-probe ran on %s", sys.Hostname)
	nodestatus.RecordEvent(nodestatus.Warning, "GoProbeRan", "the Go probe ran")
}

func init() { nodestatus.Export(probe{}) }

func main() {}
