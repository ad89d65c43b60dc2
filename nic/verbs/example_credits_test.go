package verbs_test

import (
	"encoding/binary"
	"fmt"
	"log"
	"time"

	"github.com/softmrc/softmrc/nic/daemon/daemontest"
	"github.com/softmrc/softmrc/nic/verbs"
)

// ExampleCreditSender streams ten messages through a receive FIFO of only
// three slots: the sender writes a slot only while it holds its credit, and
// the receiver returns credits with zero-length Write-with-Immediate once it
// has read the slots. This is the flow control the collectives
// (nic/collective) run on every ring hop.
func ExampleCreditSender() {
	nics, err := daemontest.Run(2)
	if err != nil {
		log.Fatal(err)
	}
	defer nics.Close()
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
	qa, _ := a.CreateQP(verbs.QPConfig{})
	qb, _ := b.CreateQP(verbs.QPConfig{})
	if err := qa.Connect(qb.ConnectInfo()); err != nil { // exchanged out of band in real programs
		log.Fatal(err)
	}
	if err := qb.Connect(qa.ConnectInfo()); err != nil {
		log.Fatal(err)
	}

	const slots, size = 3, 8
	staging, _ := a.RegMR(slots*size, verbs.AccessLocalWrite)                      // the sender's copy of each slot
	fifo, _ := b.RegMR(slots*size, verbs.AccessLocalWrite|verbs.AccessRemoteWrite) // the receiver's FIFO

	// The receiver advertises its slots (out of band in real programs).
	// Credits are zero-length writes: they name no memory, so no target.
	rx, err := verbs.NewCreditReceiver(qb, fifo, 0, slots, size, verbs.CreditTarget{})
	if err != nil {
		log.Fatal(err)
	}
	tx, err := verbs.NewCreditSender(qa, rx.Slots())
	if err != nil {
		log.Fatal(err)
	}

	const total = 10
	sent, got, blocked := 0, 0, 0
	for got < total {
		// Sender: post while credits last. A staging slot is filled only
		// with its credit in hand: until then the NIC may still be reading
		// (or retransmitting) the previous message from it.
		for sent < total {
			if tx.Credits() == 0 {
				blocked++
				break
			}
			slot := tx.NextSlot()
			binary.LittleEndian.PutUint64(staging.Buf[slot*size:], uint64(100+sent))
			if err := tx.Post(staging, uint64(slot*size), size, uint32(sent)); err != nil {
				log.Fatal(err)
			}
			sent++
		}
		// Receiver: take one message, use it, give its slot back.
		c, err := b.NextCompletion(5 * time.Second)
		if err != nil {
			log.Fatal(err)
		}
		m, ok, err := rx.OnCompletion(c)
		if err != nil || !ok {
			log.Fatal("not a message: ", err)
		}
		fmt.Printf("tag %d slot %d value %d\n", m.Tag, m.Slot, binary.LittleEndian.Uint64(m.Data))
		got++
		if err := rx.Release(1); err != nil {
			log.Fatal(err)
		}
		// Sender: wait for that credit.
		for tx.Credits() == 0 && sent < total {
			c, err := a.NextCompletion(5 * time.Second)
			if err != nil {
				log.Fatal(err)
			}
			if _, err := tx.OnCompletion(c); err != nil {
				log.Fatal(err)
			}
		}
	}
	fmt.Println("sender ran out of credits:", blocked > 0)
	// Output:
	// tag 0 slot 0 value 100
	// tag 1 slot 1 value 101
	// tag 2 slot 2 value 102
	// tag 3 slot 0 value 103
	// tag 4 slot 1 value 104
	// tag 5 slot 2 value 105
	// tag 6 slot 0 value 106
	// tag 7 slot 1 value 107
	// tag 8 slot 2 value 108
	// tag 9 slot 0 value 109
	// sender ran out of credits: true
}
