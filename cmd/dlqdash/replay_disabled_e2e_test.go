package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// adminRewrite sends the admin client's https://<namespace>/ requests to
// the emulator's admin listener (after the SAS policy signed them).
type adminRewrite struct{ host string }

func (a adminRewrite) Do(req *http.Request) (*http.Response, error) {
	req.URL.Scheme, req.URL.Host = "http", a.host
	return http.DefaultClient.Do(req)
}

// setStatus sets a queue's status through the emulator's admin API with
// the real SDK's admin client, as a person with az or the portal would.
func (r *faultRig) setStatus(queue string, status admin.EntityStatus) {
	t := r.t
	t.Helper()
	c, err := admin.NewClientFromConnectionString(r.conn, &admin.ClientOptions{
		ClientOptions: azcore.ClientOptions{Transport: adminRewrite{r.adminAddr}, Retry: policy.RetryOptions{MaxRetries: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	q, err := c.GetQueue(ctx, queue, nil)
	if err != nil || q == nil {
		t.Fatalf("get queue %s: %v", queue, err)
	}
	q.Status = &status
	if _, err := c.UpdateQueue(ctx, queue, q.QueueProperties, nil); err != nil {
		t.Fatalf("set %s's status to %s: %v", queue, status, err)
	}
}

// TestReplayDisabledDestinationPauses: with the real program, a replay to
// a destination disabled for sending pauses, and GET /api/v1/jobs/{id}
// says why in words, with nothing sent, failed or flagged and every
// original still in the DLQ; enabled again and resumed, the job completes
// with every copy in the destination once.
func TestReplayDisabledDestinationPauses(t *testing.T) {
	const n = 30
	r := newFaultRig(t)
	r.seed("off", n)
	r.serve()
	r.setStatus("target", admin.EntityStatusSendDisabled)

	created := r.replayAll(n, nil)
	var j faultJob
	waitForWithin(t, 30*time.Second, "the job to pause", func() bool {
		j = r.job(created.ID)
		return j.Status == "paused" || j.Status == "completed" || j.Status == "failed"
	})
	t.Logf("%s", j)
	const want = "target is disabled for sending: enable it (az servicebus queue update --status Active) and resume"
	if j.Status != "paused" || j.PausedReason == nil || !strings.Contains(*j.PausedReason, want) {
		t.Fatalf("%s; want paused saying %q", j, want)
	}
	if j.Counts.Pending != n || j.Counts.Sent+j.Counts.Completed+j.Counts.Failed != 0 || j.Flagged != 0 {
		t.Fatalf("%s; want all %d pending, nothing sent, failed or flagged", j, n)
	}
	if left := len(r.peekAll("orders", azservicebus.SubQueueDeadLetter)); left != n {
		t.Fatalf("%d originals in the DLQ while paused, want %d", left, n)
	}

	r.setStatus("target", admin.EntityStatusActive)
	var resumed faultJob
	if code := r.api("POST", "/api/v1/jobs/"+created.ID+"/resume", map[string]any{}, &resumed); code != http.StatusOK {
		t.Fatalf("resume: %d %s", code, resumed)
	}
	waitForWithin(t, 30*time.Second, "the job to complete", func() bool {
		j = r.job(created.ID)
		return j.Status == "completed" || j.Status == "paused" || j.Status == "failed"
	})
	if j.Status != "completed" || j.Counts.Completed != n || j.Flagged != 0 {
		t.Fatalf("resumed: %s; want %d completed, none flagged", j, n)
	}
	copies := originals(r.peekAll("target", 0))
	if len(copies) != n {
		t.Errorf("%d originals have a copy in target, want %d", len(copies), n)
	}
	for id, k := range copies {
		if k != 1 {
			t.Errorf("%s is in target %d times, want once", id, k)
		}
	}
	if left := len(r.peekAll("orders", azservicebus.SubQueueDeadLetter)); left != 0 {
		t.Errorf("%d originals left in the DLQ", left)
	}
}
