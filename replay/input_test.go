package replay_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
)

// Bad input is a 400 naming the field, with nothing changed: never a
// broker error (a 500) for a destination Service Bus could not name.
func TestSubmitRefusesBadText(t *testing.T) {
	e := newEnv(t, queues("orders", "elsewhere"), envOptions{})
	e.sendAndDeadLetter("orders", "a", 2, "SqlTimeout")
	e.cataloged(dlq.Filter{Entity: "orders"}, 2)
	f := &dlq.Filter{Entity: "orders"}
	for _, tt := range []struct {
		name  string
		req   replay.Request
		param string
	}{
		{"destination with a NUL", replay.Request{Destination: "else\x00where"}, "destination"},
		{"destination with two slashes", replay.Request{Destination: "a//b"}, "destination"},
		{"destination starting with a slash", replay.Request{Destination: "/orders"}, "destination"},
		{"destination ending with a slash", replay.Request{Destination: "orders/"}, "destination"},
		{"destination with a space", replay.Request{Destination: "my queue"}, "destination"},
		{"destination with a query", replay.Request{Destination: "orders?x=1"}, "destination"},
		{"destination of the broker's own", replay.Request{Destination: "orders/$DeadLetterQueue"}, "destination"},
		{"destination too long", replay.Request{Destination: strings.Repeat("q", 261)}, "destination"},
		{"reason with a NUL", replay.Request{Reason: "bug\x00fixed"}, "reason"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, dry := range []bool{true, false} {
				req := tt.req
				req.Action, req.Selection, req.DryRun = replay.ActionReplay, replay.Selection{Filter: f}, dry
				_, job, err := e.engine.Submit(audit.WithActor(t.Context(), "tester"), req)
				var inv *replay.InvalidError
				if !errors.As(err, &inv) || inv.Param != tt.param {
					t.Fatalf("dry run %v: error %v (%T), want an InvalidError naming %s", dry, err, err, tt.param)
				}
				if job.ID != 0 {
					t.Fatalf("a job was created: %+v", job)
				}
			}
		})
	}
	// A name Service Bus allows passes the check and reaches the broker.
	for _, ok := range []string{"elsewhere", "orders"} {
		if _, _, err := e.engine.Submit(t.Context(), replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{Filter: f},
			Destination: ok, DryRun: true}); err != nil {
			t.Errorf("destination %q: %v", ok, err)
		}
	}
	if jobs, _, _ := e.st.ListJobs(t.Context(), 10, ""); len(jobs) != 0 {
		t.Errorf("%d jobs were created", len(jobs))
	}
}

// An empty filter would select the whole catalog: refused (400 naming
// filter) unless it says "all": true, in a dry run and for real.
func TestSubmitEmptyFilterNeedsAll(t *testing.T) {
	e := newEnv(t, queues("orders", "other"), envOptions{})
	e.sendAndDeadLetter("orders", "a", 2, "SqlTimeout")
	e.sendAndDeadLetter("other", "b", 1, "Other")
	e.cataloged(dlq.Filter{Entity: "orders"}, 2)
	e.cataloged(dlq.Filter{Entity: "other"}, 1)
	for _, f := range []dlq.Filter{{}, {IncludeGone: true}} {
		for _, dry := range []bool{true, false} {
			_, job, err := e.engine.Submit(t.Context(), replay.Request{Action: replay.ActionDiscard, Reason: "cleanup",
				Selection: replay.Selection{Filter: &f}, DryRun: dry})
			var inv *replay.InvalidError
			if !errors.As(err, &inv) || inv.Param != "filter" || !strings.Contains(inv.Msg, `"all": true`) || job.ID != 0 {
				t.Errorf("filter %+v, dry run %v: %v, job %d; want a 400 naming filter that says how to mean all", f, dry, err, job.ID)
			}
		}
	}
	plan, _ := e.submit(replay.Request{Action: replay.ActionDiscard, Selection: replay.Selection{Filter: &dlq.Filter{All: true}}, DryRun: true})
	if plan.Summary.Total != 3 {
		t.Errorf(`"all": true selects %d, want every message (3)`, plan.Summary.Total)
	}
	if jobs, _, _ := e.st.ListJobs(t.Context(), 10, ""); len(jobs) != 0 {
		t.Errorf("%d jobs were created", len(jobs))
	}
}

// A scheduled time Service Bus cannot hold (after 9999-12-31, which an
// offset reaches) is a 400; one it can, far beyond what int64 nanoseconds
// hold, schedules the copy for then (the emulator once enqueued it at once).
func TestScheduledEnqueueBounds(t *testing.T) {
	e := newEnv(t, queues("orders", "later"), envOptions{})
	e.sendAndDeadLetter("orders", "a", 1, "SqlTimeout")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, 1)
	late, err := time.Parse(time.RFC3339, "9999-12-31T23:00:00-05:00")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = e.engine.Submit(t.Context(), replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids},
		ScheduledEnqueueAt: &late, DryRun: true})
	var inv *replay.InvalidError
	if !errors.As(err, &inv) || inv.Param != "scheduled_enqueue_at" || !strings.Contains(inv.Msg, "9999-12-31T23:59:59.9999999Z") {
		t.Fatalf("%v: %v, want a 400 naming scheduled_enqueue_at and the limit", late, err)
	}
	far := time.Date(2500, 1, 2, 3, 4, 5, 0, time.UTC)
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}, Destination: "later",
		ScheduledEnqueueAt: &far})
	if j := e.finished(job.ID, 20*time.Second); j.Status != replay.StatusCompleted {
		t.Fatalf("job %+v", j)
	}
	copies := e.peekAll("later", 0)
	if len(copies) != 1 || copies[0].State != azservicebus.MessageStateScheduled || copies[0].ScheduledEnqueueTime == nil ||
		!copies[0].ScheduledEnqueueTime.Equal(far) {
		for _, c := range copies {
			t.Logf("copy: state %v scheduled %v", c.State, c.ScheduledEnqueueTime)
		}
		t.Fatalf("%d copies, want one scheduled for %v", len(copies), far)
	}
}
