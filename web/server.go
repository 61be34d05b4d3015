package web

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Catalog is what the dashboard reads about the Service Bus namespace.
// *store.Store implements it.
type Catalog interface {
	EntityCount(ctx context.Context) (int, error)
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
}

// Server is the dashboard's HTTP server.
type Server struct {
	logger  *slog.Logger
	catalog Catalog
	mode    string
	ns      string
	http    *http.Server
}

// Timeouts of the underlying http.Server. There is no write timeout: later
// websocket connections live for as long as a browser keeps a page open.
const (
	ReadHeaderTimeout = 10 * time.Second
	IdleTimeout       = 120 * time.Second
)

// New builds the server; call Serve to start it.
func New(cfg Config) *Server {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{logger: logger, catalog: cfg.Catalog, mode: cfg.Mode, ns: cfg.Namespace}
	s.http = &http.Server{
		Handler:           s.routes(),
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	return s
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
