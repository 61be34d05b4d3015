package replay_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/servicebus"
	"github.com/dlqdash/dlqdash/store"
)

// twoNamespaceEnv is two emulators, eu and us, each with the queue orders,
// cataloged by one ingester each into one store, and one engine with a
// broker per namespace.
type twoNamespaceEnv struct {
	t      *testing.T
	st     *store.Store
	engine *replay.Engine
	sb     map[string]*azservicebus.Client
	ns     map[string]*broker.Namespace
}

func newTwoNamespaceEnv(t *testing.T, euDLQ, usDLQ int) *twoNamespaceEnv {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "dlqdash.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &twoNamespaceEnv{t: t, st: st, sb: map[string]*azservicebus.Client{}, ns: map[string]*broker.Namespace{}}
	clients := map[string]*servicebus.Client{}
	ingesters := map[string]*dlq.Ingester{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 3)
	for name, n := range map[string]int{"eu": euDLQ, "us": usDLQ} {
		ns := broker.New(broker.Options{})
		queues("orders")(ns)
		emulatortest.FillDLQ(t, ns, "orders", n, 16, nil)
		srv := emulatortest.Start(t, emulator.Config{Namespace: ns})
		c, err := servicebus.Open(t.Context(), srv.ConnectionString(), servicebus.Options{AdminEndpoint: srv.AdminURL()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		sb, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sb.Close(context.Background()) })
		clients[name], e.sb[name], e.ns[name] = c, sb, ns
		ingesters[name] = dlq.New(dlq.Config{Namespace: name, Broker: c, Catalog: st.Namespace(name), Poll: 20 * time.Millisecond,
			MinFullInterval: 50 * time.Millisecond, MainInterval: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	}
	e.engine, err = replay.New(replay.Config{Store: st, Audit: audit.New(st),
		Brokers: func(ns string) (replay.Broker, error) {
			if c, ok := clients[ns]; ok {
				return c, nil
			}
			return nil, fmt.Errorf("no namespace %q", ns)
		},
		OnRemovedFrom: func(ns, entity string, q dlq.SubQueue, n int) { ingesters[ns].Removed(entity, q, n) }})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ingesters {
		go func() { in.Run(ctx); done <- struct{}{} }()
	}
	go func() { e.engine.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done; <-done })
	return e
}

// count waits for n cataloged present messages matching f.
func (e *twoNamespaceEnv) count(f dlq.Filter, n int64) {
	e.t.Helper()
	waitFor(e.t, fmt.Sprintf("%d messages matching %+v", n, f), 20*time.Second, func() bool {
		got, err := e.st.CountMessages(e.t.Context(), f, 1000)
		var unknown *dlq.UnknownEntityError
		if errors.As(err, &unknown) {
			return false
		}
		if err != nil {
			e.t.Fatal(err)
		}
		return got == n
	})
}

// active is the ids of the messages in namespace ns's orders queue (not
// its dead letters), received and completed.
func (e *twoNamespaceEnv) active(ns string) []string {
	e.t.Helper()
	env := &env{t: e.t, sb: e.sb[ns]}
	return messageIDs(env.receiveAll("orders", "", 0))
}

// TestReplayStaysInItsNamespace: a replay goes back to its own namespace;
// a selection spanning two is refused; another namespace is a destination
// only when the request names it (and the dry run says so); an unknown one
// is a 400 naming destination_namespace.
func TestReplayStaysInItsNamespace(t *testing.T) {
	e := newTwoNamespaceEnv(t, 3, 2)
	e.count(dlq.Filter{Entity: "orders"}, 5)
	e.count(dlq.Filter{Namespace: "eu"}, 3)
	ctx := audit.WithActor(t.Context(), "tester")

	// Both namespaces' orders: refused, saying why.
	_, _, err := e.engine.Submit(ctx, replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{Filter: &dlq.Filter{Entity: "orders"}}})
	var invalid *replay.InvalidError
	if !errors.As(err, &invalid) || invalid.Param != "filter" || !strings.Contains(invalid.Msg, "2 namespaces (3 in eu, 2 in us)") {
		t.Fatalf("a selection across namespaces: %v; want a 400 on filter naming both with their counts", err)
	}

	// eu's dead letters go back to eu's orders, not us's.
	plan, job, err := e.engine.Submit(ctx, replay.Request{Action: replay.ActionReplay,
		Selection: replay.Selection{Filter: &dlq.Filter{Namespace: "eu", Entity: "orders"}}})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Namespace != "eu" || plan.DestinationNamespace != "" || job.Namespace != "eu" || job.DestinationNamespace != "" {
		t.Fatalf("plan %s→%q, job %s→%q: want eu to its own", plan.Namespace, plan.DestinationNamespace, job.Namespace, job.DestinationNamespace)
	}
	env := &env{t: t, st: e.st}
	if j := env.finished(job.ID, 30*time.Second); j.Status != replay.StatusCompleted || j.Counts.Completed != 3 {
		t.Fatalf("eu job: %s, %+v (%s)", j.Status, j.Counts, j.PausedReason)
	}
	if got := e.active("eu"); len(got) != 3 {
		t.Errorf("eu's orders got %v; want the 3 copies", got)
	}
	if got := e.active("us"); len(got) != 0 {
		t.Errorf("us's orders got %v; want nothing", got)
	}
	e.count(dlq.Filter{Namespace: "us", SubQueue: dlq.SubQueueDeadLetter}, 2)

	// An unknown destination namespace: 400 naming it.
	_, _, err = e.engine.Submit(ctx, replay.Request{Action: replay.ActionReplay, DestinationNamespace: "apac", DryRun: true,
		Selection: replay.Selection{Filter: &dlq.Filter{Namespace: "us"}}})
	if !errors.As(err, &invalid) || invalid.Param != "destination_namespace" {
		t.Fatalf("unknown destination namespace: %v; want a 400 on destination_namespace", err)
	}

	// us's dead letters to eu, named explicitly: the dry run warns, the job
	// keeps it, the copies land in eu.
	req := replay.Request{Action: replay.ActionReplay, DestinationNamespace: "eu", DryRun: true,
		Selection: replay.Selection{Filter: &dlq.Filter{Namespace: "us"}}}
	plan, _, err = e.engine.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Namespace != "us" || plan.DestinationNamespace != "eu" ||
		!strings.Contains(strings.Join(plan.Warnings, "\n"), "the copies go to the namespace eu, not back to us") {
		t.Errorf("dry run to eu: %s→%s, warnings %q", plan.Namespace, plan.DestinationNamespace, plan.Warnings)
	}
	req.DryRun = false
	_, job, err = e.engine.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if j := env.finished(job.ID, 30*time.Second); j.Status != replay.StatusCompleted || j.Counts.Completed != 2 ||
		j.Namespace != "us" || j.DestinationNamespace != "eu" {
		t.Fatalf("us→eu job: %s %s→%s, %+v (%s)", j.Status, j.Namespace, j.DestinationNamespace, j.Counts, j.PausedReason)
	}
	if got := e.active("eu"); len(got) != 2 {
		t.Errorf("eu's orders got %v; want us's 2 copies", got)
	}
	if got := e.active("us"); len(got) != 0 {
		t.Errorf("us's orders got %v; want nothing", got)
	}
	e.count(dlq.Filter{Namespace: "us", SubQueue: dlq.SubQueueDeadLetter}, 0)

	// The jobs list by namespace.
	jobs, _, err := e.engine.ListJobsIn(t.Context(), "us", 10, "")
	if err != nil || len(jobs) != 1 || jobs[0].ID != job.ID {
		t.Errorf("us's jobs: %v, %v", jobs, err)
	}
}

// TestSubmitAsksAllow: Request.Allow is asked with the selection's
// namespaces (every one, before a selection spanning two is refused) and
// the destination namespace when it is another; its refusal is returned as
// it is, with an empty plan, dry run or not, and creates nothing.
func TestSubmitAsksAllow(t *testing.T) {
	e := newTwoNamespaceEnv(t, 2, 2)
	e.count(dlq.Filter{Entity: "orders"}, 4)
	ctx := audit.WithActor(t.Context(), "tester")
	refused := errors.New("refused by the test")
	type call struct {
		sources     string
		destination string
	}
	var calls []call
	allow := func(err error) func([]string, string) error {
		return func(sources []string, destination string) error {
			calls = append(calls, call{strings.Join(sources, ","), destination})
			return err
		}
	}
	for _, tt := range []struct {
		name string
		req  replay.Request
		want call
	}{
		{"spanning two", replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{Filter: &dlq.Filter{Entity: "orders"}}},
			call{"eu,us", ""}},
		{"into another", replay.Request{Action: replay.ActionReplay, DestinationNamespace: "us",
			Selection: replay.Selection{Filter: &dlq.Filter{Namespace: "eu"}}}, call{"eu", "us"}},
		{"into its own, named", replay.Request{Action: replay.ActionReplay, DestinationNamespace: "eu",
			Selection: replay.Selection{Filter: &dlq.Filter{Namespace: "eu"}}}, call{"eu", ""}},
		{"a dry run", replay.Request{Action: replay.ActionDiscard, DryRun: true,
			Selection: replay.Selection{Filter: &dlq.Filter{Namespace: "us"}}}, call{"us", ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			calls = nil
			tt.req.Allow = allow(refused)
			plan, job, err := e.engine.Submit(ctx, tt.req)
			if !errors.Is(err, refused) || plan.Summary.Total != 0 || len(plan.Summary.Sample) != 0 || job.ID != 0 {
				t.Fatalf("Submit = %+v, job %d, %v; want the refusal with an empty plan", plan, job.ID, err)
			}
			if len(calls) != 1 || calls[0] != tt.want {
				t.Errorf("Allow calls %+v, want %+v", calls, tt.want)
			}
		})
	}
	if jobs, _, err := e.engine.ListJobs(ctx, 10, ""); err != nil || len(jobs) != 0 {
		t.Fatalf("refusals created jobs: %d %v", len(jobs), err)
	}
	// Allowed: the job is created.
	calls = nil
	_, job, err := e.engine.Submit(ctx, replay.Request{Action: replay.ActionReplay, Allow: allow(nil),
		Selection: replay.Selection{Filter: &dlq.Filter{Namespace: "eu"}}})
	if err != nil || job.ID == 0 || len(calls) != 1 {
		t.Fatalf("allowed: job %d, %v, calls %+v", job.ID, err, calls)
	}
}
