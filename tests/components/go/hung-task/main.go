// hung-task: a TaskHung condition and a Warning event when the kernel
// reports a task blocked for too long ("INFO: task X:PID blocked for more
// than 120 seconds.").
package main

import (
	"fmt"

	"nodestatus.dev/sdk"
)

type setter struct{}

func (setter) Metadata() nodestatus.Metadata {
	return nodestatus.Metadata{
		Name:        "hung-task",
		Version:     "0.1.0",
		Description: "TaskHung condition from the kernel log",
	}
}

// Set runs each pass: the condition as the node holds it (OnLines set it),
// False until a task hangs.
func (setter) Set(node *nodestatus.Node) (*nodestatus.Part, error) {
	part := node.Part()
	if c, ok := node.Condition("TaskHung"); ok {
		part.SetCondition("TaskHung", nodestatus.ConditionStatus(c.Status), c.Reason, c.Message)
	} else {
		part.SetCondition("TaskHung", nodestatus.False, "NoTaskHung", "")
	}
	return part, nil
}

// Subscribe runs once at load: the kernel log, and the pattern the
// operator's config may replace ({"pattern": "..."}).
func (setter) Subscribe() nodestatus.Subscriptions {
	cfg := struct{ Pattern string }{Pattern: `task (\S+):(\d+) blocked for more than (\d+) seconds`}
	if err := nodestatus.DecodeConfig(&cfg); err != nil {
		nodestatus.Log(nodestatus.Error, "%v", err)
	}
	return nodestatus.Subscriptions{Streams: []nodestatus.Stream{{
		Name:     "kernel",
		Source:   nodestatus.KmsgSource(),
		Patterns: []string{cfg.Pattern},
	}}}
}

// OnLines runs within a second of a matching kernel message.
func (s setter) OnLines(node *nodestatus.Node, lines *nodestatus.Lines) (*nodestatus.Part, error) {
	part, err := s.Set(node)
	if err != nil {
		return nil, err
	}
	for _, m := range lines.Matches {
		message := fmt.Sprintf("%s (at %s)", m.Text, m.Time().Format("15:04:05"))
		part.SetCondition("TaskHung", nodestatus.True, "TaskHung", message)
		nodestatus.RecordEvent(nodestatus.Warning, "TaskHung", message)
	}
	return part, nil
}

func init() { nodestatus.ExportReactor(setter{}) }

func main() {}
