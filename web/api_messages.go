package web

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/web/apijson"
)

// Page sizes of GET /api/v1/messages (docs/api.md).
const (
	defaultMessageLimit = 50
	maxMessageLimit     = 500
)

// parseFilter reads the message list's filter parameters (dlq's one
// parser of them): the API's rules, or a form's for a page's query.
func parseFilter(q *query) (dlq.Filter, error) {
	q.mark(dlq.FilterKeys()...)
	if q.form {
		return dlq.ParseFilterForm(q.values)
	}
	return dlq.ParseFilterQuery(q.values)
}

// listMessages answers GET /api/v1/messages: a page of the messages matching
// the filters, newest first, without bodies.
func (s *Server) listMessages(w http.ResponseWriter, r *http.Request) error {
	q, err := newQuery(r)
	if err != nil {
		return err
	}
	f, err := parseFilter(q)
	if err != nil {
		return err
	}
	limit, cursor, err := q.page(defaultMessageLimit, maxMessageLimit)
	if err != nil {
		return err
	}
	if err := q.done(); err != nil {
		return err
	}
	m, err := s.readMessages(r, f, limit, cursor, 0)
	if err != nil {
		return err
	}
	out := struct {
		Messages   []message `json:"messages"`
		NextCursor *string   `json:"next_cursor"`
	}{Messages: make([]message, 0, len(m.recs))}
	for _, rec := range m.recs {
		out.Messages = append(out.Messages, hideBody(apijson.NewMessage(rec, false), m.hide))
	}
	out.NextCursor = nextCursor(m.next)
	writeJSON(w, r, http.StatusOK, out)
	return nil
}

// messagesRead is a page of the message list as the API and the page read
// it (readMessages).
type messagesRead struct {
	recs []dlq.Record
	next string // the next page's cursor; "" after the last
	hide bool   // the caller may not read bodies: previews are left out
	// matching counts the matches up to the cap readMessages was given.
	matching int64
}

// readMessages reads a page of the messages matching f, newest first, for
// r's caller: a search leaves bodies out for one who may not read them.
// With countCap > 0 it also counts the matches up to countCap, at the same
// time on the read pool (a search's count costs about what its page does).
func (s *Server) readMessages(r *http.Request, f dlq.Filter, limit int, cursor string, countCap int64) (messagesRead, error) {
	type counted struct {
		n   int64
		err error
	}
	m := messagesRead{hide: !s.canSeeBodies(r.Context())}
	f.QueryNotBodies = m.hide
	if empty, err := s.filterScope(r, &f); err != nil || empty {
		return m, err // no namespace to view: no messages
	}
	ch := make(chan counted, 1)
	if countCap > 0 {
		go func() {
			n, err := s.catalog.CountMessages(r.Context(), f, countCap)
			ch <- counted{n, err}
		}()
	} else {
		ch <- counted{}
	}
	var err error
	m.recs, m.next, err = s.catalog.ListMessages(r.Context(), f, limit, cursor)
	c := <-ch
	if err != nil {
		return m, fmt.Errorf("list messages: %w", err)
	}
	if c.err != nil {
		return m, fmt.Errorf("count messages: %w", c.err)
	}
	m.matching = c.n
	return m, nil
}

// messageID reads the {id} of the path. Anything but a canonical positive
// decimal names no message.
func messageID(r *http.Request) (int64, error) {
	s := r.PathValue("id")
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != s {
		return 0, notFound("there is no message with id %q", s)
	}
	return id, nil
}

// messageRequest reads a /api/v1/messages/{id}[/body] request: the id, and
// no query parameters.
func messageRequest(r *http.Request) (int64, error) {
	id, err := messageID(r)
	if err != nil {
		return 0, err
	}
	q, err := newQuery(r)
	if err != nil {
		return 0, err
	}
	return id, q.done()
}

func messageNotFound(id int64) error {
	return notFound("message %d is not in the catalog (messages gone from the broker are pruned after a while)", id)
}

// readMessage reads one message with its body, as the API and the message
// page show it; hide says its body is not the caller's to read.
func (s *Server) readMessage(r *http.Request, id int64) (rec dlq.Record, hide bool, err error) {
	rec, err = s.catalog.GetMessage(r.Context(), id)
	if catalogNotFound(err) {
		return rec, false, messageNotFound(id)
	}
	if err != nil {
		return rec, false, fmt.Errorf("show message %d: %w", id, err)
	}
	if err := s.viewMessageIn(r, rec.Namespace); err != nil {
		return dlq.Record{}, false, err
	}
	return rec, !s.canSeeBodiesIn(r.Context(), rec.Namespace), nil
}

// viewMessageIn checks that the request's identity may view a message of
// namespace (access rules): a 403 naming it otherwise.
func (s *Server) viewMessageIn(r *http.Request, namespace string) error {
	if !s.limited() {
		return nil
	}
	return s.need(r, namespace, auth.Viewer, "viewing its messages")
}

// showMessage answers GET /api/v1/messages/{id}: one message with its body.
func (s *Server) showMessage(w http.ResponseWriter, r *http.Request) error {
	id, err := messageRequest(r)
	if err != nil {
		return err
	}
	rec, hide, err := s.readMessage(r, id)
	if err != nil {
		return err
	}
	m := hideBody(apijson.NewMessage(rec, !hide), hide)
	if src, ok := s.catalog.(lineageSource); ok {
		evs, err := src.Lineage(r.Context(), id)
		if err != nil {
			return fmt.Errorf("show message %d: %w", id, err)
		}
		m.Lineage = apijson.NewLineage(evs, id)
	}
	writeJSON(w, r, http.StatusOK, m)
	return nil
}

// lineageSource is a catalog that knows messages' lineages across replays
// (the store does; a catalog without jobs need not).
type lineageSource interface {
	Lineage(ctx context.Context, id int64) ([]dlq.LineageEvent, error)
}

// message is the API's message object, and body_hidden when the body and
// its preview are left out because the caller's role may not read them
// (--hide-bodies-from-viewers). Export shares apijson.Message and never
// hides anything, so the flag lives here.
type message struct {
	apijson.Message
	BodyHidden bool `json:"body_hidden,omitempty"`
	// Lineage: GET /api/v1/messages/{id} only.
	Lineage []apijson.LineageEvent `json:"lineage,omitempty"`
}

// hideBody leaves a message's body and preview out if hide, and says so.
func hideBody(m apijson.Message, hide bool) message {
	if hide {
		m.BodyBase64, m.BodyPreview = nil, ""
	}
	return message{Message: m, BodyHidden: hide}
}

// downloadMessageBody answers GET /api/v1/messages/{id}/body with the exact
// body bytes, always as a download: the bytes are whatever a sender put
// there, so the browser must never render them as a page of ours.
func (s *Server) downloadMessageBody(w http.ResponseWriter, r *http.Request) error {
	id, err := messageRequest(r)
	if err != nil {
		return err
	}
	if s.limited() {
		// The body's namespace, without the body: bodies need their role
		// there.
		recs, err := s.catalog.MessagesByID(r.Context(), []int64{id}, dlq.Filter{IncludeGone: true})
		if err != nil {
			return fmt.Errorf("message %d: %w", id, err)
		}
		if len(recs) == 0 {
			return messageNotFound(id)
		}
		if err := s.need(r, recs[0].Namespace, s.role(bodies), "reading its message bodies"); err != nil {
			return err
		}
	}
	body, ct, err := s.catalog.MessageBody(r.Context(), id)
	if catalogNotFound(err) {
		return messageNotFound(id)
	}
	if err != nil {
		return fmt.Errorf("message %d body: %w", id, err)
	}
	typ, ext := bodyType(ct)
	h := w.Header()
	h.Set("Content-Type", typ)
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": "message-" + strconv.FormatInt(id, 10) + ext}))
	h.Set("X-Content-Type-Options", "nosniff")
	// Should anything still render it, it runs no script and loads nothing.
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
	return nil
}

// bodyType returns the Content-Type to serve a body with, and a file name
// extension. The sender's content type is used only when browsers treat it
// as inert data (JSON, plain text, CSV, octet-stream); anything else (HTML,
// SVG, XML, JavaScript, malformed values) is served as
// application/octet-stream. A charset is kept only if it is a plain token.
func bodyType(ct *string) (string, string) {
	const fallback = "application/octet-stream"
	if ct == nil {
		return fallback, ".bin"
	}
	mt, params, err := mime.ParseMediaType(*ct)
	if err != nil {
		return fallback, ".bin"
	}
	ext := ".bin"
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		ext = ".json"
	case mt == "text/plain":
		ext = ".txt"
	case mt == "text/csv":
		ext = ".csv"
	case mt == "application/xml" || mt == "text/xml" || strings.HasSuffix(mt, "+xml"):
		return fallback, ".xml"
	case mt == fallback:
		return fallback, ".bin"
	default:
		return fallback, ".bin"
	}
	out := map[string]string{}
	if cs := params["charset"]; cs != "" && plainToken(cs) {
		out["charset"] = cs
	}
	return mime.FormatMediaType(mt, out), ext
}

func plainToken(s string) bool {
	if len(s) > 40 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
