package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
)

// ScheduledCanceller is a Broker that can cancel scheduled messages
// (Service Bus's cancel-scheduled-message; package servicebus's Client
// does it). Cancelling a number that is no longer scheduled does nothing.
type ScheduledCanceller interface {
	CancelScheduled(ctx context.Context, entity string, seqs []int64) error
}

// MaxCancel bounds the messages of one CancelScheduled request.
const MaxCancel = 1000

// CancelRequest asks to cancel scheduled messages: by catalog id, or by an
// entity's sequence numbers (Selection.Entity, SequenceNumbers and
// Namespace; the main subqueue, where scheduled messages wait).
type CancelRequest struct {
	Selection Selection
	// Reason is required: a cancelled message is gone for good.
	Reason string
	// Allow, when set, is asked with the namespaces of the selected
	// messages before anything is cancelled: an error refuses the request
	// as it is (the dashboard's access rules: admin in each of them).
	Allow func(namespaces []string) error
}

// CancelResult is what a CancelScheduled did.
type CancelResult struct {
	// Cancelled are the messages cancelled, Skipped those left alone
	// (with why: not scheduled, gone already).
	Cancelled []dlq.Record
	Skipped   []SkippedMessage
}

// SkippedMessage is a selected message that was not acted on, and why.
type SkippedMessage struct {
	Record dlq.Record
	Why    string
}

func (req *CancelRequest) validate() error {
	sel := req.Selection
	switch {
	case sel.Filter != nil || sel.Edit != nil || len(sel.Edits) > 0:
		return &InvalidError{Param: "ids", Msg: "cancel scheduled messages by ids, or by an entity's sequence_numbers"}
	case len(sel.IDs) > 0 && sel.Entity != "":
		return &InvalidError{Param: "ids", Msg: "give ids, or an entity and its sequence_numbers: one of them"}
	case len(sel.IDs) == 0 && sel.Entity == "" && len(sel.SequenceNumbers) == 0:
		return &InvalidError{Param: "ids", Msg: "select the scheduled messages to cancel: ids, or an entity and its sequence_numbers"}
	case (sel.Entity == "") != (len(sel.SequenceNumbers) == 0) && len(sel.IDs) == 0:
		return &InvalidError{Param: "sequence_numbers", Msg: "sequence numbers need their entity, and an entity its sequence_numbers"}
	case sel.SubQueue != "" && sel.SubQueue != dlq.SubQueueMain:
		return &InvalidError{Param: "subqueue", Msg: "scheduled messages wait in the entity itself (subqueue main)"}
	case len(sel.IDs) > MaxCancel || len(sel.SequenceNumbers) > MaxCancel:
		return &InvalidError{Param: "ids", Msg: fmt.Sprintf("at most %d messages at a time", MaxCancel)}
	}
	if i := strings.IndexByte(sel.Entity, 0); i >= 0 {
		return &InvalidError{Param: "entity", Msg: fmt.Sprintf("holds a NUL byte (at byte %d): remove it", i)}
	}
	req.Reason = strings.ToValidUTF8(strings.TrimSpace(req.Reason), "\uFFFD")
	switch {
	case req.Reason == "":
		return &InvalidError{Param: "reason", Msg: "cancelling needs a reason: the messages are removed for good"}
	case len(req.Reason) > 1000:
		return &InvalidError{Param: "reason", Msg: "at most 1000 characters"}
	}
	return nil
}

// CancelScheduled cancels scheduled messages before they are due: one
// cancel-scheduled-message request per entity. Selected messages that are
// not scheduled, or gone already, are skipped and said so; when none is
// left to cancel it is a *PreconditionError. Each entity's cancellation is
// audited (scheduled_cancelled, with the messages, the reason and the
// outcome; a failed one too), and the catalog's reader is told (OnRemoved).
// Errors: *InvalidError (400), *PreconditionError (422), Allow's error, a
// broker error (the cancellation may or may not have happened: Service
// Bus ignores numbers no longer scheduled, so it can be asked again).
func (e *Engine) CancelScheduled(ctx context.Context, req CancelRequest) (CancelResult, error) {
	var res CancelResult
	if err := req.validate(); err != nil {
		return res, err
	}
	sel := req.Selection
	sel.SubQueue = ""
	if sel.Entity != "" {
		sel.SubQueue = dlq.SubQueueMain
	}
	n := max(len(sel.IDs), len(sel.SequenceNumbers))
	sum, err := e.cfg.Store.SummariseSelection(ctx, sel, e.cfg.PoisonCap, n)
	if err != nil {
		return res, err
	}
	if sum.Total == 0 {
		return res, &PreconditionError{Msg: "the selection matches no messages"}
	}
	var names []string
	for _, src := range sum.Sources {
		if !slices.Contains(names, src.Namespace) {
			names = append(names, src.Namespace)
		}
	}
	if req.Allow != nil {
		if err := req.Allow(names); err != nil {
			return res, err
		}
	}
	// The messages to cancel, by namespace and entity, in catalog order.
	type key struct{ namespace, entity string }
	var order []key
	groups := map[key][]dlq.Record{}
	for _, rec := range sum.Sample {
		switch {
		case rec.GoneAt != nil:
			res.Skipped = append(res.Skipped, SkippedMessage{rec, "it already left the broker"})
		case rec.SubQueue != dlq.SubQueueMain || rec.State != dlq.StateScheduled:
			res.Skipped = append(res.Skipped, SkippedMessage{rec, "it is not a scheduled message: only those can be cancelled"})
		default:
			k := key{rec.Namespace, rec.Entity}
			if _, ok := groups[k]; !ok {
				order = append(order, k)
			}
			groups[k] = append(groups[k], rec)
		}
	}
	if len(order) == 0 {
		why := "none of the selected messages is scheduled"
		if len(res.Skipped) == 1 {
			why = "the message cannot be cancelled: " + res.Skipped[0].Why
		}
		return res, &PreconditionError{Msg: why}
	}
	for _, k := range order {
		recs := groups[k]
		if err := e.cancelIn(ctx, k.namespace, k.entity, recs, req.Reason); err != nil {
			return res, err
		}
		res.Cancelled = append(res.Cancelled, recs...)
	}
	return res, nil
}

// cancelIn cancels one entity's scheduled messages and audits it.
func (e *Engine) cancelIn(ctx context.Context, namespace, entity string, recs []dlq.Record, reason string) error {
	seqs := make([]int64, len(recs))
	ids := make([]string, len(recs))
	for i, r := range recs {
		seqs[i], ids[i] = r.SequenceNumber, strconv.FormatInt(r.ID, 10)
	}
	params := map[string]any{"entity": entity, "sequence_numbers": seqs, "reason": reason}
	if namespace != "" {
		params["namespace"] = namespace
	}
	record := func(err error) {
		rec := audit.Record{Action: audit.ActionScheduledCancelled, MessageIDs: ids, Params: params}
		if err != nil {
			rec.Outcome = audit.OutcomeFailed
			params["error"] = err.Error()
		}
		e.audit(ctx, rec)
	}
	b, err := e.broker(namespace)
	if err != nil {
		return &PreconditionError{Msg: fmt.Sprintf("the messages' namespace %s is not configured: configure it to cancel them", namespace)}
	}
	c, ok := b.(ScheduledCanceller)
	if !ok {
		return errors.New("cancel scheduled messages: this broker cannot cancel scheduled messages")
	}
	if err := c.CancelScheduled(ctx, entity, seqs); err != nil {
		if errors.Is(err, dlq.ErrEntityNotFound) {
			err = &PreconditionError{Msg: fmt.Sprintf("%s no longer exists, and its scheduled messages with it", entity)}
			record(err)
			return err
		}
		err = fmt.Errorf("cancel %d scheduled messages of %s: %w", len(seqs), entity, err)
		record(err)
		return err
	}
	record(nil)
	e.log.Info("replay: scheduled messages cancelled", "namespace", namespace, "entity", entity, "count", len(seqs), "by", audit.ActorFrom(ctx))
	if e.cfg.OnRemovedFrom != nil {
		e.cfg.OnRemovedFrom(namespace, entity, dlq.SubQueueMain, len(seqs))
	} else if e.cfg.OnRemoved != nil {
		e.cfg.OnRemoved(entity, dlq.SubQueueMain, len(seqs))
	}
	return nil
}
