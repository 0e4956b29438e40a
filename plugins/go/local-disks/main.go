// local-disks: a vendor-style reporter in Go. It reads the machine's block
// devices from sysfs and reports them as a storage vendor's node agent
// does: labels for the kinds of disk, the count as an extended resource
// that pods can request, an annotation that lists them, and a condition
// that says whether the node has as many disks as the operator wants.
//
// Config (optional): {"minDisks": 1}.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"nodestatus.dev/sdk"
)

// The names this setter writes.
const (
	LabelSSD      = "disk.example.com/ssd"
	LabelHDD      = "disk.example.com/hdd"
	Resource      = "example.com/local-disk"
	Annotation    = "disk.example.com/devices"
	ConditionType = "LocalDisksReady"
)

// Disk is one local disk.
type Disk struct {
	Name       string
	Bytes      uint64
	Rotational bool
}

// Config is the operator's config for this setter.
type Config struct {
	MinDisks int `json:"minDisks"`
}

// Disks lists the disks under root (a sysfs's block directory): the block
// devices backed by a device (not loop, ram or zram), in name order.
func Disks(root string) ([]Disk, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("cannot list %s: %w", root, err)
	}
	var disks []Disk
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if _, err := os.Stat(filepath.Join(dir, "device")); err != nil {
			continue // virtual: loop, ram, zram, device-mapper
		}
		sectors, err := readUint(filepath.Join(dir, "size"))
		if err != nil {
			return nil, err
		}
		rot, err := readUint(filepath.Join(dir, "queue", "rotational"))
		if err != nil {
			return nil, err
		}
		disks = append(disks, Disk{Name: e.Name(), Bytes: sectors * 512, Rotational: rot == 1})
	}
	sort.Slice(disks, func(i, j int) bool { return disks[i].Name < disks[j].Name })
	return disks, nil
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("cannot read %s: %w", path, err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a number", path, strings.TrimSpace(string(b)))
	}
	return n, nil
}

// Report writes the disks into the part.
func Report(part *nodestatus.Part, disks []Disk, cfg Config) {
	var ssd, hdd bool
	var list []string
	for _, d := range disks {
		kind := "ssd"
		if d.Rotational {
			kind, hdd = "hdd", true
		} else {
			ssd = true
		}
		list = append(list, fmt.Sprintf("%s:%s:%s", d.Name, nodestatus.Bytes(d.Bytes), kind))
	}
	for label, has := range map[string]bool{LabelSSD: ssd, LabelHDD: hdd} {
		if has {
			part.SetLabel(label, "true")
		} else {
			part.RemoveLabel(label)
		}
	}
	n := nodestatus.Units(int64(len(disks)))
	part.SetCapacity(Resource, n).SetAllocatable(Resource, n)
	part.SetAnnotation(Annotation, strings.Join(list, ","))
	if len(disks) >= cfg.MinDisks {
		part.SetCondition(ConditionType, nodestatus.True, "DisksFound",
			fmt.Sprintf("%d local disk(s): %s", len(disks), strings.Join(list, ", ")))
	} else {
		part.SetCondition(ConditionType, nodestatus.False, "TooFewDisks",
			fmt.Sprintf("%d local disk(s), the operator wants at least %d", len(disks), cfg.MinDisks))
	}
}

type setter struct{ root string }

func (setter) Metadata() nodestatus.Metadata {
	return nodestatus.Metadata{
		Name:        "local-disks",
		Version:     "0.1.0",
		Description: "reports the machine's local disks: their kinds, their count as example.com/local-disk, and LocalDisksReady",
		Paths:       []string{"/sys"},
	}
}

func (s setter) Set(node *nodestatus.Node) (*nodestatus.Part, error) {
	cfg := Config{MinDisks: 1}
	if err := nodestatus.DecodeConfig(&cfg); err != nil {
		return nil, err
	}
	disks, err := Disks(s.root)
	if err != nil {
		return nil, err
	}
	nodestatus.Log(nodestatus.Debug, "%d local disk(s)", len(disks))
	part := node.Part()
	Report(part, disks, cfg)
	return part, nil
}

func init() { nodestatus.Export(setter{root: "/sys/block"}) }

func main() {}
