package web

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/views"
)

// Cancelling scheduled messages (admins): GET /messages/{id}/cancel asks
// for a reason and a confirmation, POST /messages/{id}/cancel cancels the
// message in the broker (the replay engine's CancelScheduled, which audits
// it), and POST /api/v1/scheduled/cancel is the same for scripts, by ids or
// by an entity's sequence numbers.

// scheduledCanceller is the replay engine's CancelScheduled (*replay.Engine
// has it); a Jobs without it offers no cancel.
type scheduledCanceller interface {
	CancelScheduled(ctx context.Context, req replay.CancelRequest) (replay.CancelResult, error)
}

// canceller is the engine's CancelScheduled, or nil.
func (s *Server) canceller() scheduledCanceller {
	c, _ := s.jobs.(scheduledCanceller)
	return c
}

// cancelAllowed is CancelRequest.Allow for a request of r: admin in every
// namespace of the selected messages.
func (s *Server) cancelAllowed(r *http.Request) func(namespaces []string) error {
	return func(namespaces []string) error {
		for _, ns := range namespaces {
			if err := s.need(r, ns, auth.Admin, "cancelling scheduled messages there"); err != nil {
				return err
			}
		}
		return nil
	}
}

// canCancel reports whether rec is a scheduled message the request's
// identity may cancel (admin in its namespace) with this server.
func (s *Server) canCancel(ctx context.Context, rec dlq.Record) bool {
	return s.canceller() != nil && rec.State == dlq.StateScheduled && rec.GoneAt == nil &&
		s.roleIn(ctx, rec.Namespace).Includes(auth.Admin)
}

// cancelPage is the confirm page of one scheduled message.
func (s *Server) cancelPage(rec dlq.Record) views.CancelScheduled {
	c := views.CancelScheduled{Item: s.messageItem(rec), Due: rec.ScheduledEnqueueAt}
	c.Item.Preview = ""
	switch {
	case rec.GoneAt != nil:
		c.NotScheduled = "It already left the broker: there is nothing to cancel."
	case rec.State != dlq.StateScheduled:
		c.NotScheduled = "It is not a scheduled message (it is " + string(rec.State) + "): only scheduled messages can be cancelled."
	}
	return c
}

// showCancelPage renders GET /messages/{id}/cancel.
func (s *Server) showCancelPage(w http.ResponseWriter, r *http.Request) error {
	if s.canceller() == nil {
		return errNoJobs
	}
	id, err := messageID(r)
	if err != nil {
		return err
	}
	rec, _, err := s.readMessage(r, id)
	if err != nil {
		return err
	}
	if err := s.need(r, rec.Namespace, auth.Admin, "cancelling scheduled messages there"); err != nil {
		return err
	}
	return s.render(w, r, views.CancelScheduledPage(s.cancelPage(rec)))
}

// cancelScheduledPage answers POST /messages/{id}/cancel: the message is
// cancelled (the page says so) or the confirm page comes back with what
// was refused.
func (s *Server) cancelScheduledPage(w http.ResponseWriter, r *http.Request) error {
	c := s.canceller()
	if c == nil {
		return errNoJobs
	}
	id, err := messageID(r)
	if err != nil {
		return err
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		return s.refused(w, r, invalidArgument("form", "the form could not be read: %v", err))
	}
	rec, _, err := s.readMessage(r, id)
	if err != nil {
		return err
	}
	p := s.cancelPage(rec)
	p.Reason = r.PostForm.Get("reason")
	_, err = c.CancelScheduled(r.Context(), replay.CancelRequest{Selection: replay.Selection{IDs: []int64{id}}, Reason: p.Reason,
		Allow: s.cancelAllowed(r)})
	if err != nil {
		status, fe, ok := formProblem(err)
		if !ok {
			return err
		}
		p.Error = fe
		return s.write(w, r, status, views.CancelScheduledPage(p))
	}
	p.Done = true
	return s.render(w, r, views.CancelScheduledPage(p))
}

// cancelRequest is the body of POST /api/v1/scheduled/cancel.
type cancelRequest struct {
	IDs             []string `json:"ids"`
	Entity          string   `json:"entity"`
	SequenceNumbers []int64  `json:"sequence_numbers"`
	Namespace       string   `json:"namespace"`
	Reason          string   `json:"reason"`
}

// cancelledJSON is one message of a cancel's answer.
type cancelledJSON struct {
	ID             string  `json:"id"`
	Namespace      *string `json:"namespace"`
	Entity         string  `json:"entity"`
	SequenceNumber int64   `json:"sequence_number"`
	Reason         string  `json:"reason,omitempty"`
}

func newCancelledJSON(rec dlq.Record, why string) cancelledJSON {
	out := cancelledJSON{ID: strconv.FormatInt(rec.ID, 10), Entity: rec.Entity, SequenceNumber: rec.SequenceNumber, Reason: why}
	if rec.Namespace != "" {
		ns := rec.Namespace
		out.Namespace = &ns
	}
	return out
}

// cancelScheduled answers POST /api/v1/scheduled/cancel.
func (s *Server) cancelScheduled(w http.ResponseWriter, r *http.Request) error {
	c := s.canceller()
	if c == nil {
		return errNoJobs
	}
	var cr cancelRequest
	if err := decodeBody(r, &cr, 1<<20); err != nil {
		return err
	}
	var sel replay.Selection
	for _, v := range cr.IDs {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id <= 0 {
			return invalidArgument("ids", "%q is not a message id", v)
		}
		sel.IDs = append(sel.IDs, id)
	}
	sel.Entity, sel.SequenceNumbers, sel.Namespace = strings.TrimSpace(cr.Entity), cr.SequenceNumbers, strings.TrimSpace(cr.Namespace)
	if sel.Namespace != "" {
		if err := s.need(r, sel.Namespace, auth.Admin, "cancelling scheduled messages there"); err != nil {
			return err
		}
	}
	res, err := c.CancelScheduled(r.Context(), replay.CancelRequest{Selection: sel, Reason: cr.Reason, Allow: s.cancelAllowed(r)})
	if err != nil {
		return err
	}
	out := struct {
		Cancelled []cancelledJSON `json:"cancelled"`
		Skipped   []cancelledJSON `json:"skipped"`
	}{Cancelled: []cancelledJSON{}, Skipped: []cancelledJSON{}}
	for _, rec := range res.Cancelled {
		out.Cancelled = append(out.Cancelled, newCancelledJSON(rec, ""))
	}
	for _, sk := range res.Skipped {
		out.Skipped = append(out.Skipped, newCancelledJSON(sk.Record, sk.Why))
	}
	writeJSON(w, r, http.StatusOK, out)
	return nil
}
