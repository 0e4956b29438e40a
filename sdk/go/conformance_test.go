package nodestatus

// The shared conformance vectors in sdk/conformance/ (quantities, the
// condition rules, RFC 3339 times, the part a 0.2 setter returns), which
// the Rust, Python, JavaScript and C SDKs run too.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// conformanceDir is sdk/conformance, beside this module (in a kit too:
// nodestatus-kit/sdk/conformance).
const conformanceDir = "../conformance"

func vectors(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(conformanceDir, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func nonEmpty[T any](t *testing.T, what string, cases []T) []T {
	t.Helper()
	if len(cases) == 0 {
		t.Fatalf("no %s case", what)
	}
	return cases
}

type quantityVectors struct {
	Parse      []struct{ Input, Millis, Format, Canonical string }
	Invalid    []struct{ Input, Why string }
	Format     []struct{ Millis, Format, Canonical string }
	Arithmetic []struct {
		A, B, Add     string
		SaturatingSub string `json:"saturating_sub"`
	}
	UnitsCeil []struct {
		Input     string
		UnitsCeil string `json:"units_ceil"`
	} `json:"units_ceil"`
}

func TestConformanceQuantities(t *testing.T) {
	var v quantityVectors
	vectors(t, "quantity.json", &v)
	for _, c := range nonEmpty(t, "parse", v.Parse) {
		q, err := ParseQuantity(c.Input)
		if err != nil {
			t.Errorf("parse %q: %v", c.Input, err)
			continue
		}
		if got := [3]string{q.AsMillis(), q.Format.String(), q.String()}; got != [3]string{c.Millis, c.Format, c.Canonical} {
			t.Errorf("parse %q: %v, want %v", c.Input, got, [3]string{c.Millis, c.Format, c.Canonical})
		}
	}
	for _, c := range nonEmpty(t, "invalid", v.Invalid) {
		if q, err := ParseQuantity(c.Input); err == nil {
			t.Errorf("parse %q (%s): %v, want an error", c.Input, c.Why, q)
		}
	}
	for _, c := range nonEmpty(t, "format", v.Format) {
		f := DecimalSI
		if c.Format == "BinarySI" {
			f = BinarySI
		}
		q, ok := QuantityFromMillis(c.Millis, f)
		if !ok || q.String() != c.Canonical {
			t.Errorf("%sm %s: %q (%v), want %q", c.Millis, c.Format, q.String(), ok, c.Canonical)
		}
	}
	for _, c := range nonEmpty(t, "arithmetic", v.Arithmetic) {
		a, b := MustParseQuantity(c.A), MustParseQuantity(c.B)
		if got := [2]string{a.Add(b).String(), a.SubFloor0(b).String()}; got != [2]string{c.Add, c.SaturatingSub} {
			t.Errorf("%s and %s: %v, want [%s %s]", c.A, c.B, got, c.Add, c.SaturatingSub)
		}
	}
	for _, c := range nonEmpty(t, "units_ceil", v.UnitsCeil) {
		if got := MustParseQuantity(c.Input).UnitsCeil(); json.Number(c.UnitsCeil) != json.Number(itoa(got)) {
			t.Errorf("units_ceil %s: %d, want %s", c.Input, got, c.UnitsCeil)
		}
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestConformanceTimes(t *testing.T) {
	var v struct {
		RFC3339 []struct {
			Seconds int64
			RFC3339 string
		}
	}
	vectors(t, "time.json", &v)
	for _, c := range nonEmpty(t, "rfc3339", v.RFC3339) {
		if got := RFC3339(c.Seconds); got != c.RFC3339 {
			t.Errorf("%d: %s, want %s", c.Seconds, got, c.RFC3339)
		}
	}
}

// nodeWith is a node whose status.conditions is conditions (absent when
// nil).
func nodeWith(t *testing.T, conditions json.RawMessage) *Node {
	t.Helper()
	status := map[string]json.RawMessage{}
	if conditions != nil && string(conditions) != "null" {
		status["conditions"] = conditions
	}
	b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]string{"name": "n1"}, "status": status})
	n, err := ParseNode(b)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestConformanceConditions(t *testing.T) {
	var v struct {
		Set []struct {
			Name       string
			Conditions json.RawMessage
			Set        struct{ Type, Status, Reason, Message, Now string }
			Want       []any
			Transition struct {
				Previous *string
				Current  string
				Flipped  bool
			}
		}
		Remove []struct {
			Name       string
			Conditions json.RawMessage
			Remove     string
			Want       []any
			Removed    bool
		}
	}
	vectors(t, "condition.json", &v)
	for _, c := range nonEmpty(t, "set", v.Set) {
		n := nodeWith(t, c.Conditions)
		tr := n.Part().SetConditionAt(c.Set.Type, ConditionStatus(c.Set.Status), c.Set.Reason, c.Set.Message, c.Set.Now)
		if got := conditionEntries(t, n); !reflect.DeepEqual(got, c.Want) {
			t.Errorf("%s: %s, want %s", c.Name, mustJSON(got), mustJSON(c.Want))
		}
		want := Transition{Current: ConditionStatus(c.Transition.Current), Flipped: c.Transition.Flipped}
		if c.Transition.Previous != nil {
			want.Previous = ConditionStatus(*c.Transition.Previous)
		}
		if tr != want {
			t.Errorf("%s: transition %+v, want %+v", c.Name, tr, want)
		}
	}
	for _, c := range nonEmpty(t, "remove", v.Remove) {
		n := nodeWith(t, c.Conditions)
		removed := n.Part().RemoveCondition(c.Remove)
		got := conditionEntries(t, n)
		if len(got) == 0 && len(c.Want) == 0 {
			got, c.Want = nil, nil
		}
		if removed != c.Removed || !reflect.DeepEqual(got, c.Want) {
			t.Errorf("%s: %v %+v, want %v %+v", c.Name, removed, got, c.Removed, c.Want)
		}
	}
}

// conditionEntries is status.conditions as JSON values.
func conditionEntries(t *testing.T, n *Node) []any {
	var out []any
	for _, raw := range *n.conditionsRaw.get() {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// partOps applies one op of part.json through the Part.
var partOps = map[string]func(p *Part, args []json.RawMessage) error{
	"set_label":         func(p *Part, a []json.RawMessage) error { p.SetLabel(str(a[0]), str(a[1])); return nil },
	"remove_label":      func(p *Part, a []json.RawMessage) error { p.RemoveLabel(str(a[0])); return nil },
	"set_annotation":    func(p *Part, a []json.RawMessage) error { p.SetAnnotation(str(a[0]), str(a[1])); return nil },
	"remove_annotation": func(p *Part, a []json.RawMessage) error { p.RemoveAnnotation(str(a[0])); return nil },
	"set_condition": func(p *Part, a []json.RawMessage) error {
		p.SetCondition(str(a[0]), ConditionStatus(str(a[1])), str(a[2]), str(a[3]))
		return nil
	},
	"remove_condition": func(p *Part, a []json.RawMessage) error { p.RemoveCondition(str(a[0])); return nil },
	"set_capacity": func(p *Part, a []json.RawMessage) error {
		q, err := ParseQuantity(str(a[1]))
		p.SetCapacity(str(a[0]), q)
		return err
	},
	"set_allocatable": func(p *Part, a []json.RawMessage) error {
		q, err := ParseQuantity(str(a[1]))
		p.SetAllocatable(str(a[0]), q)
		return err
	},
	"remove_resource": func(p *Part, a []json.RawMessage) error { p.RemoveResource(str(a[0])); return nil },
	"set_node_info":   func(p *Part, a []json.RawMessage) error { p.SetNodeInfo(str(a[0]), str(a[1])); return nil },
	"set_addresses": func(p *Part, a []json.RawMessage) error {
		var pairs [][2]string
		if err := json.Unmarshal(a[0], &pairs); err != nil {
			return err
		}
		var addrs []Address
		for _, pr := range pairs {
			addrs = append(addrs, Address{Type: pr[0], Address: pr[1]})
		}
		p.SetAddresses(addrs...)
		return nil
	},
}

func str(r json.RawMessage) string {
	var s string
	if err := json.Unmarshal(r, &s); err != nil {
		panic(err)
	}
	return s
}

// comparable drops what part.json leaves to each SDK: a condition's times,
// and an empty reason or message.
func comparable(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = comparable(e)
		}
		if _, isCondition := x["type"]; isCondition {
			delete(out, "lastHeartbeatTime")
			delete(out, "lastTransitionTime")
			for _, k := range []string{"reason", "message"} {
				if out[k] == "" {
					delete(out, k)
				}
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = comparable(e)
		}
		return out
	}
	return v
}

// opsSetter runs a case's ops as its Set.
type opsSetter [][]json.RawMessage

func (opsSetter) Metadata() Metadata { return Metadata{Name: "conformance", Version: "0.0.0"} }

func (ops opsSetter) Set(n *Node) (*Part, error) {
	p := n.Part()
	for _, op := range ops {
		var name string
		if err := json.Unmarshal(op[0], &name); err != nil {
			return nil, err
		}
		f, ok := partOps[name]
		if !ok {
			return nil, hostError("unknown op " + name)
		}
		if err := f(p, op[1:]); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func TestConformancePart(t *testing.T) {
	var v struct {
		Node  json.RawMessage
		Cases []struct {
			Name string
			Ops  [][]json.RawMessage
			Part any
		}
	}
	vectors(t, "part.json", &v)
	for _, c := range nonEmpty(t, "cases", v.Cases) {
		for _, op := range c.Ops {
			if _, ok := partOps[str(op[0])]; !ok {
				t.Fatalf("%s: unknown op %s", c.Name, op[0])
			}
		}
		out, err := Run(opsSetter(c.Ops), string(v.Node))
		if err != nil || out == nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		var got any
		if err := json.Unmarshal([]byte(*out), &got); err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if !reflect.DeepEqual(comparable(got), comparable(c.Part)) {
			t.Errorf("%s:\n got  %s\n want %s", c.Name, *out, mustJSON(c.Part))
		}
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }
