package apijson

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/replay"
)

// A job's retrying state and cancelled count are in its JSON (docs/api.md),
// null when there is nothing to say.
func TestNewJobRetryingAndCancelled(t *testing.T) {
	next := time.Date(2026, 11, 26, 1, 2, 3, 0, time.UTC)
	j := replay.Job{ID: 9, Action: replay.ActionReplay, Status: replay.StatusRetrying, Total: 10,
		Counts:    replay.Counts{Pending: 3, Completed: 5, Cancelled: 2},
		LastError: "send to orders failed 2 times", RetryAttempts: 2, NextAttemptAt: &next}
	var got map[string]any
	b, _ := json.Marshal(NewJob(j))
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	counts, _ := got["counts"].(map[string]any)
	if got["status"] != "retrying" || got["last_error"] != j.LastError || got["retry_attempts"] != 2.0 ||
		got["next_attempt_at"] != "2026-11-26T01:02:03.000Z" || counts["cancelled"] != 2.0 {
		t.Fatalf("job JSON %s", b)
	}
	b, _ = json.Marshal(NewJob(replay.Job{ID: 9, Status: replay.StatusRunning}))
	got = nil
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"last_error", "next_attempt_at"} {
		if v, ok := got[k]; !ok || v != nil {
			t.Errorf("%s = %v, want null", k, v)
		}
	}
}
