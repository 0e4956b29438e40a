package nodestatus

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Level is the severity of a log line (WIT host.level).
type Level uint8

// The log levels, in the WIT's order.
const (
	Trace Level = iota
	Debug
	Info
	Warn
	Error
)

// EventType is the type of a Kubernetes Event (WIT host.event-type).
type EventType uint8

// The event types, in the WIT's order.
const (
	Normal EventType = iota
	Warning
)

// SystemInfo holds the kernel and identity facts of the machine (WIT
// host.system-info).
type SystemInfo struct {
	Hostname      string // uname -n
	KernelRelease string // uname -r
	KernelVersion string // uname -v
	Machine       string // uname -m
	OSRelease     string // /etc/os-release, "" when absent
	MachineID     string // /etc/machine-id, trimmed
	SystemUUID    string // the DMI product UUID, or cadvisor's fallbacks
	BootID        string // /proc/sys/kernel/random/boot_id
	CPUs          uint32 // logical CPUs online
}

// IPAddress is one address of a network interface.
type IPAddress struct {
	Address   string // canonical text form
	PrefixLen uint8
}

// NetworkInterface is a network interface of the host's namespace.
type NetworkInterface struct {
	Name      string
	Up        bool
	Loopback  bool
	Addresses []IPAddress // IPv4 before IPv6
}

// FsStats are statvfs(3)'s figures for a filesystem, in bytes and inodes.
type FsStats struct {
	TotalBytes     uint64
	FreeBytes      uint64
	AvailableBytes uint64
	TotalInodes    uint64
	FreeInodes     uint64
	ReadOnly       bool
}

// RuntimeCondition is a container runtime's condition (CRI's
// RuntimeCondition).
type RuntimeCondition struct {
	Type    string
	Status  bool
	Reason  string
	Message string
}

// RuntimeImage is an image the container runtime holds.
type RuntimeImage struct {
	ID          string
	RepoTags    []string
	RepoDigests []string
	Size        uint64
}

// ContainerRuntimeInfo holds the container runtime's facts, read by the host
// over CRI before the pass.
type ContainerRuntimeInfo struct {
	Name       string
	Version    string
	APIVersion string
	Conditions []RuntimeCondition
	Images     []RuntimeImage
	Handlers   []string
}

// RuntimeErrorKind says why there are no container runtime facts.
type RuntimeErrorKind uint8

// The kinds of RuntimeError, in the WIT's order.
const (
	// NotGranted: the operator did not grant this plugin containerRuntime.
	NotGranted RuntimeErrorKind = iota
	// NotConfigured: no containerRuntimeEndpoint is configured.
	NotConfigured
	// Unavailable: the runtime did not answer before the pass.
	Unavailable
)

// RuntimeError is why ContainerRuntime has no facts; its message says what
// to do.
type RuntimeError struct {
	Kind    RuntimeErrorKind
	Message string
}

func (e *RuntimeError) Error() string { return e.Message }

// hostError is an error message from the host.
type hostError string

func (e hostError) Error() string { return string(e) }

// host is what the host offers (WIT nodestatus:plugin/host@0.1.1): the
// imports in a component (abi_wasip1.go), a FakeHost in native tests.
type host interface {
	Log(level Level, message string)
	Config() string
	RecordEvent(t EventType, reason, message string)
	System() SystemInfo
	NetworkInterfaces() []NetworkInterface
	Statvfs(path string) (FsStats, error)
	ContainerRuntime() (ContainerRuntimeInfo, error)
	NodeProblems() []string
}

var theHost host = NewFakeHost()

// Log writes one line to the host's log, tagged with the plugin's name
// (lines over 4 KiB are cut; 100 lines a minute at most).
func Log(level Level, format string, args ...any) {
	theHost.Log(level, fmt.Sprintf(format, args...))
}

// Config returns the plugin's configuration from the operator, as JSON
// ("{}" when none).
func Config() string { return theHost.Config() }

// DecodeConfig decodes the plugin's configuration into v (a pointer, as
// for json.Unmarshal). Fields that the config lacks keep their value, so v
// may hold the defaults.
func DecodeConfig(v any) error {
	if err := json.Unmarshal([]byte(Config()), v); err != nil {
		return fmt.Errorf("invalid plugin config: %w", err)
	}
	return nil
}

// RecordEvent records a Kubernetes Event about this node (reason
// UpperCamelCase, at most 128 bytes; 10 events a minute at most).
func RecordEvent(t EventType, reason, message string) { theHost.RecordEvent(t, reason, message) }

// System returns the kernel and identity facts of the machine.
func System() SystemInfo { return theHost.System() }

// NetworkInterfaces lists the host's network interfaces and their addresses.
func NetworkInterfaces() []NetworkInterface { return theHost.NetworkInterfaces() }

// Statvfs returns the statistics of the filesystem that holds path, which
// must lie inside a path granted to the plugin.
func Statvfs(path string) (FsStats, error) { return theHost.Statvfs(path) }

// ContainerRuntime returns the container runtime's facts; the error (a
// *RuntimeError) says why there are none.
func ContainerRuntime() (ContainerRuntimeInfo, error) { return theHost.ContainerRuntime() }

// NodeProblems lists the problems the host knows of that make the node not
// ready.
func NodeProblems() []string { return theHost.NodeProblems() }

// validUTF8 returns s with each invalid byte replaced by U+FFFD: the host
// refuses strings that are not UTF-8.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
