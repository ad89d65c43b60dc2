package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestScanLogs(t *testing.T) {
	dir := t.TempDir()
	var many strings.Builder
	for i := range 9 {
		fmt.Fprintf(&many, "time=x level=WARN msg=\"run loop stalled: no port was served\" host=h1 gap=%dms cause=\"c%d: x\" window=1s n=%d\n", 50+i*(8-i), i, i)
		many.WriteString("time=x level=INFO msg=fine\n")
	}
	for name, body := range map[string]string{
		"h0.log":      "time=x level=INFO msg=\"mrc-nicd running\"\ntime=x level=INFO msg=\"mrc-nicd stopping\"\n",
		"h1.log":      many.String(),
		"h2.log":      `{"time":"x","level":"ERROR","msg":"QP failed","cause":"RetryTimeout"}` + "\n" + `{"time":"x","level":"INFO","msg":"ok"}` + "\n",
		"p0-t0-0.log": "time=x level=INFO msg=\"WARN in a message is no warning\"\ntime=x level=ERROR msg=\"attach failed\"\n",
		"notes.txt":   "level=WARN not a log\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	notes := ScanLogs(dir)
	var got []string
	for _, n := range notes {
		got = append(got, fmt.Sprintf("%s:%d:%d", n.File, n.Warnings, len(n.Lines)))
	}
	if want := "h1.log:9:6 h2.log:1:1 p0-t0-0.log:1:1"; strings.Join(got, " ") != want {
		t.Fatalf("notes %v, want %s", got, want)
	}
	if !strings.Contains(notes[0].Lines[0], "n=0") || !strings.Contains(notes[2].Lines[0], "attach failed") {
		t.Errorf("quoted lines: %q, %q", notes[0].Lines, notes[2].Lines)
	}
	// 50 + i(8-i) ms peaks at i = 4: 66 ms, cause "c4: x".
	if h1 := notes[0]; h1.Gaps != 9 || h1.MaxGap != 66*time.Millisecond || h1.MaxGapCause != "c4: x" {
		t.Errorf("h1's gaps: %d, longest %v (%q); want 9, 66ms, \"c4: x\"", h1.Gaps, h1.MaxGap, h1.MaxGapCause)
	}
	if g := GapSummary(notes); g != "9 run-loop gaps of 50 ms or more in 1 daemons' logs, the longest 66ms on h1 (c4: x)" {
		t.Errorf("GapSummary: %q", g)
	}
	if g := GapSummary(notes[1:]); g != "" {
		t.Errorf("GapSummary without gaps: %q", g)
	}
	if n := ScanLogs(filepath.Join(dir, "missing")); n != nil {
		t.Errorf("a missing folder gave %v", n)
	}
}
