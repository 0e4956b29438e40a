package main

import (
	"strings"
	"testing"

	"nodestatus.dev/sdk"
)

func TestAHungTaskMakesTheConditionTrueWithAnEvent(t *testing.T) {
	h := nodestatus.NewFakeHost()
	defer nodestatus.UseFakeHost(h)()
	node := `{"metadata":{"name":"n1"},"status":{}}`
	part, err := nodestatus.Run(setter{}, node)
	if err != nil || !strings.Contains(*part, `"status":"False","lastHeartbeatTime"`) {
		t.Fatalf("%v %v", part, err)
	}
	line := "INFO: task jbd2/sda1-8:311 blocked for more than 120 seconds."
	part, err = nodestatus.RunLines(setter{}, node, nodestatus.LinesOf("kernel", 0, line))
	if err != nil || !strings.Contains(*part, `"status":"True"`) || !strings.Contains(*part, line) {
		t.Fatalf("%v %v", part, err)
	}
	if len(h.Events) != 1 || h.Events[0].Reason != "TaskHung" || !strings.HasPrefix(h.Events[0].Message, line) {
		t.Errorf("%+v", h.Events)
	}
	s := setter{}.Subscribe()
	if len(s.Streams) != 1 || s.Streams[0].Source.Kind != nodestatus.SourceKmsg {
		t.Errorf("%+v", s)
	}
	h.ConfigJSON = `{"pattern": "blocked"}`
	if p := (setter{}).Subscribe().Streams[0].Patterns; len(p) != 1 || p[0] != "blocked" {
		t.Errorf("%v", p)
	}
}
