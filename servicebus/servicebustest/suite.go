package servicebustest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/servicebus"
)

// Run runs the whole suite against the namespace h describes.
func Run(t *testing.T, h Harness) {
	e := newEnv(t, h)
	t.Run("Entities", e.testEntities)
	t.Run("Settings", e.testSettings)
	t.Run("PeekDeadLetter", e.testPeekDeadLetter)
	t.Run("PeekTransferDeadLetter", e.testPeekTransferDeadLetter)
	t.Run("PeekSubscriptionDeadLetter", e.testPeekSubscriptionDeadLetter)
	t.Run("PeekMainStates", e.testPeekMainStates)
	t.Run("PeekFrom", e.testPeekFrom)
	t.Run("Paging", e.testPaging)
	t.Run("OutOfOrderDeadLetter", e.testOutOfOrderDeadLetter)
	t.Run("Fields", e.testFields)
	t.Run("SessionMessageFields", e.testSessionMessageFields)
	t.Run("NonDataBodies", e.testNonDataBodies)
	t.Run("WrongKey", e.testWrongKey)
	t.Run("MissingEntity", e.testMissingEntity)
	t.Run("Unreachable", e.testUnreachable)
	t.Run("ServerBusy", e.testServerBusy)
	t.Run("Concurrent", e.testConcurrent)
	t.Run("Close", e.testClose)
}

// entityMap indexes Entities by path, keeping only this run's.
func (e *env) entities(t *testing.T, c *servicebus.Client) (map[string]dlq.Entity, error) {
	t.Helper()
	all, err := c.Entities(testCtx(t))
	if err != nil {
		return nil, err
	}
	out := map[string]dlq.Entity{}
	for _, en := range all {
		if strings.HasPrefix(en.Path, e.prefix) {
			if _, dup := out[en.Path]; dup {
				t.Errorf("Entities lists %s twice", en.Path)
			}
			out[en.Path] = en
		}
	}
	return out, nil
}

func (e *env) testEntities(t *testing.T) {
	c := e.open(t)

	// A queue: 2 active (one of them deferred, which Service Bus counts as
	// active), 1 dead-lettered, 1 scheduled.
	q := e.createQueue(t, "ent-q", nil)
	e.send(t, q, &azservicebus.Message{Body: []byte("a")}, &azservicebus.Message{Body: []byte("b")}, &azservicebus.Message{Body: []byte("c")})
	e.deadLetter(t, q, 1, "r", "d")
	r := e.receiver(t, q, nil)
	m := receive(t, r, 1)[0]
	if err := r.DeferMessage(testCtx(t), m, nil); err != nil {
		t.Fatalf("defer: %v", err)
	}
	e.schedule(t, q, &azservicebus.Message{Body: []byte("later")})

	// A queue forwarding to a send-disabled one: its messages land in its
	// transfer dead-letter queue.
	archive := e.createQueue(t, "ent-archive", &admin.QueueProperties{Status: ptr(admin.EntityStatusSendDisabled)})
	fwd := e.createQueue(t, "ent-fwd", &admin.QueueProperties{ForwardTo: &archive})
	e.send(t, fwd, &azservicebus.Message{Body: []byte("x")}, &azservicebus.Message{Body: []byte("y")})

	// A topic with one scheduled message and two subscriptions.
	topic := e.createTopic(t, "ent-topic", nil)
	subA := e.createSubscription(t, topic, "a", nil)
	subB := e.createSubscription(t, topic, "b", nil)
	e.send(t, topic, &azservicebus.Message{Body: []byte("1")}, &azservicebus.Message{Body: []byte("2")})
	e.deadLetter(t, subA, 1, "r", "d")
	e.schedule(t, topic, &azservicebus.Message{Body: []byte("later")})

	want := map[string]dlq.Entity{
		q:       {Path: q, Kind: dlq.KindQueue, Counts: dlq.Counts{Active: 2, DeadLetter: 1, Scheduled: 1}},
		archive: {Path: archive, Kind: dlq.KindQueue},
		fwd:     {Path: fwd, Kind: dlq.KindQueue, Counts: dlq.Counts{TransferDeadLetter: 2}},
		topic:   {Path: topic, Kind: dlq.KindTopic, Counts: dlq.Counts{Scheduled: 1}},
		subA:    {Path: subA, Kind: dlq.KindSubscription, Topic: topic, Counts: dlq.Counts{Active: 1, DeadLetter: 1}},
		subB:    {Path: subB, Kind: dlq.KindSubscription, Topic: topic, Counts: dlq.Counts{Active: 2}},
	}
	waitFor(t, e.h.CountTimeout, "the runtime counts", func() (bool, string) {
		got, err := e.entities(t, c)
		if err != nil {
			t.Fatalf("Entities: %v", err)
		}
		// Other tests' entities may exist; compare only these.
		for k := range got {
			if _, ok := want[k]; !ok {
				delete(got, k)
			}
		}
		return reflect.DeepEqual(got, want), fmt.Sprintf("got %+v\nwant %+v", got, want)
	})
}

func (e *env) testSettings(t *testing.T) {
	c := e.open(t)
	target := e.createQueue(t, "set-target", nil)
	q := e.createQueue(t, "set-q", &admin.QueueProperties{
		LockDuration:                        ptr("PT45S"),
		MaxDeliveryCount:                    ptr[int32](7),
		RequiresDuplicateDetection:          ptr(true),
		DuplicateDetectionHistoryTimeWindow: ptr("PT5M"),
		DefaultMessageTimeToLive:            ptr("P2D"),
		DeadLetteringOnMessageExpiration:    ptr(true),
		ForwardDeadLetteredMessagesTo:       &target,
	})
	sq := e.createQueue(t, "set-sessions", &admin.QueueProperties{RequiresSession: ptr(true), Status: ptr(admin.EntityStatusReceiveDisabled)})
	fq := e.createQueue(t, "set-fwd", &admin.QueueProperties{ForwardTo: &target})
	topic := e.createTopic(t, "set-topic", &admin.TopicProperties{
		DefaultMessageTimeToLive:            ptr("PT1H"),
		RequiresDuplicateDetection:          ptr(true),
		DuplicateDetectionHistoryTimeWindow: ptr("PT2M"),
	})
	sub := e.createSubscription(t, topic, "s", &admin.SubscriptionProperties{
		LockDuration:                     ptr("PT20S"),
		MaxDeliveryCount:                 ptr[int32](3),
		DefaultMessageTimeToLive:         ptr("PT30M"),
		DeadLetteringOnMessageExpiration: ptr(true),
		RequiresSession:                  ptr(true),
		ForwardTo:                        &target,
	})

	all, err := c.Settings(testCtx(t))
	if err != nil {
		t.Fatalf("Settings: %v", err)
	}
	got := map[string]dlq.Settings{}
	for _, s := range all {
		got[s.Path] = s
	}
	// Forwarding targets come back as names from the emulator and as URLs
	// from some namespaces; only their last segment is compared.
	lastSegment := func(s string) string {
		return strings.ToLower(s[strings.LastIndex(s, "/")+1:])
	}
	check := func(path string, want dlq.Settings) {
		t.Helper()
		g, ok := got[path]
		if !ok {
			t.Errorf("Settings has no %s", path)
			return
		}
		if lastSegment(g.ForwardTo) != lastSegment(want.ForwardTo) || lastSegment(g.ForwardDeadLetteredMessagesTo) != lastSegment(want.ForwardDeadLetteredMessagesTo) {
			t.Errorf("%s: forwarding %q, %q; want %q, %q", path, g.ForwardTo, g.ForwardDeadLetteredMessagesTo, want.ForwardTo, want.ForwardDeadLetteredMessagesTo)
		}
		g.ForwardTo, g.ForwardDeadLetteredMessagesTo = want.ForwardTo, want.ForwardDeadLetteredMessagesTo
		if g.Kind == dlq.KindTopic {
			g.LockDuration, g.MaxDeliveryCount = 0, 0 // topics have neither
		}
		if g != want {
			t.Errorf("%s:\n got %+v\nwant %+v", path, g, want)
		}
	}
	infinite := time.Duration(math.MaxInt64)
	check(q, dlq.Settings{Path: q, Kind: dlq.KindQueue, Status: "Active", LockDuration: 45 * time.Second, MaxDeliveryCount: 7,
		RequiresDuplicateDetection: true, DuplicateDetectionWindow: 5 * time.Minute, DefaultTimeToLive: 48 * time.Hour,
		DeadLetteringOnMessageExpiration: true, ForwardDeadLetteredMessagesTo: target})
	check(sq, dlq.Settings{Path: sq, Kind: dlq.KindQueue, Status: "ReceiveDisabled", LockDuration: time.Minute, MaxDeliveryCount: 10,
		RequiresSession: true, DuplicateDetectionWindow: 10 * time.Minute, DefaultTimeToLive: infinite})
	check(fq, dlq.Settings{Path: fq, Kind: dlq.KindQueue, Status: "Active", LockDuration: time.Minute, MaxDeliveryCount: 10,
		DuplicateDetectionWindow: 10 * time.Minute, DefaultTimeToLive: infinite, ForwardTo: target})
	check(topic, dlq.Settings{Path: topic, Kind: dlq.KindTopic, Status: "Active", RequiresDuplicateDetection: true,
		DuplicateDetectionWindow: 2 * time.Minute, DefaultTimeToLive: time.Hour})
	check(sub, dlq.Settings{Path: sub, Kind: dlq.KindSubscription, Status: "Active", LockDuration: 20 * time.Second, MaxDeliveryCount: 3,
		RequiresSession: true, DefaultTimeToLive: 30 * time.Minute, DeadLetteringOnMessageExpiration: true, ForwardTo: target})
}

// peek calls Peek and fails the test on an error.
func peek(t *testing.T, c *servicebus.Client, entity string, q dlq.SubQueue, from int64, max int) []dlq.Message {
	t.Helper()
	msgs, err := c.Peek(testCtx(t), entity, q, from, max)
	if err != nil {
		t.Fatalf("Peek(%s, %s, %d, %d): %v", entity, q, from, max, err)
	}
	return msgs
}

// peekAll pages through a subqueue until an empty page.
func peekAll(t *testing.T, c *servicebus.Client, entity string, q dlq.SubQueue, page int) []dlq.Message {
	t.Helper()
	var all []dlq.Message
	var from int64
	for i := 0; ; i++ {
		if i > 10000 {
			t.Fatalf("paging %s never ended", entity)
		}
		msgs := peek(t, c, entity, q, from, page)
		if len(msgs) == 0 {
			return all
		}
		checkAscending(t, msgs, from)
		all = append(all, msgs...)
		from = msgs[len(msgs)-1].SequenceNumber + 1
	}
}

// checkAscending checks the Peek contract: numbers >= from, strictly
// ascending.
func checkAscending(t *testing.T, msgs []dlq.Message, from int64) {
	t.Helper()
	prev := from - 1
	for _, m := range msgs {
		if m.SequenceNumber <= prev {
			t.Fatalf("sequence numbers not ascending from %d: %v", from, seqs(msgs))
		}
		prev = m.SequenceNumber
	}
}

func seqs(msgs []dlq.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.SequenceNumber
	}
	return out
}

func bodies(msgs []dlq.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Body)
	}
	return out
}

func (e *env) testPeekDeadLetter(t *testing.T) {
	c := e.open(t)
	q := e.createQueue(t, "dlq", nil)
	e.send(t, q, &azservicebus.Message{Body: []byte("one")}, &azservicebus.Message{Body: []byte("two")}, &azservicebus.Message{Body: []byte("three")})
	e.deadLetter(t, q, 3, "ValidationFailed", "field x is missing")

	got := peek(t, c, q, dlq.SubQueueDeadLetter, 0, 10)
	checkAscending(t, got, 0)
	if b := bodies(got); !reflect.DeepEqual(b, []string{"one", "two", "three"}) {
		t.Fatalf("DLQ bodies %q, want one, two, three", b)
	}
	for _, m := range got {
		if m.State != dlq.StateActive || m.DeadLetterReason == nil || *m.DeadLetterReason != "ValidationFailed" ||
			m.DeadLetterErrorDescription == nil || *m.DeadLetterErrorDescription != "field x is missing" {
			t.Errorf("message %d: state %s, reason %v, description %v", m.SequenceNumber, m.State, str(m.DeadLetterReason), str(m.DeadLetterErrorDescription))
		}
	}
	// The main queue is empty, and so is the transfer DLQ.
	if got := peek(t, c, q, dlq.SubQueueMain, 0, 10); len(got) != 0 {
		t.Errorf("main queue has %d messages, want 0", len(got))
	}
	if got := peek(t, c, q, dlq.SubQueueTransferDeadLetter, 0, 10); len(got) != 0 {
		t.Errorf("transfer DLQ has %d messages, want 0", len(got))
	}
}

func str(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%q", *p)
}

func (e *env) testPeekTransferDeadLetter(t *testing.T) {
	c := e.open(t)
	archive := e.createQueue(t, "tdlq-archive", &admin.QueueProperties{Status: ptr(admin.EntityStatusSendDisabled)})
	q := e.createQueue(t, "tdlq", &admin.QueueProperties{ForwardTo: &archive})
	e.send(t, q, &azservicebus.Message{Body: []byte("invoice-1")}, &azservicebus.Message{Body: []byte("invoice-2")})

	var got []dlq.Message
	waitFor(t, e.h.CountTimeout, "the transfer DLQ to fill", func() (bool, string) {
		got = peek(t, c, q, dlq.SubQueueTransferDeadLetter, 0, 10)
		return len(got) == 2, fmt.Sprintf("%d messages", len(got))
	})
	checkAscending(t, got, 0)
	if b := bodies(got); !reflect.DeepEqual(b, []string{"invoice-1", "invoice-2"}) {
		t.Errorf("transfer DLQ bodies %q", b)
	}
	for _, m := range got {
		if m.DeadLetterReason == nil || *m.DeadLetterReason == "" {
			t.Errorf("message %d has no dead-letter reason", m.SequenceNumber)
		}
	}
	if got := peek(t, c, q, dlq.SubQueueDeadLetter, 0, 10); len(got) != 0 {
		t.Errorf("DLQ has %d messages, want 0", len(got))
	}
}

func (e *env) testPeekSubscriptionDeadLetter(t *testing.T) {
	c := e.open(t)
	topic := e.createTopic(t, "subdlq", nil)
	audit := e.createSubscription(t, topic, "audit", nil)
	other := e.createSubscription(t, topic, "other", nil)
	e.send(t, topic, &azservicebus.Message{Body: []byte("p1"), Subject: ptr("PaymentCaptured")}, &azservicebus.Message{Body: []byte("p2")})
	e.deadLetter(t, audit, 2, "AuditFailed", "no ledger")

	got := peek(t, c, audit, dlq.SubQueueDeadLetter, 0, 10)
	checkAscending(t, got, 0)
	if b := bodies(got); !reflect.DeepEqual(b, []string{"p1", "p2"}) {
		t.Fatalf("subscription DLQ bodies %q", b)
	}
	if got[0].Subject == nil || *got[0].Subject != "PaymentCaptured" || str(got[1].DeadLetterReason) != `"AuditFailed"` {
		t.Errorf("subject %s, reason %s", str(got[0].Subject), str(got[1].DeadLetterReason))
	}
	if got := peek(t, c, other, dlq.SubQueueDeadLetter, 0, 10); len(got) != 0 {
		t.Errorf("the other subscription's DLQ has %d messages", len(got))
	}
	if b := bodies(peek(t, c, other, dlq.SubQueueMain, 0, 10)); !reflect.DeepEqual(b, []string{"p1", "p2"}) {
		t.Errorf("the other subscription holds %q", b)
	}
}

func (e *env) testPeekMainStates(t *testing.T) {
	c := e.open(t)
	q := e.createQueue(t, "states", nil)
	e.send(t, q, &azservicebus.Message{Body: []byte("deferred")}, &azservicebus.Message{Body: []byte("active")})
	r := e.receiver(t, q, nil)
	m := receive(t, r, 1)[0]
	if string(m.Body) != "deferred" {
		t.Fatalf("received %q first", m.Body)
	}
	if err := r.DeferMessage(testCtx(t), m, nil); err != nil {
		t.Fatalf("defer: %v", err)
	}
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	s, err := e.sb.NewSender(q, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if _, err := s.ScheduleMessages(testCtx(t), []*azservicebus.Message{{Body: []byte("scheduled")}}, at, nil); err != nil {
		t.Fatalf("schedule: %v", err)
	}

	got := peek(t, c, q, dlq.SubQueueMain, 0, 10)
	checkAscending(t, got, 0)
	states := map[string]dlq.State{}
	for _, m := range got {
		states[string(m.Body)] = m.State
	}
	want := map[string]dlq.State{"deferred": dlq.StateDeferred, "active": dlq.StateActive, "scheduled": dlq.StateScheduled}
	if !reflect.DeepEqual(states, want) {
		t.Errorf("states %v, want %v", states, want)
	}
	for _, m := range got {
		if string(m.Body) == "scheduled" && (m.ScheduledEnqueueAt == nil || !m.ScheduledEnqueueAt.Equal(at)) {
			t.Errorf("scheduled message: ScheduledEnqueueAt %v, want %v", m.ScheduledEnqueueAt, at)
		}
	}
}

func (e *env) testPeekFrom(t *testing.T) {
	c := e.open(t)
	q := e.createQueue(t, "from", nil)
	var msgs []*azservicebus.Message
	for i := range 10 {
		msgs = append(msgs, &azservicebus.Message{Body: fmt.Appendf(nil, "m%d", i)})
	}
	e.send(t, q, msgs...)
	all := peek(t, c, q, dlq.SubQueueMain, 0, 100)
	if len(all) != 10 {
		t.Fatalf("peeked %d of 10", len(all))
	}
	checkAscending(t, all, 0)

	from := all[4].SequenceNumber
	got := peek(t, c, q, dlq.SubQueueMain, from, 3)
	if !reflect.DeepEqual(seqs(got), seqs(all[4:7])) {
		t.Errorf("Peek from %d max 3: %v, want %v", from, seqs(got), seqs(all[4:7]))
	}
	// From a number between two messages' (none is missing here, so from
	// the last + 1) and past the end.
	if got := peek(t, c, q, dlq.SubQueueMain, all[9].SequenceNumber+1, 10); len(got) != 0 {
		t.Errorf("Peek past the end: %v", seqs(got))
	}
	if got := peek(t, c, q, dlq.SubQueueMain, all[9].SequenceNumber, 10); len(got) != 1 || got[0].SequenceNumber != all[9].SequenceNumber {
		t.Errorf("Peek from the last: %v", seqs(got))
	}
	// A negative from is read as 0.
	if got := peek(t, c, q, dlq.SubQueueMain, -5, 2); !reflect.DeepEqual(seqs(got), seqs(all[:2])) {
		t.Errorf("Peek from -5: %v", seqs(got))
	}
}

func (e *env) testPaging(t *testing.T) {
	c := e.open(t)
	q := e.createQueue(t, "paging", nil)
	var msgs []*azservicebus.Message
	for i := range 23 {
		msgs = append(msgs, &azservicebus.Message{Body: fmt.Appendf(nil, "m%02d", i)})
	}
	e.send(t, q, msgs...)
	got := peekAll(t, c, q, dlq.SubQueueMain, 5)
	if len(got) != 23 {
		t.Fatalf("paged %d of 23", len(got))
	}
	for i, m := range got {
		if want := fmt.Sprintf("m%02d", i); string(m.Body) != want {
			t.Fatalf("message %d is %q, want %q", i, m.Body, want)
		}
	}

	e.deadLetter(t, q, 7, "r", "d")
	dl := peekAll(t, c, q, dlq.SubQueueDeadLetter, 3)
	if len(dl) != 7 {
		t.Fatalf("paged %d of 7 DLQ messages", len(dl))
	}
	if !reflect.DeepEqual(seqs(dl), seqs(got[:7])) {
		t.Errorf("dead-lettered numbers %v, want %v (they keep theirs)", seqs(dl), seqs(got[:7]))
	}
}

func (e *env) testOutOfOrderDeadLetter(t *testing.T) {
	c := e.open(t)
	q := e.createQueue(t, "ooo", nil)
	e.send(t, q, &azservicebus.Message{Body: []byte("early")}, &azservicebus.Message{Body: []byte("mid")}, &azservicebus.Message{Body: []byte("late")})
	r := e.receiver(t, q, nil)
	got := receive(t, r, 3)
	byBody := map[string]*azservicebus.ReceivedMessage{}
	for _, m := range got {
		byBody[string(m.Body)] = m
	}
	for _, b := range []string{"mid", "late"} {
		if err := r.DeadLetterMessage(testCtx(t), byBody[b], nil); err != nil {
			t.Fatalf("dead-letter %s: %v", b, err)
		}
	}
	first := peek(t, c, q, dlq.SubQueueDeadLetter, 0, 10)
	if b := bodies(first); !reflect.DeepEqual(b, []string{"mid", "late"}) {
		t.Fatalf("first read %q", b)
	}
	tail := first[len(first)-1].SequenceNumber + 1

	// The early message is dead-lettered last, and keeps its low number.
	if err := r.DeadLetterMessage(testCtx(t), byBody["early"], nil); err != nil {
		t.Fatalf("dead-letter early: %v", err)
	}
	if got := peek(t, c, q, dlq.SubQueueDeadLetter, tail, 10); len(got) != 0 {
		t.Errorf("reading the tail after %d found %q; the late arrival has a lower number", tail-1, bodies(got))
	}
	again := peek(t, c, q, dlq.SubQueueDeadLetter, 0, 10)
	if b := bodies(again); !reflect.DeepEqual(b, []string{"early", "mid", "late"}) {
		t.Fatalf("re-read from 0: %q", b)
	}
	if again[0].SequenceNumber >= first[0].SequenceNumber {
		t.Errorf("early's number %d is not below those already read %v", again[0].SequenceNumber, seqs(first))
	}
}

// fieldMessages are sent by testFields: every body shape and property type
// the catalog must keep exactly.
func fieldMessages() []*azservicebus.Message {
	big := make([]byte, 200*1024)
	for i := range big {
		big[i] = byte(i * 7)
	}
	props := map[string]any{
		"string":  "héllo <b>",
		"empty":   "",
		"int64":   int64(math.MaxInt64),
		"big":     int64(1<<53 + 1),
		"neg":     int64(-1 << 60),
		"int32":   int32(-7),
		"int16":   int16(300),
		"int8":    int8(-3),
		"uint64":  uint64(math.MaxUint64),
		"uint32":  uint32(4000000000),
		"uint16":  uint16(65000),
		"uint8":   uint8(200),
		"float64": 3.141592653589793,
		"float32": float32(1.5),
		"bool":    true,
		"false":   false,
		"time":    time.Date(2026, 11, 22, 10, 42, 7, 123000000, time.UTC),
		"bytes":   []byte{0, 1, 2, 0xff},
		"uuid":    amqp.UUID{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef},
		"nil":     nil,
	}
	return []*azservicebus.Message{
		{
			Body:                  []byte(`{"order":42}`),
			MessageID:             ptr("msg-all-fields"),
			CorrelationID:         ptr("corr-1"),
			Subject:               ptr("OrderPlaced"),
			ContentType:           ptr("application/json"),
			ReplyTo:               ptr("replies"),
			ReplyToSessionID:      ptr("reply-session"),
			To:                    ptr("orders-service"),
			TimeToLive:            ptr(time.Hour),
			ApplicationProperties: props,
		},
		{Body: []byte{0xff, 0xfe, 0x00, 0xc3, 0x28, 0x80}, MessageID: ptr("binary"), ContentType: ptr("application/octet-stream")},
		{Body: []byte{}, MessageID: ptr("empty")},
		{Body: big, MessageID: ptr("big")},
		{Body: []byte("plain"), MessageID: ptr("no-props")},
	}
}

func (e *env) testFields(t *testing.T) {
	c := e.open(t)
	q := e.createQueue(t, "fields", nil)
	sent := fieldMessages()
	e.send(t, q, sent...)

	got := peek(t, c, q, dlq.SubQueueMain, 0, 100)
	sdk := e.sdkPeek(t, q, 0, 100)
	compareWithSDK(t, got, sdk)
	compareWithSent(t, got, sent, nil)

	// The same messages dead-lettered: the SDK's view of the DLQ, and the
	// dead-letter fields on top of what was sent.
	e.deadLetter(t, q, len(sent), "Reason <x>", "Description\nwith a newline")
	got = peek(t, c, q, dlq.SubQueueDeadLetter, 0, 100)
	sdk = e.sdkPeek(t, q, azservicebus.SubQueueDeadLetter, 100)
	compareWithSDK(t, got, sdk)
	compareWithSent(t, got, sent, map[string]any{"DeadLetterReason": "Reason <x>", "DeadLetterErrorDescription": "Description\nwith a newline"})
	for _, m := range got {
		if str(m.DeadLetterReason) != `"Reason <x>"` || str(m.DeadLetterErrorDescription) != `"Description\nwith a newline"` {
			t.Errorf("%s: reason %s, description %s", m.MessageID, str(m.DeadLetterReason), str(m.DeadLetterErrorDescription))
		}
	}
}

// testSessionMessageFields covers the session fields, which need a
// session-enabled entity (whose main queue cannot be peeked without a
// session, but whose DLQ can).
func (e *env) testSessionMessageFields(t *testing.T) {
	c := e.open(t)
	q := e.createQueue(t, "sessions", &admin.QueueProperties{RequiresSession: ptr(true)})
	e.send(t, q, &azservicebus.Message{Body: []byte("s"), MessageID: ptr("in-session"), SessionID: ptr("cart-7"), PartitionKey: ptr("cart-7")})
	sr, err := e.sb.AcceptSessionForQueue(testCtx(t), q, "cart-7", nil)
	if err != nil {
		t.Fatalf("accept session: %v", err)
	}
	defer sr.Close(context.Background())
	m := receive(t, sr, 1)[0]
	if err := sr.DeadLetterMessage(testCtx(t), m, nil); err != nil {
		t.Fatalf("dead-letter: %v", err)
	}
	got := peek(t, c, q, dlq.SubQueueDeadLetter, 0, 10)
	compareWithSDK(t, got, e.sdkPeek(t, q, azservicebus.SubQueueDeadLetter, 10))
	if len(got) != 1 || str(got[0].SessionID) != `"cart-7"` || str(got[0].PartitionKey) != `"cart-7"` {
		t.Fatalf("got %+v", got)
	}
	if _, err := c.Peek(testCtx(t), q, dlq.SubQueueMain, 0, 10); err == nil {
		t.Log("note: this namespace lets a session-enabled queue's main queue be peeked without a session")
	}
}

// compareWithSDK checks every field of got against the SDK's own peek of
// the same messages, with the rules of the package documentation.
func compareWithSDK(t *testing.T, got []dlq.Message, sdk []*azservicebus.ReceivedMessage) {
	t.Helper()
	if len(got) != len(sdk) {
		t.Fatalf("Peek returned %d messages, the SDK %d", len(got), len(sdk))
	}
	for i, rm := range sdk {
		want := dlq.Message{
			SequenceNumber:             *rm.SequenceNumber,
			State:                      map[azservicebus.MessageState]dlq.State{0: dlq.StateActive, 1: dlq.StateDeferred, 2: dlq.StateScheduled}[rm.State],
			MessageID:                  rm.MessageID,
			CorrelationID:              rm.CorrelationID,
			SessionID:                  rm.SessionID,
			PartitionKey:               rm.PartitionKey,
			Subject:                    rm.Subject,
			ContentType:                rm.ContentType,
			ReplyTo:                    rm.ReplyTo,
			ReplyToSessionID:           rm.ReplyToSessionID,
			To:                         rm.To,
			DeadLetterReason:           rm.DeadLetterReason,
			DeadLetterErrorDescription: rm.DeadLetterErrorDescription,
			DeadLetterSource:           rm.DeadLetterSource,
			DeliveryCount:              rm.DeliveryCount,
			EnqueuedAt:                 rm.EnqueuedTime,
			ScheduledEnqueueAt:         rm.ScheduledEnqueueTime,
			ApplicationProperties:      dlq.EncodeProperties(rm.ApplicationProperties),
			Body:                       rm.Body,
		}
		if rm.TimeToLive != nil && *rm.TimeToLive > 0 {
			want.TimeToLive, want.ExpiresAt = rm.TimeToLive, rm.ExpiresAt
		}
		compareMessage(t, got[i], want)
	}
}

// compareMessage compares field by field, times by instant and bodies by
// bytes, and names every field that differs.
func compareMessage(t *testing.T, got, want dlq.Message) {
	t.Helper()
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := range gv.NumField() {
		name := gv.Type().Field(i).Name
		g, w := gv.Field(i).Interface(), wv.Field(i).Interface()
		same := false
		switch g := g.(type) {
		case *time.Time:
			w := w.(*time.Time)
			same = (g == nil) == (w == nil) && (g == nil || g.Equal(*w))
			if g != nil && g.Location() != time.UTC {
				t.Errorf("message %d: %s is not UTC", got.SequenceNumber, name)
			}
		case []byte:
			same = bytes.Equal(g, w.([]byte))
		case json.RawMessage:
			same = bytes.Equal(g, w.(json.RawMessage))
		default:
			same = reflect.DeepEqual(g, w)
		}
		if !same {
			t.Errorf("message %d (%s): %s = %s, SDK: %s", got.SequenceNumber, got.MessageID, name, short(g), short(w))
		}
	}
}

func short(v any) string {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		v = rv.Elem().Interface()
	}
	s := fmt.Sprintf("%v", v)
	if b, ok := v.([]byte); ok {
		s = fmt.Sprintf("%d bytes %q", len(b), b)
	}
	if b, ok := v.(json.RawMessage); ok {
		s = string(b)
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// compareWithSent checks what the broker kept of what was sent, in order.
func compareWithSent(t *testing.T, got []dlq.Message, sent []*azservicebus.Message, extraProps map[string]any) {
	t.Helper()
	if len(got) != len(sent) {
		t.Fatalf("peeked %d of %d sent messages", len(got), len(sent))
	}
	for i, s := range sent {
		g := got[i]
		if !bytes.Equal(g.Body, s.Body) {
			t.Errorf("%s: body of %d bytes, sent %d", *s.MessageID, len(g.Body), len(s.Body))
		}
		if g.Body == nil {
			t.Errorf("%s: nil body; want non-nil even when empty", *s.MessageID)
		}
		props := map[string]any{}
		for k, v := range s.ApplicationProperties {
			props[k] = v
		}
		for k, v := range extraProps {
			props[k] = v
		}
		if want := dlq.EncodeProperties(props); !bytes.Equal(g.ApplicationProperties, want) {
			t.Errorf("%s: properties\n got %s\nwant %s", *s.MessageID, g.ApplicationProperties, want)
		}
		same := func(name string, got, want *string) {
			if (got == nil) != (want == nil) || (got != nil && *got != *want) {
				t.Errorf("%s: %s = %s, sent %s", *s.MessageID, name, str(got), str(want))
			}
		}
		if g.MessageID != *s.MessageID {
			t.Errorf("MessageID %q, sent %q", g.MessageID, *s.MessageID)
		}
		same("CorrelationID", g.CorrelationID, s.CorrelationID)
		same("Subject", g.Subject, s.Subject)
		same("ContentType", g.ContentType, s.ContentType)
		same("ReplyTo", g.ReplyTo, s.ReplyTo)
		same("ReplyToSessionID", g.ReplyToSessionID, s.ReplyToSessionID)
		same("To", g.To, s.To)
		if s.TimeToLive != nil {
			if g.TimeToLive == nil || *g.TimeToLive != *s.TimeToLive {
				t.Errorf("%s: TimeToLive %v, sent %v", *s.MessageID, g.TimeToLive, *s.TimeToLive)
			}
			if g.ExpiresAt == nil || g.EnqueuedAt == nil || !g.ExpiresAt.Equal(g.EnqueuedAt.Add(*s.TimeToLive)) {
				t.Errorf("%s: ExpiresAt %v, EnqueuedAt %v, TTL %v", *s.MessageID, g.ExpiresAt, g.EnqueuedAt, *s.TimeToLive)
			}
		}
		if g.EnqueuedAt == nil || time.Since(*g.EnqueuedAt) > time.Hour || time.Since(*g.EnqueuedAt) < -time.Minute {
			t.Errorf("%s: EnqueuedAt %v", *s.MessageID, g.EnqueuedAt)
		}
		if g.State != dlq.StateActive {
			t.Errorf("%s: state %s", *s.MessageID, g.State)
		}
	}
}

func (e *env) testNonDataBodies(t *testing.T) {
	c := e.open(t)
	q := e.createQueue(t, "bodies", nil)
	uuid := amqp.UUID{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}
	cases := []struct {
		msg      *azservicebus.AMQPAnnotatedMessage
		body     string
		id, corr string
	}{
		{&azservicebus.AMQPAnnotatedMessage{Body: azservicebus.AMQPAnnotatedMessageBody{Data: [][]byte{[]byte("ab"), []byte("cd"), []byte("ef")}},
			Properties: &azservicebus.AMQPAnnotatedMessageProperties{MessageID: "multi-data"}}, "abcdef", "multi-data", ""},
		{&azservicebus.AMQPAnnotatedMessage{Body: azservicebus.AMQPAnnotatedMessageBody{Value: "héllo"},
			Properties: &azservicebus.AMQPAnnotatedMessageProperties{MessageID: uint64(42), CorrelationID: uuid}}, "héllo", "42", "12345678-9abc-def0-0123-456789abcdef"},
		{&azservicebus.AMQPAnnotatedMessage{Body: azservicebus.AMQPAnnotatedMessageBody{Value: []byte{1, 2, 0xff}},
			Properties: &azservicebus.AMQPAnnotatedMessageProperties{MessageID: uuid, CorrelationID: []byte{0xca, 0xfe}}}, "\x01\x02\xff", "12345678-9abc-def0-0123-456789abcdef", "cafe"},
		{&azservicebus.AMQPAnnotatedMessage{Body: azservicebus.AMQPAnnotatedMessageBody{Value: map[string]any{"n": int64(1<<60 + 1), "s": "x", "b": true, "l": []any{int32(1), "two"}}},
			Properties: &azservicebus.AMQPAnnotatedMessageProperties{MessageID: "value-map"}}, `{"b":true,"l":[1,"two"],"n":1152921504606846977,"s":"x"}`, "value-map", ""},
		{&azservicebus.AMQPAnnotatedMessage{Body: azservicebus.AMQPAnnotatedMessageBody{Value: int64(-12)},
			Properties: &azservicebus.AMQPAnnotatedMessageProperties{MessageID: "value-int"}}, `-12`, "value-int", ""},
		{&azservicebus.AMQPAnnotatedMessage{Body: azservicebus.AMQPAnnotatedMessageBody{Sequence: [][]any{{"a", int64(1)}, {true}}},
			Properties: &azservicebus.AMQPAnnotatedMessageProperties{MessageID: "sequence"}}, `["a",1,true]`, "sequence", ""},
	}
	for _, tc := range cases {
		e.sendAMQP(t, q, tc.msg)
	}
	got := peek(t, c, q, dlq.SubQueueMain, 0, 100)
	if len(got) != len(cases) {
		t.Fatalf("peeked %d of %d", len(got), len(cases))
	}
	for i, tc := range cases {
		g := got[i]
		if string(g.Body) != tc.body {
			t.Errorf("%s: body %q, want %q", tc.id, g.Body, tc.body)
		}
		if g.MessageID != tc.id {
			t.Errorf("MessageID %q, want %q", g.MessageID, tc.id)
		}
		if tc.corr != "" && str(g.CorrelationID) != fmt.Sprintf("%q", tc.corr) {
			t.Errorf("%s: CorrelationID %s, want %q", tc.id, str(g.CorrelationID), tc.corr)
		}
	}
}

// wrongKey returns the harness's connection string with a key (or
// signature) that the namespace will refuse, and that secret.
func wrongKey(connStr string) (string, string) {
	const bogus = "bm90IHRoZSBrZXkgeW91IGFyZSBsb29raW5nIGZvcg=="
	parts := strings.Split(connStr, ";")
	for i, p := range parts {
		k, v, _ := strings.Cut(p, "=")
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "sharedaccesskey":
			parts[i] = k + "=" + bogus
		case "sharedaccesssignature":
			if before, after, ok := strings.Cut(v, "sig="); ok {
				_, rest, _ := strings.Cut(after, "&")
				parts[i] = k + "=" + before + "sig=" + bogus + "&" + rest
			}
		}
	}
	return strings.Join(parts, ";"), bogus
}

func (e *env) testWrongKey(t *testing.T) {
	q := e.createQueue(t, "wrongkey", nil)
	conn, secret := wrongKey(e.h.ConnectionString)
	c, err := servicebus.Open(t.Context(), conn, e.h.Options)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer c.Close(context.Background())

	_, err = c.Entities(testCtx(t))
	checkErr(t, "Entities", err, dlq.ErrUnauthorized, secret)
	_, err = c.Settings(testCtx(t))
	checkErr(t, "Settings", err, dlq.ErrUnauthorized, secret)
	_, err = c.Peek(testCtx(t), q, dlq.SubQueueDeadLetter, 0, 10)
	checkErr(t, "Peek", err, dlq.ErrUnauthorized, secret)
	if err != nil && !strings.Contains(err.Error(), "SharedAccessKey") {
		t.Errorf("Peek error does not say what to check: %v", err)
	}
}

// checkErr checks that err matches want and does not leak secret.
func checkErr(t *testing.T, what string, err, want error, secret string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: error %v, want %v", what, err, want)
		return
	}
	if secret != "" && strings.Contains(err.Error(), secret) {
		t.Errorf("%s: the error shows the key: %v", what, err)
	}
	t.Logf("%s: %v", what, err)
}

func (e *env) testMissingEntity(t *testing.T) {
	c := e.open(t)
	topic := e.createTopic(t, "missing-topic", nil)
	missingQ := e.name(t, "no-such-queue")
	for _, tc := range []struct {
		entity string
		q      dlq.SubQueue
	}{
		{missingQ, dlq.SubQueueDeadLetter},
		{missingQ, dlq.SubQueueMain},
		{missingQ, dlq.SubQueueTransferDeadLetter},
		{topic + "/Subscriptions/no-such-sub", dlq.SubQueueDeadLetter},
		{e.name(t, "no-such-topic") + "/Subscriptions/s", dlq.SubQueueDeadLetter},
	} {
		_, err := c.Peek(testCtx(t), tc.entity, tc.q, 0, 10)
		checkErr(t, fmt.Sprintf("Peek(%s, %s)", tc.entity, tc.q), err, dlq.ErrEntityNotFound, "")
	}

	// The receiver of a missing entity is not kept: once the queue exists,
	// the same peek works.
	e.createQueue(t, "no-such-queue", nil)
	waitFor(t, e.h.CountTimeout, "the new queue to be peekable", func() (bool, string) {
		_, err := c.Peek(testCtx(t), missingQ, dlq.SubQueueDeadLetter, 0, 10)
		return err == nil, fmt.Sprint(err)
	})

	// And a queue deleted under a cached receiver reports not found.
	if _, err := e.admin.DeleteQueue(testCtx(t), missingQ, nil); err != nil {
		t.Fatalf("delete: %v", err)
	}
	waitFor(t, e.h.CountTimeout, "the deleted queue to be reported missing", func() (bool, string) {
		_, err := c.Peek(testCtx(t), missingQ, dlq.SubQueueDeadLetter, 0, 10)
		return errors.Is(err, dlq.ErrEntityNotFound), fmt.Sprint(err)
	})
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func (e *env) testUnreachable(t *testing.T) {
	amqpAddr, adminAddr := closedPort(t), closedPort(t)
	conn := "Endpoint=sb://" + amqpAddr + ";SharedAccessKeyName=k;SharedAccessKey=c2VjcmV0LWtleQ==;UseDevelopmentEmulator=true"
	c, err := servicebus.Open(t.Context(), conn, servicebus.Options{AdminEndpoint: "http://" + adminAddr})
	if err != nil {
		t.Fatalf("Open does no I/O and must succeed: %v", err)
	}
	defer c.Close(context.Background())
	if got := c.Namespace(); got != amqpAddr {
		t.Errorf("Namespace() = %q, want %q", got, amqpAddr)
	}

	// With the default retry policy: fast, not after the SDK's ~30 s.
	const quick = 10 * time.Second
	start := time.Now()
	_, err = c.Entities(testCtx(t))
	checkErr(t, "Entities", err, dlq.ErrUnreachable, "c2VjcmV0LWtleQ==")
	if d := time.Since(start); d > quick {
		t.Errorf("Entities took %s to fail", d)
	}
	start = time.Now()
	_, err = c.Peek(testCtx(t), "orders", dlq.SubQueueDeadLetter, 0, 10)
	checkErr(t, "Peek", err, dlq.ErrUnreachable, "c2VjcmV0LWtleQ==")
	if d := time.Since(start); d > quick {
		t.Errorf("Peek took %s to fail", d)
	}

	// The caller's deadline is honoured and reported as unreachable.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err = c.Peek(ctx, "orders", dlq.SubQueueDeadLetter, 0, 10)
	if !errors.Is(err, dlq.ErrUnreachable) && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Peek with a short deadline: %v", err)
	}
	// Cancellation is the caller's, not the broker's.
	ctx, cancel = context.WithCancel(t.Context())
	cancel()
	_, err = c.Peek(ctx, "orders", dlq.SubQueueDeadLetter, 0, 10)
	if !errors.Is(err, context.Canceled) || errors.Is(err, dlq.ErrUnreachable) {
		t.Errorf("Peek with a cancelled context: %v", err)
	}
}

func (e *env) testServerBusy(t *testing.T) {
	if e.h.InjectServerBusy == nil {
		t.Skip("the harness cannot make the namespace throttle")
	}
	c := e.open(t)
	q := e.createQueue(t, "busy", nil)
	e.send(t, q, &azservicebus.Message{Body: []byte("x")})
	e.deadLetter(t, q, 1, "r", "d")
	if got := peek(t, c, q, dlq.SubQueueDeadLetter, 0, 10); len(got) != 1 {
		t.Fatalf("peeked %d", len(got))
	}

	// More faulted operations than the adapter's retries.
	e.h.InjectServerBusy(q, 100)
	t.Cleanup(e.h.ClearFaults)
	start := time.Now()
	_, err := c.Peek(testCtx(t), q, dlq.SubQueueDeadLetter, 0, 10)
	checkErr(t, "Peek while busy", err, dlq.ErrThrottled, "")
	var te *dlq.ThrottledError
	if !errors.As(err, &te) {
		t.Errorf("error %T is not a *dlq.ThrottledError", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s to report throttling", d)
	}
	e.h.ClearFaults()
	if got := peek(t, c, q, dlq.SubQueueDeadLetter, 0, 10); len(got) != 1 {
		t.Errorf("after the fault: peeked %d", len(got))
	}
}

func (e *env) testConcurrent(t *testing.T) {
	c := e.open(t)
	const n = 6
	queues := make([]string, n)
	for i := range queues {
		queues[i] = e.createQueue(t, fmt.Sprintf("conc-%d", i), nil)
		var msgs []*azservicebus.Message
		for j := 0; j <= i; j++ {
			msgs = append(msgs, &azservicebus.Message{Body: fmt.Appendf(nil, "%d-%d", i, j)})
		}
		e.send(t, queues[i], msgs...)
		e.deadLetter(t, queues[i], i+1, "r", "d")
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4*n*10)
	for i, q := range queues {
		for _, sq := range []dlq.SubQueue{dlq.SubQueueDeadLetter, dlq.SubQueueMain} {
			wg.Go(func() {
				for range 10 {
					msgs, err := c.Peek(t.Context(), q, sq, 0, 100)
					if err != nil {
						errs <- err
						return
					}
					want := 0
					if sq == dlq.SubQueueDeadLetter {
						want = i + 1
					}
					if len(msgs) != want {
						errs <- fmt.Errorf("%s %s: %d messages, want %d", q, sq, len(msgs), want)
						return
					}
				}
			})
		}
	}
	// The same (entity, subqueue) from two goroutines is allowed too: the
	// peeks take turns.
	for range 2 {
		wg.Go(func() {
			for range 5 {
				if _, err := c.Peek(t.Context(), queues[0], dlq.SubQueueDeadLetter, 0, 100); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Go(func() {
		if _, err := c.Entities(t.Context()); err != nil {
			errs <- err
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func (e *env) testClose(t *testing.T) {
	q := e.createQueue(t, "close", nil)
	c, err := e.openClient(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Peek(testCtx(t), q, dlq.SubQueueDeadLetter, 0, 10); err != nil {
		t.Fatalf("Peek: %v", err)
	}
	// Close while peeks run: they end, with messages or ErrClosed.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				_, err := c.Peek(t.Context(), q, dlq.SubQueueDeadLetter, 0, 10)
				if errors.Is(err, servicebus.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("Peek during Close: %v", err)
					return
				}
			}
		})
	}
	if err := c.Close(testCtx(t)); err != nil {
		t.Errorf("Close: %v", err)
	}
	wg.Wait()
	if err := c.Close(testCtx(t)); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := c.Peek(testCtx(t), q, dlq.SubQueueDeadLetter, 0, 10); !errors.Is(err, servicebus.ErrClosed) {
		t.Errorf("Peek after Close: %v", err)
	}
	if _, err := c.Entities(testCtx(t)); !errors.Is(err, servicebus.ErrClosed) {
		t.Errorf("Entities after Close: %v", err)
	}
	if _, err := c.Settings(testCtx(t)); !errors.Is(err, servicebus.ErrClosed) {
		t.Errorf("Settings after Close: %v", err)
	}
}
