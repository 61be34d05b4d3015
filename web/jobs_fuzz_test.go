package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
)

// fuzzStore is the catalog as the engine's Submit sees it: one present
// dead letter in orders matches any selection; a job is created by
// remembering what it was given (once its creation entry could be made).
// Nothing else is called by Submit.
type fuzzStore struct {
	replay.Store
	mu      sync.Mutex
	created []replay.Job
	sels    []replay.Selection
}

func (s *fuzzStore) SummariseSelection(ctx context.Context, sel replay.Selection, poisonCap, sample int) (replay.SelectionSummary, error) {
	return replay.SelectionSummary{Total: 1, Sources: []replay.SourceCount{{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, Count: 1}}}, nil
}

func (s *fuzzStore) CreateJobAudited(ctx context.Context, j replay.Job, sel replay.Selection, poisonCap int,
	entry func(replay.Job) (audit.Build, error)) (replay.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j.ID, j.Status, j.Total = int64(len(s.created)+1), replay.StatusQueued, 1
	if _, err := entry(j); err != nil {
		return replay.Job{}, err
	}
	s.created, s.sels = append(s.created, j), append(s.sels, sel)
	return j, nil
}

// fuzzBroker knows the queue orders and the topic events; nothing else
// exists.
type fuzzBroker struct{ replay.Broker }

func (fuzzBroker) Entity(ctx context.Context, path string) (replay.EntityInfo, error) {
	switch path {
	case "orders":
		return replay.EntityInfo{Path: path, Kind: dlq.KindQueue}, nil
	case "events":
		return replay.EntityInfo{Path: path, Kind: dlq.KindTopic}, nil
	}
	return replay.EntityInfo{}, dlq.ErrEntityNotFound
}

type fuzzAudit struct{}

func (fuzzAudit) Append(ctx context.Context, r audit.Record) (audit.Entry, error) {
	return audit.Entry{}, nil
}

func (fuzzAudit) Builder(context.Context) (func(audit.Record) (audit.Build, error), error) {
	return func(audit.Record) (audit.Build, error) {
		return func(int64, string) (audit.Entry, error) { return audit.Entry{}, nil }, nil
	}, nil
}

// FuzzJobRequest posts fuzzed bodies to POST /api/v1/jobs, decoded and
// validated by the real handler and the real engine's Submit (over a
// catalog and broker of one queue). Every answer is a job (201), a dry run
// (200) or a client error in the API's shape (400 naming the parameter,
// 404, 409, 422): never a 500. What reaches a job holds no NUL byte and
// valid UTF-8 in its reason, a destination Service Bus can name, and never
// an unconditional filter that does not say all.
func FuzzJobRequest(f *testing.F) {
	for _, seed := range []string{
		`{"action":"replay","ids":["1"]}`,
		`{"action":"replay","filter":{}}`,
		`{"action":"discard","filter":{"all":true},"reason":"cleanup"}`,
		`{"action":"replay","filter":{"include_gone":true},"dry_run":true}`,
		`{"action":"replay","filter":{"q":"a\u0000b"}}`,
		`{"action":"replay","filter":{"entity":"nosuch"}}`,
		`{"action":"replay","ids":["1"],"destination":"a//b"}`,
		`{"action":"replay","ids":["1"],"destination":"else\u0000where"}`,
		`{"action":"replay","ids":["1"],"destination":"orders?x=1"}`,
		`{"action":"replay","ids":["1"],"scheduled_enqueue_at":"9999-12-31T23:00:00-05:00"}`,
		`{"action":"replay","ids":["1"],"scheduled_enqueue_at":"2500-01-01T00:00:00Z"}`,
		`{"action":"discard","ids":["1"],"reason":"bad \ud800 reason"}`,
		`{"action":"replay","entity":"orders","sequence_numbers":[1,2],"subqueue":"dead_letter"}`,
		`{"action":"replay","ids":["1"],"rate_per_second":-1}`,
		`{"action":"replay","ids":["0"]}`,
		`{"action":"replay","ids":["1"],"colour":"red"}`,
		`{"action":"replay","filter":{"":1}}`,
		`[]`,
		``,
	} {
		f.Add([]byte(seed))
	}
	st := &fuzzStore{}
	eng, err := replay.New(replay.Config{Store: st, Broker: fuzzBroker{}, Audit: fuzzAudit{}})
	if err != nil {
		f.Fatal(err)
	}
	h := New(Config{Jobs: eng}).Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		st.mu.Lock()
		before := len(st.created)
		st.mu.Unlock()
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/api/v1/jobs", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch code := rec.Code; code {
		case http.StatusOK, http.StatusCreated:
		case http.StatusBadRequest, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity:
			var e struct {
				Error struct{ Code, Message, Parameter string } `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Fatalf("%d without the API's error shape: %s", code, rec.Body)
			}
			if code == http.StatusBadRequest && e.Error.Parameter == "" {
				t.Fatalf("a 400 names no parameter: %s", rec.Body)
			}
		default:
			t.Fatalf("body %q: status %d: %s", body, code, rec.Body)
		}
		st.mu.Lock()
		defer st.mu.Unlock()
		for i := before; i < len(st.created); i++ {
			j, sel := st.created[i], st.sels[i]
			for _, s := range []string{j.Reason, j.Destination} {
				if strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) {
					t.Fatalf("a job got text %q", s)
				}
			}
			if sel.Filter != nil && sel.Filter.Unconditional() && !sel.Filter.All {
				t.Fatalf("a job selects every message without saying all: %q", body)
			}
		}
	})
}
