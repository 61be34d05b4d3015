package amqpserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlqdash/dlqdash/emulator/amqp"
	"github.com/dlqdash/dlqdash/emulator/broker"
)

// Default option values.
const (
	DefaultKeyName           = "RootManageSharedAccessKey"
	DefaultKey               = "SAS_KEY_VALUE"
	DefaultMaxMessageSize    = 262144
	DefaultHeartbeatInterval = 15 * time.Second
	DefaultTickInterval      = 100 * time.Millisecond

	// closeGrace is how long Close lets connections flush their close frame.
	closeGrace = 2 * time.Second
)

// Options configure a Server. The zero value is usable.
type Options struct {
	Namespace *broker.Namespace // nil → a fresh broker.New
	KeyName   string            // default "RootManageSharedAccessKey"
	Key       string            // default "SAS_KEY_VALUE"
	// Rules are further namespace-level shared access rules, each a key
	// name with a primary (and optionally a secondary) key and its rights
	// (Manage, Send, Listen). KeyName/Key has every right. A connection
	// that put a token of a rule without Send (Listen) for an entity cannot
	// attach a sender (receiver) to it.
	Rules             []broker.AuthorizationRule
	Logger            *slog.Logger     // default discard
	Now               func() time.Time // default time.Now
	MaxMessageSize    uint64           // default 262144 (advertised on sender attaches, enforced)
	HeartbeatInterval time.Duration    // default 15s
	TickInterval      time.Duration    // broker Tick period, default 100ms
	// JWTKey checks the HS256 signature of Entra-style (jwt) CBS tokens;
	// empty refuses every jwt token.
	JWTKey []byte
	// TLS, when set, makes the listener AMQPS: every connection starts
	// with a TLS handshake. The connection string then has no
	// UseDevelopmentEmulator=true, which would make the SDK dial plain TCP.
	TLS *tls.Config
}

// Server is the AMQP 1.0 front end of the emulator. Create it with New, then Start it.
type Server struct {
	opts Options
	ns   *broker.Namespace
	log  *slog.Logger

	latency  atomic.Int64    // time.Duration added before every reply and delivery
	accepted [2]atomic.Int64 // connections served, by Transport

	mu       sync.Mutex
	ln       net.Listener
	connStr  string
	conns    map[*conn]struct{}
	closed   bool
	stopTick context.CancelFunc

	wg sync.WaitGroup // accept loop, ticker, every connection
}

// New returns a Server that is not yet listening.
func New(o Options) *Server {
	if o.KeyName == "" {
		o.KeyName = DefaultKeyName
	}
	if o.Key == "" {
		o.Key = DefaultKey
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxMessageSize == 0 {
		o.MaxMessageSize = DefaultMaxMessageSize
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if o.TickInterval <= 0 {
		o.TickInterval = DefaultTickInterval
	}
	ns := o.Namespace
	if ns == nil {
		ns = broker.New(broker.Options{Now: o.Now, Logger: o.Logger})
	}
	return &Server{opts: o, ns: ns, log: o.Logger, conns: map[*conn]struct{}{}}
}

// Start listens on addr ("127.0.0.1:0" picks a free port), serves connections in the
// background and runs the broker ticker. It returns the connection string for the SDK.
func (s *Server) Start(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("emulator: listen %s: %w", addr, err)
	}
	emulatorFlag := "UseDevelopmentEmulator=true;"
	if s.opts.TLS != nil {
		ln = tls.NewListener(ln, s.opts.TLS)
		emulatorFlag = ""
	}
	s.mu.Lock()
	if s.closed || s.ln != nil {
		s.mu.Unlock()
		ln.Close()
		return "", errors.New("emulator: server already started or closed")
	}
	s.ln = ln
	s.connStr = fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=%s;SharedAccessKey=%s;%s",
		ln.Addr().String(), s.opts.KeyName, s.opts.Key, emulatorFlag)
	ctx, cancel := context.WithCancel(context.Background())
	s.stopTick = cancel
	s.mu.Unlock()

	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		s.ns.Run(ctx, s.opts.TickInterval)
	}()
	go func() {
		defer s.wg.Done()
		s.acceptLoop(ln)
	}()
	s.log.Info("emulator listening", "addr", ln.Addr().String())
	return s.connStr, nil
}

// Addr is the listening address, or nil before Start.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// ConnectionString is the connection string for the SDK (valid after Start).
func (s *Server) ConnectionString() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connStr
}

// Namespace is the broker behind the server.
func (s *Server) Namespace() *broker.Namespace { return s.ns }

// Stats is a snapshot of the operations the emulator served (see Server.Stats).
type Stats = broker.Stats

// OpCounts are the operation counters of Stats, in total or for one entity.
type OpCounts = broker.OpCounts

// ManagementOpCounts split OpCounts.Management by $management operation.
type ManagementOpCounts = broker.ManagementOpCounts

// Stats returns the operations served since the namespace was created or last reset,
// in total and per entity path as addressed (lower-cased): $management peek requests
// and the messages they returned, messages delivered on receive links or by
// receive-by-sequence-number, messages accepted (send links and schedule-message),
// settlements (complete, abandon, defer, dead-letter; by disposition or $management),
// every $management request (also by operation), and admin HTTP requests when an
// admin handler (package atom) serves the same namespace. For example
// srv.Stats().Totals.Peek, or srv.Stats().Entity("orders/$DeadLetterQueue").Peek.
func (s *Server) Stats() Stats { return s.ns.Stats() }

// ResetStats sets every operation counter to zero.
func (s *Server) ResetStats() { s.ns.ResetStats() }

// Close stops the listener and the ticker, closes every connection and waits for
// every goroutine the server started.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	ln := s.ln
	stop := s.stopTick
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()

	var err error
	if ln != nil {
		err = ln.Close()
	}
	if stop != nil {
		stop()
	}
	for _, c := range conns {
		c.shutdown(nil)
	}
	// A peer that does not read could keep the final flush blocked for writeTimeout;
	// after a grace period the sockets are closed regardless.
	force := time.AfterFunc(closeGrace, func() {
		for _, c := range conns {
			c.nc.Close()
		}
	})
	s.wg.Wait()
	force.Stop()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// DropConnections sends close{amqp:connection:forced} to every open connection and
// closes it. The SDK recovers by reconnecting.
func (s *Server) DropConnections() {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.shutdown(&amqp.Error{Condition: condConnectionForced, Description: "connection dropped by the emulator (fault injection)"})
	}
}

// SetLatency delays every reply and delivery by d (0 turns it off).
func (s *Server) SetLatency(d time.Duration) {
	if d < 0 {
		d = 0
	}
	s.latency.Store(int64(d))
}

func (s *Server) acceptLoop(ln net.Listener) {
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Temporary failures (EMFILE...): back off a little rather than spin.
			if delay == 0 {
				delay = 5 * time.Millisecond
			} else if delay < time.Second {
				delay *= 2
			}
			s.log.Warn("emulator accept failed", "error", err)
			time.Sleep(delay)
			continue
		}
		delay = 0
		c, ok := s.track(nc, TransportTCP)
		if !ok {
			continue
		}
		go func() {
			defer s.wg.Done()
			s.run(c)
		}()
	}
}

// Transport names how a connection reached the server, for ConnCounts.
type Transport int

const (
	// TransportTCP is a connection accepted on the server's own listener.
	TransportTCP Transport = iota
	// TransportWebSocket is a connection handed to ServeConn by the
	// AMQP-over-WebSockets endpoint.
	TransportWebSocket
)

// ConnCounts are the connections the server accepted since it was created,
// by transport, and how many of them are open now.
type ConnCounts struct {
	TCP       int64 `json:"tcp"`
	WebSocket int64 `json:"websocket"`
	Open      int64 `json:"open"`
}

// Connections counts the connections served so far, by transport.
func (s *Server) Connections() ConnCounts {
	s.mu.Lock()
	open := int64(len(s.conns))
	s.mu.Unlock()
	return ConnCounts{TCP: s.accepted[TransportTCP].Load(), WebSocket: s.accepted[TransportWebSocket].Load(), Open: open}
}

// ErrServerClosed is returned by ServeConn once Close has begun.
var ErrServerClosed = errors.New("emulator: server closed")

// ServeConn serves one AMQP connection that reached the emulator some other
// way than its TCP listener (AMQP over WebSockets: nc carries the AMQP
// bytes), exactly as an accepted TCP connection: the same handshake, faults
// (DropConnections, SetLatency), stats and Close. It blocks until the
// connection ends and always closes nc. The server must have been started.
func (s *Server) ServeConn(nc net.Conn, t Transport) error {
	c, ok := s.track(nc, t)
	if !ok {
		return ErrServerClosed
	}
	defer s.wg.Done()
	s.run(c)
	return nil
}

// track registers a new connection and adds it to s.wg, or closes nc and
// reports false when the server is closed (or not started).
func (s *Server) track(nc net.Conn, t Transport) (*conn, bool) {
	c := newConn(s, nc)
	s.mu.Lock()
	if s.closed || s.ln == nil {
		s.mu.Unlock()
		nc.Close()
		return nil, false
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	s.accepted[t].Add(1)
	return c, true
}

// run serves c until it ends and forgets it.
func (s *Server) run(c *conn) {
	c.serve()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}
