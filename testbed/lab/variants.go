package lab

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/softmrc/softmrc/testbed/lab/scenario"
	"github.com/softmrc/softmrc/testbed/lab/verdict"
	"github.com/softmrc/softmrc/testbed/plan"
)

// runVariants runs every variant of s as a full run (its own testbed,
// outputs in OutDir/VARIANT), then checks the cross-run claims on the
// values of all of them. A variant whose run failed is reported with its
// error and its values are absent: claims that need them are not measured.
//
// The variants share one address run id (Options.RunID). A RoCE QP is
// pinned to the path its addresses and QPNs hash to, and QPNs are handed
// out in the same order in every run, so with the same addresses a variant
// and its twin (S7: RoCE without and with loss) put every QP on the same
// uplink: what differs between them is what the variant changes, not a
// new ECMP draw. A new scenario run is a new draw.
func runVariants(ctx context.Context, s *scenario.Scenario, o Options, out *Outcome) {
	out.Values = map[string]float64{}
	if o.RunID == 0 {
		o.RunID = plan.RunIDFor(randPrefix())
	}
	for i, v := range s.Variants {
		vs := s.Apply(v)
		progress(o, "[%s] variant %d of %d: %s", s.Name, i+1, len(s.Variants), v.Name)
		vo := o
		vo.OutDir = filepath.Join(o.OutDir, v.Name)
		r := Run(ctx, vs, vo)
		r.Label = v.Name
		out.Variants = append(out.Variants, r)
		out.Samples += r.Samples
		out.Faults = append(out.Faults, r.Faults...) // for the report's count; each run's own are in its report
		if r.Err != nil {
			out.Err = joinErr(out.Err, fmt.Errorf("variant %s: %w", v.Name, r.Err))
		} else {
			for k, x := range r.Values {
				out.Values[v.Name+"."+k] = x
			}
		}
		for _, res := range r.Results {
			res.Claim = v.Name + ": " + res.Claim
			out.Results = append(out.Results, res)
		}
		if ctx.Err() != nil {
			out.Err = joinErr(out.Err, ctx.Err())
			return
		}
	}
	out.Results = append(out.Results, verdict.CheckValues(s, data{o: out})...)
	verdict.ApplyGiven(out.Results)
}

func joinErr(a, b error) error {
	if a == nil {
		return b
	}
	return fmt.Errorf("%w; %w", a, b)
}

// collectiveLine is a collective's result in a progress line.
func collectiveLine(r FlowResult) string {
	if r.Err != nil {
		return "FAILED: " + r.Err.Error()
	}
	v := FlowValues(r)
	w := "not checked"
	if x, ok := v["wrong"]; ok {
		w = fmt.Sprintf("#wrong %g", x)
	}
	return fmt.Sprintf("busbw %.1f Mbit/s, algbw %.1f Mbit/s, %s", v["busbw"], v["algbw"], w)
}
