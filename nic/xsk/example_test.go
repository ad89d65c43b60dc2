package xsk_test

import (
	"fmt"
	"time"

	"github.com/softmrc/softmrc/nic/xsk"
)

// A run loop receives in batches without copying, and Waits when idle. The
// same code runs on an *xsk.XDPPort from xsk.Open.
func ExampleNewPipe() {
	host, nic := xsk.NewPipe("host", "nic", 0)
	if _, err := host.Send([][]byte{[]byte("frame one"), []byte("frame two")}); err != nil {
		panic(err)
	}
	for got := 0; got < 2; {
		n, err := nic.RecvFunc(64, func(frame []byte) {
			fmt.Printf("%s (%d bytes)\n", frame, len(frame)) // valid only inside the callback
		})
		if err != nil {
			panic(err)
		}
		got += n
		if n == 0 {
			_ = nic.Wait(10 * time.Millisecond)
		}
	}
	st := nic.Stats()
	fmt.Println("rx frames:", st.RxFrames)
	// Output:
	// frame one (9 bytes)
	// frame two (9 bytes)
	// rx frames: 2
}
