package nodestatus

import (
	"fmt"
	"path"
	"strings"
)

// LogLine is a line a setter logged through a FakeHost.
type LogLine struct {
	Level   Level
	Message string
}

// Event is an event a setter recorded through a FakeHost.
type Event struct {
	Type    EventType
	Reason  string
	Message string
}

// FakeHost answers the host functions outside a component (go test): it
// records what the setter logs and the events it records, and returns what
// its fields hold. Install one with UseFakeHost.
type FakeHost struct {
	// ConfigJSON is what Config returns ("" is "{}").
	ConfigJSON string
	// Problems is what NodeProblems returns.
	Problems []string
	// SystemInfo is what System returns.
	SystemInfo SystemInfo
	// Interfaces is what NetworkInterfaces returns.
	Interfaces []NetworkInterface
	// Filesystems holds Statvfs's answers by granted path: a path inside
	// one of them gets its figures, any other an error.
	Filesystems map[string]FsStats
	// Runtime is what ContainerRuntime returns; nil: not granted.
	Runtime *ContainerRuntimeInfo
	// Logs and Events are what the setter logged and recorded.
	Logs   []LogLine
	Events []Event
}

// NewFakeHost is a FakeHost with an empty config, nothing granted.
func NewFakeHost() *FakeHost { return &FakeHost{} }

// UseFakeHost makes h answer the host functions, and returns what puts the
// previous host back.
func UseFakeHost(h *FakeHost) (restore func()) {
	old := theHost
	theHost = h
	return func() { theHost = old }
}

func (h *FakeHost) Log(level Level, message string) {
	h.Logs = append(h.Logs, LogLine{level, message})
}

func (h *FakeHost) Config() string {
	if h.ConfigJSON == "" {
		return "{}"
	}
	return h.ConfigJSON
}

func (h *FakeHost) RecordEvent(t EventType, reason, message string) {
	h.Events = append(h.Events, Event{t, reason, message})
}

func (h *FakeHost) System() SystemInfo                    { return h.SystemInfo }
func (h *FakeHost) NetworkInterfaces() []NetworkInterface { return h.Interfaces }
func (h *FakeHost) NodeProblems() []string                { return h.Problems }

func (h *FakeHost) Statvfs(p string) (FsStats, error) {
	clean := path.Clean(p)
	for root, st := range h.Filesystems {
		if clean == root || strings.HasPrefix(clean, strings.TrimSuffix(root, "/")+"/") {
			return st, nil
		}
	}
	return FsStats{}, hostError(fmt.Sprintf("%s is not inside a path granted to this plugin", p))
}

func (h *FakeHost) ContainerRuntime() (ContainerRuntimeInfo, error) {
	if h.Runtime == nil {
		return ContainerRuntimeInfo{}, &RuntimeError{Kind: NotGranted, Message: "this plugin is not granted containerRuntime"}
	}
	return *h.Runtime, nil
}
