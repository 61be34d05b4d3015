package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/dlqdash/dlqdash/dlq"
)

// process acts on messages the source received for the job: it returns
// how many it finished. Messages it cannot act on within their locks stay
// pending for a later pass.
func (r *run) process(ctx context.Context, s *source, matched []match) (int, error) {
	if len(matched) == 0 {
		return 0, nil
	}
	e := r.e
	j := r.job
	now := e.now()
	var poison []*Item
	var work []match
	for _, mt := range matched {
		if r.cancelling && mt.it.State != ItemSent {
			continue
		}
		if j.Action == ActionReplay && !j.AllowPoison && mt.it.State != ItemSent && mt.m.ReplayCount >= e.cfg.PoisonCap {
			poison = append(poison, mt.it)
			continue
		}
		if mt.m.LockedUntil.Sub(now) < s.margin {
			continue
		}
		work = append(work, mt)
	}
	if len(poison) > 0 {
		if err := r.resolve(ctx, s, poison, ItemSkipped, fmt.Sprintf("poison: its lineage was already replayed %d times or more "+
			"(allow_poison replays it anyway)", e.cfg.PoisonCap)); err != nil {
			return 0, err
		}
	}
	if len(work) == 0 {
		return len(poison), nil
	}

	// Paced jobs go a bucketful at a time, so progress (and a pause or
	// cancel) shows between them rather than after the whole batch.
	size := len(work)
	if r.limiter != nil {
		r.ramp(now) // a ramping job's bucket is smaller at first
		size = r.limiter.Burst()
	}
	done := len(poison)
	for chunk := range slices.Chunk(work, size) {
		n, err := r.act(ctx, s, chunk)
		if n < 0 {
			break
		}
		done += n
		if err != nil {
			return done, err
		}
		if r.canarySent() {
			return done, errCanaryWatch // canary.go: watch it before going on
		}
	}
	return done, nil
}

// act sends one chunk's copies and removes their originals (a discard:
// removes them), and returns how many it finished; -1 when the run is
// stopped (the chunk stays as it is, untouched). Whatever makes a message
// acted on (a send; a discard's complete) happens while r.acting is held,
// which a cancel takes before it counts the unsent messages as cancelled.
func (r *run) act(ctx context.Context, s *source, chunk []match) (int, error) {
	r.acting.Lock()
	if r.stopped() {
		r.acting.Unlock()
		return -1, nil
	}
	if r.job.Action == ActionReplay {
		chunk, err := r.sendCopies(ctx, s, chunk)
		r.acting.Unlock()
		if err != nil {
			return 0, err
		}
		return r.complete(ctx, s, chunk)
	}
	defer r.acting.Unlock()
	ups := make([]Update, len(chunk))
	for i, mt := range chunk {
		ups[i] = Update{MessageID: mt.it.MessageID, State: ItemLocked}
		mt.it.State = ItemLocked
	}
	if err := r.update(ctx, s, ups); err != nil {
		return 0, err
	}
	return r.complete(ctx, s, chunk)
}

// sendCopies sends the copies of the messages that are not sent yet (as
// the rate allows within their locks) and returns the messages whose copy
// is now sent, ready to have their originals removed.
func (r *run) sendCopies(ctx context.Context, s *source, work []match) ([]match, error) {
	var ready, toSend []match
	for _, mt := range work {
		if mt.it.State == ItemSent {
			ready = append(ready, mt)
		} else {
			toSend = append(toSend, mt)
		}
	}
	if len(toSend) == 0 {
		return ready, nil
	}
	var err error
	if toSend, err = r.canaryCap(ctx, toSend); err != nil {
		return ready, err
	}
	if toSend, err = r.pace(ctx, s, toSend); err != nil || len(toSend) == 0 {
		return ready, err
	}
	// By destination (a job without one sends each source's messages to
	// its own entity, so this is one group).
	dest, sender, err := r.destinationSender(ctx, s.key.entity)
	if err != nil {
		return ready, err
	}
	// Which items no run or attempt has tried to send yet: a refusal that
	// pauses the job gives those back as pending (see unsent).
	fresh := make([]bool, len(toSend))
	for i, mt := range toSend {
		fresh[i] = mt.it.State != ItemLocked
	}
	locked, copies, resent := r.copiesOf(toSend)
	// The state before the call: after a crash these are sent again under
	// the same MessageIds.
	if err := r.update(ctx, s, locked); err != nil {
		return ready, err
	}
	_, attempts, err := retry(ctx, r, "send to "+dest.Path, func() (struct{}, error) {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		return struct{}{}, sender.Send(cctx, copies)
	})
	flag := (resent || attempts > 1) && !dest.DuplicateDetection
	if err != nil {
		if stop := r.sendHalt(dest, err); stop != nil {
			if attempts == 1 && refused(err) {
				// Nothing was sent (a destination disabled for sending,
				// say): the resume sends these as first copies, unflagged.
				if uerr := r.unsent(ctx, s, toSend, fresh); uerr != nil {
					return ready, uerr
				}
			}
			return ready, stop
		}
		// Refused for what the messages are (too large, say): one by one,
		// to find which. But an error that did not halt can also be one
		// that leaves unknown whether the broker took the batch (a link
		// that ended mid-call with an error the adapter could not
		// classify): the copies sent again one by one may then be second
		// copies, so they are flagged unless the destination detects
		// duplicates. Only a Sender's definite refusal (Refusal: nothing
		// was sent) spares them, and only when this was the batch's first
		// attempt and no earlier run or attempt may have sent them.
		again := flag || (!refused(err) && !dest.DuplicateDetection)
		return r.sendOneByOne(ctx, s, dest, sender, toSend, copies, fresh, ready, again)
	}
	sent := make([]Update, len(toSend))
	for i, mt := range toSend {
		sent[i] = Update{MessageID: mt.it.MessageID, State: ItemSent, Flag: flag}
		mt.it.State = ItemSent
	}
	if err := r.update(ctx, s, sent); err != nil {
		return ready, err
	}
	return append(ready, toSend...), nil
}

// copiesOf makes the copies of the messages in toSend and marks their items
// locked. It returns the updates that record the lock (with each copy's
// MessageId), the copies, and whether any item was locked already: by this
// run's earlier, failed send, or by a process that crashed after writing
// it, either of which may have sent its copy.
func (r *run) copiesOf(toSend []match) (locked []Update, copies []Copy, resent bool) {
	j := r.job
	locked = make([]Update, len(toSend))
	copies = make([]Copy, len(toSend))
	suffix, jobID := derivedSuffix(j.ID), strconv.FormatInt(j.ID, 10)
	for i, mt := range toSend {
		// Derived from the received message itself: a resend of the same
		// message after a crash derives the same id.
		id := derivedMessageID(mt.m.MessageID, mt.it.SequenceNumber, suffix)
		mt.it.CopyMessageID = id
		locked[i] = Update{MessageID: mt.it.MessageID, State: ItemLocked, CopyMessageID: id}
		copies[i] = Copy{Of: mt.m, MessageID: id, Properties: copyProperties(mt.m, mt.it, jobID),
			ScheduledEnqueueAt: j.ScheduledEnqueueAt, Edit: mt.it.Edit}
		if mt.it.State == ItemLocked {
			resent = true
		}
		mt.it.State = ItemLocked
	}
	return locked, copies, resent
}

// sendHalt is what stops the work after a failed send: a pause when the
// destination is gone, the credentials are refused or the broker kept
// failing; the run's own stop. Nil for a refusal of the messages
// themselves.
func (r *run) sendHalt(dest EntityInfo, err error) error {
	switch {
	case errors.Is(err, dlq.ErrEntityNotFound):
		return &halt{reason: r.destName(dest.Path) + " does not exist (any more): create it, or cancel this job"}
	case errors.Is(err, dlq.ErrEntityDisabled):
		return &halt{reason: fmt.Sprintf("%s is disabled for sending: enable it (az servicebus %s update --status Active) and resume; "+
			"the messages not sent yet stay in their dead-letter queue", r.destName(dest.Path), azKind(dest))}
	case errors.Is(err, dlq.ErrQuotaExceeded):
		return &halt{reason: fmt.Sprintf("%s is full (or over a quota of its namespace) and still was after %s of retries: "+
			"let its consumers make room, or raise its maximum size (az servicebus %s update --max-size), and resume; "+
			"the messages not sent yet stay in their dead-letter queue (%v)", r.destName(dest.Path), r.e.cfg.GiveUpAfter, azKind(dest), err)}
	}
	if transient(err) || errors.Is(err, dlq.ErrUnauthorized) || errors.Is(err, context.Canceled) || errors.Is(err, errStopped) {
		return r.brokerHalt("send to "+dest.Path, err)
	}
	return nil
}

// destName names the destination as the user knows it: with its
// namespace ("the destination prod-eu/orders"), or its path alone when
// dlqdash has one unnamed namespace.
func (r *run) destName(path string) string {
	if ns := r.job.SendsTo(); ns != "" {
		return "the destination " + ns + "/" + path
	}
	return "the destination " + path
}

// azKind is the az servicebus command group of the destination.
func azKind(dest EntityInfo) string {
	if dest.Kind == dlq.KindTopic {
		return "topic"
	}
	return "queue"
}

// unsent gives the items of a send that sent nothing back as pending,
// those that no earlier run or attempt had tried (fresh[i]): a resume then
// sends their copies as first copies, not flagged as possibly sent twice.
// The others stay locked: their earlier try may have sent them.
func (r *run) unsent(ctx context.Context, s *source, toSend []match, fresh []bool) error {
	var ups []Update
	for i, mt := range toSend {
		if fresh[i] && mt.it.State == ItemLocked {
			ups = append(ups, Update{MessageID: mt.it.MessageID, State: ItemPending})
			mt.it.State = ItemPending
		}
	}
	if len(ups) == 0 {
		return nil
	}
	return r.update(ctx, s, ups)
}

// sendOneByOne sends the copies of a batch the destination refused one at
// a time, each with retries, to fail only the messages it refuses for what
// they are. A transient failure that retries do not cure, or a stop, ends
// it as it ends a batch send: the rest stay locked, to be sent again under
// the same MessageIds (or pending when the send that stopped it was
// refused and flag is false: nothing of them was sent).
//
// A copy whose own send failed with an error that is not a refusal (a
// rejection the adapter could not tell from a partial outcome, an error
// it could not classify) is failed saying that it may have arrived, and
// flagged unless the destination detects duplicates: nothing says the
// broker did not keep it.
func (r *run) sendOneByOne(ctx context.Context, s *source, dest EntityInfo, sender Sender, toSend []match, copies []Copy,
	fresh []bool, ready []match, flag bool) ([]match, error) {
	var ups []Update
	var stop error
	for i, mt := range toSend {
		if r.stopped() {
			stop = errStopped
			break
		}
		_, attempts, err := retry(ctx, r, "send to "+dest.Path, func() (struct{}, error) {
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			defer cancel()
			return struct{}{}, sender.Send(cctx, copies[i:i+1])
		})
		f := flag || (attempts > 1 && !dest.DuplicateDetection)
		if err != nil {
			if stop = r.sendHalt(dest, err); stop != nil {
				if !flag && attempts == 1 && refused(err) {
					// Neither the batch (refused outright) nor these
					// copies were sent: pending again, for the resume.
					for k := i; k < len(toSend); k++ {
						if fresh[k] {
							ups = append(ups, Update{MessageID: toSend[k].it.MessageID, State: ItemPending})
							toSend[k].it.State = ItemPending
						}
					}
				}
				break
			}
			if refused(err) && attempts == 1 {
				earlier := ""
				if f {
					earlier = "; an earlier send of it, whose outcome the broker did not say, may have delivered it"
				}
				ups = append(ups, Update{MessageID: mt.it.MessageID, State: ItemFailed, Flag: f,
					Error: "the destination refused the copy: " + err.Error() + earlier})
				continue
			}
			maybe := "; the copy may have arrived all the same (the broker did not say)"
			if dest.DuplicateDetection {
				maybe = "; if the copy arrived all the same, the destination's duplicate detection drops a second one"
			} else {
				f = true
			}
			ups = append(ups, Update{MessageID: mt.it.MessageID, State: ItemFailed, Flag: f,
				Error: "the copy could not be sent: " + err.Error() + maybe})
			continue
		}
		ups = append(ups, Update{MessageID: mt.it.MessageID, State: ItemSent, Flag: f})
		mt.it.State = ItemSent
		ready = append(ready, mt)
	}
	if err := r.update(ctx, s, ups); err != nil {
		return ready, err
	}
	return ready, stop
}
