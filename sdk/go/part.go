package nodestatus

import (
	"encoding/json"
	"fmt"
	"strings"
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
// the node's map f.
func (p *Part) write(k *keyed[string], f *strField, key string, v *string) *Part {
	k.put(key, v)
	f.put(key, v)
	return p
}

// SetLabel sets a label.
func (p *Part) SetLabel(key, value string) *Part {
	return p.write(&p.labels, &p.node.labels, key, &value)
}

// RemoveLabel removes a label (null in the part, whether the node had it
// or not).
func (p *Part) RemoveLabel(key string) *Part {
	return p.write(&p.labels, &p.node.labels, key, nil)
}

// SetAnnotation sets an annotation.
func (p *Part) SetAnnotation(key, value string) *Part {
	return p.write(&p.annotations, &p.node.annotations, key, &value)
}

// RemoveAnnotation removes an annotation.
func (p *Part) RemoveAnnotation(key string) *Part {
	return p.write(&p.annotations, &p.node.annotations, key, nil)
}

// SetCapacity sets status.capacity[name], in the canonical form.
func (p *Part) SetCapacity(name string, q Quantity) *Part {
	s := q.String()
	return p.write(&p.capacity, &p.node.capacity, name, &s)
}

// SetAllocatable sets status.allocatable[name], in the canonical form.
func (p *Part) SetAllocatable(name string, q Quantity) *Part {
	s := q.String()
	return p.write(&p.allocatable, &p.node.allocatable, name, &s)
}

// RemoveResource removes status.capacity[name] and
// status.allocatable[name].
func (p *Part) RemoveResource(name string) *Part {
	p.write(&p.capacity, &p.node.capacity, name, nil)
	return p.write(&p.allocatable, &p.node.allocatable, name, nil)
}

// SetNodeInfo sets status.nodeInfo.<field>.
func (p *Part) SetNodeInfo(field, value string) *Part {
	p.info.put(field, &value)
	raw, _ := json.Marshal(value)
	info := p.node.nodeInfo.get()
	if *info == nil {
		*info = rawMap{}
	}
	(*info)[field] = raw
	return p
}

// SetAddresses replaces status.addresses.
func (p *Part) SetAddresses(addresses ...Address) *Part {
	a := append([]Address{}, addresses...)
	p.addresses = &a
	p.node.addresses.set(lenient[[]Address]{append([]Address(nil), a...)})
	return p
}

// SetTaints replaces spec.taints (the operator's field allowance must let
// the plugin set them).
func (p *Part) SetTaints(taints ...Taint) *Part {
	t := append([]Taint{}, taints...)
	p.taints = &t
	p.node.taints.set(lenient[[]Taint]{append([]Taint(nil), t...)})
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
// section ({} when the setter wrote nothing). It is what encoding/json
// writes of the part as maps (keys in order), written by hand.
func (p *Part) JSON() (string, error) {
	if p.err != nil {
		return "", p.err
	}
	top := jsonObject{b: make([]byte, 0, 512)}
	top.open()
	if len(p.annotations.keys)+len(p.labels.keys) > 0 {
		m := top.object("metadata")
		m.keyed("annotations", p.annotations)
		m.keyed("labels", p.labels)
		top.b = m.close()
	}
	if p.taints != nil {
		spec := top.object("spec")
		spec.key("taints")
		spec.b = appendList(spec.b, *p.taints, appendTaint)
		top.b = spec.close()
	}
	if p.addresses != nil || len(p.allocatable.keys)+len(p.capacity.keys)+len(p.conditions.keys)+len(p.info.keys) > 0 {
		status := top.object("status")
		if p.addresses != nil {
			status.key("addresses")
			status.b = appendList(status.b, *p.addresses, appendAddress)
		}
		status.keyed("allocatable", p.allocatable)
		status.keyed("capacity", p.capacity)
		if len(p.conditions.keys) > 0 {
			status.key("conditions")
			status.b = append(status.b, '[')
			for i, t := range p.conditions.keys {
				if i > 0 {
					status.b = append(status.b, ',')
				}
				if c := p.conditions.vals[t]; c != nil {
					status.b = appendCondition(status.b, c)
				} else {
					status.b = append(status.b, `{"$patch":"delete","type":`...)
					status.b = append(appendString(status.b, t), '}')
				}
			}
			status.b = append(status.b, ']')
		}
		status.keyed("nodeInfo", p.info)
		top.b = status.close()
	}
	return string(top.close()), nil
}

// jsonObject writes a JSON object's members.
type jsonObject struct {
	b       []byte
	members int
}

func (o *jsonObject) open() { o.b = append(o.b, '{') }

// key starts a member.
func (o *jsonObject) key(k string) {
	if o.members > 0 {
		o.b = append(o.b, ',')
	}
	o.members++
	o.b = append(appendString(o.b, k), ':')
}

// object starts a member whose value is an object, written by the
// jsonObject returned and ended by its close.
func (o *jsonObject) object(k string) jsonObject {
	o.key(k)
	inner := jsonObject{b: o.b}
	inner.open()
	return inner
}

// close ends the object and returns the text.
func (o *jsonObject) close() []byte { return append(o.b, '}') }

// keyed writes a map of the part as a member, its keys in order, each
// with its value or null; nothing when it is empty.
func (o *jsonObject) keyed(k string, m keyed[string]) {
	if len(m.keys) == 0 {
		return
	}
	keys := append([]string(nil), m.keys...)
	// In order, as encoding/json writes a map: an insertion sort, for a
	// handful of keys (slices.Sort would add 13 kB of WebAssembly).
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	inner := o.object(k)
	for _, key := range keys {
		inner.key(key)
		if v := m.vals[key]; v != nil {
			inner.b = appendString(inner.b, *v)
		} else {
			inner.b = append(inner.b, "null"...)
		}
	}
	o.b = inner.close()
}

// htmlSafe marks the bytes that encoding/json writes as they are in a
// string: printable ASCII but '"', '\\', '<', '>' and '&'.
var htmlSafe = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = !strings.ContainsRune(`"\<>&`, rune(c))
	}
	return
}()

// appendString appends s as encoding/json writes it.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if !htmlSafe[s[i]] {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func appendList[T any](b []byte, items []T, item func([]byte, *T) []byte) []byte {
	b = append(b, '[')
	for i := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = item(b, &items[i])
	}
	return append(b, ']')
}

// appendFields appends an object of string members: name, value pairs;
// a name that starts with '?' is left out when its value is "" (JSON's
// omitempty).
func appendFields(b []byte, pairs ...string) []byte {
	o := jsonObject{b: b}
	o.open()
	for i := 0; i < len(pairs); i += 2 {
		name, v := pairs[i], pairs[i+1]
		if name[0] == '?' {
			if v == "" {
				continue
			}
			name = name[1:]
		}
		o.key(name)
		o.b = appendString(o.b, v)
	}
	return o.close()
}

func appendCondition(b []byte, c *Condition) []byte {
	return appendFields(b, "type", c.Type, "status", c.Status, "?lastHeartbeatTime", c.LastHeartbeatTime,
		"?lastTransitionTime", c.LastTransitionTime, "reason", c.Reason, "message", c.Message)
}

func appendAddress(b []byte, a *Address) []byte {
	return appendFields(b, "type", a.Type, "address", a.Address)
}

func appendTaint(b []byte, t *Taint) []byte {
	return appendFields(b, "key", t.Key, "?value", t.Value, "effect", t.Effect, "?timeAdded", t.TimeAdded)
}
