package report

import (
	"errors"
	"strings"
	"testing"

	"github.com/softmrc/softmrc/testbed/lab"
	"github.com/softmrc/softmrc/testbed/lab/scenario"
	"github.com/softmrc/softmrc/testbed/lab/verdict"
)

func TestDigest(t *testing.T) {
	s1 := &scenario.Scenario{Name: "s01", Title: "bandwidth | both"}
	s5 := &scenario.Scenario{Name: "s05", Title: "switch failure"}
	res := func(vals ...float64) []verdict.Result {
		var out []verdict.Result
		for i, v := range vals {
			out = append(out, verdict.Result{Claim: []string{"headline", "T0 down", "repaired"}[i], Measured: v, Unit: "ratio", Bounds: "≥ 0.7", Pass: v >= 0.7})
		}
		return out
	}
	outs := []*lab.Outcome{
		{Label: "s01-run1", Scenario: s1, Results: res(1.0, 0.9, 0.95)},
		{Label: "s01-run2", Scenario: s1, Results: res(0.998, 0.9, 0.96)},
		{Label: "s05-run1", Scenario: s5, Results: res(0.94, 0.75, 1.0)},
		{Label: "s05-run2", Scenario: s5, Results: res(0.94, 0.5, 1.0)},
		{Label: "s05-run3", Scenario: s5, Err: errors.New("bring-up failed")},
	}
	got := Digest(outs)
	for _, want := range []string{
		"| s01 | bandwidth / both | **2 of 2** | headline: 1.000 / 0.998 (≥ 0.7) |",
		"| s05 | switch failure | 1 of 3 | headline: 0.940 / 0.940 / **error** (≥ 0.7)<br>T0 down: 0.750 / **0.500** / **error** (≥ 0.7)<br>repaired: 1.000 / 1.000 / **error** (≥ 0.7)<br>s05-run3: bring-up failed |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("digest lacks\n%s\ngot:\n%s", want, got)
		}
	}
	if strings.Contains(got, "s01 | bandwidth / both | **2 of 2** | headline: 1.000 / 0.998 (≥ 0.7)<br>") {
		t.Errorf("claims that passed in every run other than the headline must not be listed:\n%s", got)
	}
}

// TestDigestReported: a report-only claim is never bold nor listed as
// failed, and does not cost its run the pass; a judged one beside it still
// does.
func TestDigestReported(t *testing.T) {
	s8 := &scenario.Scenario{Name: "s08", Title: "incast"}
	res := func(mrc float64) []verdict.Result {
		return []verdict.Result{
			{Claim: "MRC victim", Measured: mrc, Unit: "ratio", Bounds: "≥ 0.95", Pass: mrc >= 0.95},
			{Claim: "RoCE victim", Measured: 0.6, Unit: "ratio", Bounds: "reported, not judged", Reported: true},
		}
	}
	got := Digest([]*lab.Outcome{{Label: "s08-run1", Scenario: s8, Results: res(1.0)}, {Label: "s08-run2", Scenario: s8, Results: res(0.9)}})
	if want := "| s08 | incast | 1 of 2 | MRC victim: 1.000 / **0.900** (≥ 0.95) |"; !strings.Contains(got, want) {
		t.Errorf("digest lacks\n%s\ngot:\n%s", want, got)
	}
	if strings.Contains(got, "RoCE victim") {
		t.Errorf("a report-only claim is listed as failed:\n%s", got)
	}
}

func TestSplice(t *testing.T) {
	doc := "# R\n\nbefore\n" + DigestBegin + "\nold table\n" + DigestEnd + "\nafter\n"
	got, err := Splice(doc, "new table\n\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "# R\n\nbefore\n" + DigestBegin + "\nnew table\n" + DigestEnd + "\nafter\n"; got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	for name, bad := range map[string]string{
		"no begin":     "x\n" + DigestEnd,
		"no end":       DigestBegin + "\nx",
		"out of order": DigestEnd + "\n" + DigestBegin,
	} {
		if _, err := Splice(bad, "t"); err == nil {
			t.Errorf("%s: Splice accepted %q", name, bad)
		}
	}
}
