package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// The HTTP edge's limits on request bodies. The http.Server's timeouts
// (server.go) bound how long reading a request may take; this bounds how
// large its body may be.

// MaxRequestBody is the largest request body most routes take: 1 MiB holds
// an edited 256 KiB message in base64 with room to spare.
const MaxRequestBody = 1 << 20

// bodyLimit is the largest body the route of method and path takes: a
// selection by ids (100,000 of them) may be larger.
func bodyLimit(method, path string) int64 {
	if method == http.MethodPost && (path == "/api/v1/jobs" || path == "/jobs" || path == "/replays") {
		return maxJobRequest
	}
	return MaxRequestBody
}

// mebibytes words a limit for a message: "1 MiB".
func mebibytes(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// tooLargeError is a request body over its route's limit: 413.
type tooLargeError struct{ limit int64 }

func (e *tooLargeError) Error() string {
	return "the request body is larger than this endpoint takes (at most " + mebibytes(e.limit) + ")"
}

// bodyState is a request's body as limitRequest saw it; handlers' errors
// after the limit was hit are answered as the 413 it caused.
type bodyState struct {
	limit    int64
	exceeded atomic.Bool
}

type bodyStateKey struct{}

// bodyTooLarge is the 413 of a request whose body went over its limit, or
// nil.
func bodyTooLarge(ctx context.Context) error {
	if st, ok := ctx.Value(bodyStateKey{}).(*bodyState); ok && st.exceeded.Load() {
		return &tooLargeError{limit: st.limit}
	}
	return nil
}

// limitRequest caps request bodies: a declared Content-Length over the
// limit is answered 413 before anything is read, and a body that turns out
// longer (chunked) is cut off at the limit, the handler's error becoming
// the 413 (problemFor).
func (s *Server) limitRequest(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		st := &bodyState{limit: bodyLimit(r.Method, r.URL.Path)}
		r = r.WithContext(context.WithValue(r.Context(), bodyStateKey{}, st))
		if r.ContentLength > st.limit {
			st.exceeded.Store(true)
			s.refuseBody(w, r)
			return
		}
		r.Body = &limitedBody{ReadCloser: http.MaxBytesReader(w, r.Body, st.limit), st: st}
		next.ServeHTTP(w, r)
	})
}

// refuseBody answers 413 in the route's kind: JSON under /api/, the error
// page elsewhere.
func (s *Server) refuseBody(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Connection", "close") // the rest of the body is not read
	err := bodyTooLarge(r.Context())
	if strings.HasPrefix(r.URL.Path, "/api/") {
		s.serveAPIError(w, r, err)
		return
	}
	s.handle(func(http.ResponseWriter, *http.Request) error { return err }).ServeHTTP(w, r)
}

// limitedBody is a body under http.MaxBytesReader that notes going over the
// limit.
type limitedBody struct {
	io.ReadCloser
	st *bodyState
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		b.st.exceeded.Store(true)
	}
	return n, err
}
