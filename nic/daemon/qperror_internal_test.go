package daemon

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/wire"
)

// snapshotEngine answers Snapshot with a fixed QP; nothing else is called.
type snapshotEngine struct {
	Engine
	s mrc.QPSnapshot
}

func (e *snapshotEngine) Snapshot(qpn wire.QPN, s *mrc.QPSnapshot) error {
	if qpn != e.s.QPN {
		return mrc.ErrUnknownQP
	}
	*s = e.s
	return nil
}

// A QP that fails is logged with the rule that failed it and its EVs by
// state: the application's RETRY_EXCEEDED alone does not say which.
func TestLogQPError(t *testing.T) {
	s := mrc.QPSnapshot{QPN: 0x12a, State: mrc.QPError, Status: mrc.StatusRetryExceeded, FailCause: mrc.FailRetryLimit,
		SRTT: 900 * mrc.Microsecond, Counters: mrc.QPCounters{Timeouts: 41, Retries: 41}}
	for _, st := range []mrc.EVState{mrc.EVAssumedBad, mrc.EVAssumedBad, mrc.EVDenied, mrc.EVSkip} {
		s.EVs = append(s.EVs, mrc.EVSnapshot{State: st})
	}
	var buf bytes.Buffer
	d := &Daemon{eng: &snapshotEngine{s: s}, log: slog.New(slog.NewTextHandler(&buf, nil))}
	d.logQPError(0x12a)
	d.logQPError(0x999) // unknown: nothing logged
	got := buf.String()
	for _, want := range []string{`level=WARN msg="QP failed" qpn=0x00012a status=RETRY_EXCEEDED`,
		`cause="a packet timed out retry_limit times with no usable EV left"`, "srtt=900µs", "timeouts=41",
		"evs_good=0 evs_skip=1 evs_assumed_bad=2 evs_denied=1"} {
		if !strings.Contains(got, want) {
			t.Errorf("log %q lacks %q", got, want)
		}
	}
	if n := strings.Count(got, "QP failed"); n != 1 {
		t.Errorf("%d log lines, want 1 (an unknown QP logs nothing)", n)
	}
}
