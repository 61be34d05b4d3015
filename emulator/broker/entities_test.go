package broker

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

func TestEntityCRUD(t *testing.T) {
	ns, clk := newNS(t)
	if ns.Name() != "sbemulatorns" {
		t.Fatalf("name %q", ns.Name())
	}
	ns.SetName("other")
	if ns.Name() != "other" {
		t.Fatal("SetName")
	}
	qi, err := ns.CreateQueue("Beta", QueueProperties{})
	mustNil(t, err)
	want := DefaultQueueProperties()
	want.EnableBatchedOperations = false // a bool cannot be defaulted from its zero value
	if !reflect.DeepEqual(qi.Properties, want) || !qi.CreatedAt.Equal(clk.Now()) {
		t.Fatalf("zero properties not defaulted: %+v", qi.Properties)
	}
	mustQueue(t, ns, "alpha", nil)
	_, err = ns.CreateQueue("BETA", want)
	wantErr(t, err, ErrAlreadyExists)
	_, err = ns.CreateTopic("beta", DefaultTopicProperties())
	wantErr(t, err, ErrAlreadyExists)
	mustNil(t, ns.CreateTopicDefault("t"))
	_, err = ns.CreateQueue("T", want)
	wantErr(t, err, ErrAlreadyExists)
	for _, bad := range []func(*QueueProperties){
		func(p *QueueProperties) { p.LockDuration = 6 * time.Minute },
		func(p *QueueProperties) { p.MaxDeliveryCount = -1 },
		func(p *QueueProperties) { p.Status = "Weird" },
	} {
		p := DefaultQueueProperties()
		bad(&p)
		_, err := ns.CreateQueue("bad", p)
		wantErr(t, err, ErrInvalidProperties)
	}
	_, err = ns.CreateQueue("", want)
	wantErr(t, err, ErrInvalidProperties)
	names := []string{}
	for _, q := range ns.Queues() {
		names = append(names, q.Name)
	}
	if !slices.Equal(names, []string{"alpha", "Beta"}) {
		t.Fatalf("Queues %v", names)
	}
	clk.Advance(time.Minute)
	p := DefaultQueueProperties()
	p.MaxDeliveryCount = 3
	p.UserMetadata = "meta"
	qi, err = ns.UpdateQueue("beta", p)
	mustNil(t, err)
	if qi.Properties.MaxDeliveryCount != 3 || qi.Properties.UserMetadata != "meta" || !qi.UpdatedAt.Equal(clk.Now()) || qi.CreatedAt.Equal(qi.UpdatedAt) {
		t.Fatalf("updated %+v", qi)
	}
	p.RequiresSession = true
	_, err = ns.UpdateQueue("beta", p)
	wantErr(t, err, ErrInvalidProperties)
	_, err = ns.UpdateQueue("nope", want)
	wantErr(t, err, ErrNotFound)
	mustNil(t, ns.DeleteQueue("BETA"))
	wantErr(t, ns.DeleteQueue("beta"), ErrNotFound)
	_, err = ns.Queue("beta")
	wantErr(t, err, ErrNotFound)

	// Topics and subscriptions.
	tp := DefaultTopicProperties()
	tp.DefaultMessageTimeToLive = time.Hour
	ti, err := ns.UpdateTopic("T", tp)
	mustNil(t, err)
	if ti.Properties.DefaultMessageTimeToLive != time.Hour {
		t.Fatalf("topic %+v", ti)
	}
	_, err = ns.CreateSubscription("t", "s2", SubscriptionProperties{})
	mustNil(t, err)
	si, err := ns.CreateSubscription("t", "S1", DefaultSubscriptionProperties())
	mustNil(t, err)
	if si.Topic != "t" || si.Name != "S1" {
		t.Fatalf("sub info %+v", si)
	}
	_, err = ns.CreateSubscription("t", "s1", DefaultSubscriptionProperties())
	wantErr(t, err, ErrAlreadyExists)
	_, err = ns.CreateSubscription("nope", "s1", DefaultSubscriptionProperties())
	wantErr(t, err, ErrNotFound)
	subs, err := ns.Subscriptions("t")
	mustNil(t, err)
	if len(subs) != 2 || subs[0].Name != "S1" || subs[1].Properties.LockDuration != time.Minute || subs[1].Properties.MaxDeliveryCount != 10 {
		t.Fatalf("subs %+v", subs)
	}
	sp := DefaultSubscriptionProperties()
	sp.MaxDeliveryCount = 2
	si, err = ns.UpdateSubscription("t", "s1", sp)
	mustNil(t, err)
	if si.Properties.MaxDeliveryCount != 2 {
		t.Fatalf("updated sub %+v", si)
	}
	mustNil(t, ns.DeleteSubscription("t", "s2"))
	wantErr(t, ns.DeleteSubscription("t", "s2"), ErrNotFound)
	if tis := ns.Topics(); len(tis) != 1 || tis[0].SubscriptionCount != 1 {
		t.Fatalf("topics %+v", tis)
	}
	mustNil(t, ns.DeleteTopic("t"))
	_, err = ns.Subscription("t", "s1")
	wantErr(t, err, ErrNotFound)
}

func TestCounts(t *testing.T) {
	ns, clk := newNS(t)
	mustQueue(t, ns, "q", nil)
	for range 6 {
		mustSend(t, ns, "q", msg("0123456789"))
	}
	mustSend(t, ns, "q", schedMsg("s", clk.Now().Add(time.Hour)))
	c := mustConsumer(t, ns, "q", ConsumerOptions{})
	d1, d2, d3 := mustNext(t, c), mustNext(t, c), mustNext(t, c)
	mustNil(t, ns.Defer(d1.LockToken, nil))
	mustNil(t, ns.DeadLetter(d2.LockToken, "r", "d", nil))
	_ = d3 // stays locked
	got := counts(t, ns, "q")
	if got.Active != 5 || got.Scheduled != 1 || got.DeadLetter != 1 || got.TransferDeadLetter != 0 || got.Total != 7 || got.SizeInBytes <= 0 {
		t.Fatalf("counts %+v", got)
	}
	qi, err := ns.Queue("q")
	mustNil(t, err)
	if !qi.AccessedAt.Equal(clk.Now()) {
		t.Fatalf("accessed %v", qi.AccessedAt)
	}
}

func TestDeleteWithOpenConsumer(t *testing.T) {
	ns, _ := newNS(t)
	mustQueue(t, ns, "q", nil)
	mustSend(t, ns, "q", msg("a"))
	c := mustConsumer(t, ns, "q", ConsumerOptions{})
	dc := mustConsumer(t, ns, "q/$DeadLetterQueue", ConsumerOptions{})
	d := mustNext(t, c)
	mustNil(t, ns.DeleteQueue("q"))
	for _, c := range []*Consumer{c, dc} {
		<-c.Done()
		wantErr(t, c.Err(), ErrEntityDeleted)
		noNext(t, c)
	}
	wantErr(t, ns.Complete(d.LockToken), ErrLockLost)
	// Recreating the queue starts from scratch.
	mustQueue(t, ns, "q", nil)
	mustSend(t, ns, "q", msg("b"))
	if d := mustNext(t, mustConsumer(t, ns, "q", ConsumerOptions{})); d.SequenceNumber != 1 {
		t.Fatalf("seq %d", d.SequenceNumber)
	}
	// A subscription consumer ends when its topic goes.
	mustNil(t, ns.CreateTopicDefault("t"))
	_, err := ns.CreateSubscription("t", "s", DefaultSubscriptionProperties())
	mustNil(t, err)
	sc := mustConsumer(t, ns, "t/subscriptions/s", ConsumerOptions{})
	mustNil(t, ns.DeleteTopic("t"))
	<-sc.Done()
	wantErr(t, sc.Err(), ErrEntityDeleted)
}

func TestDeleteWakesAcceptNext(t *testing.T) {
	ns, _ := newNS(t)
	mustQueue(t, ns, "sq", func(p *QueueProperties) { p.RequiresSession = true })
	errc := make(chan error, 1)
	go func() {
		_, err := ns.NewConsumer(t.Context(), "sq", ConsumerOptions{Session: true})
		errc <- err
	}()
	// Whether the goroutine parks before or after the delete, it must end
	// with ErrEntityDeleted or ErrNotFound.
	mustNil(t, ns.DeleteQueue("sq"))
	err := <-errc
	if err == nil {
		t.Fatal("accept-next on a deleted queue succeeded")
	}
	if !errorsIs(err, ErrEntityDeleted) && !errorsIs(err, ErrNotFound) {
		t.Fatalf("err %v", err)
	}
}

func TestStatus(t *testing.T) {
	ns, _ := newNS(t)
	mustQueue(t, ns, "q", nil)
	c := mustConsumer(t, ns, "q", ConsumerOptions{})
	for _, tt := range []struct {
		status      EntityStatus
		send, recvd bool
	}{
		{StatusSendDisabled, false, true},
		{StatusReceiveDisabled, true, false},
		{StatusDisabled, false, false},
		{StatusActive, true, true},
	} {
		p := DefaultQueueProperties()
		p.Status = tt.status
		_, err := ns.UpdateQueue("q", p)
		mustNil(t, err)
		err = ns.Send("q", msg("x"))
		if tt.send {
			mustNil(t, err)
		} else {
			wantErr(t, err, ErrEntityDisabled)
		}
		_, ok := c.Next()
		_, err = ns.NewConsumer(t.Context(), "q", ConsumerOptions{})
		if tt.recvd != (err == nil) {
			t.Errorf("%s: NewConsumer err %v", tt.status, err)
		}
		if !tt.recvd && ok {
			t.Errorf("%s: Next delivered", tt.status)
		}
	}
}

func TestFaults(t *testing.T) {
	ns, clk := newNS(t)
	mustQueue(t, ns, "q", nil)
	mustQueue(t, ns, "other", nil)
	ns.InjectServerBusy("Q", 2, time.Time{})
	wantErr(t, ns.Send("q", msg("a")), ErrServerBusy)
	_, err := ns.Peek("q", 1, 1)
	wantErr(t, err, ErrServerBusy)
	mustSend(t, ns, "q", msg("a"))
	mustSend(t, ns, "other", msg("a"))
	ns.InjectServerBusy("q", 0, clk.Now().Add(time.Minute))
	for range 3 {
		wantErr(t, ns.Send("q", msg("a")), ErrServerBusy)
	}
	_, err = ns.NewConsumer(t.Context(), "q/$DeadLetterQueue", ConsumerOptions{})
	wantErr(t, err, ErrServerBusy)
	clk.Advance(time.Minute)
	mustSend(t, ns, "q", msg("b"))
	ns.InjectServerBusy("q", 100, time.Time{})
	ns.ClearFaults()
	mustSend(t, ns, "q", msg("c"))

	c := mustConsumer(t, ns, "q", ConsumerOptions{})
	d1, d2 := mustNext(t, c), mustNext(t, c)
	ns.ExpireLocks("q")
	wantErr(t, ns.Complete(d1.LockToken), ErrLockLost)
	wantErr(t, ns.Complete(d2.LockToken), ErrLockLost)
	if d := mustNext(t, c); d.SequenceNumber != 1 || d.Message.Header.DeliveryCount != 1 {
		t.Fatalf("after ExpireLocks: seq %d count %d", d.SequenceNumber, d.Message.Header.DeliveryCount)
	}
}

func TestFaultsDoNotOutliveTheirEntity(t *testing.T) {
	ns, _ := newNS(t)
	mustQueue(t, ns, "q", nil)
	ns.InjectServerBusy("q", 100, time.Time{})
	if err := ns.DeleteQueue("Q"); err != nil {
		t.Fatal(err)
	}
	mustQueue(t, ns, "q", nil)
	mustSend(t, ns, "q", msg("a")) // a queue created again under the name starts healthy

	if _, err := ns.CreateTopic("t", DefaultTopicProperties()); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"a", "b"} {
		if _, err := ns.CreateSubscription("t", sub, DefaultSubscriptionProperties()); err != nil {
			t.Fatal(err)
		}
		ns.InjectServerBusy("t/Subscriptions/"+sub, 100, time.Time{})
	}
	ns.InjectServerBusy("t", 100, time.Time{})
	if err := ns.DeleteSubscription("t", "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := ns.CreateSubscription("t", "a", DefaultSubscriptionProperties()); err != nil {
		t.Fatal(err)
	}
	if _, err := ns.Peek("t/Subscriptions/a", 1, 1); err != nil {
		t.Errorf("recreated subscription inherited a fault: %v", err)
	}
	if _, err := ns.Peek("t/Subscriptions/b", 1, 1); !errors.Is(err, ErrServerBusy) {
		t.Errorf("the fault of a subscription that was not deleted went away: %v", err)
	}
	if err := ns.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	if _, err := ns.CreateTopic("t", DefaultTopicProperties()); err != nil {
		t.Fatal(err)
	}
	if _, err := ns.CreateSubscription("t", "b", DefaultSubscriptionProperties()); err != nil {
		t.Fatal(err)
	}
	if err := ns.Send("t", msg("x")); err != nil {
		t.Errorf("recreated topic inherited a fault: %v", err)
	}
	if _, err := ns.Peek("t/Subscriptions/b", 1, 1); err != nil {
		t.Errorf("subscription of a recreated topic inherited a fault: %v", err)
	}
}

func TestNotify(t *testing.T) {
	ns, clk := newNS(t)
	mustQueue(t, ns, "q", nil)
	c := mustConsumer(t, ns, "q", ConsumerOptions{})
	if !signalled(c) {
		t.Fatal("new consumer not signalled")
	}
	if signalled(c) {
		t.Fatal("signalled twice")
	}
	mustSend(t, ns, "q", msg("a"))
	if !signalled(c) {
		t.Fatal("send did not notify")
	}
	// Many sends never block the broker (capacity 1).
	for range 10 {
		mustSend(t, ns, "q", msg("x"))
	}
	d := mustNext(t, c)
	signalled(c)
	mustNil(t, ns.Abandon(d.LockToken, nil))
	if !signalled(c) {
		t.Fatal("abandon did not notify")
	}
	mustSend(t, ns, "q", schedMsg("s", clk.Now().Add(time.Second)))
	signalled(c)
	clk.Advance(time.Second)
	ns.Tick()
	if !signalled(c) {
		t.Fatal("activation did not notify")
	}
}

func TestSeqIndexRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var x seqIndex
	ref := map[int64]*record{}
	for i := 0; i < 20000; i++ {
		seq := int64(r.IntN(5000))
		if rec, ok := ref[seq]; ok {
			if r.IntN(2) == 0 {
				if !x.remove(rec) {
					t.Fatalf("remove %d failed", seq)
				}
				delete(ref, seq)
			}
			continue
		}
		rec := &record{seq: seq}
		x.insert(rec)
		ref[seq] = rec
	}
	if x.n != len(ref) {
		t.Fatalf("n %d, want %d", x.n, len(ref))
	}
	want := make([]int64, 0, len(ref))
	for s := range ref {
		want = append(want, s)
	}
	slices.Sort(want)
	var got []int64
	x.ascend(0, func(r *record) bool { got = append(got, r.seq); return true })
	if !slices.Equal(got, want) {
		t.Fatal("ascend order differs")
	}
	for _, from := range []int64{0, 1, 2500, 4999, 5000} {
		var first int64 = -1
		x.ascend(from, func(r *record) bool { first = r.seq; return false })
		i, _ := slices.BinarySearch(want, from)
		exp := int64(-1)
		if i < len(want) {
			exp = want[i]
		}
		if first != exp {
			t.Fatalf("ascend(%d) first %d, want %d", from, first, exp)
		}
	}
	for s, rec := range ref {
		if x.get(s) != rec {
			t.Fatalf("get %d", s)
		}
	}
	for _, c := range x.chunks {
		if len(c) == 0 || len(c) > maxChunk {
			t.Fatalf("chunk len %d", len(c))
		}
	}
}

func TestRecHeapRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	h := recHeap{kind: hLock}
	var live []*record
	for i := 0; i < 5000; i++ {
		switch op := r.IntN(4); {
		case op < 2 || len(live) == 0:
			rec := newRecord(nil, nil, int64(i), 0)
			rec.lockedUntil = r.Int64N(1000)
			h.push(rec)
			live = append(live, rec)
		case op == 2:
			j := r.IntN(len(live))
			h.remove(live[j])
			live = slices.Delete(live, j, j+1)
		default:
			j := r.IntN(len(live))
			live[j].lockedUntil = r.Int64N(1000)
			h.fix(live[j])
		}
	}
	var prev int64 = -1
	for h.len() > 0 {
		top := h.top()
		if top.lockedUntil < prev {
			t.Fatal("heap order violated")
		}
		prev = top.lockedUntil
		h.remove(top)
	}
	_ = goamqp.UUID{}
}
