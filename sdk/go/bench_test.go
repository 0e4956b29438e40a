package nodestatus

// Benchmarks of what a kept instance's `set` does in the SDK, on the node
// the host's guest bench passes (host/benches/guests.rs):
//
//	go test -run '^$' -bench . -benchmem
//
// testdata/busy-node.json is tests/nodes.rs's busy_node() as the host
// sends it (compact, keys in the order written): 14,348 bytes, 4
// conditions, 50 images.

import (
	"fmt"
	"os"
	"testing"
)

func busyNode(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile("testdata/busy-node.json")
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// diskSetter writes what plugins/go/local-disks writes for two disks,
// without reading sysfs: two labels, a resource, an annotation and a
// condition.
type diskSetter struct{}

func (diskSetter) Metadata() Metadata { return Metadata{Name: "bench", Version: "0"} }

func (diskSetter) Set(n *Node) (*Part, error) {
	list := "sdb:1Mi:hdd,vda:256Gi:ssd"
	p := n.Part()
	p.SetLabel("disk.example.com/ssd", "true").SetLabel("disk.example.com/hdd", "true")
	p.SetCapacity("example.com/local-disk", Units(2)).SetAllocatable("example.com/local-disk", Units(2))
	p.SetAnnotation("disk.example.com/devices", list)
	p.SetCondition("LocalDisksReady", True, "DisksFound", fmt.Sprintf("%d local disk(s): %s", 2, list))
	return p, nil
}

func BenchmarkParseNode(b *testing.B) {
	node := []byte(busyNode(b))
	b.SetBytes(int64(len(node)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseNode(node); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSet is the SDK's part of a `set` call: the node parsed, a
// local-disks-like Set, the part's JSON.
func BenchmarkSet(b *testing.B) {
	node := busyNode(b)
	b.SetBytes(int64(len(node)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Run(diskSetter{}, node); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPartJSON is the part's JSON alone, from a parsed node.
func BenchmarkPartJSON(b *testing.B) {
	n, err := ParseNode([]byte(busyNode(b)))
	if err != nil {
		b.Fatal(err)
	}
	p, _ := diskSetter{}.Set(n)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.JSON(); err != nil {
			b.Fatal(err)
		}
	}
}
