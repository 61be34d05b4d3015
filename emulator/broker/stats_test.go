package broker

import (
	"encoding/json"
	"sync"
	"testing"
)

func TestStats(t *testing.T) {
	ns, _ := newNS(t)
	ns.CountOp(OpPeek, "Orders/$DeadLetterQueue", 1)
	ns.CountOp(OpPeekedMessages, "orders/$deadletterqueue", 250)
	ns.CountOp(OpPeek, "/orders/$DeadLetterQueue/", 1)
	ns.CountOp(OpSend, "orders", 3)
	ns.CountOp(OpAdmin, "", 1) // totals only
	ns.CountManagement("orders/$DeadLetterQueue", "com.microsoft:peek-message")
	ns.CountManagement("orders", "com.microsoft:something-new")
	st := ns.Stats()
	if st.Totals.Peek != 2 || st.Totals.PeekedMessages != 250 || st.Totals.Send != 3 || st.Totals.Admin != 1 || st.Totals.Management != 2 {
		t.Fatalf("totals %+v", st.Totals)
	}
	dlq := st.Entity("ORDERS/$DeadLetterQueue")
	if dlq.Peek != 2 || dlq.PeekedMessages != 250 || dlq.Management != 1 || dlq.ManagementOps.PeekMessage != 1 || dlq.Send != 0 {
		t.Fatalf("dlq %+v", dlq)
	}
	if o := st.Entities["orders"]; o.Send != 3 || o.ManagementOps.Other != 1 {
		t.Fatalf("orders %+v", o)
	}
	if len(st.Entities) != 2 {
		t.Fatalf("entities %v", st.Entities)
	}
	b, err := json.Marshal(st)
	mustNil(t, err)
	var back map[string]map[string]any
	mustNil(t, json.Unmarshal(b, &back))
	if back["totals"]["peeked_messages"] != float64(250) || back["entities"]["orders/$deadletterqueue"] == nil ||
		back["totals"]["management_ops"].(map[string]any)["peek-message"] != float64(1) {
		t.Fatalf("json %s", b)
	}

	ns.ResetStats()
	st = ns.Stats()
	if st.Totals.Peek != 0 || st.Totals.Management != 0 || len(st.Entities) != 0 {
		t.Fatalf("after reset %+v", st)
	}
	ns.CountOp(OpPeek, "orders/$DeadLetterQueue", 1)
	if ns.Stats().Entity("orders/$deadletterqueue").Peek != 1 {
		t.Fatal("no count after reset")
	}
}

func TestStatsConcurrentAndCheap(t *testing.T) {
	ns, _ := newNS(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				ns.CountOp(OpReceive, "q", 1)
				ns.CountManagement("Q", "com.microsoft:renew-lock")
				_ = ns.Stats()
			}
		})
	}
	wg.Wait()
	if o := ns.Stats().Entity("q"); o.Receive != 8000 || o.ManagementOps.RenewLock != 8000 {
		t.Fatalf("counts %+v", o)
	}
	if n := testing.AllocsPerRun(100, func() {
		ns.CountOp(OpPeek, "q", 1)
		ns.CountManagement("q", "com.microsoft:peek-message")
	}); n != 0 {
		t.Fatalf("%v allocations per counted operation", n)
	}
}
