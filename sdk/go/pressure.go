package nodestatus

import (
	"fmt"
	"strconv"
	"strings"
)

// Threshold is an eviction threshold: an amount (bytes, inodes or a
// count), or a percentage of a total.
type Threshold struct {
	// Amount, when Percent is false.
	Amount uint64
	// Percent of the total, between 0 and 100, when IsPercent.
	Percent   float64
	IsPercent bool
}

// ParseThreshold parses a quantity (100Mi, 5Gi, 1k, 1000) or a percentage
// (10%). An error names field, the config field it came from.
func ParseThreshold(field, spec string) (Threshold, error) {
	if p, ok, err := Percentage(spec); ok {
		if err != nil {
			return Threshold{}, fmt.Errorf("%s: %w", field, err)
		}
		return Threshold{Percent: p, IsPercent: true}, nil
	}
	q, err := ParseQuantity(spec)
	if err != nil {
		return Threshold{}, fmt.Errorf("%s: %w", field, err)
	}
	if q.Units < 0 {
		return Threshold{}, fmt.Errorf("%s: %q is negative", field, strings.TrimSpace(spec))
	}
	return Threshold{Amount: uint64(q.UnitsCeil())}, nil
}

// Percentage reads a threshold written N% (space around it is ignored),
// between 0 and 100: ok is false when spec is not a percentage, err set
// when it is one out of that range or not a number.
func Percentage(spec string) (p float64, ok bool, err error) {
	spec = strings.TrimSpace(spec)
	num, found := strings.CutSuffix(spec, "%")
	if !found {
		return 0, false, nil
	}
	v, perr := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if perr != nil || v < 0 || v > 100 {
		return 0, true, fmt.Errorf("%q is not a percentage between 0%% and 100%%", spec)
	}
	return v, true, nil
}

// Of is the threshold's amount for this total (which matters only for a
// percentage; the fraction is dropped).
func (t Threshold) Of(total uint64) uint64 {
	if t.IsPercent {
		return uint64(float64(total) * t.Percent / 100)
	}
	return t.Amount
}

// Outcome is what a pressure condition should say.
type Outcome struct {
	// Status: True under pressure, False without, Unknown when an input is
	// missing.
	Status  ConditionStatus
	Reason  string
	Message string
}

// PressureCondition is one of the kubelet's pressure conditions
// (MemoryPressure, DiskPressure, PIDPressure, or a vendor's own): its type,
// and the reasons, messages and events it uses with and without pressure.
type PressureCondition struct {
	Condition       string // e.g. MemoryPressure
	PressureReason  string // e.g. KubeletHasInsufficientMemory
	PressureMessage string
	PressureEvent   string // e.g. NodeHasInsufficientMemory
	OKReason        string // e.g. KubeletHasSufficientMemory; also Unknown's reason
	OKMessage       string
	OKEvent         string // e.g. NodeHasSufficientMemory
}

// Outcome is True with the pressure reason and message, or False with the
// no-pressure ones.
func (c PressureCondition) Outcome(underPressure bool) Outcome {
	if underPressure {
		return Outcome{True, c.PressureReason, c.PressureMessage}
	}
	return Outcome{False, c.OKReason, c.OKMessage}
}

// Unknown is what the kubelet says when an input cannot be read: the
// no-pressure reason, and message (which should name the input).
func (c PressureCondition) Unknown(message string) Outcome {
	return Outcome{Unknown, c.OKReason, message}
}

// Apply sets the condition at now (heartbeat always, transition time only
// on a flip), and returns the event to record when the status becomes True
// or False: a new condition, or a flip from another status. None (ok
// false) for Unknown, which the kubelet's setters never write.
func (c PressureCondition) Apply(part *Part, o Outcome, now string) (event Event, ok bool) {
	t := part.SetConditionAt(c.Condition, o.Status, o.Reason, o.Message, now)
	reason := c.OKEvent
	switch o.Status {
	case True:
		reason = c.PressureEvent
	case Unknown:
		return Event{}, false
	}
	if !t.Flipped {
		return Event{}, false
	}
	return Event{Normal, reason, fmt.Sprintf("Node %s status is now: %s", part.node.Name(), reason)}, true
}

// Set is what a pressure setter does with its outcome: Apply it now, and
// record the event, if any, as a Normal event (the kubelet's type for
// these). It returns that event.
func (c PressureCondition) Set(part *Part, o Outcome) (Event, bool) {
	e, ok := c.Apply(part, o, Now())
	if ok {
		RecordEvent(e.Type, e.Reason, e.Message)
	}
	return e, ok
}
