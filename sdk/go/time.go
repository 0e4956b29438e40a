package nodestatus

import "time"

// RFC3339 writes seconds since the Unix epoch as a condition's times are
// written (metav1.Time): "2026-01-02T03:04:05Z", UTC, whole seconds.
func RFC3339(seconds int64) string {
	return time.Unix(seconds, 0).UTC().Format(time.RFC3339)
}

// Now is the current time as RFC3339 writes it.
func Now() string { return RFC3339(time.Now().Unix()) }
