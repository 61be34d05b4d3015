package web

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/views"
)

// The edit-and-replay page: GET /messages/{id}/edit shows the form,
// POST /messages/{id}/edit with dry_run shows what would be sent (the
// diff of body and properties against the original, and the job's plan)
// without sending anything; without dry_run it starts the job.

// showEditPage renders GET /messages/{id}/edit.
func (s *Server) showEditPage(w http.ResponseWriter, r *http.Request) error {
	if s.jobs == nil {
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
	p := views.EditPage{Item: s.messageItem(rec)}
	p.Body, p.Binary, p.Properties = editForm(rec)
	return s.render(w, r, views.EditReplayPage(p))
}

// editReplayPage answers POST /messages/{id}/edit: the edit form, as a dry
// run (dry_run=true: the page again, with the diff and the plan) or for
// real (one job: to its page). POST /api/v1/messages/{id}/replay is the
// same for scripts. A refusal re-renders the form as typed.
func (s *Server) editReplayPage(w http.ResponseWriter, r *http.Request) error {
	if s.jobs == nil {
		return errNoJobs
	}
	id, err := messageID(r)
	if err != nil {
		return err
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxEditRequest)
	if err := r.ParseForm(); err != nil {
		return s.refused(w, r, invalidArgument("form", "the form could not be read: %v", err))
	}
	rec, _, err := s.readMessage(r, id)
	if err != nil {
		return err
	}
	f := r.PostForm
	p := views.EditPage{Item: s.messageItem(rec), Destination: f.Get("destination"), Reason: f.Get("reason"),
		Properties: f.Get("application_properties"), DryRun: truthy(f.Get("dry_run"))}
	_, p.Binary, _ = editForm(rec)
	er := editRequest{Destination: strings.TrimSpace(p.Destination), Reason: p.Reason, DryRun: p.DryRun}
	if vs, ok := f["body"]; ok && len(vs) == 1 && !p.Binary {
		p.Body = vs[0]
		er.Body = &vs[0]
	}
	if v := strings.TrimSpace(p.Properties); v != "" {
		er.ApplicationProperties = json.RawMessage(v)
	}
	req, err := er.request(id)
	if err == nil {
		if req.Selection.Edit == nil {
			req.Selection.Edit = &replay.Edit{} // replayed as it is, but recorded as an edit
		}
		req.Allow = s.sendAllowed(r, auth.Admin, "editing and replaying there")
		var plan replay.Plan
		var job replay.Job
		plan, job, err = s.jobs.Submit(r.Context(), req)
		if err == nil && !p.DryRun {
			http.Redirect(w, r, views.JobURL(job.ID), http.StatusSeeOther)
			return nil
		}
		if err == nil {
			review := editReview(rec, req.Selection.Edit)
			p.Review, p.Plan = &review, planView(plan, false)
		}
	}
	if err != nil {
		status, fe, ok := formProblem(err)
		if !ok {
			return err
		}
		fe.Message = pageWords(fe.Message)
		p.Error = fe
		return s.write(w, r, status, views.EditReplayPage(p))
	}
	return s.render(w, r, views.EditReplayPage(p))
}

// editReview is what an edit changes against the original message: its
// body line by line (both sides indented when both are JSON) and its
// application properties by key, as the copy would carry them: without the
// broker's dead-letter properties and with dlqdash's own (the job's id is
// only known once it is created).
func editReview(rec dlq.Record, e *replay.Edit) views.EditReview {
	var v views.EditReview
	newBody := rec.Body
	if e != nil && e.Body != nil {
		newBody = e.Body
	}
	v.OldSize, v.NewSize = len(rec.Body), len(newBody)
	v.BodyChanged = !bytes.Equal(rec.Body, newBody)
	if !isText(rec.Body) || !isText(newBody) {
		v.BodyBinary = true
	} else {
		o, n := string(rec.Body), string(newBody)
		var ob, nb bytes.Buffer
		if json.Indent(&ob, rec.Body, "", "  ") == nil && json.Indent(&nb, newBody, "", "  ") == nil {
			o, n = ob.String(), nb.String()
		}
		v.BodyDiff = views.LineDiff(text(o), text(n))
	}

	old := propertyTexts(rec.ApplicationProperties)
	sent := maps.Clone(old)
	if e != nil && e.ApplicationProperties != nil && !bytes.Equal(bytes.TrimSpace(e.ApplicationProperties), []byte("null")) {
		sent = propertyTexts(e.ApplicationProperties)
	}
	maps.DeleteFunc(sent, func(k, _ string) bool { return dlq.IsBrokerDeadLetterProperty(k) })
	for k, val := range copyPropertyTexts(rec) {
		sent[k] = val
	}
	v.Properties = views.PropertyDiff(old, sent)
	for i, c := range v.Properties {
		switch {
		case dlq.IsBrokerDeadLetterProperty(c.Key) && c.Kind == views.PropertyRemoved:
			v.Properties[i].Note = "set by the broker when it dead-lettered the message: a copy never carries it"
		case strings.HasPrefix(c.Key, "dlqdash."):
			v.Properties[i].Note = "set by dlqdash on every replayed copy"
		}
	}
	v.Unchanged = len(sent)
	for _, c := range v.Properties {
		if c.Kind != views.PropertyRemoved {
			v.Unchanged--
		}
	}
	return v
}

// copyPropertyTexts are the dlqdash.* properties the copy of rec gets
// (replay/copy.go), as JSON text; the job's id is not known before the job
// exists.
func copyPropertyTexts(rec dlq.Record) map[string]string {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	p := map[string]string{
		replay.PropOriginalMessageID:      q(rec.MessageID),
		replay.PropOriginalSequenceNumber: strconv.FormatInt(rec.SequenceNumber, 10),
		replay.PropOriginalEntity:         q(rec.Entity),
		replay.PropJobID:                  q("(the new job's id)"),
		replay.PropReplayCount:            strconv.Itoa(rec.ReplayCount + 1),
	}
	if rec.DeadLetterReason != nil && *rec.DeadLetterReason != "" {
		p[replay.PropDeadLetterReason] = q(*rec.DeadLetterReason)
	}
	return p
}

// propertyTexts are application properties in the stable JSON form, each
// value as its compact JSON text (none when raw is not an object).
func propertyTexts(raw json.RawMessage) map[string]string {
	out := map[string]string{}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return out
	}
	for k, v := range m {
		var b bytes.Buffer
		if json.Compact(&b, v) == nil {
			out[text(k)] = text(b.String())
		}
	}
	return out
}

// isText: a body the page compares as lines.
func isText(b []byte) bool {
	return len(b) <= maxEditBody && utf8.Valid(b) && bytes.IndexByte(b, 0) < 0
}
