package lab

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// LogNote is what one daemon's kept log holds that a reader of the report
// should see: its warnings and errors (a QP that failed and why, a run
// loop that stalled, a port whose carrier dropped unasked).
type LogNote struct {
	File     string   // the log's name in the logs folder (h8.log, p0-t1-0.log)
	Warnings int      // lines at level WARN or ERROR
	Lines    []string // the first logNoteLines of them
	// Gaps are mrc-nicd's "run loop stalled" lines (docs/operations.md),
	// MaxGap the longest of them and MaxGapCause its cause.
	Gaps        int
	MaxGap      time.Duration
	MaxGapCause string
}

// logNoteLines bounds the lines a report quotes per log.
const logNoteLines = 6

// ScanLogs reads the slog text and JSON logs in dir and returns a note for
// each log with a warning or an error, by file name.
func ScanLogs(dir string) []LogNote {
	paths, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	slices.Sort(paths)
	var notes []LogNote
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		n := LogNote{File: filepath.Base(p)}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			l := sc.Text()
			if !isWarning(l) {
				continue
			}
			n.Warnings++
			if len(n.Lines) < logNoteLines {
				n.Lines = append(n.Lines, l)
			}
			if strings.Contains(l, gapMsg) {
				n.Gaps++
				if g, ok := logField(l, "gap"); ok {
					if d, err := time.ParseDuration(g); err == nil && d > n.MaxGap {
						n.MaxGap = d
						n.MaxGapCause, _ = logField(l, "cause")
					}
				}
			}
		}
		f.Close()
		if n.Warnings > 0 {
			notes = append(notes, n)
		}
	}
	return notes
}

// gapMsg begins mrc-nicd's message for a run-loop gap (nic/daemon logGap).
const gapMsg = "run loop stalled"

// logField is key's value in a slog text line (quotes removed): the text
// after "key=" up to the next space, or to the closing quote.
func logField(l, key string) (string, bool) {
	i := strings.Index(l, " "+key+"=")
	if i < 0 {
		return "", false
	}
	v := l[i+len(key)+2:]
	if strings.HasPrefix(v, `"`) {
		if j := strings.IndexByte(v[1:], '"'); j >= 0 {
			return v[1 : j+1], true
		}
		return v[1:], true
	}
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v, true
}

// GapSummary sums the notes' run-loop gaps: how many, in how many logs,
// and the longest with its log and cause ("" when there were none).
func GapSummary(notes []LogNote) string {
	var n, logs int
	var max LogNote
	for _, x := range notes {
		if x.Gaps == 0 {
			continue
		}
		n += x.Gaps
		logs++
		if x.MaxGap > max.MaxGap {
			max = x
		}
	}
	if n == 0 {
		return ""
	}
	host := strings.TrimSuffix(max.File, ".log")
	return fmt.Sprintf("%d run-loop gaps of 50 ms or more in %d daemons' logs, the longest %v on %s (%s)",
		n, logs, max.MaxGap, host, max.MaxGapCause)
}

// isWarning reports whether a log line is at level WARN or ERROR, in
// slog's text or JSON form.
func isWarning(l string) bool {
	for _, lv := range []string{"WARN", "ERROR"} {
		if strings.Contains(l, "level="+lv+" ") || strings.Contains(l, `"level":"`+lv+`"`) {
			return true
		}
	}
	return false
}
