package web

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
)

// fakeJobs is a web.Jobs that records what the pages ask of it. The engine
// itself is tested in package replay; this one answers from maps, with the
// engine's error types, and refuses a discard without a reason as the
// engine does.
type fakeJobs struct {
	mu       sync.Mutex
	submits  []replay.Request
	controls []string // "pause 3", "resume 3", "cancel 3"
	// plan answers a submission (dry or not); nil gives planOf's default.
	plan func(replay.Request) replay.Plan
	// submitErr, if set, refuses real submissions (dry runs pass), with the
	// plan as the engine returns it alongside.
	submitErr error
	// checkOptions, if set, refuses any submission (dry or not) whose
	// options it refuses, with no plan: as the engine's validation does.
	checkOptions func(replay.Request) error
	controlErr   error
	jobs         map[int64]replay.Job
	items        map[int64][]replay.Item
	listCalls    []string // "job state cursor"
	history      map[int64][]replay.Item
	copies       []dlq.Record
	nextID       int64
	sample       []dlq.Record
}

func newFakeJobs(sample []dlq.Record) *fakeJobs {
	return &fakeJobs{jobs: map[int64]replay.Job{}, items: map[int64][]replay.Item{}, history: map[int64][]replay.Item{},
		nextID: 100, sample: sample}
}

// fakeWarning is a warning with markup in it: the page must show it as text.
const fakeWarning = `orders has no duplicate detection <script>alert("w")</script>`

func (f *fakeJobs) planOf(req replay.Request) replay.Plan {
	if f.plan != nil {
		return f.plan(req)
	}
	total := len(req.Selection.IDs)
	if req.Selection.Filter != nil {
		total = 12
	}
	p := replay.Plan{Summary: replay.SelectionSummary{Total: total, Gone: 1, Deferred: 2, Poison: 3, InJobs: 0,
		Sources: []replay.SourceCount{{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, Count: total}}},
		Warnings: []string{fakeWarning},
		Targets:  []replay.Target{{Source: "orders", Path: "orders", Kind: dlq.KindQueue}}}
	p.Summary.Sample = f.sample[:min(len(f.sample), total, replay.SampleSize)]
	return p
}

func (f *fakeJobs) Submit(ctx context.Context, req replay.Request) (replay.Plan, replay.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.submits = append(f.submits, req)
	if f.checkOptions != nil {
		if err := f.checkOptions(req); err != nil {
			return replay.Plan{}, replay.Job{}, err
		}
	}
	if req.Action == replay.ActionDiscard && strings.TrimSpace(req.Reason) == "" && !req.DryRun { // as the engine
		return replay.Plan{}, replay.Job{}, &replay.InvalidError{Param: "reason", Msg: "a discard needs a reason: it removes the messages for good"}
	}
	p := f.planOf(req)
	if req.DryRun {
		return p, replay.Job{}, nil
	}
	if f.submitErr != nil {
		return p, replay.Job{}, f.submitErr
	}
	f.nextID++
	j := replay.Job{ID: f.nextID, Action: req.Action, Status: replay.StatusQueued, CreatedAt: time.Now().UTC(), CreatedBy: "local",
		Destination: req.Destination, RatePerSecond: req.RatePerSecond, Reason: req.Reason, Total: p.Summary.Total,
		Counts: replay.Counts{Pending: p.Summary.Total}}
	f.jobs[j.ID] = j
	return p, j, nil
}

func (f *fakeJobs) control(what string, id int64, to replay.Status) (replay.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.controls = append(f.controls, fmt.Sprint(what, " ", id))
	j, ok := f.jobs[id]
	if !ok {
		return j, replay.ErrNotFound
	}
	if f.controlErr != nil {
		return j, f.controlErr
	}
	j.Status = to
	f.jobs[id] = j
	return j, nil
}

func (f *fakeJobs) Pause(ctx context.Context, id int64) (replay.Job, error) {
	return f.control("pause", id, replay.StatusPaused)
}

func (f *fakeJobs) Resume(ctx context.Context, id int64) (replay.Job, error) {
	return f.control("resume", id, replay.StatusQueued)
}

func (f *fakeJobs) Cancel(ctx context.Context, id int64) (replay.Job, error) {
	return f.control("cancel", id, replay.StatusCancelling)
}

func (f *fakeJobs) Job(ctx context.Context, id int64) (replay.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok {
		return j, replay.ErrNotFound
	}
	return j, nil
}

// invalidCursor is a bad cursor, as the store reports one.
type invalidCursor struct{}

func (invalidCursor) Error() string            { return "cursor: not one this server issued" }
func (invalidCursor) InvalidParameter() string { return "cursor" }

func (f *fakeJobs) ListJobsIn(ctx context.Context, namespace string, limit int, cursor string) ([]replay.Job, string, error) {
	jobs, next, err := f.ListJobs(ctx, limit, cursor)
	if namespace == "" || err != nil {
		return jobs, next, err
	}
	var out []replay.Job
	for _, j := range jobs {
		if j.Namespace == namespace {
			out = append(out, j)
		}
	}
	return out, next, nil
}

func (f *fakeJobs) ListJobs(ctx context.Context, limit int, cursor string) ([]replay.Job, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var after int64 = 1 << 62
	if cursor != "" {
		n, err := strconv.ParseInt(strings.TrimPrefix(cursor, "j"), 10, 64)
		if err != nil || !strings.HasPrefix(cursor, "j") {
			return nil, "", invalidCursor{}
		}
		after = n
	}
	var out []replay.Job
	for _, j := range f.jobs {
		if j.ID < after {
			out = append(out, j)
		}
	}
	slices.SortFunc(out, func(a, b replay.Job) int { return int(b.ID - a.ID) })
	if len(out) > limit {
		out = out[:limit]
		return out, "j" + strconv.FormatInt(out[limit-1].ID, 10), nil
	}
	return out, "", nil
}

func (f *fakeJobs) ListItems(ctx context.Context, jobID int64, state replay.ItemState, limit int, cursor string) ([]replay.Item, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listCalls = append(f.listCalls, fmt.Sprint(jobID, " ", state, " ", cursor))
	if _, ok := f.jobs[jobID]; !ok {
		return nil, "", replay.ErrNotFound
	}
	var after int64
	if cursor != "" {
		n, err := strconv.ParseInt(strings.TrimPrefix(cursor, "i"), 10, 64)
		if err != nil || !strings.HasPrefix(cursor, "i") {
			return nil, "", invalidCursor{}
		}
		after = n
	}
	var out []replay.Item
	for _, it := range f.items[jobID] {
		if it.MessageID > after && (state == "" || it.State == state) {
			out = append(out, it)
		}
	}
	if len(out) > limit {
		out = out[:limit]
		return out, "i" + strconv.FormatInt(out[limit-1].MessageID, 10), nil
	}
	return out, "", nil
}

func (f *fakeJobs) History(ctx context.Context, messageID int64) ([]replay.Item, []dlq.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	items := f.history[messageID]
	if len(items) == 0 {
		return nil, nil, nil
	}
	return items, f.copies, nil
}

func (f *fakeJobs) submitted() []replay.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.submits)
}

func (f *fakeJobs) controlled() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.controls)
}

func (f *fakeJobs) add(j replay.Job, items ...replay.Item) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.jobs[j.ID] = j
	f.items[j.ID] = append(f.items[j.ID], items...)
}

var _ Jobs = (*fakeJobs)(nil)
