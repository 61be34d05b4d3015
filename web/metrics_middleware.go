package web

import (
	"bufio"
	"net"
	"net/http"
	"time"
)

// RequestObserver records how long each request took. *metrics.Metrics
// implements it.
type RequestObserver interface {
	// ObserveRequest gets the route table's pattern that matched
	// ("GET /api/v1/messages/{id}"), or "" when none did; never the path.
	ObserveRequest(method, route string, code int, elapsed time.Duration)
}

// measure is the outermost middleware: it times every request, labelled by
// the route pattern.
//
// The pattern is known only once the mux has matched, and the mux records
// it (Request.Pattern) on the request it was handed, which the middleware
// in between has replaced (WithContext). So measure asks the mux itself:
// mux.Handler(r) finds the pattern the same way ServeHTTP will, without
// serving. Every pattern it returns is one of the table's (or "" for no
// match), so the label stays bounded whatever paths clients send.
func (s *Server) measure(mux *http.ServeMux, next http.Handler) http.Handler {
	if s.observer == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, route := mux.Handler(r)
		if r.Method == http.MethodConnect {
			// CONNECT's trailing-slash redirect reports the request's own
			// path as the pattern.
			route = ""
		}
		rec := &statusRecorder{ResponseWriter: w, start: time.Now()}
		rec.observe = func(code int) { s.observer.ObserveRequest(r.Method, route, code, time.Since(rec.start)) }
		defer func() {
			// Also when a handler aborts with http.ErrAbortHandler.
			if !rec.hijacked {
				rec.observe(rec.status())
			}
		}()
		next.ServeHTTP(rec, r)
	})
}

// statusRecorder remembers the status code a handler sent. It passes
// Flush, Hijack and (through Unwrap) everything http.ResponseController
// offers on to the real writer.
type statusRecorder struct {
	http.ResponseWriter
	code     int
	start    time.Time
	hijacked bool
	observe  func(code int)
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.code == 0 && code >= 200 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusRecorder) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusRecorder) Flush() {
	http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack hands the connection over (the websocket upgrade of GET /live).
// The request is observed then, as a 101: the websocket's lifetime is not
// a request duration.
func (w *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil && !w.hijacked {
		w.hijacked = true
		w.observe(http.StatusSwitchingProtocols)
	}
	return conn, rw, err
}
