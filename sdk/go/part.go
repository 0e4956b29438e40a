package nodestatus

import (
	"encoding/json"
	"fmt"
)

// Part is a setter's part of the node: the fields it sets, which Set
// returns and the host merges into the node (WIT nodestatus:plugin@0.2.1).
// Start one with node.Part().
//
// A part holds every field written, even to the value the node already held
// (a field left out is one the setter no longer sets, and the host removes
// it), at its last value: a removed label, annotation or resource key as
// null, a removed condition as {"type": T, "$patch": "delete"}, conditions
// once per type in the order first written. Each label, annotation,
// capacity, allocatable and nodeInfo key and each condition is a field of
// its own; the addresses and the taints are one field each, the whole list.
// The node's getters see what the part wrote.
type Part struct {
	node                                             *Node
	labels, annotations, capacity, allocatable, info keyed[string]
	conditions                                       keyed[Condition]
	addresses                                        *[]Address
	taints                                           *[]Taint
	err                                              error
}

// keyed is the fields of one map of the part, in the order first written;
// a nil value is a removal.
type keyed[V any] struct {
	keys []string
	vals map[string]*V
}

func (k *keyed[V]) put(key string, v *V) {
	if k.vals == nil {
		k.vals = map[string]*V{}
	}
	if _, ok := k.vals[key]; !ok {
		k.keys = append(k.keys, key)
	}
	k.vals[key] = v
}

// MarshalJSON writes the map: each key with its value, or null.
func (k keyed[V]) MarshalJSON() ([]byte, error) {
	m := make(map[string]*V, len(k.keys))
	for _, key := range k.keys {
		m[key] = k.vals[key]
	}
	return json.Marshal(m)
}

// Part starts this setter's part of the node, empty.
func (n *Node) Part() *Part { return &Part{node: n} }

// fail records the first misuse; Run returns it as the setter's error.
func (p *Part) fail(err error) {
	if p.err == nil {
		p.err = err
	}
}

// Err is the first invalid write (a status that is not one), which makes
// the call fail.
func (p *Part) Err() error { return p.err }

// write records key of a map of the part (nil: removed) and writes it in
// the node's map m.
func (p *Part) write(k *keyed[string], m *strMap, key string, v *string) *Part {
	k.put(key, v)
	if v == nil {
		delete(*m, key)
		return p
	}
	if *m == nil {
		*m = strMap{}
	}
	(*m)[key] = *v
	return p
}

// SetLabel sets a label.
func (p *Part) SetLabel(key, value string) *Part {
	return p.write(&p.labels, &p.node.doc.Metadata.Labels, key, &value)
}

// RemoveLabel removes a label (null in the part, whether the node had it
// or not).
func (p *Part) RemoveLabel(key string) *Part {
	return p.write(&p.labels, &p.node.doc.Metadata.Labels, key, nil)
}

// SetAnnotation sets an annotation.
func (p *Part) SetAnnotation(key, value string) *Part {
	return p.write(&p.annotations, &p.node.doc.Metadata.Annotations, key, &value)
}

// RemoveAnnotation removes an annotation.
func (p *Part) RemoveAnnotation(key string) *Part {
	return p.write(&p.annotations, &p.node.doc.Metadata.Annotations, key, nil)
}

// SetCapacity sets status.capacity[name], in the canonical form.
func (p *Part) SetCapacity(name string, q Quantity) *Part {
	s := q.String()
	return p.write(&p.capacity, &p.node.doc.Status.Capacity, name, &s)
}

// SetAllocatable sets status.allocatable[name], in the canonical form.
func (p *Part) SetAllocatable(name string, q Quantity) *Part {
	s := q.String()
	return p.write(&p.allocatable, &p.node.doc.Status.Allocatable, name, &s)
}

// RemoveResource removes status.capacity[name] and
// status.allocatable[name].
func (p *Part) RemoveResource(name string) *Part {
	p.write(&p.capacity, &p.node.doc.Status.Capacity, name, nil)
	return p.write(&p.allocatable, &p.node.doc.Status.Allocatable, name, nil)
}

// SetNodeInfo sets status.nodeInfo.<field>.
func (p *Part) SetNodeInfo(field, value string) *Part {
	p.info.put(field, &value)
	raw, _ := json.Marshal(value)
	info := &p.node.doc.Status.NodeInfo.v
	if *info == nil {
		*info = map[string]json.RawMessage{}
	}
	(*info)[field] = raw
	return p
}

// SetAddresses replaces status.addresses.
func (p *Part) SetAddresses(addresses ...Address) *Part {
	a := append([]Address{}, addresses...)
	p.addresses = &a
	p.node.doc.Status.Addresses.v = append([]Address(nil), a...)
	return p
}

// SetTaints replaces spec.taints (the operator's field allowance must let
// the plugin set them).
func (p *Part) SetTaints(taints ...Taint) *Part {
	t := append([]Taint{}, taints...)
	p.taints = &t
	p.node.doc.Spec.Taints.v = append([]Taint(nil), t...)
	return p
}

// SetCondition sets a condition with the kubelet's rules, at the current
// time:
//   - lastHeartbeatTime is now on every call;
//   - a new condition, or one whose status flips, gets lastTransitionTime
//     now; otherwise the transition time is kept;
//   - reason and message are replaced.
//
// The host stamps the times again as it merges the part. The result says
// whether the status flipped (when the kubelet records an event).
func (p *Part) SetCondition(conditionType string, status ConditionStatus, reason, message string) Transition {
	return p.SetConditionAt(conditionType, status, reason, message, Now())
}

// SetConditionAt is SetCondition at a given time (RFC 3339), for tests.
func (p *Part) SetConditionAt(conditionType string, status ConditionStatus, reason, message, now string) Transition {
	if err := status.valid(); err != nil {
		p.fail(fmt.Errorf("condition %s: %w", conditionType, err))
		return Transition{}
	}
	c := Condition{Type: conditionType, Status: string(status), LastHeartbeatTime: now,
		LastTransitionTime: now, Reason: reason, Message: message}
	t := Transition{Current: status, Flipped: true}
	i := p.node.conditionIndex(conditionType)
	if i >= 0 {
		old := p.node.conds[i]
		t.Previous, _ = ParseStatus(old.Status)
		t.Flipped = t.Previous != status
		if !t.Flipped && old.LastTransitionTime != "" {
			c.LastTransitionTime = old.LastTransitionTime
		}
	}
	p.node.putCondition(i, c)
	p.conditions.put(conditionType, &c)
	return t
}

// RemoveCondition removes a condition; the part says so ({"type": T,
// "$patch": "delete"}) whether or not the node had it. It returns whether
// the node had it.
func (p *Part) RemoveCondition(conditionType string) bool {
	p.conditions.put(conditionType, nil)
	i := p.node.conditionIndex(conditionType)
	if i < 0 {
		return false
	}
	p.node.dropCondition(i)
	return true
}

// JSON is the part as JSON text: no kind, apiVersion or name, and no empty
// section ({} when the setter wrote nothing).
func (p *Part) JSON() (string, error) {
	if p.err != nil {
		return "", p.err
	}
	type obj = map[string]any
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
			f.section[f.key] = f.m
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
	return string(b), err
}
