package nodestatus

import "fmt"

// ConditionStatus is True, False or Unknown, as the API spells them.
type ConditionStatus string

// The condition statuses.
const (
	True    ConditionStatus = "True"
	False   ConditionStatus = "False"
	Unknown ConditionStatus = "Unknown"
)

// StatusFromBool is True when b, else False.
func StatusFromBool(b bool) ConditionStatus {
	if b {
		return True
	}
	return False
}

// ParseStatus returns the status named s; false when s is not one.
func ParseStatus(s string) (ConditionStatus, bool) {
	switch ConditionStatus(s) {
	case True, False, Unknown:
		return ConditionStatus(s), true
	}
	return "", false
}

func (s ConditionStatus) valid() error {
	if _, ok := ParseStatus(string(s)); !ok {
		return fmt.Errorf("%q is not True, False or Unknown", string(s))
	}
	return nil
}

// Condition is a node condition as the API has it.
type Condition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	LastHeartbeatTime  string `json:"lastHeartbeatTime,omitempty"`
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
	Reason             string `json:"reason"`
	Message            string `json:"message"`
}

// Transition says what setting a condition did.
type Transition struct {
	// Previous is the status before, "" for a new condition.
	Previous ConditionStatus
	// Current is the status now.
	Current ConditionStatus
	// Flipped: new, or its status changed; when the kubelet records an
	// event.
	Flipped bool
}
