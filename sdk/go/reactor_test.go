package nodestatus

import (
	"errors"
	"strings"
	"testing"
)

// xidWatch marks the node on an XID and records an event for each.
type xidWatch struct{}

func (xidWatch) Metadata() Metadata { return Metadata{Name: "xid-watch", Version: "0"} }

func (xidWatch) Set(n *Node) (*Part, error) {
	p := n.Part()
	if c, ok := n.Condition("GPUHealthy"); ok {
		p.SetCondition("GPUHealthy", ConditionStatus(c.Status), c.Reason, c.Message)
	} else {
		p.SetCondition("GPUHealthy", True, "NoXid", "")
	}
	return p, nil
}

func (xidWatch) Subscribe() Subscriptions {
	return Subscriptions{Streams: []Stream{{Name: "kernel", Source: KmsgSource(), Patterns: []string{`NVRM: Xid`}}}}
}

func (x xidWatch) OnLines(n *Node, lines *Lines) (*Part, error) {
	if lines.Dropped > 0 {
		return nil, errors.New("lines were dropped")
	}
	p := n.Part()
	for _, m := range lines.Matches {
		p.SetCondition("GPUHealthy", False, "Xid", m.Stream+": "+m.Text)
		RecordEvent(Warning, "GPUXid", m.Text)
	}
	if len(lines.Matches) == 0 {
		return x.Set(n)
	}
	return p, nil
}

func TestRunLinesGivesThePartAndRecordsTheEvents(t *testing.T) {
	h := NewFakeHost()
	defer UseFakeHost(h)()
	lines := LinesOf("kernel", 0, "NVRM: Xid (PCI:0000:17:00): 79", "NVRM: Xid (PCI:0000:17:00): 48")
	if lines.Matches[1].Time().IsZero() || lines.Matches[1].Pattern != 0 {
		t.Errorf("%+v", lines.Matches[1])
	}
	part, err := RunLines(xidWatch{}, `{"metadata":{"name":"n1"},"status":{}}`, lines)
	if err != nil {
		t.Fatal(err)
	}
	// One condition, the last match's.
	for _, want := range []string{`"type":"GPUHealthy","status":"False"`, `"reason":"Xid","message":"kernel: NVRM: Xid (PCI:0000:17:00): 48"`} {
		if !strings.Contains(*part, want) {
			t.Errorf("no %s in %s", want, *part)
		}
	}
	if strings.Count(*part, `"type"`) != 1 {
		t.Errorf("%s", *part)
	}
	if len(h.Events) != 2 || h.Events[0] != (Event{Warning, "GPUXid", "NVRM: Xid (PCI:0000:17:00): 79"}) {
		t.Errorf("%+v", h.Events)
	}
	// No match: the part of Set, which keeps what the node holds.
	node := `{"metadata":{"name":"n1"},"status":{"conditions":[{"type":"GPUHealthy","status":"False","reason":"Xid","message":"m"}]}}`
	part, err = RunLines(xidWatch{}, node, &Lines{})
	if err != nil || !strings.Contains(*part, `"status":"False","lastHeartbeatTime"`) {
		t.Errorf("%v %v", part, err)
	}
	// The plugin's error, and a node that does not parse.
	if _, err := RunLines(xidWatch{}, node, &Lines{Dropped: 3}); err == nil || err.Error() != "lines were dropped" {
		t.Errorf("%v", err)
	}
	if _, err := RunLines(xidWatch{}, `[]`, lines); err == nil || !strings.Contains(err.Error(), "does not parse") {
		t.Errorf("%v", err)
	}
}

func TestExportReactorRegistersTheReactor(t *testing.T) {
	defer func(old Setter) { exported = old }(exported)
	ExportReactor(xidWatch{})
	if r := registeredReactor(); r.Subscribe().Streams[0].Source.Kind != SourceKmsg {
		t.Errorf("%+v", r.Subscribe())
	}
	// A plain setter is no reactor: the reactor's exports say so.
	Export(setterFunc(func(n *Node) (*Part, error) { return n.Part(), nil }))
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "ExportReactor") {
			t.Errorf("%v", r)
		}
	}()
	registeredReactor()
}

func TestSourcesSayTheirKind(t *testing.T) {
	if s := FileSource("/var/log/syslog"); s.Kind != SourceFile || s.Path != "/var/log/syslog" {
		t.Errorf("%+v", s)
	}
	if s := JournalSource("containerd", "kubelet"); s.Kind != SourceJournal || len(s.Units) != 2 {
		t.Errorf("%+v", s)
	}
	if s := JournalSource(); s.Kind != SourceJournal || s.Units != nil {
		t.Errorf("%+v", s)
	}
}
