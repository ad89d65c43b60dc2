package lab

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// LogNote is what one daemon's kept log holds that a reader of the report
// should see: its warnings and errors (a QP that failed and why, a run
// loop that stalled, a port whose carrier dropped unasked).
type LogNote struct {
	File     string   // the log's name in the logs folder (h8.log, p0-t1-0.log)
	Warnings int      // lines at level WARN or ERROR
	Lines    []string // the first logNoteLines of them
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
		}
		f.Close()
		if n.Warnings > 0 {
			notes = append(notes, n)
		}
	}
	return notes
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
