package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/gorilla/websocket"
)

// liveRig is the real program end to end for live updates: `dlqdash
// emulator`, `dlqdash serve --poll 1s` against it, a websocket subscribed
// to queue.1's message list, and the real SDK to dead-letter messages.
type liveRig struct {
	sender   *azservicebus.Sender
	receiver *azservicebus.Receiver
	frames   chan string // prepend ops' HTML
}

func newLiveRig(tb testing.TB) *liveRig {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	conn, adminAddr := startTestEmulator(tb, "")

	db := filepath.Join(tb.TempDir(), "catalog.db")
	s := start(tb, []string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--poll", "1s", "--admin-endpoint", "http://" + adminAddr},
		env(envConnectionString, conn))

	ws, _, err := websocket.DefaultDialer.DialContext(ctx, "ws://"+s.addr+"/live?page=messages&entity=queue.1&first=1", nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ws.Close() })
	r := &liveRig{frames: make(chan string, 64)}
	go func() {
		defer close(r.frames)
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				return
			}
			var op struct{ Op, HTML string }
			if json.Unmarshal(b, &op) == nil && op.Op == "prepend" {
				r.frames <- op.HTML
			}
		}
	}()

	client, err := azservicebus.NewClientFromConnectionString(conn, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { client.Close(context.Background()) })
	if r.sender, err = client.NewSender("queue.1", nil); err != nil {
		tb.Fatal(err)
	}
	if r.receiver, err = client.NewReceiverForQueue("queue.1", nil); err != nil {
		tb.Fatal(err)
	}
	// serve stops before the emulator (cleanups run last-in first-out).
	tb.Cleanup(func() { s.cancel(); <-s.done })
	return r
}

// deadLetter sends one message, receives and dead-letters it, and returns
// how long after the dead-lettering the row reached the websocket.
func (r *liveRig) deadLetter(tb testing.TB, id string) time.Duration {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.sender.SendMessage(ctx, &azservicebus.Message{Body: []byte(`{"n":1}`), MessageID: &id}, nil); err != nil {
		tb.Fatal(err)
	}
	ms, err := r.receiver.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(ms) != 1 {
		tb.Fatalf("receive: %v (%d messages)", err, len(ms))
	}
	reason := "Latency"
	if err := r.receiver.DeadLetterMessage(ctx, ms[0], &azservicebus.DeadLetterOptions{Reason: &reason}); err != nil {
		tb.Fatal(err)
	}
	at := time.Now()
	for {
		select {
		case html, ok := <-r.frames:
			if !ok {
				tb.Fatal("the websocket closed")
			}
			if strings.Contains(html, "<code>"+id+"</code>") {
				return time.Since(at)
			}
		case <-ctx.Done():
			tb.Fatalf("no row for %s on the websocket", id)
		}
	}
}

// TestLiveEndToEnd: a message dead-lettered through the SDK reaches a
// subscribed websocket as a prepended row, within the poll interval plus
// the time to read and render it.
func TestLiveEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the emulator and serve with a 1 s poll")
	}
	r := newLiveRig(t)
	for i := range 2 {
		if d := r.deadLetter(t, fmt.Sprintf("e2e-%d", i)); d > 5*time.Second {
			t.Errorf("message %d took %v to reach the page", i, d)
		}
	}
}

// BenchmarkLiveLatency measures dead-lettered in the emulator -> row
// received by a websocket client, over 20 messages per run, with --poll 1s.
// Messages are spaced by a random pause of up to one poll interval so that
// they land at every phase of the ingester's polling (a pause for sampling,
// not a wait for an event). Reports p50 and p95 in ms.
func BenchmarkLiveLatency(b *testing.B) {
	r := newLiveRig(b)
	var ds []time.Duration
	for i := 0; b.Loop(); i++ {
		for j := range 20 {
			time.Sleep(rand.N(time.Second))
			ds = append(ds, r.deadLetter(b, fmt.Sprintf("bench-%d-%d", i, j)))
		}
	}
	slices.Sort(ds)
	pct := func(p float64) float64 {
		return float64(ds[int(p*float64(len(ds)-1)+0.5)]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.95), "p95-ms")
	b.ReportMetric(float64(ds[len(ds)-1])/float64(time.Millisecond), "max-ms")
	b.ReportMetric(0, "ns/op")
}
