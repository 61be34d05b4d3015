package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Options tune the simulated traffic. The zero value is the demo's default.
type Options struct {
	Logger *slog.Logger
	// Seed makes the traffic reproducible; 0 picks one from the clock.
	Seed uint64
	// Scale multiplies the size of the initial burst; 1 (the default)
	// leaves about three thousand dead letters behind.
	Scale float64
	// Interval is the pause between two trickle sends; default 1 s.
	Interval time.Duration
	// Namespace is the demo namespace the traffic is for (NamespaceEU or
	// NamespaceUS, set by ForNamespace; "" is prod-eu): it must match how
	// the namespace was provisioned (ProvisionNamespace).
	Namespace string
	Now       func() time.Time
}

// Summary tells what the burst left behind, as the consumers saw it.
type Summary struct {
	Sent int
	// DeadLettered counts dead letters by entity path and reason, including
	// MaxDeliveryCountExceeded where a consumer's abandon exhausted the
	// entity's MaxDeliveryCount.
	DeadLettered map[string]map[string]int
	Deferred     int
	Scheduled    int
	// Expiring is the number of messages sent to a subscription nobody
	// consumes; the broker dead-letters them when their TTL runs out.
	Expiring int
	// Forwarded is the number of invoices sent to a queue that
	// auto-forwards to a send-disabled archive (prod-eu's); the broker parks
	// them in the queue's transfer dead-letter queue.
	Forwarded int
}

// Traffic drives producers and failing consumers through the SDK.
type Traffic struct {
	client *azservicebus.Client
	owned  bool // Dial made client; Close closes it
	log    *slog.Logger
	now    func() time.Time
	scale  float64
	every  time.Duration
	site   site

	mu       sync.Mutex
	rnd      *rand.Rand
	seq      int
	expected map[string]int // consumer → messages routed to it
	finished map[string]int // consumer → messages it settled for good
	summary  Summary
	progress chan struct{}
	wg       sync.WaitGroup
}

// New prepares traffic against client. Nothing runs until Start.
func New(client *azservicebus.Client, o Options) *Traffic {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Scale <= 0 {
		o.Scale = 1
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.Seed == 0 {
		o.Seed = uint64(o.Now().UnixNano())
	}
	return &Traffic{
		client:   client,
		log:      o.Logger,
		now:      o.Now,
		scale:    o.Scale,
		every:    o.Interval,
		site:     siteOf(o.Namespace),
		rnd:      rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15)),
		expected: map[string]int{},
		finished: map[string]int{},
		summary:  Summary{DeadLettered: map[string]map[string]int{}},
		progress: make(chan struct{}, 1),
	}
}

// consumer describes one simulated service reading one entity.
type consumer struct {
	path     string // how it appears in the summary
	queue    string
	topic    string
	sub      string
	sessions bool
	maxDeliv int32
	process  func(*azservicebus.ReceivedMessage) verdict
}

func (t *Traffic) consumers() []consumer {
	return []consumer{
		{path: QueueOrders, queue: QueueOrders, maxDeliv: ordersMaxDeliver, process: processOrder},
		{path: QueueEmail, queue: QueueEmail, maxDeliv: 10, process: processEmail},
		{path: QueueInventory, queue: QueueInventory, sessions: true, maxDeliv: 3, process: processStockUpdate},
		{path: QueueShipping, queue: QueueShipping, maxDeliv: 10, process: func(*azservicebus.ReceivedMessage) verdict { return ok() }},
		{path: TopicPayments + "/Subscriptions/" + SubLedger, topic: TopicPayments, sub: SubLedger, maxDeliv: 10, process: processLedger},
		{path: TopicPayments + "/Subscriptions/" + SubFraudCheck, topic: TopicPayments, sub: SubFraudCheck, maxDeliv: fraudMaxDeliver, process: processFraudCheck},
	}
}

// Start launches the consumers; they run until ctx ends. Wait waits for them.
func (t *Traffic) Start(ctx context.Context) {
	for _, c := range t.consumers() {
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			if c.sessions {
				t.consumeSessions(ctx, c)
				return
			}
			t.consume(ctx, c)
		}()
	}
}

// Wait blocks until every consumer started by Start has returned.
func (t *Traffic) Wait() { t.wg.Wait() }

// settler is what the session and non-session receivers share.
type settler interface {
	ReceiveMessages(ctx context.Context, n int, o *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
	CompleteMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.CompleteMessageOptions) error
	AbandonMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.AbandonMessageOptions) error
	DeferMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.DeferMessageOptions) error
	DeadLetterMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.DeadLetterOptions) error
}

func (t *Traffic) consume(ctx context.Context, c consumer) {
	var (
		r   *azservicebus.Receiver
		err error
	)
	if c.topic != "" {
		r, err = t.client.NewReceiverForSubscription(c.topic, c.sub, nil)
	} else {
		r, err = t.client.NewReceiverForQueue(c.queue, nil)
	}
	if err != nil {
		t.log.Error("demo consumer could not start", "entity", c.path, "error", err)
		return
	}
	defer r.Close(context.WithoutCancel(ctx))
	for ctx.Err() == nil {
		msgs, err := r.ReceiveMessages(ctx, 100, nil)
		if err != nil {
			if ctx.Err() == nil {
				t.log.Warn("demo consumer receive failed; retrying", "entity", c.path, "error", err)
				sleep(ctx, time.Second)
			}
			continue
		}
		for _, m := range msgs {
			t.handle(ctx, c, r, m)
		}
	}
}

func (t *Traffic) consumeSessions(ctx context.Context, c consumer) {
	for ctx.Err() == nil {
		acceptCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		r, err := t.client.AcceptNextSessionForQueue(acceptCtx, c.queue, nil)
		cancel()
		if err != nil {
			var sbErr *azservicebus.Error
			if ctx.Err() == nil && !(errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeTimeout) {
				t.log.Warn("demo session consumer could not accept a session; retrying", "entity", c.path, "error", err)
				sleep(ctx, time.Second)
			}
			continue
		}
		// Drain the session, then let another one have a turn.
		for ctx.Err() == nil {
			rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			msgs, err := r.ReceiveMessages(rctx, 50, nil)
			cancel()
			if err != nil || len(msgs) == 0 {
				break
			}
			for _, m := range msgs {
				t.handle(ctx, c, r, m)
			}
		}
		_ = r.Close(context.WithoutCancel(ctx))
	}
}

func (t *Traffic) handle(ctx context.Context, c consumer, r settler, m *azservicebus.ReceivedMessage) {
	v := c.process(m)
	var (
		err   error
		final = true
	)
	switch v.action {
	case complete:
		err = r.CompleteMessage(ctx, m, nil)
	case deferIt:
		err = r.DeferMessage(ctx, m, nil)
	case deadLetter:
		err = r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{
			Reason:           ptr(v.reason),
			ErrorDescription: ptr(v.description),
			PropertiesToModify: map[string]any{
				"failedBy": "contoso-" + c.path + "-worker",
			},
		})
	case abandon:
		// The broker dead-letters the message itself once this delivery was
		// the last one MaxDeliveryCount allows.
		final = int32(m.DeliveryCount) >= c.maxDeliv
		err = r.AbandonMessage(ctx, m, &azservicebus.AbandonMessageOptions{
			PropertiesToModify: map[string]any{"lastError": v.reason + ": " + firstLine(v.description)},
		})
		if final {
			v.reason = "MaxDeliveryCountExceeded"
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			t.log.Warn("demo consumer could not settle a message", "entity", c.path, "sequence_number", m.SequenceNumber, "error", err)
		}
		return
	}
	if !final {
		return
	}
	t.mu.Lock()
	t.finished[c.path]++
	switch {
	case v.action == deferIt:
		t.summary.Deferred++
	case v.action != complete:
		byReason := t.summary.DeadLettered[c.path]
		if byReason == nil {
			byReason = map[string]int{}
			t.summary.DeadLettered[c.path] = byReason
		}
		byReason[v.reason]++
	}
	t.mu.Unlock()
	select {
	case t.progress <- struct{}{}:
	default:
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// Seed sends the initial burst and returns once the consumers have settled
// every message of it for good.
func (t *Traffic) Seed(ctx context.Context) (Summary, error) {
	n := func(base int) int { return max(1, int(float64(base)*t.scale)) }
	start := t.now()
	if err := t.send(ctx, QueueOrders, n(6000), t.orders); err != nil {
		return Summary{}, err
	}
	if err := t.send(ctx, TopicPayments, n(2200), t.payments); err != nil {
		return Summary{}, err
	}
	if err := t.send(ctx, QueueEmail, n(1500), t.emails); err != nil {
		return Summary{}, err
	}
	if err := t.send(ctx, QueueInventory, n(900), t.stock); err != nil {
		return Summary{}, err
	}
	if err := t.send(ctx, QueueShipping, n(400), t.labels); err != nil {
		return Summary{}, err
	}
	if err := t.send(ctx, QueueInvoices, n(250), t.invoices); err != nil {
		return Summary{}, err
	}
	if err := t.scheduleReminders(ctx, n(40)); err != nil {
		return Summary{}, err
	}
	for {
		t.mu.Lock()
		pending := 0
		for path, want := range t.expected {
			pending += max(0, want-t.finished[path])
		}
		t.mu.Unlock()
		if pending == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return Summary{}, fmt.Errorf("demo burst: %d messages still being processed: %w", pending, ctx.Err())
		case <-t.progress:
		case <-time.After(time.Second):
		}
	}
	s := t.Summary()
	t.log.Info("demo burst processed", "sent", s.Sent, "dead_lettered", s.deadLettered(), "deferred", s.Deferred,
		"scheduled", s.Scheduled, "expiring", s.Expiring, "transfer_dead_lettered", s.Forwarded, "took", t.now().Sub(start).Round(time.Millisecond))
	return s, nil
}

// Summary returns a copy of what the consumers have reported so far.
func (t *Traffic) Summary() Summary {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.summary
	s.DeadLettered = map[string]map[string]int{}
	for path, byReason := range t.summary.DeadLettered {
		s.DeadLettered[path] = map[string]int{}
		for reason, c := range byReason {
			s.DeadLettered[path][reason] = c
		}
	}
	return s
}

func (s Summary) deadLettered() int {
	total := 0
	for _, byReason := range s.DeadLettered {
		for _, c := range byReason {
			total += c
		}
	}
	return total
}

// Reasons lists "entity: reason" keys in a stable order, for logs and tests.
func (s Summary) Reasons() []string {
	var out []string
	for path, byReason := range s.DeadLettered {
		for reason := range byReason {
			out = append(out, path+": "+reason)
		}
	}
	sort.Strings(out)
	return out
}

// Trickle keeps a slow, steady stream of traffic going until ctx ends, so
// that a newcomer watching the dashboard sees it change.
func (t *Traffic) Trickle(ctx context.Context) error {
	tick := time.NewTicker(t.every)
	defer tick.Stop()
	producers := []struct {
		entity string
		make   func(int) []*azservicebus.Message
	}{
		{QueueOrders, t.orders}, {QueueOrders, t.orders}, {TopicPayments, t.payments},
		{QueueEmail, t.emails}, {QueueInventory, t.stock}, {QueueShipping, t.labels},
		{QueueInvoices, t.invoices},
	}
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		t.mu.Lock()
		p := producers[t.rnd.IntN(len(producers))]
		count := 1 + t.rnd.IntN(3)
		t.mu.Unlock()
		if err := t.send(ctx, p.entity, count, p.make); err != nil && ctx.Err() == nil {
			t.log.Warn("demo trickle send failed", "entity", p.entity, "error", err)
		}
		if i%60 == 59 {
			if err := t.scheduleReminders(ctx, 1); err != nil && ctx.Err() == nil {
				t.log.Warn("demo trickle schedule failed", "entity", QueueEmail, "error", err)
			}
		}
	}
}

// send builds count messages with mk and sends them in batches.
func (t *Traffic) send(ctx context.Context, entity string, count int, mk func(int) []*azservicebus.Message) error {
	msgs := mk(count)
	s, err := t.client.NewSender(entity, nil)
	if err != nil {
		return fmt.Errorf("demo sender for %s: %w", entity, err)
	}
	defer s.Close(context.WithoutCancel(ctx))
	for len(msgs) > 0 {
		b, err := s.NewMessageBatch(ctx, nil)
		if err != nil {
			return fmt.Errorf("demo batch for %s: %w", entity, err)
		}
		added := 0
		for _, m := range msgs {
			if err := b.AddMessage(m, nil); err != nil {
				if errors.Is(err, azservicebus.ErrMessageTooLarge) && added > 0 {
					break
				}
				return fmt.Errorf("demo batch for %s: %w", entity, err)
			}
			added++
		}
		if err := s.SendMessageBatch(ctx, b, nil); err != nil {
			return fmt.Errorf("demo send to %s: %w", entity, err)
		}
		msgs = msgs[added:]
	}
	t.mu.Lock()
	t.summary.Sent += count
	t.mu.Unlock()
	return nil
}

// The generators below run under t.mu: they use the shared random source
// and record which consumer each message is routed to.

func (t *Traffic) next() int { t.seq++; return t.seq }

func (t *Traffic) orders(n int) []*azservicebus.Message {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*azservicebus.Message, n)
	for i := range out {
		out[i] = newOrder(t.rnd, t.now(), t.next())
	}
	t.expected[QueueOrders] += n
	return out
}

func (t *Traffic) payments(n int) []*azservicebus.Message {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*azservicebus.Message, n)
	for i := range out {
		m, region := newPayment(t.rnd, t.next())
		out[i] = m
		t.expected[TopicPayments+"/Subscriptions/"+SubLedger]++
		if region == t.site.fraudRegion {
			t.expected[TopicPayments+"/Subscriptions/"+SubFraudCheck]++
		}
		if *m.Subject == "PaymentCaptured" {
			t.summary.Expiring++
		}
	}
	return out
}

func (t *Traffic) emails(n int) []*azservicebus.Message {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*azservicebus.Message, n)
	for i := range out {
		out[i] = newEmail(t.rnd, t.next())
	}
	t.expected[QueueEmail] += n
	return out
}

func (t *Traffic) stock(n int) []*azservicebus.Message {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*azservicebus.Message, n)
	for i := range out {
		out[i] = newStockUpdate(t.rnd, t.next(), t.now())
	}
	t.expected[QueueInventory] += n
	return out
}

func (t *Traffic) labels(n int) []*azservicebus.Message {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*azservicebus.Message, n)
	for i := range out {
		out[i] = newLabel(t.rnd, t.next())
	}
	t.expected[QueueShipping] += n
	return out
}

func (t *Traffic) invoices(n int) []*azservicebus.Message {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*azservicebus.Message, n)
	for i := range out {
		out[i] = newInvoice(t.rnd, t.next(), t.now())
	}
	if t.site.archiveFrozen {
		t.summary.Forwarded += n
	}
	return out
}

// scheduleReminders schedules review-reminder emails hours ahead; they sit
// in the email queue as scheduled messages.
func (t *Traffic) scheduleReminders(ctx context.Context, n int) error {
	s, err := t.client.NewSender(QueueEmail, nil)
	if err != nil {
		return fmt.Errorf("demo sender for %s: %w", QueueEmail, err)
	}
	defer s.Close(context.WithoutCancel(ctx))
	for range n {
		t.mu.Lock()
		m := newReminder(t.rnd, t.next())
		at := t.now().Add(time.Duration(1+t.rnd.IntN(72)) * time.Hour).Truncate(time.Minute)
		t.mu.Unlock()
		if _, err := s.ScheduleMessages(ctx, []*azservicebus.Message{m}, at, nil); err != nil {
			return fmt.Errorf("demo schedule on %s: %w", QueueEmail, err)
		}
		t.mu.Lock()
		t.summary.Scheduled++
		t.mu.Unlock()
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
