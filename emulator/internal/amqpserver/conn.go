package amqpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/dlqdash/dlqdash/emulator/amqp"
)

const (
	// ourMaxFrameSize is advertised in open and enforced on reads.
	ourMaxFrameSize = 65536
	// ourChannelMax is sent explicitly: go-amqp lowers its own limit to ours, and the SDK
	// needs several sessions per connection.
	ourChannelMax = 65535
	// handshakeTimeout bounds everything up to and including the peer's open.
	handshakeTimeout = 10 * time.Second
	// minPeerFrameSize is the smallest max-frame-size AMQP allows.
	minPeerFrameSize = 512
	// minHeartbeat is the shortest keep-alive period a peer can ask for.
	minHeartbeat = 50 * time.Millisecond
)

// conn is one client connection. A single reader goroutine (serve) owns the protocol
// state machine; link deliverer goroutines and pending session attaches share the
// session/link state with it under mu. Nothing holds mu while calling the broker in a
// way that can block, and nothing ever writes to the socket except the writer.
type conn struct {
	s   *Server
	nc  net.Conn
	log *slog.Logger
	w   *writer

	ctx    context.Context // cancelled when the connection ends
	cancel context.CancelFunc

	mu            sync.Mutex
	sessions      map[uint16]*session // by the client's channel (we use the same number)
	peerMaxFrame  uint32
	peerIdle      time.Duration
	closing       bool    // a close has been queued; ignore further frames
	writerRunning bool    // the writer goroutine owns the socket
	grants        []grant // accepted put-tokens: rights per audience (rights.go)

	wg sync.WaitGroup // deliverers and pending attaches
}

func newConn(s *Server, nc net.Conn) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{
		s:            s,
		nc:           nc,
		log:          s.log.With("remote", nc.RemoteAddr().String()),
		ctx:          ctx,
		cancel:       cancel,
		sessions:     map[uint16]*session{},
		peerMaxFrame: ourMaxFrameSize,
	}
	c.w = newWriter(c, nc)
	return c
}

// connError is a protocol error that closes the connection with an AMQP close.
type connError struct{ e *amqp.Error }

func (e *connError) Error() string { return e.e.Error() }

func protoErr(cond amqp.Symbol, format string, args ...any) error {
	return &connError{&amqp.Error{Condition: cond, Description: fmt.Sprintf(format, args...)}}
}

// serve runs the connection until it ends, then tears down every goroutine it started.
func (c *conn) serve() {
	writerStarted := false
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("emulator: panic in connection", "panic", r, "stack", string(debug.Stack()))
			c.shutdownWith(&amqp.Error{Condition: condInternalError, Description: "internal error"})
		}
		c.cancel()
		c.teardownSessions()
		if writerStarted {
			c.w.close(nil)
			<-c.w.done
		} else {
			c.nc.Close()
		}
		c.wg.Wait()
	}()

	// One FrameReader for the whole connection: it buffers, so the protocol headers
	// must be read through it too.
	fr := amqp.NewFrameReader(c.nc)
	if err := c.handshake(fr); err != nil {
		if !errors.Is(err, io.EOF) {
			c.log.Debug("emulator: handshake failed", "error", err)
		}
		return
	}
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	writerStarted = true
	c.writerRunning = true
	c.mu.Unlock()
	go c.w.run(c.s.opts.HeartbeatInterval)

	fr.SetMaxFrameSize(ourMaxFrameSize)
	if err := c.open(fr); err != nil {
		c.failWith(err)
		return
	}
	for {
		if d := c.readDeadline(); d > 0 {
			_ = c.nc.SetReadDeadline(time.Now().Add(d))
		}
		f, err := fr.ReadFrame()
		if err != nil {
			c.failWith(err)
			return
		}
		if err := c.handleFrame(f); err != nil {
			if errors.Is(err, errConnClosedByPeer) {
				return
			}
			c.failWith(err)
			return
		}
	}
}

var errConnClosedByPeer = errors.New("connection closed by peer")

// readDeadline: a peer that sends nothing for twice the idle time-out (its own or
// ours, whichever is longer) is dead.
func (c *conn) readDeadline() time.Duration {
	c.mu.Lock()
	peer := c.peerIdle
	c.mu.Unlock()
	d := 2 * c.ourIdleTimeout()
	if 2*peer > d {
		d = 2 * peer
	}
	return d
}

// ourIdleTimeout is advertised in open; the client then sends keep-alives every half of it.
func (c *conn) ourIdleTimeout() time.Duration { return 4 * c.s.opts.HeartbeatInterval }

// failWith closes the connection after a read or protocol error.
func (c *conn) failWith(err error) {
	var ce *connError
	switch {
	case errors.As(err, &ce):
		c.log.Info("emulator: closing connection", "condition", string(ce.e.Condition), "error", ce.e.Description)
		c.shutdownWith(ce.e)
	case errors.Is(err, amqp.ErrFrameTooLarge):
		c.log.Info("emulator: closing connection", "error", err)
		c.shutdownWith(&amqp.Error{Condition: condFramingError, Description: err.Error()})
	case errors.Is(err, amqp.ErrMalformed):
		c.log.Info("emulator: closing connection", "error", err)
		c.shutdownWith(&amqp.Error{Condition: condDecodeError, Description: err.Error()})
	default:
		// I/O error, EOF, deadline: nothing to say to the peer.
		if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
			c.log.Debug("emulator: connection read ended", "error", err)
		}
		c.w.close(nil)
	}
}

// shutdown closes the connection from outside the reader goroutine (Server.Close,
// DropConnections). e may be nil for a plain close.
func (c *conn) shutdown(e *amqp.Error) {
	c.mu.Lock()
	if !c.writerRunning {
		// Still in the handshake: nothing to say, just unblock the reader.
		c.closing = true
		c.mu.Unlock()
		c.nc.Close()
		return
	}
	c.mu.Unlock()
	c.shutdownWith(e)
}

func (c *conn) shutdownWith(e *amqp.Error) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		c.w.close(nil)
		return
	}
	c.closing = true
	c.mu.Unlock()
	c.w.close(&amqp.Frame{Type: amqp.FrameTypeAMQP, Body: &amqp.Close{Error: e}})
}

// handshake performs the protocol headers and SASL (ANONYMOUS or MSSBCBS), leaving the
// reader at the AMQP frames.
func (c *conn) handshake(fr *amqp.FrameReader) error {
	_ = c.nc.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.nc.SetDeadline(time.Time{})

	proto, err := fr.ReadProtocolHeader()
	if err != nil {
		// Bad header: answer with the header we do speak, then hang up (AMQP 2.2).
		_, _ = c.nc.Write(amqp.ProtocolHeader(amqp.ProtoSASL))
		return fmt.Errorf("protocol header: %w", err)
	}
	switch proto {
	case amqp.ProtoSASL:
		if _, err := c.nc.Write(amqp.ProtocolHeader(amqp.ProtoSASL)); err != nil {
			return fmt.Errorf("write sasl header: %w", err)
		}
		if err := c.sasl(fr); err != nil {
			return err
		}
		proto, err = fr.ReadProtocolHeader()
		if err != nil {
			_, _ = c.nc.Write(amqp.ProtocolHeader(amqp.ProtoAMQP))
			return fmt.Errorf("protocol header after sasl: %w", err)
		}
		if proto != amqp.ProtoAMQP {
			_, _ = c.nc.Write(amqp.ProtocolHeader(amqp.ProtoAMQP))
			return fmt.Errorf("protocol id %d after sasl", proto)
		}
	case amqp.ProtoAMQP:
		// [choice] plain AMQP without SASL is accepted too; authorisation is CBS only anyway.
	default:
		_, _ = c.nc.Write(amqp.ProtocolHeader(amqp.ProtoSASL))
		return fmt.Errorf("unsupported protocol id %d", proto)
	}
	if _, err := c.nc.Write(amqp.ProtocolHeader(amqp.ProtoAMQP)); err != nil {
		return fmt.Errorf("write amqp header: %w", err)
	}
	return nil
}

// saslMechanisms are the mechanisms offered, both meaning "authorise later over $cbs":
// MSSBCBS is Service Bus's own, which uamqp (the AMQP stack of the Python SDK up to
// 7.8) insists on; every other SDK picks ANONYMOUS.
var saslMechanisms = []amqp.Symbol{"MSSBCBS", "ANONYMOUS"}

func (c *conn) sasl(fr *amqp.FrameReader) error {
	fr.SetMaxFrameSize(minPeerFrameSize * 8)
	out, err := amqp.AppendFrame(nil, amqp.Frame{Type: amqp.FrameTypeSASL, Body: &amqp.SASLMechanisms{
		Mechanisms: saslMechanisms,
	}})
	if err != nil {
		return fmt.Errorf("encode sasl-mechanisms: %w", err)
	}
	if _, err := c.nc.Write(out); err != nil {
		return fmt.Errorf("write sasl-mechanisms: %w", err)
	}
	f, err := fr.ReadFrame()
	if err != nil {
		return fmt.Errorf("read sasl-init: %w", err)
	}
	init, ok := f.Body.(*amqp.SASLInit)
	code := uint8(0)
	if !ok || !slices.Contains(saslMechanisms, init.Mechanism) {
		code = 1 // auth failure
	}
	out, err = amqp.AppendFrame(nil, amqp.Frame{Type: amqp.FrameTypeSASL, Body: &amqp.SASLOutcome{Code: code}})
	if err != nil {
		return fmt.Errorf("encode sasl-outcome: %w", err)
	}
	if _, err := c.nc.Write(out); err != nil {
		return fmt.Errorf("write sasl-outcome: %w", err)
	}
	if code != 0 {
		return fmt.Errorf("sasl: unsupported mechanism or frame %s", describeBody(f.Body))
	}
	return nil
}

// open reads the peer's open and answers it.
func (c *conn) open(fr *amqp.FrameReader) error {
	_ = c.nc.SetReadDeadline(time.Now().Add(handshakeTimeout))
	f, err := fr.ReadFrame()
	if err != nil {
		return err
	}
	o, ok := f.Body.(*amqp.Open)
	if !ok {
		return protoErr(condNotAllowed, "expected open, got %s", describeBody(f.Body))
	}
	c.mu.Lock()
	c.peerMaxFrame = o.MaxFrameSize
	if c.peerMaxFrame < minPeerFrameSize {
		c.mu.Unlock()
		return protoErr(condFrameSizeTooSmall, "max-frame-size %d is below 512", o.MaxFrameSize)
	}
	c.peerIdle = o.IdleTimeout
	c.mu.Unlock()
	if hb := c.s.opts.HeartbeatInterval; o.IdleTimeout > 0 && o.IdleTimeout/2 < hb {
		// The peer wants traffic more often than our default: every half of its time-out,
		// with a floor so a silly value cannot make us spin.
		c.w.setHeartbeat(max(o.IdleTimeout/2, minHeartbeat))
	}
	c.w.send(amqp.Frame{Type: amqp.FrameTypeAMQP, Body: &amqp.Open{
		ContainerID:  "dlqdash-emulator-" + randomHex(8),
		Hostname:     o.Hostname,
		MaxFrameSize: ourMaxFrameSize,
		ChannelMax:   ourChannelMax,
		IdleTimeout:  c.ourIdleTimeout(),
		Properties:   map[amqp.Symbol]any{"product": "dlqdash-emulator"},
	}})
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// handleFrame dispatches one frame read after open.
func (c *conn) handleFrame(f amqp.Frame) error {
	if f.Type != amqp.FrameTypeAMQP {
		return protoErr(condNotAllowed, "unexpected frame type %d", f.Type)
	}
	if f.Body == nil {
		return nil // keep-alive
	}
	c.mu.Lock()
	closing := c.closing
	c.mu.Unlock()
	if closing {
		// We have sent close; only the peer's close matters now.
		if _, ok := f.Body.(*amqp.Close); ok {
			return errConnClosedByPeer
		}
		return nil
	}
	switch b := f.Body.(type) {
	case *amqp.Open:
		return protoErr(condNotAllowed, "second open")
	case *amqp.Close:
		if b.Error != nil {
			c.log.Debug("emulator: peer closed with error", "condition", string(b.Error.Condition), "error", b.Error.Description)
		}
		c.mu.Lock()
		c.closing = true
		c.mu.Unlock()
		c.w.close(&amqp.Frame{Type: amqp.FrameTypeAMQP, Body: &amqp.Close{}})
		return errConnClosedByPeer
	case *amqp.Begin:
		return c.handleBegin(f.Channel, b)
	}
	c.mu.Lock()
	sess := c.sessions[f.Channel]
	c.mu.Unlock()
	if sess == nil {
		return protoErr(condNotAllowed, "%s on channel %d without a session", describeBody(f.Body), f.Channel)
	}
	switch b := f.Body.(type) {
	case *amqp.End:
		return sess.handleEnd(b)
	case *amqp.Attach:
		return sess.handleAttach(b)
	case *amqp.Flow:
		return sess.handleFlow(b)
	case *amqp.Transfer:
		return sess.handleTransfer(b)
	case *amqp.Disposition:
		return sess.handleDisposition(b)
	case *amqp.Detach:
		return sess.handleDetach(b)
	default:
		return protoErr(condNotImplemented, "unexpected %s", describeBody(f.Body))
	}
}

func (c *conn) handleBegin(ch uint16, b *amqp.Begin) error {
	if b.RemoteChannel != nil {
		return protoErr(condNotAllowed, "begin with remote-channel: the emulator never begins sessions")
	}
	c.mu.Lock()
	if _, dup := c.sessions[ch]; dup {
		c.mu.Unlock()
		return protoErr(condNotAllowed, "begin on channel %d which already has a session", ch)
	}
	s := newSession(c, ch, b)
	c.sessions[ch] = s
	remote := ch
	c.send(ch, &amqp.Begin{
		RemoteChannel:  &remote,
		NextOutgoingID: s.nextOutgoingID,
		IncomingWindow: sessionIncomingWindow,
		OutgoingWindow: sessionOutgoingWindow,
		HandleMax:      ^uint32(0) - 1,
	})
	c.mu.Unlock()
	return nil
}

// send queues a frame on a channel. Callers hold mu when ordering matters.
func (c *conn) send(ch uint16, body any) {
	c.w.send(amqp.Frame{Type: amqp.FrameTypeAMQP, Channel: ch, Body: body})
}

// teardownSessions forgets every session when the connection ends: consumers are
// closed (releasing session locks), deliverers stop. Message locks survive.
func (c *conn) teardownSessions() {
	c.mu.Lock()
	sessions := make([]*session, 0, len(c.sessions))
	for _, s := range c.sessions {
		sessions = append(sessions, s)
	}
	c.sessions = map[uint16]*session{}
	c.mu.Unlock()
	for _, s := range sessions {
		s.endLinks()
	}
}

func describeBody(b any) string {
	switch b.(type) {
	case nil:
		return "empty frame"
	case *amqp.Open:
		return "open"
	case *amqp.Begin:
		return "begin"
	case *amqp.Attach:
		return "attach"
	case *amqp.Flow:
		return "flow"
	case *amqp.Transfer:
		return "transfer"
	case *amqp.Disposition:
		return "disposition"
	case *amqp.Detach:
		return "detach"
	case *amqp.End:
		return "end"
	case *amqp.Close:
		return "close"
	case *amqp.SASLMechanisms, *amqp.SASLInit, *amqp.SASLChallenge, *amqp.SASLResponse, *amqp.SASLOutcome:
		return "sasl frame"
	default:
		return fmt.Sprintf("%T", b)
	}
}
