package mrc

import (
	"fmt"

	"github.com/softmrc/softmrc/internal/wire"
)

// SetEVs gives a QP in INIT state an explicit EV set (the EXPLICIT profile
// of QPConfig.EVs): active is used as given, reserve are its backup EVs.
// Connect checks them against the planes both ends have. It is for
// callers that choose the set only when they connect (mrc-nicd's verbs
// Connect), after CreateQP.
func (e *Engine) SetEVs(qpn wire.QPN, active, reserve []wire.EV) error {
	q := e.qps[qpn]
	if q == nil {
		return ErrUnknownQP
	}
	if q.state != QPInit {
		return fmt.Errorf("%w: the EV set is chosen before connect, QP %v is %v", ErrQPState, qpn, q.state)
	}
	if len(active) == 0 || len(active) > maxNumEVs {
		return configErr("%d explicit EVs, want 1..%d", len(active), maxNumEVs)
	}
	q.cfg.EVs = append([]wire.EV(nil), active...)
	q.cfg.Reserve = append([]wire.EV(nil), reserve...)
	return nil
}
