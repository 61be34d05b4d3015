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
// Beyond Microsoft's emulator it serves several namespaces from one process
// (Config.Namespaces, each its own broker on its own listeners; see
// Emulator.Server), TLS listeners (Config.TLS: AMQPS and HTTPS admin, with a
// generated certificate by default) and Entra ID style tokens for the SDKs'
// TokenCredential clients (Config.JWTKey: HS256 JWTs, checked by
// internal/jwtcheck, on $cbs and the admin API):
//
//	emu, err := emulator.Start(ctx, emulator.Config{
//		Namespaces: []emulator.NamespaceConfig{{Name: "prod-eu"}, {Name: "prod-us"}},
//		TLS:        &emulator.TLSConfig{},
//		JWTKey:     key,
//	})
//	us := emu.Server("prod-us")
//	client, err := azservicebus.NewClient(us.FullyQualifiedNamespace(), cred,
//		&azservicebus.ClientOptions{TLSConfig: emu.ClientTLSConfig()})
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
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
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

	// Namespaces, when not empty, serves several namespaces from one
	// process, each its own broker on its own pair of listeners (so a
	// client reaches one by its ports, as it reaches one Azure namespace by
	// its host). AMQPAddr, AdminAddr, Namespace and Entities above must
	// then be left empty: they describe the one namespace served without
	// Namespaces. The first entry is the default namespace of the
	// Emulator's own accessors (ConnectionString, AdminURL, ...).
	Namespaces []NamespaceConfig

	KeyName string // SAS key name clients must use; default DefaultKeyName
	Key     string // SAS key; default DefaultKey

	// AuthorizationRules are further namespace-level shared access rules
	// (every namespace of the Config has them): a key name, a primary and
	// optionally a secondary key, and rights among Manage, Send and Listen
	// (Manage needs the other two), as an Azure namespace's shared access
	// policies. KeyName/Key above has every right. A token of a rule
	// without Send cannot attach a sender, without Listen a receiver, and
	// without Manage cannot use the admin API's entity operations, each
	// refused in Azure's words.
	AuthorizationRules []broker.AuthorizationRule

	// JWTKey is the HS256 key Entra-style tokens (token type jwt on $cbs,
	// a bearer token on the admin API) must be signed with; their audience
	// must be https://servicebus.azure.net (or the namespace host) and
	// they must not have expired. Empty refuses every such token (401).
	JWTKey []byte

	// TLS, when not nil, serves AMQPS and HTTPS admin instead of plain
	// AMQP and HTTP on every listener.
	TLS *TLSConfig

	Logger *slog.Logger     // default: discard
	Now    func() time.Time // the broker's clock when it creates the namespace; default time.Now

	TickInterval      time.Duration // how often locks, TTL and schedules are checked; default 100 ms
	HeartbeatInterval time.Duration // AMQP keep-alive period; default 15 s
	MaxMessageSize    uint64        // bytes a message may have; default 262,144 as Standard tier
}

// NamespaceConfig is one namespace of Config.Namespaces.
type NamespaceConfig struct {
	// Name names the namespace (broker.Namespace.Name, logs, the
	// generated certificate): a DNS label such as prod-eu, unique in the
	// Config. Required.
	Name string
	// AMQPAddr and AdminAddr are its listen addresses; default 127.0.0.1:0.
	AMQPAddr  string
	AdminAddr string
	// Namespace is the broker to serve; nil creates one.
	Namespace *broker.Namespace
	// Entities are created before the listeners open (nil: none).
	Entities *config.Config
}

// TLSConfig configures the TLS listeners.
type TLSConfig struct {
	// Certificate is served on every listener. Nil: Start generates a
	// self-signed ECDSA P-256 certificate for localhost, 127.0.0.1, ::1
	// and each namespace name, valid for a year; Emulator.CertificatePEM
	// gives it to clients to trust.
	Certificate *tls.Certificate
}

// Emulator is a running emulator: the listeners of each namespace and the
// brokers they serve. Its accessors without a namespace name are those of
// the first (default) namespace.
type Emulator struct {
	servers []*NamespaceServer
	certPEM []byte // the served certificate chain, PEM; nil without TLS

	closeOnce sync.Once
	closeErr  error
}

// NamespaceServer is one served namespace: its AMQP and admin listeners and
// its broker.
type NamespaceServer struct {
	name      string
	tls       bool
	ns        *broker.Namespace
	amqp      *amqpserver.Server
	admin     *http.Server
	adminAddr net.Addr
	adminDone chan struct{}
}

// Start creates each namespace (or takes the given broker), applies its
// entities, and serves AMQP and admin HTTP in the background until Close.
// ctx bounds the start only.
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
	if err := checkRules(cfg.KeyName, cfg.AuthorizationRules); err != nil {
		return nil, err
	}
	nss, err := namespaceConfigs(cfg)
	if err != nil {
		return nil, err
	}
	e := &Emulator{}
	var tlsCfg *tls.Config
	if cfg.TLS != nil {
		cert := cfg.TLS.Certificate
		if cert == nil {
			hosts := []string{"localhost", "127.0.0.1", "::1"}
			for _, n := range nss {
				if n.Name != "" {
					hosts = append(hosts, n.Name)
				}
			}
			generated, err := GenerateCertificate(hosts, time.Now())
			if err != nil {
				return nil, err
			}
			cert = &generated
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12}
		e.certPEM = certificatePEM(cert)
	}
	for _, n := range nss {
		s, err := startNamespace(cfg, n, tlsCfg, logger)
		if err != nil {
			_ = e.Close()
			return nil, err
		}
		e.servers = append(e.servers, s)
	}
	return e, nil
}

// namespaceConfigs is the list of namespaces cfg asks for, checked.
func namespaceConfigs(cfg Config) ([]NamespaceConfig, error) {
	if len(cfg.Namespaces) == 0 {
		return []NamespaceConfig{{AMQPAddr: cfg.AMQPAddr, AdminAddr: cfg.AdminAddr, Namespace: cfg.Namespace, Entities: cfg.Entities}}, nil
	}
	if cfg.AMQPAddr != "" || cfg.AdminAddr != "" || cfg.Namespace != nil || cfg.Entities != nil {
		return nil, errors.New("emulator configuration: with Namespaces, give the addresses, broker and entities in each namespace, not in Config")
	}
	seen := map[string]bool{}
	for i, n := range cfg.Namespaces {
		if !ValidNamespaceName(n.Name) {
			return nil, fmt.Errorf("emulator configuration: namespace %d: name %q must be a DNS label (letters, digits and hyphens, at most 63)", i+1, n.Name)
		}
		if seen[strings.ToLower(n.Name)] {
			return nil, fmt.Errorf("emulator configuration: namespace %q is listed twice", n.Name)
		}
		seen[strings.ToLower(n.Name)] = true
	}
	return cfg.Namespaces, nil
}

// ValidNamespaceName says whether s can name a namespace: a DNS label
// (letters, digits and hyphens, at most 63, no hyphen at either end).
func ValidNamespaceName(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

func startNamespace(cfg Config, n NamespaceConfig, tlsCfg *tls.Config, logger *slog.Logger) (*NamespaceServer, error) {
	what := "the emulator's"
	if n.Name != "" {
		what = "namespace " + n.Name + "'s"
		logger = logger.With("namespace", n.Name)
	}
	ns := n.Namespace
	if ns == nil {
		ns = broker.New(broker.Options{Now: cfg.Now, Logger: logger})
	}
	if n.Entities != nil {
		if err := n.Entities.Apply(ns); err != nil {
			return nil, fmt.Errorf("emulator configuration of %s entities: %w", what, err)
		}
	}
	if n.Name != "" {
		ns.SetName(n.Name)
	}
	srv := amqpserver.New(amqpserver.Options{
		Namespace:         ns,
		KeyName:           cfg.KeyName,
		Key:               cfg.Key,
		Rules:             cfg.AuthorizationRules,
		JWTKey:            cfg.JWTKey,
		TLS:               tlsCfg,
		Logger:            logger.With("component", "emulator"),
		Now:               cfg.Now,
		MaxMessageSize:    cfg.MaxMessageSize,
		HeartbeatInterval: cfg.HeartbeatInterval,
		TickInterval:      cfg.TickInterval,
	})
	if _, err := srv.Start(orLoopback(n.AMQPAddr)); err != nil {
		return nil, fmt.Errorf("start %s AMQP endpoint: %w", what, err)
	}
	ln, err := net.Listen("tcp", orLoopback(n.AdminAddr))
	if err != nil {
		_ = srv.Close()
		return nil, fmt.Errorf("start %s admin endpoint: %w", what, err)
	}
	s := &NamespaceServer{
		name: n.Name,
		tls:  tlsCfg != nil,
		ns:   ns,
		amqp: srv,
		admin: &http.Server{
			Handler: withWebSockets(atom.NewHandler(ns, atom.Options{
				KeyName: cfg.KeyName,
				Key:     cfg.Key,
				Rules:   cfg.AuthorizationRules,
				JWTKey:  cfg.JWTKey,
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
	if tlsCfg != nil {
		s.admin.TLSConfig = tlsCfg.Clone()
		ln = tls.NewListener(ln, s.admin.TLSConfig)
	}
	go func() {
		defer close(s.adminDone)
		if err := s.admin.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("emulator admin endpoint stopped", "error", err)
		}
	}()
	logger.Info("emulator admin listening", "addr", s.adminAddr.String(), "tls", tlsCfg != nil)
	return s, nil
}

func orLoopback(addr string) string {
	if addr == "" {
		return "127.0.0.1:0"
	}
	return addr
}

// Servers are the served namespaces, in the order of Config.Namespaces
// (one, unnamed, without it).
func (e *Emulator) Servers() []*NamespaceServer { return append([]*NamespaceServer(nil), e.servers...) }

// Server is the namespace named name (case-insensitive), or nil.
func (e *Emulator) Server(name string) *NamespaceServer {
	for _, s := range e.servers {
		if strings.EqualFold(s.name, name) {
			return s
		}
	}
	return nil
}

// CertificatePEM is the certificate chain the TLS listeners serve, PEM
// encoded: for a generated certificate, what clients must trust (write it
// to a file for tls_ca_file / --tls-ca-out). Nil without TLS.
func (e *Emulator) CertificatePEM() []byte { return append([]byte(nil), e.certPEM...) }

// ClientTLSConfig is a client configuration that trusts CertificatePEM, for
// the SDKs' TLSConfig options, with ServerName localhost: go-amqp checks the
// certificate against the namespace it was given, port included
// ("127.0.0.1:5671"), which no certificate names. Nil without TLS.
func (e *Emulator) ClientTLSConfig() *tls.Config {
	if e.certPEM == nil {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(e.certPEM)
	return &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}
}

// The accessors of the default (first) namespace.

// ConnectionString is the connection string of the AMQP endpoint as
// listened on (Endpoint=sb://HOST:PORT;…;UseDevelopmentEmulator=true;,
// without the emulator flag over TLS).
func (e *Emulator) ConnectionString() string { return e.servers[0].ConnectionString() }

// AdminURL is the admin endpoint's base URL, http://HOST:PORT (https over TLS).
func (e *Emulator) AdminURL() string { return e.servers[0].AdminURL() }

// AMQPAddr and AdminAddr are the addresses the listeners bound.
func (e *Emulator) AMQPAddr() net.Addr  { return e.servers[0].AMQPAddr() }
func (e *Emulator) AdminAddr() net.Addr { return e.servers[0].AdminAddr() }

// Namespace is the broker behind both endpoints, for seeding and faults
// that have no wire form (server-busy on one entity, the clock, lock loss).
func (e *Emulator) Namespace() *broker.Namespace { return e.servers[0].Namespace() }

// DropConnections closes every AMQP connection of every namespace, over TCP
// and over WebSockets alike, with amqp:connection:forced.
func (e *Emulator) DropConnections() {
	for _, s := range e.servers {
		s.DropConnections()
	}
}

// SetLatency delays every AMQP reply and delivery of every namespace by d;
// 0 turns it off.
func (e *Emulator) SetLatency(d time.Duration) {
	for _, s := range e.servers {
		s.SetLatency(d)
	}
}

// Stats counts what the default namespace served, in total and per
// entity; see broker.Stats.
func (e *Emulator) Stats() broker.Stats { return e.servers[0].Stats() }

// ResetStats sets every counter of Stats to zero.
func (e *Emulator) ResetStats() { e.servers[0].ResetStats() }

// Name is the namespace's name ("" for the one namespace of a Config
// without Namespaces).
func (s *NamespaceServer) Name() string { return s.name }

// ConnectionString is the SAS connection string of its AMQP endpoint.
func (s *NamespaceServer) ConnectionString() string { return s.amqp.ConnectionString() }

// FullyQualifiedNamespace is what a token credential client is given
// (azservicebus.NewClient): the AMQP endpoint's host:port.
func (s *NamespaceServer) FullyQualifiedNamespace() string { return s.amqp.Addr().String() }

// AdminURL is the admin endpoint's base URL.
func (s *NamespaceServer) AdminURL() string {
	if s.tls {
		return "https://" + s.adminAddr.String()
	}
	return "http://" + s.adminAddr.String()
}

// AMQPAddr and AdminAddr are the addresses its listeners bound.
func (s *NamespaceServer) AMQPAddr() net.Addr  { return s.amqp.Addr() }
func (s *NamespaceServer) AdminAddr() net.Addr { return s.adminAddr }

// Namespace is its broker.
func (s *NamespaceServer) Namespace() *broker.Namespace { return s.ns }

// DropConnections closes its AMQP connections with amqp:connection:forced.
func (s *NamespaceServer) DropConnections() { s.amqp.DropConnections() }

// SetLatency delays its AMQP replies and deliveries by d; 0 turns it off.
func (s *NamespaceServer) SetLatency(d time.Duration) { s.amqp.SetLatency(d) }

// Stats counts what it served; see broker.Stats.
func (s *NamespaceServer) Stats() broker.Stats { return s.ns.Stats() }

// ResetStats sets every counter of Stats to zero.
func (s *NamespaceServer) ResetStats() { s.ns.ResetStats() }

// close stops its admin endpoint, then its AMQP endpoint.
func (s *NamespaceServer) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Shutdown waits for requests in flight; one that outlasts the
	// grace (a loaded machine, a client that never reads) is cut off
	// by Close, which is what stopping a server means, not an error.
	err := s.admin.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = s.admin.Close()
	}
	<-s.adminDone
	return errors.Join(err, s.amqp.Close())
}

// Close stops the admin endpoints, then the AMQP endpoints (closing every
// connection), and waits for their goroutines. The namespaces keep their
// messages and can be served again by Start. Closing twice is harmless.
func (e *Emulator) Close() error {
	e.closeOnce.Do(func() {
		var errs []error
		for _, s := range e.servers {
			errs = append(errs, s.close())
		}
		e.closeErr = errors.Join(errs...)
	})
	return e.closeErr
}

// checkRules validates Config.AuthorizationRules: each has a key name of
// its own (not KeyName's), a primary key, and rights among Manage, Send and
// Listen, Manage only with the other two (as Azure requires).
func checkRules(mainKeyName string, rules []broker.AuthorizationRule) error {
	seen := map[string]bool{strings.ToLower(mainKeyName): true}
	for i, r := range rules {
		switch {
		case r.KeyName == "":
			return fmt.Errorf("emulator authorization rule %d: a key name is required", i+1)
		case seen[strings.ToLower(r.KeyName)]:
			return fmt.Errorf("emulator authorization rule %q: the key name is used twice (or is KeyName's)", r.KeyName)
		case r.PrimaryKey == "":
			return fmt.Errorf("emulator authorization rule %q: a primary key is required", r.KeyName)
		case len(r.Rights) == 0:
			return fmt.Errorf("emulator authorization rule %q: give at least one of the rights Manage, Send, Listen", r.KeyName)
		}
		seen[strings.ToLower(r.KeyName)] = true
		for _, right := range r.Rights {
			if right != "Manage" && right != "Send" && right != "Listen" {
				return fmt.Errorf("emulator authorization rule %q: right %q is not one of Manage, Send, Listen", r.KeyName, right)
			}
		}
		if slices.Contains(r.Rights, "Manage") && (!slices.Contains(r.Rights, "Send") || !slices.Contains(r.Rights, "Listen")) {
			return fmt.Errorf("emulator authorization rule %q: the Manage right requires the Send and Listen rights", r.KeyName)
		}
	}
	return nil
}
