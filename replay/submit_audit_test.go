package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
)

// crashingAuditor's entries fail as they are appended, inside the store's
// transaction and after the job's rows were written (as a crash there
// would: the transaction rolls back).
type crashingAuditor struct {
	replay.Auditor
	err error
}

func (a crashingAuditor) Builder(ctx context.Context) (func(audit.Record) (audit.Build, error), error) {
	build, err := a.Auditor.Builder(ctx)
	if err != nil {
		return nil, err
	}
	return func(r audit.Record) (audit.Build, error) {
		if _, err := build(r); err != nil {
			return nil, err
		}
		return func(int64, string) (audit.Entry, error) { return audit.Entry{}, a.err }, nil
	}, nil
}

// A submitted job and its creation entry are one transaction, for every
// kind of job Submit creates (a replay, a discard, a bulk edit, a replay
// of deferred messages): when the entry cannot be appended no job exists
// and its messages are free; when it can, both exist and the chain
// verifies.
func TestSubmitCreatesTheJobWithItsEntry(t *testing.T) {
	e := newEnv(t, queues("orders"), envOptions{noRun: true})
	e.sendAndDeadLetter("orders", "ord", 4, "SqlTimeout")
	ids := e.cataloged(dlq.Filter{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter}, 4)
	crash := errors.New("crashed before the creation entry")
	crashing, err := replay.New(replay.Config{Store: e.st, Broker: e.client, Audit: crashingAuditor{Auditor: e.log, err: crash}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := audit.WithActor(t.Context(), "tester")
	entries := func() []audit.Entry {
		t.Helper()
		var out []audit.Entry
		if err := e.log.Scan(ctx, audit.Filter{}, func(en audit.Entry) error { out = append(out, en); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for i, c := range []struct {
		name   string
		req    replay.Request
		action string
	}{
		{"replay", replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids[:1]}}, audit.ActionReplayJobCreated},
		{"discard", replay.Request{Action: replay.ActionDiscard, Reason: "obsolete", Selection: replay.Selection{IDs: ids[1:2]}},
			audit.ActionDiscardJobCreated},
		{"bulk edit", replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids[2:3],
			Edits: map[int64]*replay.Edit{ids[2]: {Body: []byte(`{"fixed":true}`)}}, Transform: &replay.Transform{}}}, audit.ActionEditReplay},
		{"by sequence number", replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{Entity: "orders",
			SubQueue: dlq.SubQueueDeadLetter, SequenceNumbers: []int64{sequenceOf(t, e, ids[3])}}}, audit.ActionReplayJobCreated},
	} {
		before := len(entries())
		if _, _, err := crashing.Submit(ctx, c.req); !errors.Is(err, crash) {
			t.Fatalf("%s: submit with the entry failing: %v, want %v", c.name, err, crash)
		}
		if jobs, _, err := e.st.ListJobs(ctx, 10, ""); err != nil || len(jobs) != i {
			t.Fatalf("%s: %d jobs (%v) after a creation whose entry failed, want the %d before it", c.name, len(jobs), err, i)
		}
		if got := len(entries()); got != before {
			t.Fatalf("%s: the failed creation left %d entries, want %d", c.name, got, before)
		}
		_, job, err := e.engine.Submit(ctx, c.req)
		if err != nil {
			t.Fatalf("%s: the same request once the entry can be written (its messages must be free): %v", c.name, err)
		}
		got := entries()
		last := got[len(got)-1]
		var p struct {
			JobID string `json:"job_id"`
			Total int    `json:"total"`
		}
		_ = json.Unmarshal(last.Params, &p)
		if len(got) != before+1 || last.Action != c.action || p.JobID != strconv.FormatInt(job.ID, 10) || p.Total != 1 || job.Total != 1 {
			t.Fatalf("%s: %d entries after job %d (total %d), the last %s %s; want %d, %s naming the job with total 1", c.name,
				len(got), job.ID, job.Total, last.Action, last.Params, before+1, c.action)
		}
	}
	if n, err := e.log.Verify(ctx, nil); err != nil || n != 4 {
		t.Fatalf("verify: %d entries, %v; want 4", n, err)
	}
}

// sequenceOf is a cataloged message's sequence number.
func sequenceOf(t *testing.T, e *env, id int64) int64 {
	t.Helper()
	r, err := e.st.GetMessage(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r.SequenceNumber
}
