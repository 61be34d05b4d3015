package amqp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

// miniBroker is the smallest AMQP peer this package can build: one
// connection, any sessions, links to a single in-memory queue. It exists to
// prove that go-amqp (the SDK's AMQP stack) accepts everything this package
// writes and that everything go-amqp writes decodes.
type miniBroker struct {
	conn        net.Conn
	fr          *FrameReader
	peerMax     uint32
	queue       [][]byte
	links       map[[2]uint32]*Attach // (channel, handle) → the client's attach
	nextOut     map[uint16]uint32     // per channel: our next outgoing transfer id
	partial     []byte
	deliveryID  uint32
	settled     bool
	dispositons chan *Disposition
	tag         byte
}

func (b *miniBroker) write(f Frame) error {
	out, err := AppendFrame(nil, f)
	if err != nil {
		return err
	}
	_, err = b.conn.Write(out)
	return err
}

func (b *miniBroker) serve() error {
	defer b.conn.Close()
	b.fr = NewFrameReader(b.conn)
	b.links = map[[2]uint32]*Attach{}
	b.nextOut = map[uint16]uint32{}

	if p, err := b.fr.ReadProtocolHeader(); err != nil || p != ProtoSASL {
		return fmt.Errorf("sasl header: %d, %v", p, err)
	}
	if _, err := b.conn.Write(ProtocolHeader(ProtoSASL)); err != nil {
		return err
	}
	if err := b.write(Frame{Type: FrameTypeSASL, Body: &SASLMechanisms{Mechanisms: []Symbol{"ANONYMOUS", "MSSBCBS"}}}); err != nil {
		return err
	}
	f, err := b.fr.ReadFrame()
	if err != nil {
		return err
	}
	if init, ok := f.Body.(*SASLInit); !ok || init.Mechanism != "ANONYMOUS" {
		return fmt.Errorf("want sasl-init ANONYMOUS, got %#v", f.Body)
	}
	if err := b.write(Frame{Type: FrameTypeSASL, Body: &SASLOutcome{Code: 0}}); err != nil {
		return err
	}
	if p, err := b.fr.ReadProtocolHeader(); err != nil || p != ProtoAMQP {
		return fmt.Errorf("amqp header: %d, %v", p, err)
	}
	if _, err := b.conn.Write(ProtocolHeader(ProtoAMQP)); err != nil {
		return err
	}
	for {
		f, err := b.fr.ReadFrame()
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if err := b.handle(f); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func (b *miniBroker) handle(f Frame) error {
	ch := f.Channel
	switch p := f.Body.(type) {
	case nil:
		return nil
	case *Open:
		b.peerMax = p.MaxFrameSize
		return b.write(Frame{Body: &Open{ContainerID: "mini-broker", MaxFrameSize: 65536, ChannelMax: 4999, IdleTimeout: time.Minute,
			OfferedCapabilities: []Symbol{"ANONYMOUS-RELAY"}, Properties: map[Symbol]any{"product": "dlqdash-test"}}})
	case *Begin:
		return b.write(Frame{Channel: ch, Body: &Begin{RemoteChannel: &ch, NextOutgoingID: 0, IncomingWindow: 5000, OutgoingWindow: 5000, HandleMax: 255}})
	case *Attach:
		b.links[[2]uint32{uint32(ch), p.Handle}] = p
		if p.Target != nil && p.Target.Address == "missing" {
			// Refuse the link the AMQP way: attach without a terminus, then
			// detach with an error.
			if err := b.write(Frame{Channel: ch, Body: &Attach{Name: p.Name, Handle: p.Handle, Role: !p.Role, Source: p.Source}}); err != nil {
				return err
			}
			delete(b.links, [2]uint32{uint32(ch), p.Handle})
			return b.write(Frame{Channel: ch, Body: &Detach{Handle: p.Handle, Closed: true, Error: &Error{
				Condition: "amqp:not-found", Description: "The messaging entity 'missing' could not be found.",
				Info: map[Symbol]any{"tracking-id": "t-1"}}}})
		}
		reply := &Attach{Name: p.Name, Handle: p.Handle, Role: !p.Role, SndSettleMode: p.SndSettleMode, RcvSettleMode: p.RcvSettleMode,
			Source: p.Source, Target: p.Target, MaxMessageSize: 1 << 20}
		if err := b.write(Frame{Channel: ch, Body: reply}); err != nil {
			return err
		}
		if p.Role == RoleSender {
			// Grant the client's sender credit.
			next := uint32(0)
			return b.write(Frame{Channel: ch, Body: &Flow{NextIncomingID: &next, IncomingWindow: 5000, NextOutgoingID: b.nextOut[ch],
				OutgoingWindow: 5000, Handle: &p.Handle, DeliveryCount: ptr(uint32(0)), LinkCredit: ptr(uint32(10))}})
		}
		return nil
	case *Transfer:
		// Continuation frames may omit the delivery id and settled flag:
		// they come from the first frame.
		if p.DeliveryID != nil {
			b.deliveryID = *p.DeliveryID
		}
		if p.Settled != nil {
			b.settled = *p.Settled
		}
		b.partial = append(b.partial, p.Payload...)
		if p.More {
			return nil
		}
		a := b.links[[2]uint32{uint32(ch), p.Handle}]
		if a != nil && a.Target != nil && a.Target.Address == "reject" {
			b.partial = nil
			return b.write(Frame{Channel: ch, Body: &Disposition{Role: RoleReceiver, First: b.deliveryID, Settled: true,
				State: &Rejected{Error: &Error{Condition: "com.microsoft:message-size-exceeded", Description: "too big"}}}})
		}
		b.queue = append(b.queue, b.partial)
		b.partial = nil
		if !b.settled {
			return b.write(Frame{Channel: ch, Body: &Disposition{Role: RoleReceiver, First: b.deliveryID, Settled: true, State: &Accepted{}}})
		}
		return nil
	case *Flow:
		if p.Handle == nil || p.LinkCredit == nil || *p.LinkCredit == 0 || len(b.queue) == 0 {
			return nil
		}
		a := b.links[[2]uint32{uint32(ch), *p.Handle}]
		if a == nil || a.Role != RoleReceiver {
			return nil
		}
		msg := b.queue[0]
		b.queue = b.queue[1:]
		id := b.nextOut[ch]
		b.nextOut[ch]++
		b.tag++
		out, err := AppendTransferFrames(nil, ch, &Transfer{Handle: *p.Handle, DeliveryID: &id, DeliveryTag: []byte{b.tag},
			MessageFormat: ptr(uint32(0)), Settled: ptr(false), Payload: msg}, b.peerMax)
		if err != nil {
			return err
		}
		_, err = b.conn.Write(out)
		return err
	case *Disposition:
		b.dispositons <- p
		if !p.Settled {
			return b.write(Frame{Channel: ch, Body: &Disposition{Role: RoleSender, First: p.First, Last: p.Last, Settled: true, State: p.State}})
		}
		return nil
	case *Detach:
		key := [2]uint32{uint32(ch), p.Handle}
		if b.links[key] == nil {
			return nil // the client's answer to our detach
		}
		delete(b.links, key)
		return b.write(Frame{Channel: ch, Body: &Detach{Handle: p.Handle, Closed: p.Closed}})
	case *End:
		return b.write(Frame{Channel: ch, Body: &End{}})
	case *Close:
		if err := b.write(Frame{Body: &Close{}}); err != nil {
			return err
		}
		return io.EOF
	}
	return fmt.Errorf("unexpected %T", f.Body)
}

// TestInteropWithGoAMQP runs a real go-amqp client against miniBroker:
// SASL ANONYMOUS, open, begin, a sender link sending a message larger than a
// frame, a receiver link receiving it back (split by AppendTransferFrames),
// an accepted disposition, and an orderly close.
func TestInteropWithGoAMQP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	broker := &miniBroker{dispositons: make(chan *Disposition, 8)}
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		broker.conn = c
		done <- broker.serve()
	}()

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	conn, err := goamqp.Dial(ctx, "amqp://"+ln.Addr().String(), &goamqp.ConnOptions{
		SASLType: goamqp.SASLTypeAnonymous(), IdleTimeout: 30 * time.Second,
		Properties: map[string]any{"product": "go-amqp test", "n": int64(1)},
	})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	sess, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	snd, err := sess.NewSender(ctx, "queue1", nil)
	if err != nil {
		t.Fatalf("NewSender: %v", err)
	}
	body := bytes.Repeat([]byte("0123456789abcdef"), 10_000) // 160 KB: several frames each way
	msg := goamqp.NewMessage(body)
	msg.ApplicationProperties = map[string]any{"k": "v"}
	if err := snd.Send(ctx, msg, nil); err != nil {
		t.Fatalf("Send: %v", err)
	}

	// A refused link reports the detach error.
	_, err = sess.NewSender(ctx, "missing", nil)
	var refused *goamqp.Error
	if !errors.As(err, &refused) || refused.Condition != "amqp:not-found" || refused.Info["tracking-id"] != "t-1" {
		t.Fatalf("NewSender(missing) err = %#v, want amqp:not-found", err)
	}
	// A rejected delivery reports the rejection error.
	rej, err := sess.NewSender(ctx, "reject", nil)
	if err != nil {
		t.Fatalf("NewSender(reject): %v", err)
	}
	var amqpErr *goamqp.Error
	if err := rej.Send(ctx, goamqp.NewMessage([]byte("x")), nil); !errors.As(err, &amqpErr) || amqpErr.Condition != "com.microsoft:message-size-exceeded" {
		t.Fatalf("Send to reject = %#v, want a rejection", err)
	}

	rcv, err := sess.NewReceiver(ctx, "queue1", &goamqp.ReceiverOptions{Credit: 10})
	if err != nil {
		t.Fatalf("NewReceiver: %v", err)
	}
	got, err := rcv.Receive(ctx, nil)
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	if !bytes.Equal(got.GetData(), body) || got.ApplicationProperties["k"] != "v" {
		t.Fatalf("received a different message: %d bytes, props %v", len(got.GetData()), got.ApplicationProperties)
	}
	if err := rcv.AcceptMessage(ctx, got); err != nil {
		t.Fatalf("AcceptMessage: %v", err)
	}
	select {
	case d := <-broker.dispositons:
		if _, ok := d.State.(*Accepted); !ok || d.Role != RoleReceiver {
			t.Fatalf("disposition %#v", d)
		}
	case <-ctx.Done():
		t.Fatal("no disposition from the client")
	}
	if err := rcv.Close(ctx); err != nil {
		t.Fatalf("receiver Close: %v", err)
	}
	if err := snd.Close(ctx); err != nil {
		t.Fatalf("sender Close: %v", err)
	}
	if err := sess.Close(ctx); err != nil {
		t.Fatalf("session Close: %v", err)
	}
	if err := conn.Close(); err != nil {
		t.Fatalf("conn Close: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("broker: %v", err)
	}
}
