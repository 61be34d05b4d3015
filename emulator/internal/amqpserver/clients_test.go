package amqpserver_test

// What clients other than the Go SDK need on the wire, as Azure provides it:
// the Python SDK's AMQP stacks (uamqp up to azure-servicebus 7.8, pyamqp
// from 7.9) read performative fields by position, authenticate with SASL
// MSSBCBS, send $cbs and $management requests without reply-to, and address
// links with URIs.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/emulator/amqp"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/internal/amqpserver"
)

// rawFrame is one frame as read off the wire: the decoded frame and the
// number of fields its performative's list carried.
type rawFrame struct {
	f      amqp.Frame
	fields int
	raw    []byte
}

// readRaw reads one frame and counts the fields of its performative's list.
func (c *rawConn) readRaw() rawFrame {
	c.t.Helper()
	var hdr [4]byte
	if _, err := io.ReadFull(c.nc, hdr[:]); err != nil {
		c.t.Fatalf("read frame size: %v", err)
	}
	size := binary.BigEndian.Uint32(hdr[:])
	b := make([]byte, size)
	copy(b, hdr[:])
	if _, err := io.ReadFull(c.nc, b[4:]); err != nil {
		c.t.Fatalf("read frame: %v", err)
	}
	f, err := amqp.ParseFrame(b)
	if err != nil {
		c.t.Fatalf("parse frame % x: %v", b, err)
	}
	body := b[int(b[4])*4:]
	if len(body) == 0 {
		return rawFrame{f: f, fields: -1, raw: b}
	}
	// 0x00 0x53 <code> then the list: list0, list8 size count, list32 size count.
	switch body[3] {
	case 0x45:
		return rawFrame{f: f, fields: 0, raw: b}
	case 0xc0:
		return rawFrame{f: f, fields: int(body[5]), raw: b}
	case 0xd0:
		return rawFrame{f: f, fields: int(binary.BigEndian.Uint32(body[8:12])), raw: b}
	}
	c.t.Fatalf("performative is not a list: % x", body)
	return rawFrame{}
}

// readHeader reads a protocol header straight off the connection (c.fr
// would buffer past it, and readRaw reads the connection itself).
func (c *rawConn) readHeader(want []byte) {
	c.t.Helper()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c.nc, got); err != nil || !bytes.Equal(got, want) {
		c.t.Fatalf("protocol header % x, %v; want % x", got, err, want)
	}
}

// rawHandshake is handshake with the SASL mechanism of the caller's choice; it
// returns the mechanisms the server offered. Read the connection with readRaw
// only.
func (c *rawConn) rawHandshake(mechanism amqp.Symbol) []amqp.Symbol {
	c.t.Helper()
	c.write(amqp.ProtocolHeader(amqp.ProtoSASL))
	c.readHeader(amqp.ProtocolHeader(amqp.ProtoSASL))
	mechs, ok := c.readRaw().f.Body.(*amqp.SASLMechanisms)
	if !ok {
		c.t.Fatal("no sasl-mechanisms")
	}
	b, _ := amqp.AppendFrame(nil, amqp.Frame{Type: amqp.FrameTypeSASL, Body: &amqp.SASLInit{Mechanism: mechanism}})
	c.write(b)
	if o, ok := c.readRaw().f.Body.(*amqp.SASLOutcome); !ok || o.Code != 0 {
		c.t.Fatalf("sasl %s: outcome not ok", mechanism)
	}
	c.write(amqp.ProtocolHeader(amqp.ProtoAMQP))
	c.readHeader(amqp.ProtocolHeader(amqp.ProtoAMQP))
	c.writeFrame(0, &amqp.Open{ContainerID: "raw", MaxFrameSize: 65536, ChannelMax: 65535})
	if r := c.readRaw(); r.fields != 10 {
		c.t.Fatalf("open: %d fields, want all 10 (%#v)", r.fields, r.f.Body)
	}
	return mechs.Mechanisms
}

// TestEveryFieldOnTheWire drives a connection as uamqp does (SASL MSSBCBS, a
// sender and a receiver on amqps://<host>/q1) and checks that each
// performative the emulator sends carries its full field list, and that the
// attach reply carries max-message-size.
func TestEveryFieldOnTheWire(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	c := dialRaw(t, env)
	mechs := c.rawHandshake("MSSBCBS")
	if !slices.Contains(mechs, "MSSBCBS") || !slices.Contains(mechs, "ANONYMOUS") {
		t.Fatalf("sasl mechanisms %v, want MSSBCBS and ANONYMOUS", mechs)
	}
	c.writeFrame(0, &amqp.Begin{NextOutgoingID: 0, IncomingWindow: 65536, OutgoingWindow: 65536, HandleMax: math.MaxUint32})
	if r := c.readRaw(); r.fields != 8 {
		t.Fatalf("begin: %d fields, want 8", r.fields)
	}
	uri := "amqps://" + env.srv.Addr().String() + "/q1"
	mode := amqp.ReceiverSettleModeFirst
	c.writeFrame(0, &amqp.Attach{Name: "s", Handle: 0, Role: amqp.RoleSender, RcvSettleMode: &mode,
		Source: &amqp.Source{Address: "client"}, Target: &amqp.Target{Address: uri}})
	r := c.readRaw()
	a, ok := r.f.Body.(*amqp.Attach)
	if !ok || r.fields != 14 {
		t.Fatalf("attach reply: %d fields (%#v), want an attach with 14", r.fields, r.f.Body)
	}
	if a.Target == nil || a.Target.Address != uri || a.MaxMessageSize != 262144 {
		t.Fatalf("attach reply target %+v max-message-size %d, want %s and 262144", a.Target, a.MaxMessageSize, uri)
	}
	if r := c.readRaw(); r.fields != 11 {
		t.Fatalf("flow: %d fields, want 11 (%#v)", r.fields, r.f.Body)
	}
	id, format := uint32(0), uint32(0)
	msg, err := (&goamqp.Message{Data: [][]byte{[]byte("hi")}}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	c.writeFrame(0, &amqp.Transfer{Handle: 0, DeliveryID: &id, DeliveryTag: []byte{1}, MessageFormat: &format, Payload: msg})
	r = c.readRaw()
	d, ok := r.f.Body.(*amqp.Disposition)
	if !ok || r.fields != 6 {
		t.Fatalf("disposition: %d fields (%#v), want 6", r.fields, r.f.Body)
	}
	if _, ok := d.State.(*amqp.Accepted); !ok {
		t.Fatalf("disposition state %#v, want accepted", d.State)
	}
	if n := env.ns.Stats().Totals.Send; n != 1 {
		t.Fatalf("sent %d messages through the URI address, want 1", n)
	}

	// Receive it back: the transfer carries all 11 fields, then detach 3 and
	// close 1.
	c.writeFrame(0, &amqp.Attach{Name: "r", Handle: 1, Role: amqp.RoleReceiver, RcvSettleMode: &mode,
		Source: &amqp.Source{Address: uri}, Target: &amqp.Target{Address: "client"}})
	if r := c.readRaw(); r.fields != 14 {
		t.Fatalf("receiver attach reply: %d fields (%#v), want 14", r.fields, r.f.Body)
	}
	h, credit, next := uint32(1), uint32(1), uint32(1)
	c.writeFrame(0, &amqp.Flow{NextIncomingID: &next, IncomingWindow: 100, OutgoingWindow: 100, Handle: &h, DeliveryCount: new(uint32), LinkCredit: &credit})
	for {
		r := c.readRaw()
		if tr, ok := r.f.Body.(*amqp.Transfer); ok {
			if r.fields != 11 || tr.Handle != 1 {
				t.Fatalf("transfer: %d fields on handle %d, want 11 on 1", r.fields, tr.Handle)
			}
			break
		}
	}
	c.writeFrame(0, &amqp.Detach{Handle: 1, Closed: true})
	for {
		r := c.readRaw()
		if _, ok := r.f.Body.(*amqp.Detach); ok {
			if r.fields != 3 {
				t.Fatalf("detach: %d fields, want 3", r.fields)
			}
			break
		}
	}
	c.writeFrame(0, &amqp.Close{})
	for {
		r := c.readRaw()
		if _, ok := r.f.Body.(*amqp.Close); ok {
			if r.fields != 1 {
				t.Fatalf("close: %d fields, want 1", r.fields)
			}
			break
		}
	}
}

// TestRejectedErrorIsComplete: the error of a rejected outcome carries
// condition, description and info, as the Python SDK indexes them.
func TestRejectedErrorIsComplete(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	c := dialRaw(t, env)
	c.rawHandshake("ANONYMOUS")
	c.writeFrame(0, &amqp.Begin{IncomingWindow: 100, OutgoingWindow: 100, HandleMax: 10})
	c.readRaw()
	c.writeFrame(0, &amqp.Attach{Name: "s", Handle: 0, Role: amqp.RoleSender, Source: &amqp.Source{}, Target: &amqp.Target{Address: "q1"}})
	c.readRaw() // attach
	c.readRaw() // flow
	id, format := uint32(0), uint32(0)
	c.writeFrame(0, &amqp.Transfer{Handle: 0, DeliveryID: &id, DeliveryTag: []byte{1}, MessageFormat: &format, Payload: []byte{0xff, 0x00}})
	var body []byte
	for body == nil {
		r := c.readRaw()
		if d, ok := r.f.Body.(*amqp.Disposition); ok {
			rej, ok := d.State.(*amqp.Rejected)
			if !ok || rej.Error == nil || rej.Error.Condition != "amqp:decode-error" {
				t.Fatalf("state %#v, want rejected with amqp:decode-error", d.State)
			}
			body = r.raw
		}
	}
	// The error list: 00 53 1d, then list8 size count with count 3.
	i := slices.Index(body, 0x1d)
	if i < 2 || body[i-2] != 0x00 || body[i-1] != 0x53 || body[i+1] != 0xc0 || body[i+3] != 3 {
		t.Fatalf("rejected error is not a 3-field list: % x", body)
	}
}

// TestPutTokenWithoutReplyTo: uamqp sends put-token without reply-to; the
// answer goes to the receiver attached from $cbs, as Azure does. The same
// holds for $management requests.
func TestPutTokenWithoutReplyTo(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	host := env.srv.Addr().String()
	conn, err := goamqp.Dial(ctx, "amqp://"+host, &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sess, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	rpc := func(node string, req *goamqp.Message) *goamqp.Message {
		t.Helper()
		snd, err := sess.NewSender(ctx, node, nil)
		if err != nil {
			t.Fatalf("attach sender to %s: %v", node, err)
		}
		defer snd.Close(ctx)
		rcv, err := sess.NewReceiver(ctx, node, &goamqp.ReceiverOptions{Credit: 1})
		if err != nil {
			t.Fatalf("attach receiver from %s: %v", node, err)
		}
		defer rcv.Close(ctx)
		if err := snd.Send(ctx, req, nil); err != nil {
			t.Fatalf("send to %s: %v", node, err)
		}
		resp, err := rcv.Receive(ctx, nil)
		if err != nil {
			t.Fatalf("no reply from %s: %v", node, err)
		}
		return resp
	}
	audience := "sb://" + host + "/q1"
	resp := rpc("$cbs", &goamqp.Message{
		Properties:            &goamqp.MessageProperties{MessageID: uint64(7)},
		ApplicationProperties: map[string]any{"operation": "put-token", "type": "servicebus.windows.net:sastoken", "name": audience},
		Value:                 sasToken(audience, amqpserver.DefaultKeyName, amqpserver.DefaultKey, time.Now().Add(time.Hour)),
	})
	if resp.ApplicationProperties["status-code"] != int32(202) || resp.Properties == nil || resp.Properties.CorrelationID != uint64(7) {
		t.Fatalf("put-token reply %v %+v, want 202 correlated to 7", resp.ApplicationProperties, resp.Properties)
	}
	resp = rpc("amqps://"+host+"/q1/$management", &goamqp.Message{
		Properties:            &goamqp.MessageProperties{MessageID: "peek-1"},
		ApplicationProperties: map[string]any{"operation": "com.microsoft:peek-message"},
		Value:                 map[string]any{"from-sequence-number": int64(1), "message-count": int32(1)},
	})
	if resp.ApplicationProperties["statusCode"] != int32(204) {
		t.Fatalf("peek reply %v, want 204 (empty queue)", resp.ApplicationProperties)
	}
}

// TestURIAddresses: links addressed amqps://<namespace>/<entity> (the Python
// SDK) or sb://<namespace>/<entity> reach the entity; a URI naming a missing
// entity is refused as not found, like its bare path.
func TestURIAddresses(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	sess := dialSession(t, ctx, env)
	snd, err := sess.NewSender(ctx, "amqps://example.servicebus.windows.net/q1", nil)
	if err != nil {
		t.Fatalf("sender to amqps URI: %v", err)
	}
	if err := snd.Send(ctx, &goamqp.Message{Data: [][]byte{[]byte("via uri")}}, nil); err != nil {
		t.Fatal(err)
	}
	rcv, err := sess.NewReceiver(ctx, "sb://example.servicebus.windows.net/q1/", &goamqp.ReceiverOptions{Credit: 1})
	if err != nil {
		t.Fatalf("receiver from sb URI: %v", err)
	}
	m, err := rcv.Receive(ctx, nil)
	if err != nil || string(m.GetData()) != "via uri" {
		t.Fatalf("receive through URI: %v %v", m, err)
	}
	_, err = sess.NewSender(ctx, "amqps://example.servicebus.windows.net/nope", nil)
	var ae *goamqp.Error
	if !errors.As(err, &ae) || ae.Condition != goamqp.ErrCondNotFound {
		t.Fatalf("sender to a missing entity's URI: %v, want not-found", err)
	}
}

// TestSecondCBSLink: Azure allows one $cbs sender and one $cbs receiver per
// connection and refuses another with amqp:not-allowed (the Go SDK resets the
// connection on that when a $cbs link it could not close is still open); once
// the first is detached, a new one attaches.
func TestSecondCBSLink(t *testing.T) {
	env := startEmulator(t, nil)
	ctx := testCtx(t)
	conn, err := goamqp.Dial(ctx, "amqp://"+env.srv.Addr().String(), &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s1, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, err := s1.NewSender(ctx, "$cbs", nil)
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := s1.NewReceiver(ctx, "$cbs", nil)
	if err != nil {
		t.Fatal(err)
	}
	notAllowed := func(what string, err error) {
		t.Helper()
		var ae *goamqp.Error
		if !errors.As(err, &ae) || ae.Condition != goamqp.ErrCondNotAllowed {
			t.Fatalf("%s: %v, want amqp:not-allowed", what, err)
		}
	}
	_, err = s2.NewSender(ctx, "$cbs", nil)
	notAllowed("second $cbs sender", err)
	_, err = s1.NewReceiver(ctx, "amqps://ns/$cbs", nil)
	notAllowed("second $cbs receiver", err)
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rcv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.NewSender(ctx, "$cbs", nil); err != nil {
		t.Fatalf("$cbs sender after the first closed: %v", err)
	}
	if _, err := s2.NewReceiver(ctx, "$cbs", nil); err != nil {
		t.Fatalf("$cbs receiver after the first closed: %v", err)
	}
}

// TestMessageSizeLimitOnTheWire: the link's max-message-size bounds a
// delivery's transfer payload, as on Azure: a batch of exactly 262,144 bytes
// (what an SDK that sizes batches to the byte builds at the limit) is taken, a
// byte more is rejected with amqp:link:message-size-exceeded in Azure's words,
// and the link stays usable. Raw frames: go-amqp refuses oversized sends itself.
func TestMessageSizeLimitOnTheWire(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	c := dialRaw(t, env)
	c.rawHandshake("ANONYMOUS")
	c.writeFrame(0, &amqp.Begin{IncomingWindow: 1000, OutgoingWindow: 1000, HandleMax: 10})
	c.readRaw()
	c.writeFrame(0, &amqp.Attach{Name: "s", Handle: 0, Role: amqp.RoleSender, Source: &amqp.Source{}, Target: &amqp.Target{Address: "q1"}})
	if a, ok := c.readRaw().f.Body.(*amqp.Attach); !ok || a.MaxMessageSize != 262144 {
		t.Fatalf("attach reply %#v, want max-message-size 262144", a)
	}
	c.readRaw() // flow

	// batchOf encodes a batch (one data section per message, format
	// 0x80013700) of exactly total bytes.
	batchOf := func(total int) []byte {
		t.Helper()
		enc := func(m *goamqp.Message) []byte {
			b, err := m.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		small := enc(&goamqp.Message{Data: [][]byte{[]byte("small")}})
		filler := func(n int) []byte { return enc(&goamqp.Message{Data: [][]byte{bytes.Repeat([]byte("z"), n)}}) }
		base := len(enc(&goamqp.Message{Data: [][]byte{small, filler(1000)}}))
		b := enc(&goamqp.Message{Data: [][]byte{small, filler(1000 + total - base)}})
		if len(b) != total {
			t.Fatalf("batch of %d bytes, want %d", len(b), total)
		}
		return b
	}
	format := uint32(0x80013700)
	deliver := func(id uint32, payload []byte) *amqp.Disposition {
		t.Helper()
		for first := true; len(payload) > 0; first = false {
			n := min(len(payload), 60000)
			tr := &amqp.Transfer{Handle: 0, More: n < len(payload), Payload: payload[:n]}
			if first {
				tr.DeliveryID, tr.DeliveryTag, tr.MessageFormat = &id, []byte{byte(id)}, &format
			}
			c.writeFrame(0, tr)
			payload = payload[n:]
		}
		for {
			if d, ok := c.readRaw().f.Body.(*amqp.Disposition); ok {
				return d
			}
		}
	}
	if d := deliver(0, batchOf(262144)); !isAccepted(d.State) {
		t.Fatalf("batch of exactly the limit: %#v, want accepted", d.State)
	}
	d := deliver(1, batchOf(262145))
	rej, ok := d.State.(*amqp.Rejected)
	if !ok || rej.Error == nil || rej.Error.Condition != "amqp:link:message-size-exceeded" {
		t.Fatalf("batch one byte over the limit: %#v, want rejected with amqp:link:message-size-exceeded", d.State)
	}
	// The size is the payload received when the limit was crossed: the
	// frames of 60,000 bytes put that at the fifth frame, the whole batch.
	want := "The received message (delivery-id:1, size:262145 bytes) exceeds the limit (262144 bytes) currently allowed on the link."
	if rej.Error.Description != want {
		t.Fatalf("description %q, want Azure's %q", rej.Error.Description, want)
	}
	msg, err := (&goamqp.Message{Data: [][]byte{[]byte("after")}}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	format = 0
	if d := deliver(2, msg); !isAccepted(d.State) {
		t.Fatalf("send on the same link after the refusal: %#v", d.State)
	}
	if n := env.ns.Stats().Totals.Send; n != 3 {
		t.Fatalf("broker took %d messages, want 3 (the 2 of the batch at the limit and 1 after)", n)
	}
}

func isAccepted(s amqp.DeliveryState) bool {
	_, ok := s.(*amqp.Accepted)
	return ok
}

// TestMessageNearTheLimitIsReceived: a message the SDK was allowed to send
// at nearly the size limit comes back to the SDK's receiver. The delivery is
// larger than what was sent (the broker adds annotations, a header and a lock
// token), so a receive link that advertised the send limit made go-amqp
// refuse it and close the link: 262,000 bytes were sent and never received.
func TestMessageNearTheLimitIsReceived(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "big", nil) })
	ctx := testCtx(t)
	for _, size := range []int{261_000, 262_000} {
		body := bytes.Repeat([]byte{'b'}, size)
		send(t, ctx, env.sender(t, "big"), &azservicebus.Message{Body: body})
		r := env.receiver(t, "big", nil)
		got := receiveN(t, r, 1)
		if !bytes.Equal(got[0].Body, body) {
			t.Fatalf("received %d bytes, want the %d sent", len(got[0].Body), size)
		}
		if err := r.CompleteMessage(ctx, got[0], nil); err != nil {
			t.Fatalf("complete the %d-byte message: %v", size, err)
		}
	}
}
