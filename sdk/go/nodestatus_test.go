package nodestatus

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

type setterFunc func(*Node) (*Part, error)

func (setterFunc) Metadata() Metadata           { return Metadata{Name: "t", Version: "0"} }
func (f setterFunc) Set(n *Node) (*Part, error) { return f(n) }

func TestRunGivesNoneErrorsAndParts(t *testing.T) {
	node := `{"metadata":{"name":"n1"},"status":{}}`
	if out, err := Run(setterFunc(func(*Node) (*Part, error) { return nil, nil }), node); out != nil || err != nil {
		t.Errorf("a nil part: %v %v, want none", out, err)
	}
	if _, err := Run(setterFunc(func(*Node) (*Part, error) { return nil, errors.New("on fire") }), node); err == nil || err.Error() != "on fire" {
		t.Errorf("an error: %v", err)
	}
	_, err := Run(setterFunc(func(n *Node) (*Part, error) {
		p := n.Part()
		p.SetCondition("X", "Maybe", "", "")
		return p, nil
	}), node)
	if err == nil || !strings.Contains(err.Error(), `condition X: "Maybe" is not True, False or Unknown`) {
		t.Errorf("a bad status: %v", err)
	}
	for _, bad := range []string{`[1]`, `null`, `{"status":[]}`, `not json`} {
		if _, err := Run(setterFunc(func(n *Node) (*Part, error) { return n.Part(), nil }), bad); err == nil ||
			!strings.Contains(err.Error(), "the host sent a node that does not parse") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func TestTaintsAndAddressesAreWholeFields(t *testing.T) {
	n, err := ParseNode([]byte(`{"metadata":{"name":"n1"},"spec":{"taints":[{"key":"a","effect":"NoSchedule"}]},"status":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	p := n.Part().SetTaints(Taint{Key: "example.com/broken", Effect: "NoExecute"}).
		SetAddresses(Address{"InternalIP", "10.0.0.2"})
	text, _ := p.JSON()
	want := `{"spec":{"taints":[{"key":"example.com/broken","effect":"NoExecute"}]},"status":{"addresses":[{"type":"InternalIP","address":"10.0.0.2"}]}}`
	if text != want {
		t.Errorf("%s\nwant %s", text, want)
	}
	if got := n.Taints(); len(got) != 1 || got[0].Key != "example.com/broken" {
		t.Errorf("the node's taints after the write: %+v", got)
	}
	// Cleared: an empty list, not null.
	text, _ = n.Part().SetTaints().JSON()
	if text != `{"spec":{"taints":[]}}` {
		t.Errorf("%s", text)
	}
}

// The node's getters see the part's writes, whether the map was read
// before them or not, from one part or two.
func TestGettersSeeThePartsWrites(t *testing.T) {
	n, err := ParseNode([]byte(`{"metadata":{"name":"n1","labels":{"a":"1","b":"2"},"annotations":{"x":"y"}},` +
		`"status":{"capacity":{"cpu":"4"},"allocatable":{"cpu":"3"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	p := n.Part().SetLabel("c", "3").SetLabel("a", "again").RemoveLabel("a").SetLabel("a", "again")
	p.SetCapacity("gpu", Units(2)).RemoveResource("cpu")
	n.Part().SetAnnotation("x", "z").SetLabel("b", "two").RemoveAnnotation("x")
	if v, ok := n.Label("c"); v != "3" || !ok {
		t.Errorf("label c: %q %v", v, ok)
	}
	if got := n.Labels(); !reflect.DeepEqual(got, map[string]string{"a": "again", "b": "two", "c": "3"}) {
		t.Errorf("labels %v", got)
	}
	p.RemoveLabel("a").SetLabel("d", "4") // after the map was read
	if got := n.Labels(); !reflect.DeepEqual(got, map[string]string{"b": "two", "c": "3", "d": "4"}) {
		t.Errorf("labels %v", got)
	}
	if got := n.Annotations(); len(got) != 0 {
		t.Errorf("annotations %v", got)
	}
	if q, ok := n.Capacity("gpu"); !ok || q.String() != "2" {
		t.Errorf("capacity gpu: %v %v", q, ok)
	}
	if _, ok := n.Capacity("cpu"); ok {
		t.Error("capacity cpu: removed, still there")
	}
	if _, ok := n.Allocatable("cpu"); ok {
		t.Error("allocatable cpu: removed, still there")
	}
	// A map the node lacks, written then read whole.
	n = NamedNode("n2")
	n.Part().SetAllocatable("gpu", Units(1))
	if q, ok := n.Allocatable("gpu"); !ok || q.String() != "1" {
		t.Errorf("allocatable gpu: %v %v", q, ok)
	}
	if got := n.Labels(); len(got) != 0 {
		t.Errorf("labels %v", got)
	}
}

func TestDecodeReadsTheNodeWithOtherTypes(t *testing.T) {
	n, _ := ParseNode([]byte(`{"metadata":{"name":"n1","uid":"u-1"},"status":{"images":[{"names":["a"],"sizeBytes":5}]}}`))
	var v struct {
		Metadata struct{ UID string }
		Status   struct{ Images []struct{ SizeBytes int64 } }
	}
	if err := n.Decode(&v); err != nil || v.Metadata.UID != "u-1" || v.Status.Images[0].SizeBytes != 5 {
		t.Errorf("%+v %v", v, err)
	}
}

var memoryPressure = PressureCondition{
	Condition: "MemoryPressure", PressureReason: "KubeletHasInsufficientMemory",
	PressureMessage: "kubelet has insufficient memory available", PressureEvent: "NodeHasInsufficientMemory",
	OKReason: "KubeletHasSufficientMemory", OKMessage: "kubelet has sufficient memory available",
	OKEvent: "NodeHasSufficientMemory",
}

// The kubelet's transitions: an event for a new condition and for each
// flip between True and False, none for the same status or for Unknown;
// the transition time moves on every flip, Unknown included.
func TestPressureConditionFollowsTheKubelet(t *testing.T) {
	n := NamedNode("n1")
	steps := []struct {
		o          Outcome
		now, event string
		transition string
	}{
		{memoryPressure.Outcome(false), "2026-01-01T00:00:00Z", "NodeHasSufficientMemory", "2026-01-01T00:00:00Z"},
		{memoryPressure.Outcome(false), "2026-01-01T00:00:10Z", "", "2026-01-01T00:00:00Z"},
		{memoryPressure.Outcome(true), "2026-01-01T00:00:20Z", "NodeHasInsufficientMemory", "2026-01-01T00:00:20Z"},
		{memoryPressure.Unknown("cannot read /proc/meminfo"), "2026-01-01T00:00:30Z", "", "2026-01-01T00:00:30Z"},
		{memoryPressure.Outcome(false), "2026-01-01T00:00:40Z", "NodeHasSufficientMemory", "2026-01-01T00:00:40Z"},
	}
	for i, s := range steps {
		e, ok := memoryPressure.Apply(n.Part(), s.o, s.now)
		if ok != (s.event != "") || e.Reason != s.event {
			t.Errorf("step %d: event %+v %v, want %q", i, e, ok, s.event)
		}
		if ok && e.Message != "Node n1 status is now: "+s.event {
			t.Errorf("step %d: %q", i, e.Message)
		}
		c, _ := n.Condition("MemoryPressure")
		if c.LastHeartbeatTime != s.now || c.LastTransitionTime != s.transition || c.Status != string(s.o.Status) {
			t.Errorf("step %d: %+v", i, c)
		}
	}
	// Set records the event through the host.
	h := NewFakeHost()
	defer UseFakeHost(h)()
	memoryPressure.Set(NamedNode("n2").Part(), memoryPressure.Outcome(true))
	if len(h.Events) != 1 || h.Events[0] != (Event{Normal, "NodeHasInsufficientMemory", "Node n2 status is now: NodeHasInsufficientMemory"}) {
		t.Errorf("%+v", h.Events)
	}
}

func TestThresholds(t *testing.T) {
	for spec, want := range map[string]uint64{"100Mi": 100 << 20, "10%": 102, " 5 % ": 51, "1k": 1000, "1500m": 2} {
		th, err := ParseThreshold("memoryAvailable", spec)
		if err != nil || th.Of(1024) != want {
			t.Errorf("%q: %d %v, want %d", spec, th.Of(1024), err, want)
		}
	}
	for _, bad := range []string{"101%", "-1", "x%", "lots"} {
		if _, err := ParseThreshold("memoryAvailable", bad); err == nil || !strings.HasPrefix(err.Error(), "memoryAvailable: ") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestFakeHost(t *testing.T) {
	h := &FakeHost{ConfigJSON: `{"n": 3}`, Filesystems: map[string]FsStats{"/var/lib": {TotalBytes: 10}}}
	defer UseFakeHost(h)()
	var cfg struct{ N, M int }
	cfg.M = 7
	if err := DecodeConfig(&cfg); err != nil || cfg.N != 3 || cfg.M != 7 {
		t.Errorf("%+v %v", cfg, err)
	}
	h.ConfigJSON = `{"n": "three"}`
	if err := DecodeConfig(&cfg); err == nil || !strings.HasPrefix(err.Error(), "invalid plugin config: ") {
		t.Errorf("%v", err)
	}
	if st, err := Statvfs("/var/lib/x"); err != nil || st.TotalBytes != 10 {
		t.Errorf("%+v %v", st, err)
	}
	if _, err := Statvfs("/var/libx"); err == nil {
		t.Error("a path beside the grant")
	}
	var re *RuntimeError
	if _, err := ContainerRuntime(); !errors.As(err, &re) || re.Kind != NotGranted {
		t.Errorf("%v", err)
	}
	Log(Info, "a %s", "line")
	if len(h.Logs) != 1 || h.Logs[0] != (LogLine{Info, "a line"}) {
		t.Errorf("%+v", h.Logs)
	}
}

func TestQuantityHelpers(t *testing.T) {
	if q := Bytes(16 << 30); q.String() != "16Gi" {
		t.Error(q)
	}
	if q := MilliUnits(-1500); q.Units != -2 || q.Millis != 500 || q.String() != "-1500m" {
		t.Errorf("%+v %s", q, q)
	}
	b, _ := json.Marshal(map[string]Quantity{"cpu": Units(4)})
	if string(b) != `{"cpu":"4"}` {
		t.Error(string(b))
	}
	if Units(2).Cmp(MilliUnits(2001)) != -1 || Units(2).Cmp(MilliUnits(2000)) != 0 {
		t.Error("Cmp")
	}
}
