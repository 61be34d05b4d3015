package amqpserver

import (
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/dlqdash/dlqdash/emulator/amqp"
)

// writeTimeout bounds a single socket write: a client that stops reading for this long
// is treated as dead, so its connection cannot pin memory forever.
const writeTimeout = 30 * time.Second

// maxQueuedFrames bounds the writer queue of one connection. Deliveries are bounded by
// credit and the session window, so only a peer that stops reading reaches it.
const maxQueuedFrames = 200000

// maxQueuedBytes is the backlog of transfer payload bytes (queued or being written) above
// which link deliverers stop taking messages from the broker until the writer has drained
// to half of it. Credit and window alone do not bound memory: a client granting 5000
// credits on 256 KiB messages and then not reading would otherwise make the emulator lock
// and copy 1.25 GB into this connection's queue, and keep those messages from every other
// receiver until writeTimeout drops it.
const maxQueuedBytes = 4 << 20

type outFrame struct {
	f  amqp.Frame
	at time.Time // when it was queued; used for injected latency
}

// writer owns the write side of one connection. Producers (the reader goroutine and the
// link deliverers) append to an unbounded queue and never block on the socket; the writer
// goroutine encodes whole batches into one buffer and writes it in a single call, so the
// socket is flushed exactly when the queue runs empty.
type writer struct {
	c      *conn
	nc     net.Conn
	mu     sync.Mutex
	queue  []outFrame
	spare  []outFrame
	wake   chan struct{}
	hb     chan time.Duration // new heartbeat interval, once the peer's open is known
	finish bool               // write what is queued, then close the socket
	done   chan struct{}      // closed when the writer goroutine has exited
	failed bool

	queuedBytes int           // transfer payload bytes queued or in the write in progress
	room        chan struct{} // closed when queuedBytes falls below maxQueuedBytes/2
}

func newWriter(c *conn, nc net.Conn) *writer {
	return &writer{c: c, nc: nc, wake: make(chan struct{}, 1), hb: make(chan time.Duration, 1), done: make(chan struct{})}
}

// send queues a frame. It reports false once the writer is finishing or failed.
func (w *writer) send(f amqp.Frame) bool {
	w.mu.Lock()
	if w.finish || w.failed {
		w.mu.Unlock()
		return false
	}
	var at time.Time
	if w.c.s.latency.Load() > 0 {
		at = time.Now()
	}
	if len(w.queue) >= maxQueuedFrames {
		// The peer does not read what it asks for (e.g. endless echo flows): drop it
		// rather than grow without bound.
		w.mu.Unlock()
		w.c.log.Warn("emulator: peer is not reading; closing connection", "queued_frames", maxQueuedFrames)
		w.fail()
		return false
	}
	w.queue = append(w.queue, outFrame{f: f, at: at})
	w.queuedBytes += payloadLen(f)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return true
}

func payloadLen(f amqp.Frame) int {
	if t, ok := f.Body.(*amqp.Transfer); ok {
		return len(t.Payload)
	}
	return 0
}

// waitRoom returns nil when deliverers may queue more transfers, else a channel that is
// closed once the backlog has drained (or the writer has stopped).
func (w *writer) waitRoom() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.queuedBytes < maxQueuedBytes || w.finish || w.failed {
		return nil
	}
	if w.room == nil {
		w.room = make(chan struct{})
	}
	return w.room
}

// wroteLocked accounts for written transfer bytes. Caller holds w.mu.
func (w *writer) wroteLocked(n int) {
	w.queuedBytes -= n
	if w.room != nil && w.queuedBytes < maxQueuedBytes/2 {
		close(w.room)
		w.room = nil
	}
}

// close asks the writer to flush what is queued (after an optional final frame) and
// then close the socket. Safe to call more than once.
func (w *writer) close(final *amqp.Frame) {
	w.mu.Lock()
	if !w.finish && !w.failed && final != nil {
		w.queue = append(w.queue, outFrame{f: *final})
	}
	w.finish = true
	if w.room != nil {
		close(w.room)
		w.room = nil
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// setHeartbeat changes the keep-alive period (the peer may need more than the default).
func (w *writer) setHeartbeat(d time.Duration) {
	select {
	case <-w.hb:
	default:
	}
	w.hb <- d
}

func (w *writer) run(heartbeat time.Duration) {
	defer close(w.done)
	defer w.nc.Close()
	defer func() {
		if r := recover(); r != nil {
			w.c.log.Error("emulator: panic in writer", "panic", r, "stack", string(debug.Stack()))
			w.fail()
		}
	}()
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	var buf []byte
	lastWrite := time.Now()
	for {
		select {
		case d := <-w.hb:
			heartbeat = d
			tick.Reset(d)
			continue
		case <-w.wake:
		case <-tick.C:
			// Heartbeat: an empty frame keeps the client's 60 s read deadline from firing
			// on idle links. Skipped when real traffic went out recently.
			if time.Since(lastWrite) >= heartbeat/2 {
				w.mu.Lock()
				if !w.finish && !w.failed {
					w.queue = append(w.queue, outFrame{f: amqp.Frame{Type: amqp.FrameTypeAMQP}})
				}
				w.mu.Unlock()
			}
		}
		for {
			w.mu.Lock()
			batch := w.queue
			if len(batch) > 0 {
				// Double buffering: producers fill the spare slice while this batch is written.
				w.queue, w.spare = w.spare[:0], nil
			}
			finish := w.finish
			w.mu.Unlock()
			if len(batch) == 0 {
				if finish {
					return
				}
				break
			}
			buf = buf[:0]
			batchBytes := 0
			for i := range batch {
				of := &batch[i]
				batchBytes += payloadLen(of.f)
				if !of.at.IsZero() {
					if d := time.Duration(w.c.s.latency.Load()) - time.Since(of.at); d > 0 {
						// Write what precedes this frame first, then wait out its latency.
						if !w.write(buf) {
							return
						}
						buf = buf[:0]
						time.Sleep(d)
					}
				}
				var err error
				buf, err = amqp.AppendFrame(buf, of.f)
				if err != nil {
					w.c.log.Error("emulator: encode frame", "error", err, "frame", describeBody(of.f.Body))
					w.fail()
					return
				}
				batch[i] = outFrame{}
			}
			if !w.write(buf) {
				return
			}
			lastWrite = time.Now()
			if cap(buf) > 1<<20 {
				buf = nil // don't pin a huge buffer after a burst
			}
			w.mu.Lock()
			w.spare = batch[:0]
			if !w.failed {
				w.wroteLocked(batchBytes)
			}
			w.mu.Unlock()
		}
	}
}

func (w *writer) write(b []byte) bool {
	if len(b) == 0 {
		return true
	}
	_ = w.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := w.nc.Write(b); err != nil {
		w.c.log.Debug("emulator: write failed", "error", err)
		w.fail()
		return false
	}
	return true
}

func (w *writer) fail() {
	w.mu.Lock()
	w.failed = true
	w.queue = nil
	w.queuedBytes = 0
	if w.room != nil {
		close(w.room)
		w.room = nil
	}
	w.mu.Unlock()
	// Unblock the reader too: the connection is unusable.
	w.nc.Close()
}
