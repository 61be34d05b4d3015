package replay

import (
	"context"
	"fmt"
	"strconv"

	"github.com/dlqdash/dlqdash/audit"
)

// resolveMissing finishes items whose message the broker no longer has.
func (r *run) resolveMissing(ctx context.Context, s *source, items []*Item, verb string) error {
	if len(items) == 0 {
		return nil
	}
	where := s.key.q.Path(s.key.entity)
	var ups []Update
	for _, it := range items {
		u := Update{MessageID: it.MessageID}
		switch {
		case it.State == ItemSent:
			u.State, u.Error = ItemCompleted, "the copy was sent; the original had already left "+where
		case it.State == ItemLocked && r.job.Action == ActionDiscard:
			u.State, u.Error = ItemCompleted, "removed (the job was interrupted just after removing it)"
		case it.State == ItemLocked:
			u.State, u.Flag = ItemFailed, true
			u.Error = "the job was interrupted while sending this message's copy, and the original has since left " + where +
				": the copy may or may not have been sent"
		default:
			u.State, u.Error = ItemFailed, "the message "+verb+" "+where+": it was removed by someone else, or is locked by another receiver"
		}
		ups = append(ups, u)
	}
	return r.update(ctx, s, ups)
}

// resolveAll finishes every item with one state and reason.
func (r *run) resolveAll(ctx context.Context, items []*Item, st ItemState, why string) error {
	return r.resolve(ctx, nil, items, st, why)
}

func (r *run) resolve(ctx context.Context, s *source, items []*Item, st ItemState, why string) error {
	ups := make([]Update, len(items))
	for i, it := range items {
		ups[i] = Update{MessageID: it.MessageID, State: st, Error: why}
	}
	return r.update(ctx, s, ups)
}

// update writes item states, drops finished items from the source's
// pending set, records failures and skips in the audit trail, and tells
// the dashboard.
//
// Completions deferred by deferDone are written first, in the same
// transaction, and audited after it.
func (r *run) update(ctx context.Context, s *source, ups []Update) error {
	var done []audit.Record
	if len(r.done) > 0 {
		ups = append(r.done, ups...)
		done = r.doneAudit
		r.done, r.doneAudit = nil, nil
	}
	if len(ups) == 0 {
		return nil
	}
	e := r.e
	j, err := r.store().UpdateItems(ctx, r.job.ID, ups)
	if err != nil {
		return fmt.Errorf("record message states: %w", err)
	}
	r.job = j
	for _, rec := range done {
		e.audit(ctx, rec)
	}
	byState := map[ItemState][]string{}
	flagged := []string{}
	for _, u := range ups {
		if s != nil && u.State.Finished() {
			s.finished(u.MessageID)
		}
		if u.State == ItemFailed || u.State == ItemSkipped {
			byState[u.State] = append(byState[u.State], strconv.FormatInt(u.MessageID, 10))
		}
		if u.Flag {
			flagged = append(flagged, strconv.FormatInt(u.MessageID, 10))
		}
	}
	for st, ids := range byState {
		action := audit.ActionMessageFailed
		if st == ItemSkipped {
			action = audit.ActionMessageSkipped
		}
		e.audit(ctx, audit.Record{Actor: ActorEngine, Action: action, MessageIDs: ids, Outcome: audit.OutcomeFailed,
			Params: withNamespace(map[string]any{"job_id": strconv.FormatInt(j.ID, 10), "reason": firstError(ups, st)}, j)})
	}
	if len(flagged) > 0 {
		e.audit(ctx, audit.Record{Actor: ActorEngine, Action: audit.ActionMessageFlagged, MessageIDs: flagged, Outcome: audit.OutcomeFailed,
			Params: withNamespace(map[string]any{"job_id": strconv.FormatInt(j.ID, 10),
				"reason": "possibly sent twice: resent after an interrupted or failed send, to a target without duplicate detection"}, j)})
	}
	e.changed(j)
	return nil
}

func firstError(ups []Update, st ItemState) string {
	for _, u := range ups {
		if u.State == st {
			return u.Error
		}
	}
	return ""
}

// deferDone records completions (their originals removed) to be written
// with the run's next write rather than in a transaction of their own: an
// unpaced scan's next batch is being received meanwhile, and its first
// write (the copies' locks) comes at once if it has arrived; readPass and
// scan flush them before the run waits for anything. Their items leave the pending
// set now. Until written they are sent in the store: a crash in between
// leaves them so, and the next run, not finding their originals, finishes
// them as completed (resolveMissing). rec is their audit entry (nil for
// none), appended once they are written.
func (r *run) deferDone(s *source, ups []Update, rec *audit.Record) {
	if len(r.done) == 0 {
		r.doneBatch = s.batches
	}
	for _, u := range ups {
		s.finished(u.MessageID)
	}
	r.done = append(r.done, ups...)
	if rec != nil {
		r.doneAudit = append(r.doneAudit, *rec)
	}
}

// flush writes the completions deferDone holds back, if any.
func (r *run) flush(ctx context.Context) error {
	if len(r.done) == 0 {
		return nil
	}
	return r.update(ctx, nil, nil)
}
