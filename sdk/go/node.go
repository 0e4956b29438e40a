package nodestatus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Address is one of the node's addresses (status.addresses).
type Address struct {
	Type    string `json:"type"` // InternalIP, ExternalIP, Hostname, ...
	Address string `json:"address"`
}

// Taint is one of the node's taints (spec.taints).
type Taint struct {
	Key       string `json:"key"`
	Value     string `json:"value,omitempty"`
	Effect    string `json:"effect"` // NoSchedule, PreferNoSchedule, NoExecute
	TimeAdded string `json:"timeAdded,omitempty"`
}

// Node is the v1.Node the host passes to Set, to read. A setter writes its
// part of it through a Part (node.Part()); what the part writes, the node's
// getters see.
//
// ParseNode checks the whole text's syntax but decodes only the name; each
// other field the SDK reads (labels, annotations, capacity, allocatable,
// nodeInfo, conditions, addresses, taints) is decoded on first use, from
// its own JSON, as encoding/json decodes it. The rest (images, ...) is
// skipped, and stays in Raw. A field of the wrong type reads as absent (a
// helper that writes it replaces it).
type Node struct {
	raw  []byte
	name string
	// metadata.labels and .annotations, status.capacity and .allocatable.
	labels, annotations, capacity, allocatable strField
	nodeInfo                                   lazy[rawMap, *rawMap]
	conditionsRaw                              lazy[rawList, *rawList]
	addresses                                  lazy[lenient[[]Address], *lenient[[]Address]]
	taints                                     lazy[lenient[[]Taint], *lenient[[]Taint]]
	// conds holds status.conditions decoded, entry by entry, each on first
	// use (nil until then; notCondition for an entry that is not a
	// condition object, which is kept and skipped); sized when it has an
	// entry for each.
	conds []*Condition
	sized bool
}

// notCondition is the entry of conds for one that is no condition.
var notCondition = new(Condition)

// strField is one of the node's maps of strings (labels, annotations,
// capacity, allocatable), decoded on first read: the writes before it
// are kept beside it, in order, so that a setter that only writes the map
// does not decode it.
type strField struct {
	lazy[strMap, *strMap]
	writes []strWrite
}

// strWrite is a write of a key (v nil: removed).
type strWrite struct {
	key string
	v   *string
}

// m is the map, decoded, with the writes.
func (f *strField) m() strMap {
	m := f.get()
	for _, w := range f.writes {
		w.apply(m)
	}
	f.writes = nil
	return *m
}

func (w strWrite) apply(m *strMap) {
	if w.v == nil {
		delete(*m, w.key)
		return
	}
	if *m == nil {
		*m = strMap{}
	}
	(*m)[w.key] = *w.v
}

// put writes key (v nil: removes it).
func (f *strField) put(key string, v *string) {
	if f.done {
		strWrite{key, v}.apply(&f.v)
		return
	}
	f.writes = append(f.writes, strWrite{key, v})
}

// lookup is key's value; false when absent.
func (f *strField) lookup(key string) (string, bool) {
	if !f.done {
		for i := len(f.writes) - 1; i >= 0; i-- {
			if w := f.writes[i]; w.key == key {
				if w.v == nil {
					return "", false
				}
				return *w.v, true
			}
		}
	}
	v, ok := f.m()[key]
	return v, ok
}

// lazy is one field of the node: its JSON, decoded into v on first use.
// A key given more than once is decoded once per value, in order, into
// the same v, as encoding/json decodes it into a struct's field.
type lazy[T any, P interface {
	*T
	// decode decodes one value's JSON into the field; a value of the
	// wrong type leaves it as it is, or clears it, as encoding/json
	// did with the field's type.
	decode(raw []byte)
}] struct {
	raw  []byte   // the first value's JSON; nil when the key is absent
	more [][]byte // the later values', for a key given again
	done bool
	v    T
}

func (l *lazy[T, P]) found(raw []byte) {
	if l.raw == nil {
		l.raw = raw
	} else {
		l.more = append(l.more, raw)
	}
}

// get is the field, decoded.
func (l *lazy[T, P]) get() *T {
	if !l.done {
		l.done = true
		if l.raw != nil {
			P(&l.v).decode(l.raw)
			for _, raw := range l.more {
				P(&l.v).decode(raw)
			}
		}
	}
	return &l.v
}

// set replaces the field, which is then not decoded.
func (l *lazy[T, P]) set(v T) { l.done, l.v = true, v }

// lenient is a value decoded by encoding/json that reads as its zero
// value when the JSON has another type (a null clears it).
type lenient[T any] struct{ v T }

func (l *lenient[T]) decode(raw []byte) {
	var v T
	if json.Unmarshal(raw, &v) == nil {
		l.v = v
	}
}

// strMap is a map of strings (labels, annotations, capacity); an entry
// that is not a string reads as absent.
type strMap map[string]string

// decode replaces the map with the object's string entries; a value that
// is not an object (null included) leaves it.
func (m *strMap) decode(raw []byte) {
	if raw[0] != '{' {
		return
	}
	out := strMap{}
	s := scanner{b: raw}
	_ = s.members(func(key []byte) error {
		k := unquote(key)
		v, err := s.value()
		if err != nil {
			return err
		}
		if v[0] == '"' {
			out[k] = unquote(v)
		} else {
			delete(out, k) // a key given again, with another type
		}
		return nil
	})
	*m = out
}

// rawMap is an object's members as their JSON (status.nodeInfo).
type rawMap map[string]json.RawMessage

// decode replaces the map with the object's members; null clears it;
// another value leaves it.
func (m *rawMap) decode(raw []byte) {
	switch raw[0] {
	case 'n':
		*m = nil
	case '{':
		out := rawMap{}
		s := scanner{b: raw}
		_ = s.members(func(key []byte) error {
			v, err := s.value()
			out[unquote(key)] = v
			return err
		})
		*m = out
	}
}

// rawList is an array's entries as their JSON (status.conditions).
type rawList []json.RawMessage

// decode replaces the list with the array's entries; null clears it;
// another value leaves it.
func (l *rawList) decode(raw []byte) {
	switch raw[0] {
	case 'n':
		*l = nil
	case '[':
		out := rawList{}
		s := scanner{b: raw}
		_ = s.push()
		for !s.at(']') {
			v, err := s.value()
			if err != nil {
				break
			}
			out = append(out, v)
			if s.at(',') {
				s.i++
			}
		}
		*l = out
	}
}

// stringFields decodes the JSON object raw into the strings dst, whose
// JSON names are names, as encoding/json decodes a struct of strings (a
// condition): a string sets its field, null leaves it, another key is
// skipped. It is false when raw is not an object or a field's value is
// neither a string nor null.
func stringFields(raw []byte, names []string, dst []*string) bool {
	if raw[0] != '{' {
		return false
	}
	ok := true
	s := scanner{b: raw}
	_ = s.members(func(key []byte) error {
		v, err := s.value()
		if err != nil {
			return err
		}
		if f := field(key, names...); f >= 0 {
			switch v[0] {
			case '"':
				*dst[f] = unquote(v)
			case 'n':
			default:
				ok = false
			}
		}
		return nil
	})
	return ok
}

// conditionFields are Condition's JSON names.
var conditionFields = []string{"type", "status", "lastHeartbeatTime", "lastTransitionTime", "reason", "message"}

// hasType is whether raw, a condition's JSON, has type t (as
// decodeCondition decodes its type). When it has, the condition may still
// be none (another field of the wrong type).
func hasType(raw []byte, t string) bool {
	var typ string
	return stringFields(raw, conditionFields[:1], []*string{&typ}) && typ == t
}

// decodeCondition is the condition whose JSON is raw; nil when raw is no
// condition object.
func decodeCondition(raw []byte) *Condition {
	c := new(Condition)
	if !stringFields(raw, conditionFields, []*string{&c.Type, &c.Status, &c.LastHeartbeatTime,
		&c.LastTransitionTime, &c.Reason, &c.Message}) {
		return nil
	}
	return c
}

// ParseNode parses a Node's JSON. It fails on text that is not a JSON
// object, or whose metadata, spec or status does not have a Node's shape
// (an object or null each, and a string or null as metadata.name).
func ParseNode(text []byte) (*Node, error) {
	t := bytes.TrimLeft(text, " \t\r\n")
	if len(t) == 0 || t[0] != '{' {
		return nil, errors.New("a Node must be a JSON object")
	}
	n := &Node{raw: text}
	s := scanner{b: text}
	err := s.members(func(key []byte) error {
		switch field(key, "metadata", "spec", "status") {
		case 0:
			return s.section("metadata", func(key []byte) error {
				switch field(key, "name", "labels", "annotations") {
				case 0:
					return n.decodeName(&s)
				case 1:
					return n.labels.scan(&s)
				case 2:
					return n.annotations.scan(&s)
				}
				return s.skip()
			})
		case 1:
			return s.section("spec", func(key []byte) error {
				if field(key, "taints") == 0 {
					return n.taints.scan(&s)
				}
				return s.skip()
			})
		case 2:
			return s.section("status", func(key []byte) error {
				switch field(key, "capacity", "allocatable", "nodeInfo", "conditions", "addresses") {
				case 0:
					return n.capacity.scan(&s)
				case 1:
					return n.allocatable.scan(&s)
				case 2:
					return n.nodeInfo.scan(&s)
				case 3:
					return n.conditionsRaw.scan(&s)
				case 4:
					return n.addresses.scan(&s)
				}
				return s.skip()
			})
		}
		return s.skip()
	})
	if err == nil {
		s.ws()
		if s.i < len(text) {
			err = s.unexpected("the end of the JSON text")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("not a Node: %w", err)
	}
	return n, nil
}

// section reads the object at s.i, member by member (null: nothing),
// for ParseNode; name is its key, for the error when it is not an object.
func (s *scanner) section(name string, member func(key []byte) error) error {
	switch {
	case s.at('{'):
		return s.members(member)
	case s.at('n'): // null, the one value that starts so
		return s.skip()
	}
	return s.notA(name, "an object")
}

// notA is the error for a field whose value at s.i has the wrong type.
func (s *scanner) notA(name, want string) error {
	off := s.i
	if err := s.skip(); err != nil {
		return err
	}
	return &syntaxError{fmt.Sprintf("%s is %s, not %s", name, s.b[off:s.i], want), off}
}

// scan records the value at s.i as the field's JSON.
func (l *lazy[T, P]) scan(s *scanner) error {
	raw, err := s.value()
	if err != nil {
		return err
	}
	l.found(raw)
	return nil
}

// decodeName decodes metadata.name (null: nothing).
func (n *Node) decodeName(s *scanner) error {
	raw, err := s.value()
	switch {
	case err != nil:
		return err
	case raw[0] == '"':
		n.name = unquote(raw)
	case raw[0] != 'n':
		return &syntaxError{fmt.Sprintf("metadata.name is %s, not a string", raw), s.i - len(raw)}
	}
	return nil
}

// NamedNode is a Node with only a name, for tests and examples.
func NamedNode(name string) *Node {
	n, err := ParseNode([]byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"Node","metadata":{"name":%q},"status":{}}`, name)))
	if err != nil {
		panic(err)
	}
	return n
}

// Raw is the Node's JSON as the host sent it, before any write.
func (n *Node) Raw() []byte { return n.raw }

// Decode decodes the Node's JSON, as the host sent it, into v: for example
// a k8s.io/api/core/v1.Node, to read the node with Kubernetes' own types.
func (n *Node) Decode(v any) error { return json.Unmarshal(n.raw, v) }

// Name is metadata.name.
func (n *Node) Name() string { return n.name }

// Label is a label's value; false when absent.
func (n *Node) Label(key string) (string, bool) {
	return n.labels.lookup(key)
}

// Labels is a copy of metadata.labels.
func (n *Node) Labels() map[string]string { return copyMap(n.labels.m()) }

// Annotation is an annotation's value; false when absent.
func (n *Node) Annotation(key string) (string, bool) {
	return n.annotations.lookup(key)
}

// Annotations is a copy of metadata.annotations.
func (n *Node) Annotations() map[string]string { return copyMap(n.annotations.m()) }

// Capacity is status.capacity[name]; false when absent or not a quantity.
func (n *Node) Capacity(name string) (Quantity, bool) {
	return quantityIn(n.capacity.lookup(name))
}

// Allocatable is status.allocatable[name]; false when absent or not a
// quantity.
func (n *Node) Allocatable(name string) (Quantity, bool) {
	return quantityIn(n.allocatable.lookup(name))
}

// NodeInfo is status.nodeInfo.<field> when it is a string; false otherwise.
func (n *Node) NodeInfo(field string) (string, bool) {
	var s string
	raw, ok := (*n.nodeInfo.get())[field]
	if !ok || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// Conditions is a copy of status.conditions, in order (entries that are
// not condition objects are skipped).
func (n *Node) Conditions() []Condition {
	var out []Condition
	for i := range n.entries() {
		if c := n.condition(i); c != notCondition {
			out = append(out, *c)
		}
	}
	return out
}

// Condition is the condition of this type; false when there is none.
func (n *Node) Condition(conditionType string) (Condition, bool) {
	if i := n.conditionIndex(conditionType); i >= 0 {
		return *n.conds[i], true
	}
	return Condition{}, false
}

// entries is status.conditions' entries, with conds sized to them.
func (n *Node) entries() []json.RawMessage {
	raws := *n.conditionsRaw.get()
	if !n.sized {
		n.sized = true
		n.conds = make([]*Condition, len(raws))
	}
	return raws
}

// condition is entry i, decoded (notCondition: no condition).
func (n *Node) condition(i int) *Condition {
	if n.conds[i] == nil {
		if n.conds[i] = decodeCondition((*n.conditionsRaw.get())[i]); n.conds[i] == nil {
			n.conds[i] = notCondition
		}
	}
	return n.conds[i]
}

// putCondition writes c at entry i (-1: appended).
func (n *Node) putCondition(i int, c Condition) {
	raw := appendCondition(nil, &c)
	n.entries()
	if i < 0 {
		raws := n.conditionsRaw.get()
		*raws = append(*raws, raw)
		n.conds = append(n.conds, &c)
		return
	}
	(*n.conditionsRaw.get())[i] = raw
	n.conds[i] = &c
}

// dropCondition removes entry i.
func (n *Node) dropCondition(i int) {
	n.entries()
	raws := n.conditionsRaw.get()
	*raws = append((*raws)[:i], (*raws)[i+1:]...)
	n.conds = append(n.conds[:i], n.conds[i+1:]...)
}

// Addresses is a copy of status.addresses.
func (n *Node) Addresses() []Address { return append([]Address(nil), n.addresses.get().v...) }

// Taints is a copy of spec.taints.
func (n *Node) Taints() []Taint { return append([]Taint(nil), n.taints.get().v...) }

// conditionIndex is the entry of the condition of type t; -1 for none.
// An entry not decoded yet is decoded only when its type is t.
func (n *Node) conditionIndex(t string) int {
	for i, raw := range n.entries() {
		if n.conds[i] == nil && !hasType(raw, t) {
			continue
		}
		if c := n.condition(i); c != notCondition && c.Type == t {
			return i
		}
	}
	return -1
}

func quantityIn(v string, ok bool) (Quantity, bool) {
	if !ok {
		return Quantity{}, false
	}
	q, err := ParseQuantity(v)
	return q, err == nil
}

func copyMap(m strMap) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
