package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/views"
)

// A bulk edit: one fix (replay.Transform: JSON-path sets, find-and-replace)
// for a selection of messages that share it. The fix is applied to each
// message's cataloged body here, before the job exists, so that the dry run
// shows each message's diff and the job sends exactly what was shown: each
// message's result is its own edit (replay.Selection.Edits).

// bulkSample is how many messages' diffs a bulk edit's dry run shows.
const bulkSample = 10

// bulkOutcome is what the fix does to one message.
type bulkOutcome struct {
	rec     dlq.Record
	body    []byte          // the edited body
	props   json.RawMessage // the edited properties (nil: the original's)
	changed bool
	err     error // the message cannot take the fix
}

// applyBulkEdit resolves req's selection (ids or a filter) to its messages,
// at most replay.MaxTransformMessages, applies tr to each one's body and
// makes req a selection of those ids with each one's edit. Messages that
// cannot take the fix (a JSON-path set on a body that is not JSON) are
// refused with the first of them named, unless dryRun, which reports them.
// Only admins edit (the edit shows and changes bodies).
func (s *Server) applyBulkEdit(r *http.Request, req *replay.Request, tr *replay.Transform) ([]bulkOutcome, error) {
	ctx := r.Context()
	if role := auth.FromContext(ctx).Role; !role.Includes(auth.Admin) {
		return nil, &forbiddenError{have: role, need: auth.Admin}
	}
	if req.Action != replay.ActionReplay {
		return nil, invalidArgument("edit", "an edit applies to replays only")
	}
	if err := tr.Check(); err != nil {
		return nil, err
	}
	if tr.Empty() {
		return nil, invalidArgument("edit", `the edit changes nothing: give "json_set" or "replace"`)
	}
	sel := req.Selection
	var ids []int64
	switch {
	case len(sel.IDs) > 0 && sel.Filter == nil && sel.Entity == "":
		ids = sel.IDs
	case sel.Filter != nil && len(sel.IDs) == 0 && sel.Entity == "":
		f := *sel.Filter
		cursor := ""
		for {
			recs, next, err := s.catalog.ListMessages(ctx, f, 500, cursor)
			if err != nil {
				return nil, fmt.Errorf("bulk edit: %w", err)
			}
			for _, r := range recs {
				ids = append(ids, r.ID)
			}
			if next == "" || len(ids) > replay.MaxTransformMessages {
				break
			}
			cursor = next
		}
	default:
		return nil, invalidArgument("edit", "an edit applies to messages selected by ids or a filter")
	}
	if len(ids) > replay.MaxTransformMessages {
		return nil, invalidArgument("edit", "an edit applies to at most %d messages: narrow the selection", replay.MaxTransformMessages)
	}
	if len(ids) == 0 {
		return nil, &replay.PreconditionError{Msg: "the selection matches no messages"}
	}
	out := make([]bulkOutcome, 0, len(ids))
	edits := make(map[int64]*replay.Edit, len(ids))
	var failed *bulkOutcome
	checked := map[string]bool{}
	for _, id := range ids {
		rec, err := s.catalog.GetMessage(ctx, id)
		if catalogNotFound(err) {
			return nil, invalidArgument("ids", "no message %d in the catalog", id)
		}
		if err != nil {
			return nil, fmt.Errorf("bulk edit: %w", err)
		}
		// With access rules, an edit needs admin in the namespace of
		// every message it reads, before any body is shown in a diff.
		if !checked[rec.Namespace] {
			if err := s.need(r, rec.Namespace, auth.Admin, "editing and replaying there"); err != nil {
				return nil, err
			}
			checked[rec.Namespace] = true
		}
		o := bulkOutcome{rec: rec}
		o.body, o.err = tr.Apply(rec.Body)
		o.changed = o.err == nil && string(o.body) != string(rec.Body)
		out = append(out, o)
		if o.err != nil && failed == nil {
			failed = &out[len(out)-1]
		}
		edits[id] = &replay.Edit{Body: o.body}
	}
	if failed != nil && !req.DryRun {
		n := 0
		for _, o := range out {
			if o.err != nil {
				n++
			}
		}
		return out, &replay.PreconditionError{Msg: fmt.Sprintf("%d of the %d messages cannot take the edit (message %d: %v): "+
			"leave them out of the selection, or change the edit", n, len(out), failed.rec.ID, failed.err)}
	}
	if failed != nil {
		// The dry run goes on with the messages that can take it.
		var keep []int64
		for _, o := range out {
			if o.err == nil {
				keep = append(keep, o.rec.ID)
			} else {
				delete(edits, o.rec.ID)
			}
		}
		ids = keep
	}
	req.Selection = replay.Selection{IDs: ids, Edits: edits, Transform: tr}
	if len(ids) == 0 {
		return out, &replay.PreconditionError{Msg: "no selected message can take the edit: " + failed.err.Error()}
	}
	return out, nil
}

// bulkReviews are the per-message diffs of a bulk edit's dry run: the
// messages that cannot take the fix first, then a sample of the others.
func bulkReviews(out []bulkOutcome) []views.BulkReview {
	var rs []views.BulkReview
	for _, o := range out {
		if o.err != nil {
			rs = append(rs, views.BulkReview{Item: messageItem(o.rec), Error: text(o.err.Error())})
		}
	}
	shown := 0
	for _, o := range out {
		if o.err != nil || shown >= bulkSample {
			continue
		}
		shown++
		r := editReview(o.rec, &replay.Edit{Body: o.body, ApplicationProperties: o.props})
		rs = append(rs, views.BulkReview{Item: messageItem(o.rec), Review: &r})
	}
	return rs
}

// bulkCounts says how many messages the fix changes, leaves as they were
// and cannot apply to.
func bulkCounts(out []bulkOutcome) (changed, unchanged, failed int) {
	for _, o := range out {
		switch {
		case o.err != nil:
			failed++
		case o.changed:
			changed++
		default:
			unchanged++
		}
	}
	return
}

func idText(id int64) string { return strconv.FormatInt(id, 10) }
