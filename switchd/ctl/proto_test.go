package ctl

import (
	"bufio"
	"strings"
	"testing"
	"time"
)

func TestParseFault(t *testing.T) {
	for _, tc := range []struct {
		target, spec string
		want         Fault
		err          string
	}{
		{"up0", "down", Fault{Target: "up0", Action: ActDown}, ""},
		{"up0", "up", Fault{Target: "up0", Action: ActUp}, ""},
		{"up0", "blackhole", Fault{Target: "up0", Action: ActBlackhole}, ""},
		{"up0", "clear", Fault{Target: "up0", Action: ActClear}, ""},
		{"switch", "hang", Fault{Target: "switch", Action: ActHang}, ""},
		{"switch", "clear", Fault{Target: "switch", Action: ActClear}, ""},
		{"up0", "loss=0.01", Fault{Target: "up0", Action: ActLoss, Loss: 0.01}, ""},
		{"up0", "loss=5%", Fault{Target: "up0", Action: ActLoss, Loss: 0.05}, ""},
		{"up0", "loss=0", Fault{Target: "up0", Action: ActLoss}, ""},
		{"up0", "loss=1", Fault{Target: "up0", Action: ActLoss, Loss: 1}, ""},
		{"up0", "flap=200ms/50ms", Fault{Target: "up0", Action: ActFlap, FlapOnNS: int64(200 * time.Millisecond), FlapOffNS: int64(50 * time.Millisecond)}, ""},
		{"up0", "loss=1.5", Fault{}, "want loss=P"},
		{"up0", "loss=-0.1", Fault{}, "want loss=P"},
		{"up0", "loss=NaN", Fault{}, "want loss=P"},
		{"up0", "loss", Fault{}, "want loss=P"},
		{"up0", "loss=abc", Fault{}, "want loss=P"},
		{"up0", "flap=200ms", Fault{}, "want flap=ON/OFF"},
		{"up0", "flap=0s/1s", Fault{}, "want flap=ON/OFF"},
		{"up0", "flap=x/1s", Fault{}, "want flap=ON/OFF"},
		{"up0", "hang", Fault{}, "use 'fault switch hang'"},
		{"up0", "down=1", Fault{}, "down takes no value"},
		{"up0", "melt", Fault{}, "unknown fault"},
		{"", "down", Fault{}, "missing target"},
	} {
		got, err := ParseFault(tc.target, tc.spec)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s %s: error %v, want %q", tc.target, tc.spec, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %s: %v", tc.target, tc.spec, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%s %s: got %+v, want %+v", tc.target, tc.spec, got, tc.want)
		}
		// The String form parses back to the same fault.
		target, spec, _ := strings.Cut(got.String(), " ")
		again, err := ParseFault(target, spec)
		if err != nil || again != got {
			t.Errorf("%s %s: String %q re-parses to %+v, %v", tc.target, tc.spec, got.String(), again, err)
		}
	}
}

func TestFaultStateString(t *testing.T) {
	for _, tc := range []struct {
		f    FaultState
		want string
	}{
		{FaultState{}, "ok"},
		{FaultState{Down: true}, "down"},
		{FaultState{Blackhole: true, Loss: 0.25}, "blackhole,loss=0.25"},
		{FaultState{FlapOnNS: 2e8, FlapOffNS: 5e7}, "flap=200ms/50ms"},
	} {
		if got := tc.f.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.f, got, tc.want)
		}
	}
}

func TestReadLine(t *testing.T) {
	long := strings.Repeat("x", 100_000)
	r := bufio.NewReaderSize(strings.NewReader("short\n"+long+"\n"+strings.Repeat("y", MaxLine+10)+"\n"), 16)
	for _, want := range []string{"short\n", long + "\n"} {
		got, err := ReadLine(r)
		if err != nil || string(got) != want {
			t.Fatalf("got %d bytes, %v; want %d bytes", len(got), err, len(want))
		}
	}
	if _, err := ReadLine(r); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("over-long line: %v", err)
	}
}

func FuzzParseFault(f *testing.F) {
	for _, s := range []string{"down", "loss=0.5", "loss=5%", "flap=1s/2s", "hang", "clear", "flap=/", "loss=%"} {
		f.Add("up0", s)
		f.Add("switch", s)
	}
	f.Fuzz(func(t *testing.T, target, spec string) {
		ft, err := ParseFault(target, spec)
		if err != nil {
			return
		}
		if ft.Loss < 0 || ft.Loss > 1 || ft.FlapOnNS < 0 || ft.FlapOffNS < 0 {
			t.Fatalf("accepted out-of-range fault %+v", ft)
		}
		if ft.Action == ActHang && ft.Target != TargetSwitch {
			t.Fatalf("hang accepted on port %q", ft.Target)
		}
	})
}
