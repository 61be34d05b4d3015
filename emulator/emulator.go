// Package emulator is a local Azure Service Bus: the namespace of package
// broker behind an AMQP 1.0 endpoint (the SDKs' data plane, written for this
// project in internal/amqpserver over the codec in package amqp) and the
// admin HTTP/ATOM endpoint of package atom (the SDKs' admin clients). The
// real azservicebus SDK connects to it with a `UseDevelopmentEmulator=true`
// connection string, exactly as it connects to Azure.
//
// Start is the one way to run it, for `dlqdash emulator`, the demo and every
// test (through package emulatortest):
//
//	emu, err := emulator.Start(ctx, emulator.Config{})   // both listeners on 127.0.0.1:0
//	if err != nil { ... }
//	defer emu.Close()
//	client, err := azservicebus.NewClientFromConnectionString(emu.ConnectionString(), nil)
//	admin, err := admin.NewClientFromConnectionString(emu.ConnectionString(), &admin.ClientOptions{...emu.AdminURL()...})
//
// The parts, each usable and tested on its own:
//
//   - broker: the namespace's semantics (entities, locks, delivery counts,
//     dead-lettering, sessions, scheduling, TTL, forwarding, rules, faults);
//   - amqp: the AMQP 1.0 codec and framing;
//   - internal/amqpserver: connections, sessions, links, $cbs and $management;
//   - atom: the admin HTTP/ATOM API, emulator stats and fault injection;
//   - internal/amqpws: AMQP over WebSockets at /$servicebus/websocket on
//     the admin listener (subprotocol AMQPWSB10), as Azure serves it on 443;
//   - config: the entity file of Microsoft's emulator (Config.json).
//
// The wire contract it implements is docs/servicebus-protocol.md.
package emulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/dlqdash/dlqdash/emulator/atom"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/config"
	"github.com/dlqdash/dlqdash/emulator/internal/amqpserver"
)

// The credentials of Microsoft's emulator connection string, used when
// Config leaves them empty.
const (
	DefaultKeyName = amqpserver.DefaultKeyName
	DefaultKey     = amqpserver.DefaultKey
)

// DefaultTickInterval is how often, without Config.TickInterval, the broker
// expires locks and TTLs and enqueues due scheduled messages.
const DefaultTickInterval = amqpserver.DefaultTickInterval

// Config says where and how the emulator listens. The zero value serves a
// new empty namespace on two free loopback ports.
type Config struct {
	// AMQPAddr and AdminAddr are the listen addresses (host:port; port 0
	// picks a free one). Default 127.0.0.1:0 each.
	AMQPAddr  string
	AdminAddr string

	// Namespace is the broker to serve; nil creates one. Passing the
	// namespace of a closed Emulator restarts it over the same messages.
	Namespace *broker.Namespace
	// Entities are created in the namespace before the listeners open
	// (nil: none).
	Entities *config.Config

	KeyName string // SAS key name clients must use; default DefaultKeyName
	Key     string // SAS key; default DefaultKey

	Logger *slog.Logger     // default: discard
	Now    func() time.Time // the broker's clock when it creates the namespace; default time.Now

	TickInterval      time.Duration // how often locks, TTL and schedules are checked; default 100 ms
	HeartbeatInterval time.Duration // AMQP keep-alive period; default 15 s
	MaxMessageSize    uint64        // bytes a message may have; default 262,144 as Standard tier
}

// Emulator is a running emulator: both listeners and the namespace they serve.
type Emulator struct {
	ns        *broker.Namespace
	amqp      *amqpserver.Server
	admin     *http.Server
	adminAddr net.Addr
	adminDone chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// Start creates the namespace (or takes cfg.Namespace), applies
// cfg.Entities, and serves AMQP and admin HTTP in the background until
// Close. ctx bounds the start only.
func Start(ctx context.Context, cfg Config) (*Emulator, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.KeyName == "" {
		cfg.KeyName = DefaultKeyName
	}
	if cfg.Key == "" {
		cfg.Key = DefaultKey
	}
	ns := cfg.Namespace
	if ns == nil {
		ns = broker.New(broker.Options{Now: cfg.Now, Logger: logger})
	}
	if cfg.Entities != nil {
		if err := cfg.Entities.Apply(ns); err != nil {
			return nil, fmt.Errorf("emulator configuration: %w", err)
		}
	}
	srv := amqpserver.New(amqpserver.Options{
		Namespace:         ns,
		KeyName:           cfg.KeyName,
		Key:               cfg.Key,
		Logger:            logger.With("component", "emulator"),
		Now:               cfg.Now,
		MaxMessageSize:    cfg.MaxMessageSize,
		HeartbeatInterval: cfg.HeartbeatInterval,
		TickInterval:      cfg.TickInterval,
	})
	if _, err := srv.Start(orLoopback(cfg.AMQPAddr)); err != nil {
		return nil, fmt.Errorf("start the emulator's AMQP endpoint: %w", err)
	}
	ln, err := net.Listen("tcp", orLoopback(cfg.AdminAddr))
	if err != nil {
		_ = srv.Close()
		return nil, fmt.Errorf("start the emulator's admin endpoint: %w", err)
	}
	e := &Emulator{
		ns:   ns,
		amqp: srv,
		admin: &http.Server{
			Handler: withWebSockets(atom.NewHandler(ns, atom.Options{
				KeyName: cfg.KeyName,
				Key:     cfg.Key,
				Logger:  logger.With("component", "emulator-admin"),
				Now:     cfg.Now,
				Faults:  srv, // drop-connections and latency under /$emulator/faults
			}), srv, logger.With("component", "emulator-websocket")),
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		},
		adminAddr: ln.Addr(),
		adminDone: make(chan struct{}),
	}
	go func() {
		defer close(e.adminDone)
		if err := e.admin.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("emulator admin endpoint stopped", "error", err)
		}
	}()
	logger.Info("emulator admin listening", "addr", ln.Addr().String())
	return e, nil
}

func orLoopback(addr string) string {
	if addr == "" {
		return "127.0.0.1:0"
	}
	return addr
}

// ConnectionString is the connection string of the AMQP endpoint as
// listened on (Endpoint=sb://HOST:PORT;…;UseDevelopmentEmulator=true;).
func (e *Emulator) ConnectionString() string { return e.amqp.ConnectionString() }

// AdminURL is the admin endpoint's base URL, http://HOST:PORT.
func (e *Emulator) AdminURL() string { return "http://" + e.adminAddr.String() }

// AMQPAddr and AdminAddr are the addresses the listeners bound.
func (e *Emulator) AMQPAddr() net.Addr  { return e.amqp.Addr() }
func (e *Emulator) AdminAddr() net.Addr { return e.adminAddr }

// Namespace is the broker behind both endpoints, for seeding and faults
// that have no wire form (server-busy on one entity, the clock, lock loss).
func (e *Emulator) Namespace() *broker.Namespace { return e.ns }

// DropConnections closes every AMQP connection with amqp:connection:forced,
// over TCP and over WebSockets alike.
func (e *Emulator) DropConnections() { e.amqp.DropConnections() }

// SetLatency delays every AMQP reply and delivery by d; 0 turns it off.
func (e *Emulator) SetLatency(d time.Duration) { e.amqp.SetLatency(d) }

// Stats counts what the emulator served, in total and per entity; see
// broker.Stats.
func (e *Emulator) Stats() broker.Stats { return e.ns.Stats() }

// ResetStats sets every counter of Stats to zero.
func (e *Emulator) ResetStats() { e.ns.ResetStats() }

// Close stops the admin endpoint, then the AMQP endpoint (closing every
// connection), and waits for their goroutines. The namespace keeps its
// messages and can be served again by Start. Closing twice is harmless.
func (e *Emulator) Close() error {
	e.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// Shutdown waits for requests in flight; one that outlasts the
		// grace (a loaded machine, a client that never reads) is cut off
		// by Close, which is what stopping a server means, not an error.
		err := e.admin.Shutdown(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			err = e.admin.Close()
		}
		<-e.adminDone
		e.closeErr = errors.Join(err, e.amqp.Close())
	})
	return e.closeErr
}
