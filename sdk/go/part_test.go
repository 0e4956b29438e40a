package nodestatus

// Part.JSON against encoding/json: the part's text, written by hand, is
// byte for byte what json.Marshal wrote of the part as maps before.
//
//	go test -run '^$' -fuzz FuzzPartJSON   (go test runs the seeds)

import (
	"encoding/json"
	"testing"
)

// oracleJSON is the part's JSON as encoding/json wrote it.
func oracleJSON(p *Part) string {
	type obj = map[string]any
	asMap := func(k keyed[string]) map[string]*string {
		m := map[string]*string{}
		for _, key := range k.keys {
			m[key] = k.vals[key]
		}
		return m
	}
	metadata, spec, status := obj{}, obj{}, obj{}
	for _, f := range []struct {
		section obj
		key     string
		m       keyed[string]
	}{
		{metadata, "labels", p.labels}, {metadata, "annotations", p.annotations},
		{status, "capacity", p.capacity}, {status, "allocatable", p.allocatable},
		{status, "nodeInfo", p.info},
	} {
		if len(f.m.keys) > 0 {
			f.section[f.key] = asMap(f.m)
		}
	}
	if len(p.conditions.keys) > 0 {
		list := make([]any, len(p.conditions.keys))
		for i, t := range p.conditions.keys {
			if c := p.conditions.vals[t]; c != nil {
				list[i] = c
			} else {
				list[i] = map[string]string{"type": t, "$patch": "delete"}
			}
		}
		status["conditions"] = list
	}
	if p.addresses != nil {
		status["addresses"] = *p.addresses
	}
	if p.taints != nil {
		spec["taints"] = *p.taints
	}
	part := obj{}
	for k, v := range map[string]obj{"metadata": metadata, "spec": spec, "status": status} {
		if len(v) > 0 {
			part[k] = v
		}
	}
	b, err := json.Marshal(part)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// writeAll writes, through every helper of the part, the strings a and b
// (as keys, values, names and reasons); ops picks which helpers, one bit
// each.
func writeAll(p *Part, ops uint16, a, b string) {
	q := Units(3)
	for i, op := range []func(){
		func() { p.SetLabel(a, b) }, func() { p.RemoveLabel(b) },
		func() { p.SetAnnotation(b, a) }, func() { p.RemoveAnnotation(a + "x") },
		func() { p.SetCapacity(a, q) }, func() { p.SetAllocatable(b, q) }, func() { p.RemoveResource(a + b) },
		func() { p.SetNodeInfo(a, b) },
		func() { p.SetConditionAt(a, True, b, a, "2026-01-01T00:00:00Z") },
		func() { p.SetConditionAt(b, False, "", "", "") }, func() { p.RemoveCondition(a + "y") },
		func() { p.SetAddresses(Address{a, b}, Address{}) }, func() { p.SetAddresses() },
		func() { p.SetTaints(Taint{Key: a, Value: b, Effect: "NoSchedule"}, Taint{Key: b, TimeAdded: a}) },
		func() { p.SetTaints() },
	} {
		if ops&(1<<i) != 0 {
			op()
		}
	}
}

// partStrings are strings that encoding/json escapes, or not.
var partStrings = []string{"", "a", "example.com/x", `q"uote\`, "<html>&amp;", "tab\tnl\ncr\r\x00\x1f\x7f",
	"é ü 😀", "\u2028\u2029", "bad\xffutf8", "\b\f"}

func samePartJSON(t *testing.T, ops uint16, a, b string) {
	t.Helper()
	n, err := ParseNode([]byte(`{"metadata":{"name":"n1","labels":{"old":"1"}},"status":{"conditions":[{"type":"Ready","status":"True"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	p := n.Part()
	writeAll(p, ops, a, b)
	got, err := p.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if want := oracleJSON(p); got != want {
		t.Errorf("ops %#x, %q, %q:\n got  %s\n want %s", ops, a, b, got, want)
	}
}

func TestPartJSONIsWhatEncodingJSONWrote(t *testing.T) {
	for i, a := range partStrings {
		for j, b := range partStrings {
			samePartJSON(t, 0xffff, a, b)
			samePartJSON(t, uint16(1<<((i+j)%15)), a, b)
		}
	}
	samePartJSON(t, 0, "", "")
	// Many keys, written out of order.
	n := NamedNode("n1")
	p := n.Part()
	for i := range 40 {
		k := string(rune('a' + i*7%26))
		p.SetLabel(k+partStrings[i%len(partStrings)], "v").SetCapacity(k, Units(int64(i)))
	}
	if got, want := mustText(p.JSON()), oracleJSON(p); got != want {
		t.Errorf("many keys:\n got  %s\n want %s", got, want)
	}
}

func mustText(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

func FuzzPartJSON(f *testing.F) {
	for i, a := range partStrings {
		f.Add(uint16(0xffff>>i), a, partStrings[len(partStrings)-1-i])
	}
	f.Fuzz(samePartJSON)
}
