package telemetry

// Schedule says when a sampler is due: at Start + k·Interval for k = 1, 2,
// ... A sampler that falls behind (a busy loop, a descheduled thread) skips
// the instants it missed instead of sampling in a burst, and counts them, so
// the cadence a subscriber sees stays the interval. It reads no clock: the
// caller passes the time (any clock in nanoseconds).
type Schedule struct {
	Interval int64
	next     int64
	// Missed counts instants skipped because the sampler was late by a
	// whole interval or more.
	Missed uint64
}

// NewSchedule starts a schedule at start; the first sample is due at
// start + interval.
func NewSchedule(start, interval int64) Schedule {
	if interval <= 0 {
		interval = 1
	}
	return Schedule{Interval: interval, next: start + interval}
}

// Next is the time the next sample is due.
func (s *Schedule) Next() int64 { return s.next }

// Due reports whether a sample is due at now and, if so, advances to the
// next instant after now.
func (s *Schedule) Due(now int64) bool {
	if now < s.next {
		return false
	}
	late := (now - s.next) / s.Interval
	s.Missed += uint64(late)
	s.next += (late + 1) * s.Interval
	return true
}
