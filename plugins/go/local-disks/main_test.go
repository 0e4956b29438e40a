package main

import (
	"encoding/json"
	"testing"

	"nodestatus.dev/sdk"
)

func TestDisksSkipsVirtualDevices(t *testing.T) {
	disks, err := Disks("testdata/sys/block")
	if err != nil {
		t.Fatal(err)
	}
	want := []Disk{{"sdb", 2048 * 512, true}, {"vda", 536870912 * 512, false}}
	if len(disks) != 2 || disks[0] != want[0] || disks[1] != want[1] {
		t.Fatalf("%+v, want %+v", disks, want)
	}
}

func TestThePartOfAMachineWithTwoDisks(t *testing.T) {
	h := nodestatus.NewFakeHost()
	h.ConfigJSON = `{"minDisks": 3}`
	defer nodestatus.UseFakeHost(h)()
	out, err := nodestatus.Run(setter{root: "testdata/sys/block"},
		`{"metadata":{"name":"n1","labels":{"disk.example.com/hdd":"true","disk.example.com/ssd":"old"}},"status":{}}`)
	if err != nil {
		t.Fatal(err)
	}
	var part struct {
		Metadata struct {
			Labels      map[string]string
			Annotations map[string]string
		}
		Status struct {
			Capacity   map[string]string
			Conditions []nodestatus.Condition
		}
	}
	if err := json.Unmarshal([]byte(*out), &part); err != nil {
		t.Fatal(err)
	}
	if part.Metadata.Labels[LabelSSD] != "true" || part.Metadata.Labels[LabelHDD] != "true" {
		t.Errorf("labels %v", part.Metadata.Labels)
	}
	if got := part.Metadata.Annotations[Annotation]; got != "sdb:1Mi:hdd,vda:256Gi:ssd" {
		t.Errorf("annotation %q", got)
	}
	if part.Status.Capacity[Resource] != "2" {
		t.Errorf("capacity %v", part.Status.Capacity)
	}
	c := part.Status.Conditions
	if len(c) != 1 || c[0].Status != "False" || c[0].Reason != "TooFewDisks" {
		t.Errorf("conditions %+v", c)
	}
}

func TestAMachineWithoutDisksRemovesTheLabels(t *testing.T) {
	defer nodestatus.UseFakeHost(nodestatus.NewFakeHost())()
	node := nodestatus.NamedNode("n1")
	part := node.Part()
	Report(part, nil, Config{MinDisks: 1})
	text, err := part.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ Metadata struct{ Labels map[string]*string } }
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatal(err)
	}
	labels := v.Metadata.Labels
	if _, ok := labels[LabelSSD]; !ok || labels[LabelSSD] != nil || labels[LabelHDD] != nil {
		t.Errorf("labels %v, want both null", labels)
	}
	if _, ok := node.Label(LabelSSD); ok {
		t.Error("the node still has the label")
	}
}
