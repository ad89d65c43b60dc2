package daemon

import (
	"testing"

	"github.com/softmrc/softmrc/internal/dcqcn"
	"github.com/softmrc/softmrc/nic/config"
)

// TestDCQCNConfig: a RoCE QP's DCQCN takes the NIC's scale and target rule
// (roce.dcqcn_scale, roce.dcqcn_target).
func TestDCQCNConfig(t *testing.T) {
	for _, tc := range []struct {
		o         config.RoCEOptions
		clamp     bool
		timeReset int64
	}{
		{config.RoCEOptions{}, false, dcqcn.Defaults.TimeReset},
		{config.RoCEOptions{DCQCNTarget: config.DCQCNTargetPaper, DCQCNScale: 10}, false, 10 * dcqcn.Defaults.TimeReset},
		{config.RoCEOptions{DCQCNTarget: config.DCQCNTargetMLX5, DCQCNScale: 1250}, true, 1250 * dcqcn.Defaults.TimeReset},
	} {
		c := dcqcnConfig(tc.o)
		if c.TargetOnTimerIncrease != tc.clamp || c.TimeReset != tc.timeReset {
			t.Errorf("%+v: TargetOnTimerIncrease %v, TimeReset %d; want %v, %d", tc.o, c.TargetOnTimerIncrease, c.TimeReset, tc.clamp, tc.timeReset)
		}
	}
}
