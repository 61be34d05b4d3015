package web

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"time"

	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/dlq"
)

// Catalog is what the dashboard reads about the Service Bus namespace.
// *store.Store implements it. Errors that mean "no such message" have a
// NotFound() bool method returning true; errors about an input (a cursor
// the catalog did not issue, say) have an InvalidParameter() string method
// naming it.
type Catalog interface {
	// ListEntities returns every entity, deleted ones included (DeletedAt set).
	ListEntities(ctx context.Context) ([]dlq.EntitySummary, error)
	// ListGroups returns every failure group with its counters.
	ListGroups(ctx context.Context) ([]dlq.GroupSummary, error)
	// DepthSeries is the namespace's dead-letter depth over a window, in
	// buckets, for the overview's chart.
	DepthSeries(ctx context.Context, since, until time.Time, buckets int) (dlq.DepthSeries, error)
	// MessagesByID returns those of ids that match f, newest first, without
	// bodies: which new messages belong on a live message list.
	MessagesByID(ctx context.Context, ids []int64, f dlq.Filter) ([]dlq.Record, error)
	// ListMessages returns a page of the messages matching f, newest first,
	// without bodies, and the cursor of the next page ("" after the last).
	ListMessages(ctx context.Context, f dlq.Filter, limit int, cursor string) ([]dlq.Record, string, error)
	// GetMessage returns one message with its body.
	GetMessage(ctx context.Context, id int64) (dlq.Record, error)
	// MessageBody returns a message's body and content type (nil if unset).
	MessageBody(ctx context.Context, id int64) ([]byte, *string, error)
	// CountMessages counts the messages matching f, up to max.
	CountMessages(ctx context.Context, f dlq.Filter, max int64) (int64, error)
	// ListWaiting returns a page of the present deferred (oldest first) or
	// scheduled (soonest due first) messages, and the next page's cursor.
	ListWaiting(ctx context.Context, state dlq.State, limit int, cursor string) ([]dlq.Record, string, error)
}

// StatusSource reports the catalog's freshness: the ingester implements it.
type StatusSource interface {
	Status() dlq.Status
}

// Config is what New needs.
type Config struct {
	Logger  *slog.Logger
	Catalog Catalog
	// Mode is "demo" or "serve"; the overview page words its notices by it.
	Mode string
	// Namespace is the Service Bus host from the connection string, if any.
	// Never the connection string itself.
	Namespace string
	// Namespaces are the configured namespaces' names, in order. With more
	// than one, the pages show a namespace column and filter (with one,
	// they look as they did before namespaces).
	Namespaces []string
	// Status reports the ingester's freshness; nil when nothing reads a
	// namespace (GET /api/v1/status then says the catalog is not running).
	Status StatusSource
	// Replica is this replica's id (--replica-id): GET /api/v1/status
	// says which replica answered.
	Replica string
	// OrphanAfter is how long a message may stay deferred before the
	// inventory flags it as an orphan; 0 means DefaultOrphanAfter.
	OrphanAfter time.Duration
	// Audit is the audit trail GET /api/v1/audit lists; nil answers 404.
	Audit AuditSource
	// Jobs is the replay engine; nil (or a nil pointer) answers the job
	// endpoints and pages with 404, and the message list's replay buttons
	// stay disabled.
	Jobs Jobs
	// Hub sends live updates to GET /live; nil means no live updates (the
	// endpoint answers 404). The caller runs it; New registers its Close to
	// run on Shutdown.
	Hub *Hub
	// Metrics, if set, records every request's duration by route pattern
	// (metrics_middleware.go).
	Metrics RequestObserver
	// MetricsHandler, if set, serves GET /metrics on this server; nil when
	// metrics have a listener of their own (the route then answers 404).
	MetricsHandler http.Handler

	// Auth identifies requests (perm.go); nil means sign-in is off and
	// every request is the local user, an admin, as with auth.ModeNone.
	Auth *auth.Authenticator
	// ProxyHeaders name the identity headers of auth.ModeProxy; zero
	// means DefaultProxyHeaders.
	ProxyHeaders ProxyHeaders
	// SignIn runs the OpenID Connect sign-in behind GET /login and GET
	// /auth/callback; nil answers them with 404.
	SignIn SignIn
	// AuditLog records sign-ins, sign-outs and refused requests; nil
	// records nothing.
	AuditLog AuditLog
	// Access limits roles to namespaces (the config file's access rules);
	// without rules every identity has its role in every namespace.
	Access auth.Policy
	// HideBodiesFromViewers keeps message bodies (and their previews)
	// from the viewer role: the body download answers 403 and the
	// message page says the body is hidden.
	HideBodiesFromViewers bool

	// Triage changes failure groups' triage (PATCH /api/v1/groups/{key},
	// the group page's form); nil uses Catalog when it implements
	// GroupTriage, else those answer 404.
	Triage GroupTriage
	// Alerts manages the alert webhooks (the Alerts pages); nil answers
	// them with 404 and leaves them out of the navigation.
	Alerts Alerts
	// PublicURL is the dashboard's external base URL (--public-url): alert
	// links use it; without it a webhook added on the Alerts page links to
	// the origin of the page it was added on.
	PublicURL string

	// AllowedHosts are the host names (Host header, port ignored) the
	// dashboard answers; others get 421 (hosts.go). Empty, or AnyHost
	// among them, answers every name.
	AllowedHosts []string
}

// Server is the dashboard's HTTP server.
type Server struct {
	logger  *slog.Logger
	catalog Catalog
	status  StatusSource
	mode    string
	ns      string
	// namespaces are Config.Namespaces.
	namespaces []string
	// replica is Config.Replica.
	replica string

	orphanAfter time.Duration
	audit       AuditSource
	jobs        Jobs
	hub         *Hub
	http        *http.Server

	observer       RequestObserver
	metricsHandler http.Handler
	auth           *auth.Authenticator
	proxyHeaders   ProxyHeaders
	signIn         SignIn
	auditLog       AuditLog
	hideBodies     bool
	// access is Config.Access (access.go).
	access auth.Policy
	// livePing is how often a websocket is pinged (and its credentials
	// checked again): pingPeriod; tests shorten it.
	livePing time.Duration
	// guard counts and throttles authentication failures and limits the
	// audit of denied requests (authguard.go).
	guard *authGuard
	// allowedHosts is Config.AllowedHosts normalized; nil allows any.
	allowedHosts map[string]bool
	triage       GroupTriage
	alerts       Alerts
	publicURL    string
}

// Limits of the underlying http.Server (the metrics listener's too), against
// clients that connect and then send slowly or too much.
//
// ReadHeaderTimeout bounds the request line and headers, ReadTimeout the
// whole request with its body. net/http lifts the read deadline once the
// request is read (when the handler starts, or at the end of its body), so
// ReadTimeout never cuts off a long answer, and gorilla/websocket clears
// the deadlines of the connection it hijacks (GET /live has deadlines of
// its own per frame, live.go). There is no WriteTimeout: it runs from the
// end of the request's headers to the end of the answer, so it would cut
// off answers that are long by nature (a large body download over a slow
// link, a dry run over many messages, a page while Service Bus is slow).
// IdleTimeout closes kept-alive connections left unused; request bodies
// are capped by route (limits.go).
const (
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = 30 * time.Second
	IdleTimeout       = 120 * time.Second
	MaxHeaderBytes    = 64 << 10
)

// New builds the server; call Serve to start it.
func New(cfg Config) *Server {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{logger: logger, catalog: cfg.Catalog, status: cfg.Status, mode: cfg.Mode, ns: cfg.Namespace, hub: cfg.Hub,
		namespaces: cfg.Namespaces, replica: cfg.Replica}
	s.orphanAfter = cfg.OrphanAfter
	if !isNil(cfg.Audit) {
		s.audit = cfg.Audit
	}
	if !isNil(cfg.Jobs) {
		s.jobs = cfg.Jobs
	}
	if s.orphanAfter <= 0 {
		s.orphanAfter = DefaultOrphanAfter
	}
	if !isNil(cfg.Metrics) {
		s.observer = cfg.Metrics
	}
	s.metricsHandler = cfg.MetricsHandler
	s.guard = newAuthGuard(s.observer)
	s.auth, s.hideBodies, s.livePing = cfg.Auth, cfg.HideBodiesFromViewers, pingPeriod
	s.access = cfg.Access
	if !isNil(cfg.SignIn) {
		s.signIn = cfg.SignIn
	}
	if !isNil(cfg.AuditLog) {
		s.auditLog = cfg.AuditLog
	}
	s.proxyHeaders = cfg.ProxyHeaders
	if s.proxyHeaders == (ProxyHeaders{}) {
		s.proxyHeaders = DefaultProxyHeaders
	}
	s.allowedHosts = hostSet(cfg.AllowedHosts)
	if !isNil(cfg.Triage) {
		s.triage = cfg.Triage
	} else if t, ok := cfg.Catalog.(GroupTriage); ok && !isNil(t) {
		s.triage = t
	}
	if !isNil(cfg.Alerts) {
		s.alerts = cfg.Alerts
	}
	s.publicURL = cfg.PublicURL
	s.http = &http.Server{
		Handler:           s.routes(),
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	if s.hub != nil {
		// Shutdown does not wait for hijacked connections: end them.
		s.http.RegisterOnShutdown(s.hub.Close)
	}
	return s
}

// isNil reports whether v is nil or a nil pointer in an interface (a
// *replay.Engine that was never built, say): either means "not running".
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// Handler is the complete handler with all middleware, for tests and embedding.
func (s *Server) Handler() http.Handler { return s.http.Handler }

// Serve accepts connections on ln until Shutdown; it returns nil after a
// clean Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	err := s.http.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting connections and waits for active requests until
// ctx ends, then closes whatever is left.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.http.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, s.http.Close())
	}
	return err
}

// RegisterOnShutdown registers f to run when Shutdown begins (for example to
// close websockets, which Shutdown does not wait for).
func (s *Server) RegisterOnShutdown(f func()) { s.http.RegisterOnShutdown(f) }
