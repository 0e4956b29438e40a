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
type Node struct {
	raw []byte
	doc nodeDoc
	// conds holds status.conditions decoded, entry by entry (nil for an
	// entry that is not a condition object, which is kept and skipped);
	// decoded on first use.
	conds   []*Condition
	decoded bool
}

// nodeDoc is what the SDK reads of a Node; the rest (images, ...) is
// skipped, and stays in Raw. A field of the wrong type reads as absent (a
// helper that writes it replaces it).
type nodeDoc struct {
	Metadata struct {
		Name        string `json:"name"`
		Labels      strMap `json:"labels"`
		Annotations strMap `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Taints lenient[[]Taint] `json:"taints"`
	} `json:"spec"`
	Status struct {
		Capacity    strMap                              `json:"capacity"`
		Allocatable strMap                              `json:"allocatable"`
		NodeInfo    lenient[map[string]json.RawMessage] `json:"nodeInfo"`
		Conditions  lenient[[]json.RawMessage]          `json:"conditions"`
		Addresses   lenient[[]Address]                  `json:"addresses"`
	} `json:"status"`
}

// lenient is a value that reads as its zero value when the JSON has
// another type.
type lenient[T any] struct{ v T }

func (l *lenient[T]) UnmarshalJSON(b []byte) error {
	var v T
	if json.Unmarshal(b, &v) == nil {
		l.v = v
	}
	return nil
}

// strMap is a map of strings (labels, annotations, capacity); an entry
// that is not a string reads as absent.
type strMap map[string]string

func (m *strMap) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if json.Unmarshal(b, &raw) != nil || raw == nil {
		return nil
	}
	out := make(strMap, len(raw))
	for k, v := range raw {
		var s string
		if json.Unmarshal(v, &s) == nil && len(v) > 0 && v[0] == '"' {
			out[k] = s
		}
	}
	*m = out
	return nil
}

// ParseNode parses a Node's JSON. It fails on text that is not a JSON
// object, or whose metadata, spec or status does not have a Node's shape.
func ParseNode(text []byte) (*Node, error) {
	t := bytes.TrimLeft(text, " \t\r\n")
	if len(t) == 0 || t[0] != '{' {
		return nil, errors.New("a Node must be a JSON object")
	}
	n := &Node{raw: text}
	if err := json.Unmarshal(text, &n.doc); err != nil {
		return nil, fmt.Errorf("not a Node: %w", err)
	}
	return n, nil
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
func (n *Node) Name() string { return n.doc.Metadata.Name }

// Label is a label's value; false when absent.
func (n *Node) Label(key string) (string, bool) {
	v, ok := n.doc.Metadata.Labels[key]
	return v, ok
}

// Labels is a copy of metadata.labels.
func (n *Node) Labels() map[string]string { return copyMap(n.doc.Metadata.Labels) }

// Annotation is an annotation's value; false when absent.
func (n *Node) Annotation(key string) (string, bool) {
	v, ok := n.doc.Metadata.Annotations[key]
	return v, ok
}

// Annotations is a copy of metadata.annotations.
func (n *Node) Annotations() map[string]string { return copyMap(n.doc.Metadata.Annotations) }

// Capacity is status.capacity[name]; false when absent or not a quantity.
func (n *Node) Capacity(name string) (Quantity, bool) {
	return quantityIn(n.doc.Status.Capacity, name)
}

// Allocatable is status.allocatable[name]; false when absent or not a
// quantity.
func (n *Node) Allocatable(name string) (Quantity, bool) {
	return quantityIn(n.doc.Status.Allocatable, name)
}

// NodeInfo is status.nodeInfo.<field> when it is a string; false otherwise.
func (n *Node) NodeInfo(field string) (string, bool) {
	var s string
	raw, ok := n.doc.Status.NodeInfo.v[field]
	if !ok || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// Conditions is a copy of status.conditions, in order (entries that are
// not condition objects are skipped).
func (n *Node) Conditions() []Condition {
	var out []Condition
	for _, c := range n.conditions() {
		if c != nil {
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

func (n *Node) conditions() []*Condition {
	if !n.decoded {
		n.decoded = true
		n.conds = make([]*Condition, len(n.doc.Status.Conditions.v))
		for i, raw := range n.doc.Status.Conditions.v {
			var c Condition
			t := bytes.TrimLeft(raw, " \t\r\n")
			if len(t) > 0 && t[0] == '{' && json.Unmarshal(raw, &c) == nil {
				n.conds[i] = &c
			}
		}
	}
	return n.conds
}

// putCondition writes c at entry i (-1: appended).
func (n *Node) putCondition(i int, c Condition) {
	raw, _ := json.Marshal(c)
	n.conditions()
	if i < 0 {
		n.doc.Status.Conditions.v = append(n.doc.Status.Conditions.v, raw)
		n.conds = append(n.conds, &c)
		return
	}
	n.doc.Status.Conditions.v[i] = raw
	n.conds[i] = &c
}

// dropCondition removes entry i.
func (n *Node) dropCondition(i int) {
	n.doc.Status.Conditions.v = append(n.doc.Status.Conditions.v[:i], n.doc.Status.Conditions.v[i+1:]...)
	n.conds = append(n.conds[:i], n.conds[i+1:]...)
}

// Addresses is a copy of status.addresses.
func (n *Node) Addresses() []Address { return append([]Address(nil), n.doc.Status.Addresses.v...) }

// Taints is a copy of spec.taints.
func (n *Node) Taints() []Taint { return append([]Taint(nil), n.doc.Spec.Taints.v...) }

func (n *Node) conditionIndex(t string) int {
	for i, c := range n.conditions() {
		if c != nil && c.Type == t {
			return i
		}
	}
	return -1
}

func quantityIn(m strMap, name string) (Quantity, bool) {
	v, ok := m[name]
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
