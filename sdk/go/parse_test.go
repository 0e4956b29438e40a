package nodestatus

// ParseNode against encoding/json: what the SDK read of a node before its
// own scanner (the whole text decoded into oracleDoc by json.Unmarshal) is
// what a setter must still see, for valid and invalid text alike.
//
//	go test -run '^$' -fuzz FuzzParseNode   (go test runs the seeds)

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// oracleDoc is the SDK's Node as encoding/json decoded it, before the
// scanner (scan.go).
type oracleDoc struct {
	Metadata struct {
		Name        string       `json:"name"`
		Labels      oracleStrMap `json:"labels"`
		Annotations oracleStrMap `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Taints oracleLenient[[]Taint] `json:"taints"`
	} `json:"spec"`
	Status struct {
		Capacity    oracleStrMap                              `json:"capacity"`
		Allocatable oracleStrMap                              `json:"allocatable"`
		NodeInfo    oracleLenient[map[string]json.RawMessage] `json:"nodeInfo"`
		Conditions  oracleLenient[[]json.RawMessage]          `json:"conditions"`
		Addresses   oracleLenient[[]Address]                  `json:"addresses"`
	} `json:"status"`
}

type oracleLenient[T any] struct{ v T }

func (l *oracleLenient[T]) UnmarshalJSON(b []byte) error {
	var v T
	if json.Unmarshal(b, &v) == nil {
		l.v = v
	}
	return nil
}

type oracleStrMap map[string]string

func (m *oracleStrMap) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if json.Unmarshal(b, &raw) != nil || raw == nil {
		return nil
	}
	out := make(oracleStrMap, len(raw))
	for k, v := range raw {
		var s string
		if json.Unmarshal(v, &s) == nil && len(v) > 0 && v[0] == '"' {
			out[k] = s
		}
	}
	*m = out
	return nil
}

// oracleConditions is the conditions as the SDK decoded them with
// encoding/json.
func oracleConditions(raws []json.RawMessage) []*Condition {
	out := make([]*Condition, len(raws))
	for i, raw := range raws {
		var c Condition
		t := bytes.TrimLeft(raw, " \t\r\n")
		if len(t) > 0 && t[0] == '{' && json.Unmarshal(raw, &c) == nil {
			out[i] = &c
		}
	}
	return out
}

func oracleParse(text []byte) (*oracleDoc, error) {
	t := bytes.TrimLeft(text, " \t\r\n")
	if len(t) == 0 || t[0] != '{' {
		return nil, os.ErrInvalid
	}
	var d oracleDoc
	if err := json.Unmarshal(text, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// sameAsEncodingJSON fails t when ParseNode and oracleParse disagree on
// text: one fails and not the other, or a field reads otherwise.
func sameAsEncodingJSON(t *testing.T, text []byte) {
	t.Helper()
	want, wantErr := oracleParse(text)
	n, err := ParseNode(text)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("%q: ParseNode: %v; encoding/json: %v", text, err, wantErr)
	}
	if err != nil {
		return
	}
	got := map[string]any{
		"name": n.Name(), "labels": map[string]string(n.labels.m()), "annotations": map[string]string(n.annotations.m()),
		"capacity": map[string]string(n.capacity.m()), "allocatable": map[string]string(n.allocatable.m()),
		"nodeInfo": map[string]json.RawMessage(*n.nodeInfo.get()), "conditions": []json.RawMessage(*n.conditionsRaw.get()),
		"addresses": n.addresses.get().v, "taints": n.taints.get().v, "conds": allConditions(n),
	}
	w := map[string]any{
		"name": want.Metadata.Name, "labels": map[string]string(want.Metadata.Labels),
		"annotations": map[string]string(want.Metadata.Annotations),
		"capacity":    map[string]string(want.Status.Capacity), "allocatable": map[string]string(want.Status.Allocatable),
		"nodeInfo": want.Status.NodeInfo.v, "conditions": want.Status.Conditions.v,
		"addresses": want.Status.Addresses.v, "taints": want.Spec.Taints.v,
		"conds": oracleConditions(want.Status.Conditions.v),
	}
	for k := range w {
		if !reflect.DeepEqual(got[k], w[k]) {
			t.Errorf("%q: %s %#v, encoding/json %#v", text, k, got[k], w[k])
		}
	}
	// The condition of a type, found on a node whose conditions are not
	// decoded yet (conditionIndex decodes only the entries of that type).
	conds := oracleConditions(want.Status.Conditions.v)
	for _, c := range append(conds, &Condition{Type: "Absent"}) {
		if c == nil {
			continue
		}
		wantIndex := slices.IndexFunc(conds, func(o *Condition) bool { return o != nil && o.Type == c.Type })
		fresh, _ := ParseNode(text)
		if i := fresh.conditionIndex(c.Type); i != wantIndex {
			t.Errorf("%q: condition %q at %d, encoding/json %d", text, c.Type, i, wantIndex)
		}
	}
}

// allConditions is every entry of status.conditions decoded (nil: no
// condition).
func allConditions(n *Node) []*Condition {
	out := make([]*Condition, len(n.entries()))
	for i := range out {
		if c := n.condition(i); c != notCondition {
			out[i] = c
		}
	}
	return out
}

// parseCases are texts where a scanner is easy to get wrong.
var parseCases = []string{
	`{}`, ` {"metadata":{"name":"n"}} `, "\t\r\n{}\n", `{"metadata":null,"spec":null,"status":null}`,
	// The fields, of the right and the wrong types.
	`{"metadata":{"name":"n","labels":{"a":"1","b":2,"c":null,"d":{"x":"y"}},"annotations":[]}}`,
	`{"metadata":{"name":null}}`, `{"metadata":{"name":5}}`, `{"metadata":{"name":["n"]}}`,
	`{"metadata":"n"}`, `{"metadata":[]}`, `{"spec":true}`, `{"status":1.5}`, `{"status":[]}`,
	`{"spec":{"taints":[{"key":"k","effect":"NoSchedule"},null]}}`, `{"spec":{"taints":[{"key":5}]}}`,
	`{"spec":{"taints":{"key":"k"}}}`,
	`{"status":{"capacity":{"cpu":"4","memory":4},"allocatable":null,"nodeInfo":{"a":"b","c":1,"d":null},` +
		`"conditions":[{"type":"Ready","status":"True"},5,null,{"type":1}],"addresses":[{"type":"Hostname","address":"h"}]}}`,
	`{"status":{"nodeInfo":[],"conditions":{},"addresses":[1]}}`,
	`{"status":{"conditions":[{"type":"B","status":5},{"type":"B"},{"TYPE":"C","type":"B"},{"type":"C","type":null}]}}`,
	`{"status":{"conditions":[ {"type":"A","status":null,"Reason":"r","REASON":"R","reason":null} , {"type":"B","status":"True","status":1},` +
		` {"type":"C","extra":{"x":[1]},"message":"m\u00e9"}, [], "x" ]}}`,
	// Keys: given twice, in another case, escaped, unknown.
	`{"metadata":{"name":"a","labels":{"x":"1"}},"metadata":{"name":"b"}}`,
	`{"metadata":{"labels":{"x":"1"},"labels":5}}`, `{"metadata":{"labels":{"x":"1"},"labels":null}}`,
	`{"metadata":{"labels":{"x":"1","x":2,"y":2,"y":"3"}}}`, `{"status":{"nodeInfo":{"a":"1"},"nodeInfo":null}}`,
	`{"status":{"conditions":[{"type":"a"}],"conditions":null}}`, `{"status":{"conditions":[{"type":"a"}],"conditions":{}}}`,
	`{"status":{"capacity":{"a":"1"}},"status":{"allocatable":{"b":"2"}},"status":{"capacity":{"c":"3"}}}`, `{"metadata":{"labels":{"x":"1"},"labels":{"y":"2"}}}`,
	`{"metadata":{"name":"a"},"metadata":null}`, `{"metadata":{"name":"a","name":null}}`,
	`{"spec":{"taints":[{"key":"a","effect":"NoSchedule"}],"taints":[{"key":1}]}}`,
	`{"METADATA":{"Name":"n","LABELS":{"a":"b"}},"Status":{"NodeInfo":{"x":"y"}}}`,
	`{"meta\u0064ata":{"n\u0061me":"n"}}`, `{"metadata":{"name":"\u00e9\ud83d\ude00\n\"\\\/"}}`,
	`{"metadata":{"name":"\ud800"}}`, "{\"metadata\":{\"name\":\"a\xffb\"}}", `{"metadata":{"ſtatus":1}}`,
	`{"ſtatus":{"capacity":{"cpu":"1"}}}`, `{"K\u212aind":"x","metadata":{"\u212aey":"v"}}`,
	`{"apiVersion":"v1","kind":"Node","other":{"deep":[[[{"a":[1,-0,0.5,1e5,1E+5,-1.5e-3,true,false,null]}]]]}}`,
	// Invalid: syntax anywhere, and what follows the object.
	`{"metadata":{"name":"n"}`, `{"metadata":{"name":"n"}}}`, `{"a":1,}`, `{"a":[1,]}`, `{"a" 1}`, `{a:1}`,
	`{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":-}`, `{"a":+1}`, `{"a":tru}`, `{"a":nul}`,
	`{"a":"\x"}`, `{"a":"\u12"}`, "{\"a\":\"\x01\"}", `{"a":"unterminated}`, `{"a":[}`, `{"a":{]}`,
	`{"a":[1}]}`, `{"a":{"b":1]}`, `{} {}`, `{} x`, `{"a":1}garbage`, `[1]`, `null`, `"x"`, ``, ` `,
	`{"metadata":nul}`, `{"metadata":nullx}`, `{"status":{"images":[{"names":["a"],"sizeBytes":1e}]}}`,
	`{"a":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`,
	`{"a":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
	`{"a":` + strings.Repeat(`{"b":`, 10000) + `1` + strings.Repeat("}", 10000) + `}`,
	// Many empty arrays and objects, one after the other: no nesting.
	`{"a":[` + strings.Repeat(`[],{},`, 10001) + `[{}]],"metadata":{"name":"n"}}`,
}

func TestParseNodeReadsWhatEncodingJSONRead(t *testing.T) {
	for _, c := range append(parseCases, busyNode(t)) {
		sameAsEncodingJSON(t, []byte(c))
	}
}

func FuzzParseNode(f *testing.F) {
	for _, c := range append(parseCases, busyNode(f)) {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, text []byte) { sameAsEncodingJSON(t, text) })
}

// plainWord against plain, byte by byte: every byte value at every place
// among plain bytes, and words of random bytes.
func TestPlainWordIsEightPlainBytes(t *testing.T) {
	check := func(w [8]byte) {
		want := true
		for _, c := range w {
			want = want && plain[c]
		}
		if got := plainWord(binary.LittleEndian.Uint64(w[:])); got != want {
			t.Fatalf("%q: %v, want %v", w, got, want)
		}
	}
	for c := range 256 {
		for at := range 8 {
			for _, fill := range []byte{'a', 0x20, 0xff, 0x80, '#', '['} {
				w := [8]byte{fill, fill, fill, fill, fill, fill, fill, fill}
				w[at] = byte(c)
				check(w)
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1_000_000 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		check(w)
	}
}

// A node that does not parse says what is wrong and where.
func TestParseNodeSaysWhereTheTextIsWrong(t *testing.T) {
	for text, want := range map[string]string{
		`{"metadata":{"name":"n"},"status":{"images":[1,]}}`: `not a Node: invalid character ']' looking for a value at byte 47`,
		`{"metadata":{"name":5}}`:                            `not a Node: metadata.name is 5, not a string at byte 20`,
		`{"status":[]}`:                                      `not a Node: status is [], not an object at byte 10`,
		`{"a":"x`:                                            `not a Node: unexpected end of JSON in a string at byte 7`,
		`{} {}`:                                              `not a Node: invalid character '{' looking for the end of the JSON text at byte 3`,
	} {
		if _, err := ParseNode([]byte(text)); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %s", text, err, want)
		}
	}
}
