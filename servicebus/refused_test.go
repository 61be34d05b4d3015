package servicebus

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/replay"
)

// isRefused is what package replay asks of a Send's error.
func isRefused(err error) bool {
	var r replay.Refusal
	return errors.As(err, &r) && r.Refused()
}

// Refusals Service Bus sends, through the real SDK and the emulator: a
// destination that does not accept messages refuses a batch of any size;
// a message a session queue refuses (no session id) is a refusal only when
// it was sent alone, since a batch's other messages may have been kept.
func TestSendRefusals(t *testing.T) {
	e := newReplayEnv(t)
	src := e.queue(t, "src", nil)
	off := e.queue(t, "off", func(p *broker.QueueProperties) { p.Status = broker.StatusSendDisabled })
	sess := e.queue(t, "sess", func(p *broker.QueueProperties) { p.RequiresSession = true })
	for i := range 3 {
		e.send(t, src, &azservicebus.Message{MessageID: ptr(fmt.Sprint("m", i)), Body: []byte("b")})
	}
	r, err := e.c.OpenReceiver(ctxFor(t), src, dlq.SubQueueMain)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	got := receiveN(t, r, 3)
	copies := make([]replay.Copy, len(got))
	for i, m := range got {
		copies[i] = replay.Copy{Of: m, MessageID: "copy-" + m.MessageID}
	}
	send := func(path string, cps []replay.Copy) error {
		t.Helper()
		snd, err := e.c.OpenSender(ctxFor(t), path)
		if err != nil {
			t.Fatal(err)
		}
		defer snd.Close(context.Background())
		return snd.Send(ctxFor(t), cps)
	}

	for _, n := range []int{1, 3} {
		err := send(off, copies[:n])
		var sbErr *Error
		if err == nil || !errors.As(err, &sbErr) {
			t.Fatalf("%d copies to a SendDisabled queue: %v, want the adapter's *Error", n, err)
		}
		t.Logf("%d copies to a SendDisabled queue: %v", n, err)
		if !isRefused(err) {
			t.Errorf("%d copies to a SendDisabled queue: %v is not a refusal", n, err)
		}
		if !errors.Is(err, dlq.ErrEntityDisabled) {
			t.Errorf("%d copies to a SendDisabled queue: %v does not match dlq.ErrEntityDisabled", n, err)
		}
	}
	if info, _ := e.ns.Queue(off); info.Counts.Active != 0 {
		t.Errorf("the SendDisabled queue took %d messages", info.Counts.Active)
	}

	err = send(sess, copies[:1])
	if err == nil || !isRefused(err) {
		t.Errorf("one copy without a session id to a session queue: %v, want a refusal", err)
	}
	err = send(sess, copies)
	t.Logf("a batch without session ids to a session queue: %v", err)
	if err == nil || isRefused(err) {
		t.Errorf("a batch without session ids to a session queue: %v, want an error that is not a refusal", err)
	}

	// A send that succeeds is none of it.
	if err := send("src", copies); err != nil {
		t.Fatal(err)
	}
}

// refusedWhole tells a rejection from a link or connection that ended
// with the same condition, and the conditions that name the messages from
// those that do not.
func TestRefusedWhole(t *testing.T) {
	rejected := func(c amqp.ErrCond) error { return &amqp.Error{Condition: c, Description: "d"} }
	for _, tt := range []struct {
		name string
		err  error
		n    int
		want bool
	}{
		{"too large", rejected(amqp.ErrCondMessageSizeExceeded), 10, true},
		{"too large, wrapped", fmt.Errorf("send: %w", &Error{Err: rejected(amqp.ErrCondMessageSizeExceeded)}), 10, true},
		{"entity disabled", rejected(condEntityDisabled), 10, true},
		{"not allowed, alone", rejected(amqp.ErrCondNotAllowed), 1, true},
		{"not allowed, in a batch", rejected(amqp.ErrCondNotAllowed), 2, false},
		{"link detached too large", &amqp.LinkError{RemoteErr: &amqp.Error{Condition: amqp.ErrCondMessageSizeExceeded}}, 1, false},
		{"connection closed", &amqp.ConnError{RemoteErr: &amqp.Error{Condition: condEntityDisabled}}, 1, false},
		{"server busy", rejected(condServerBusy), 1, false},
		{"quota", rejected(amqp.ErrCondResourceLimitExceeded), 1, false},
		{"not found", rejected(amqp.ErrCondNotFound), 1, false},
		{"timeout", context.DeadlineExceeded, 1, false},
		{"unknown", errors.New("boom"), 1, false},
	} {
		if got := refusedWhole(tt.err, tt.n); got != tt.want {
			t.Errorf("%s: refusedWhole = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// Before anything of a Send went out, a refused attach refuses every copy,
// bare or as the link's error; a lost connection does not.
func TestRefusedAttach(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"bare entity disabled", &amqp.Error{Condition: condEntityDisabled}, true},
		{"link entity disabled", &amqp.LinkError{RemoteErr: &amqp.Error{Condition: condEntityDisabled}}, true},
		{"link not allowed, wrapped", fmt.Errorf("send: %w", &Error{Err: &amqp.LinkError{RemoteErr: &amqp.Error{Condition: amqp.ErrCondNotAllowed}}}), true},
		{"link detached forced", &amqp.LinkError{RemoteErr: &amqp.Error{Condition: amqp.ErrCondDetachForced}}, false},
		{"link closed, no error", &amqp.LinkError{}, false},
		{"connection closed not allowed", &amqp.ConnError{RemoteErr: &amqp.Error{Condition: amqp.ErrCondNotAllowed}}, false},
		{"not found", &amqp.Error{Condition: amqp.ErrCondNotFound}, false},
		{"server busy", &amqp.Error{Condition: condServerBusy}, false},
		{"timeout", context.DeadlineExceeded, false},
	} {
		if got := refusedAttach(tt.err); got != tt.want {
			t.Errorf("%s: refusedAttach = %v, want %v", tt.name, got, tt.want)
		}
	}
}
