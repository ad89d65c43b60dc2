package vproto

// Watch subscribes the session to telemetry: every IntervalNS the daemon
// sends one TypeTelemetry message (more when the samples exceed
// MaxMessage) whose body is JSON Lines of internal/telemetry samples, one
// per QP and per NIC port. 0 means the default interval (10 ms); the daemon
// accepts 1 ms to 10 s. A later Watch replaces the interval; the
// subscription ends with the session.
type Watch struct {
	IntervalNS int64 `json:"interval_ns"`
}

// WatchInfo answers Watch.
type WatchInfo struct {
	IntervalNS int64  `json:"interval_ns"` // the interval in force
	Source     string `json:"source"`      // the samples' src (the host name)
}
