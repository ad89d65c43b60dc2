package verbs_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log"
	"time"

	"github.com/softmrc/softmrc/nic/daemon/daemontest"
	"github.com/softmrc/softmrc/nic/verbs"
)

// Example writes a buffer from one host's memory into another's with an
// RDMA Write-with-Immediate and waits for both completions. Two mrc-nicd
// daemons run in this process, joined by in-memory links; with real
// daemons only the socket paths differ (each host's device_socket).
func Example() {
	nics, err := daemontest.Run(2) // two planes
	if err != nil {
		log.Fatal(err)
	}
	defer nics.Close()

	// Each application opens its host's device.
	a, err := verbs.Open(nics.Sock[0])
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := verbs.Open(nics.Sock[1])
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	// Register memory: the daemon maps these very pages. Only dst lets
	// peers write into it.
	src, _ := a.RegMR(64<<10, verbs.AccessLocalWrite)
	dst, _ := b.RegMR(64<<10, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	copy(src.Buf, "hello, multipath world")

	// Create a QP on each side and connect them. Real applications swap
	// each QP's ConnectInfo (QPN, PSN, MTU, window, WriteImm cap, the
	// per-plane addresses), the rkey and the VA out of band (mrc-write-bw
	// uses TCP port 18515); here a JSON round trip stands for that.
	qa, _ := a.CreateQP(verbs.QPConfig{})
	qb, _ := b.CreateQP(verbs.QPConfig{})
	exchange := func(r verbs.Remote) (got verbs.Remote) {
		wire, _ := json.Marshal(r)
		_ = json.Unmarshal(wire, &got)
		return got
	}
	if err := qa.Connect(exchange(qb.ConnectInfo())); err != nil {
		log.Fatal(err)
	}
	if err := qb.Connect(exchange(qa.ConnectInfo())); err != nil {
		log.Fatal(err)
	}

	// Post: 22 bytes from src to the start of dst, with immediate 42.
	if err := qa.PostSend(verbs.WriteImm(1, src, 0, 22, dst.Addr, dst.RKey, 42)); err != nil {
		log.Fatal(err)
	}

	// The sender's completion says every packet was acknowledged; the
	// receiver's says the data is in place.
	wait := func(d *verbs.Device) verbs.Completion {
		cq := make([]verbs.Completion, 1)
		for {
			if n, err := d.PollCQ(cq); err != nil {
				log.Fatal(err)
			} else if n == 1 {
				return cq[0]
			}
			d.WaitCQ(time.Second)
		}
	}
	sc := wait(a)
	rc := wait(b)
	fmt.Println("sender:", sc.Status, "wr", sc.ID)
	fmt.Println("receiver: imm", rc.Imm, rc.Op == verbs.CQRecvImm)
	fmt.Printf("%s\n", bytes.TrimRight(dst.Buf[:32], "\x00"))
	// Output:
	// sender: success wr 1
	// receiver: imm 42 true
	// hello, multipath world
}
