package amqpserver_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/dlqdash/dlqdash/emulator/amqp"
	"github.com/dlqdash/dlqdash/emulator/broker"
)

// rawConn is a hand-driven AMQP client for protocol-violation tests.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	fr *amqp.FrameReader
}

func dialRaw(t *testing.T, env *testEnv) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", env.srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, nc: nc, fr: amqp.NewFrameReader(nc)}
}

func (c *rawConn) write(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *rawConn) writeFrame(ch uint16, body any) {
	c.t.Helper()
	b, err := amqp.AppendFrame(nil, amqp.Frame{Type: amqp.FrameTypeAMQP, Channel: ch, Body: body})
	if err != nil {
		c.t.Fatalf("encode: %v", err)
	}
	c.write(b)
}

func (c *rawConn) readFrame() amqp.Frame {
	c.t.Helper()
	f, err := c.fr.ReadFrame()
	if err != nil {
		c.t.Fatalf("read frame: %v", err)
	}
	return f
}

// handshake runs SASL ANONYMOUS and the AMQP header; with open it also exchanges opens.
func (c *rawConn) handshake(open bool) {
	c.t.Helper()
	c.write(amqp.ProtocolHeader(amqp.ProtoSASL))
	if p, err := c.fr.ReadProtocolHeader(); err != nil || p != amqp.ProtoSASL {
		c.t.Fatalf("sasl header: %d %v", p, err)
	}
	if _, ok := c.readFrame().Body.(*amqp.SASLMechanisms); !ok {
		c.t.Fatal("no sasl-mechanisms")
	}
	b, _ := amqp.AppendFrame(nil, amqp.Frame{Type: amqp.FrameTypeSASL, Body: &amqp.SASLInit{Mechanism: "ANONYMOUS", InitialResponse: []byte("anonymous")}})
	c.write(b)
	if o, ok := c.readFrame().Body.(*amqp.SASLOutcome); !ok || o.Code != 0 {
		c.t.Fatal("sasl outcome not ok")
	}
	c.write(amqp.ProtocolHeader(amqp.ProtoAMQP))
	if p, err := c.fr.ReadProtocolHeader(); err != nil || p != amqp.ProtoAMQP {
		c.t.Fatalf("amqp header: %d %v", p, err)
	}
	if !open {
		return
	}
	c.writeFrame(0, &amqp.Open{ContainerID: "raw", MaxFrameSize: 65536, ChannelMax: 65535})
	if _, ok := c.readFrame().Body.(*amqp.Open); !ok {
		c.t.Fatal("no open")
	}
}

// expectClose reads until a close frame (returning its error) or the end of the stream.
func (c *rawConn) expectClose() *amqp.Error {
	c.t.Helper()
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				c.t.Fatal("server did not close the connection")
			}
			return nil // reset by peer etc.
		}
		if cl, ok := f.Body.(*amqp.Close); ok {
			if cl.Error == nil {
				c.t.Fatal("close without an error")
			}
			// After close the server hangs up.
			if _, err := c.fr.ReadFrame(); err == nil {
				c.t.Fatal("frames after close")
			}
			return cl.Error
		}
	}
}

// stillServes proves the server carries on after a hostile connection.
func stillServes(t *testing.T, env *testEnv) {
	t.Helper()
	ctx := testCtx(t)
	send(t, ctx, env.sender(t, "q1"), &azservicebus.Message{Body: []byte("ok")})
	r := env.receiver(t, "q1", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if m := receiveN(t, r, 1)[0]; string(m.Body) != "ok" {
		t.Fatalf("body %q", m.Body)
	}
}

func TestHostileInput(t *testing.T) {
	tests := []struct {
		name string
		run  func(c *rawConn) // returns after the violation was written
		cond amqp.Symbol      // expected close condition; "" = only a hang-up is expected
	}{
		{
			name: "random bytes instead of a header",
			run: func(c *rawConn) {
				b := make([]byte, 4096)
				r := rand.New(rand.NewPCG(1, 2))
				for i := range b {
					b[i] = byte(r.Uint32())
				}
				c.write(b)
				// The server answers with the header it speaks, then hangs up.
				var h [8]byte
				if _, err := io.ReadFull(c.nc, h[:]); err != nil || !bytes.HasPrefix(h[:], []byte("AMQP")) {
					c.t.Fatalf("header reply %q %v", h, err)
				}
			},
		},
		{
			name: "random frames after open",
			run: func(c *rawConn) {
				c.handshake(true)
				b := make([]byte, 2048)
				r := rand.New(rand.NewPCG(3, 4))
				for i := range b {
					b[i] = byte(r.Uint32())
				}
				binary.BigEndian.PutUint32(b, 2048)
				b[4], b[5] = 2, 0
				c.write(b)
			},
			cond: "amqp:decode-error",
		},
		{
			name: "giant frame size",
			run: func(c *rawConn) {
				c.handshake(true)
				c.write([]byte{0x7f, 0xff, 0xff, 0xff, 2, 0, 0, 0})
			},
			cond: "amqp:connection:framing-error",
		},
		{
			name: "unknown performative",
			run: func(c *rawConn) {
				c.handshake(true)
				// described(ulong 0x99) list0
				c.write([]byte{0, 0, 0, 12, 2, 0, 0, 0, 0x00, 0x53, 0x99, 0x45})
			},
			cond: "amqp:decode-error",
		},
		{
			name: "transfer on an unknown handle",
			run: func(c *rawConn) {
				c.handshake(true)
				c.writeFrame(0, &amqp.Begin{NextOutgoingID: 0, IncomingWindow: 100, OutgoingWindow: 100, HandleMax: 10})
				if _, ok := c.readFrame().Body.(*amqp.Begin); !ok {
					c.t.Fatal("no begin")
				}
				id, settled := uint32(0), false
				c.writeFrame(0, &amqp.Transfer{Handle: 7, DeliveryID: &id, DeliveryTag: []byte{1}, Settled: &settled, Payload: []byte{0, 0x53, 0x77, 0x40}})
			},
			cond: "amqp:session:unattached-handle",
		},
		{
			name: "begin before open",
			run: func(c *rawConn) {
				c.handshake(false)
				c.writeFrame(0, &amqp.Begin{IncomingWindow: 100, OutgoingWindow: 100})
			},
			cond: "amqp:not-allowed",
		},
		{
			name: "attach on a channel without a session",
			run: func(c *rawConn) {
				c.handshake(true)
				c.writeFrame(3, &amqp.Attach{Name: "x", Handle: 0, Role: amqp.RoleReceiver, Source: &amqp.Source{Address: "q1"}})
			},
			cond: "amqp:not-allowed",
		},
	}
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, env)
			tc.run(c)
			e := c.expectClose()
			if tc.cond != "" && (e == nil || e.Condition != tc.cond) {
				t.Fatalf("close error %v, want condition %s", e, tc.cond)
			}
			stillServes(t, env)
		})
	}
}

// TestRandomFramesManySeeds: well-framed garbage (and garbage inside valid sessions)
// on many concurrent connections never takes the server down.
func TestRandomFramesManySeeds(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	done := make(chan struct{})
	const conns = 40
	for seed := range conns {
		go func() {
			defer func() { done <- struct{}{} }()
			nc, err := net.Dial("tcp", env.srv.Addr().String())
			if err != nil {
				return
			}
			defer nc.Close()
			_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
			r := rand.New(rand.NewPCG(uint64(seed), 99))
			var out []byte
			out = append(out, amqp.ProtocolHeader(amqp.ProtoAMQP)...)
			out, _ = amqp.AppendFrame(out, amqp.Frame{Type: amqp.FrameTypeAMQP, Body: &amqp.Open{ContainerID: "fuzz", MaxFrameSize: 65536, ChannelMax: 10}})
			out, _ = amqp.AppendFrame(out, amqp.Frame{Type: amqp.FrameTypeAMQP, Body: &amqp.Begin{IncomingWindow: 10, OutgoingWindow: 10, HandleMax: 10}})
			if seed%2 == 0 {
				out, _ = amqp.AppendFrame(out, amqp.Frame{Type: amqp.FrameTypeAMQP, Body: &amqp.Attach{Name: "l", Handle: 0, Role: amqp.RoleReceiver, Source: &amqp.Source{Address: "q1"}}})
			}
			for range 1 + r.IntN(5) {
				n := 8 + r.IntN(300)
				f := make([]byte, n)
				for i := range f {
					f[i] = byte(r.Uint32())
				}
				binary.BigEndian.PutUint32(f, uint32(n))
				f[4], f[5] = 2, 0
				if r.IntN(2) == 0 {
					// Keep a valid performative descriptor so decoding gets deeper.
					if n >= 11 {
						f[8], f[9], f[10] = 0x00, 0x53, byte(0x10+r.IntN(9))
					}
				}
				out = append(out, f...)
			}
			_, _ = nc.Write(out)
			_, _ = io.Copy(io.Discard, nc)
		}()
	}
	for range conns {
		<-done
	}
	stillServes(t, env)
}
