package dlq_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/dlqdash/dlqdash/dlq"
)

// fakeBroker is a scripted namespace: entities with messages in their
// subqueues, counted from the messages themselves, like Service Bus.
type fakeBroker struct {
	mu       sync.Mutex
	entities map[string]*fakeEntity
	order    []string
	fail     error // returned by every call while set
	peeks    atomic.Int64
	lists    atomic.Int64
	nextSeq  map[string]int64 // per queue or topic
}

type fakeEntity struct {
	kind     dlq.Kind
	topic    string
	settings dlq.Settings
	msgs     map[dlq.SubQueue]map[int64]dlq.Message
}

func newFakeBroker() *fakeBroker {
	return &fakeBroker{entities: map[string]*fakeEntity{}, nextSeq: map[string]int64{}}
}

func (b *fakeBroker) addQueue(path string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.entities[path] = &fakeEntity{kind: dlq.KindQueue, settings: dlq.Settings{Path: path, Kind: dlq.KindQueue, Status: "Active"},
		msgs: map[dlq.SubQueue]map[int64]dlq.Message{}}
	b.order = append(b.order, path)
}

func (b *fakeBroker) deleteEntity(path string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.entities, path)
	b.order = slices.DeleteFunc(b.order, func(p string) bool { return p == path })
}

// send puts a new message in q of entity with the next sequence number.
func (b *fakeBroker) send(entity string, q dlq.SubQueue, st dlq.State, reason string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nextSeq[entity]++
	seq := b.nextSeq[entity]
	m := dlq.Message{SequenceNumber: seq, State: st, MessageID: "m" + itoa(seq), Body: []byte(`{"n":` + itoa(seq) + `}`),
		ApplicationProperties: dlq.EncodeProperties(map[string]any{"tenant": "acme"})}
	if reason != "" {
		m.DeadLetterReason = &reason
	}
	b.put(entity, q, m)
	return seq
}

func (b *fakeBroker) put(entity string, q dlq.SubQueue, m dlq.Message) {
	e := b.entities[entity]
	if e.msgs[q] == nil {
		e.msgs[q] = map[int64]dlq.Message{}
	}
	e.msgs[q][m.SequenceNumber] = m
}

// deadLetter moves a main-entity message to the DLQ, keeping its number.
func (b *fakeBroker) deadLetter(entity string, seq int64, reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.entities[entity]
	m := e.msgs[dlq.SubQueueMain][seq]
	delete(e.msgs[dlq.SubQueueMain], seq)
	m.State = dlq.StateActive
	m.DeadLetterReason = &reason
	b.put(entity, dlq.SubQueueDeadLetter, m)
}

func (b *fakeBroker) remove(entity string, q dlq.SubQueue, seq int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.entities[entity].msgs[q], seq)
}

func (b *fakeBroker) setFail(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fail = err
}

func (b *fakeBroker) Entities(ctx context.Context) ([]dlq.Entity, error) {
	defer b.lists.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fail != nil {
		return nil, b.fail
	}
	var out []dlq.Entity
	for _, p := range b.order {
		e := b.entities[p]
		c := dlq.Counts{DeadLetter: int64(len(e.msgs[dlq.SubQueueDeadLetter])),
			TransferDeadLetter: int64(len(e.msgs[dlq.SubQueueTransferDeadLetter]))}
		for _, m := range e.msgs[dlq.SubQueueMain] {
			if m.State == dlq.StateScheduled {
				c.Scheduled++
			} else {
				c.Active++
			}
		}
		out = append(out, dlq.Entity{Path: p, Kind: e.kind, Topic: e.topic, Counts: c})
	}
	return out, nil
}

func (b *fakeBroker) Settings(ctx context.Context) ([]dlq.Settings, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fail != nil {
		return nil, b.fail
	}
	var out []dlq.Settings
	for _, p := range b.order {
		out = append(out, b.entities[p].settings)
	}
	return out, nil
}

func (b *fakeBroker) Peek(ctx context.Context, entity string, q dlq.SubQueue, from int64, max int) ([]dlq.Message, error) {
	b.peeks.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fail != nil {
		return nil, b.fail
	}
	e, ok := b.entities[entity]
	if !ok {
		return nil, dlq.ErrEntityNotFound
	}
	var seqs []int64
	for s := range e.msgs[q] {
		if s >= from {
			seqs = append(seqs, s)
		}
	}
	slices.Sort(seqs)
	if len(seqs) > max {
		seqs = seqs[:max]
	}
	out := make([]dlq.Message, 0, len(seqs))
	for _, s := range seqs {
		out = append(out, e.msgs[q][s])
	}
	return out, nil
}

func itoa(n int64) string {
	return string(appendInt(nil, n))
}

func appendInt(b []byte, n int64) []byte {
	if n >= 10 {
		b = appendInt(b, n/10)
	}
	return append(b, byte('0'+n%10))
}
