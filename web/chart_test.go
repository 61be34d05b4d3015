package web

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/storetest"
)

// The message list filtered by an entity or a group shows the chart of its
// dead letters: the bars count the seeded messages of each slice of time,
// and the job that replayed one of them is marked and linked.
func TestMessageListDeadLetterChart(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "chart.db")
	st, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	storetest.AddEntities(t, path, storetest.Entity{Path: "orders"}, storetest.Entity{Path: "email"})
	now := time.Now().UTC()
	// The 24 h chart's buckets are half hours ending with the one that
	// holds now.
	until := now.Truncate(30 * time.Minute).Add(30 * time.Minute)
	since := until.Add(-24 * time.Hour)
	want := make([]int64, 48)
	var recs []dlq.Record
	for i := range 90 {
		at := now.Add(-time.Duration(i) * 17 * time.Minute) // back over 25 hours
		ent := []string{"orders", "orders", "email"}[i%3]
		r := dlq.Record{Entity: ent, SubQueue: dlq.SubQueueDeadLetter, FirstSeenAt: at, LastSeenAt: at,
			Message: dlq.Message{SequenceNumber: int64(i + 1), State: dlq.StateActive, MessageID: fmt.Sprint("m-", i), EnqueuedAt: &at,
				DeadLetterReason: ptr("SqlTimeout")}}
		recs = append(recs, r)
		if ent == "orders" && !at.Before(since) {
			want[int(at.Sub(since)/(30*time.Minute))]++
		}
	}
	ids := storetest.Insert(t, path, recs...)
	job, err := st.CreateJob(ctx, replay.Job{Action: replay.ActionReplay, CreatedBy: "tester"}, replay.Selection{IDs: []int64{ids[0]}}, 10)
	if err != nil {
		t.Fatal(err)
	}
	fx := &apiFixture{st: st, h: New(Config{Catalog: st, Jobs: newFakeJobs(nil), Audit: st}).Handler()}

	body := fx.page(t, "/messages?entity=orders", 200)
	if time.Now().UTC().Truncate(30*time.Minute).Add(30*time.Minute) != until {
		t.Skip("a half hour began during the test: the buckets moved")
	}
	counts := regexp.MustCompile(`data-testid="chart-bar" data-count="(\d+)"`).FindAllStringSubmatch(body, -1)
	var got []int64
	for _, c := range counts {
		n, _ := strconv.ParseInt(c[1], 10, 64)
		got = append(got, n)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("bars\n got %v\nwant %v", got, want)
	}
	if !strings.Contains(body, fmt.Sprintf(`<a href="/jobs/%d" data-testid="chart-job-marker" data-job="%d">`, job.ID, job.ID)) {
		t.Errorf("no marker for job %d:\n%.4000s", job.ID, body)
	}
	// The last bar lists its slice's messages.
	lastFrom := until.Add(-30 * time.Minute).Format(time.RFC3339)
	if !strings.Contains(body, "since="+strings.ReplaceAll(lastFrom, ":", "%3A")) {
		t.Errorf("no bar links to the slice from %s", lastFrom)
	}
	// 7 days: 56 bars of 3 hours, holding every orders message.
	week := fx.page(t, "/messages?entity=orders&chart=7d", 200)
	if n := strings.Count(week, `data-testid="chart-bar"`); n != 56 || !strings.Contains(week, `aria-current="true" data-testid="chart-range">7 d<`) ||
		!strings.Contains(week, `data-testid="dl-chart-total">60 dead letters · bars of 3 hours<`) {
		t.Errorf("7 d: %d bars\n%.3000s", n, week)
	}
	// A group: the same failure in both entities.
	g, _ := dlq.GroupOf(&recs[0].Message, dlq.SubQueueDeadLetter)
	if gp := fx.page(t, "/messages?chart=7d&group="+g.ID, 200); !strings.Contains(gp, `data-testid="dl-chart-total">90 dead letters`) ||
		!strings.Contains(gp, "Dead letters over time: the failure group “SqlTimeout”") {
		t.Errorf("the group's chart:\n%.3000s", gp)
	}
	// The group's own page shows the same chart, its ranges switching on
	// that page; its bars list the messages of their slice.
	groupPage := fx.page(t, "/groups/"+g.ID, 200)
	if n := strings.Count(groupPage, `data-testid="chart-bar"`); n != 48 || !strings.Contains(groupPage, "Dead letters over time: the failure group “SqlTimeout”") ||
		!strings.Contains(groupPage, fmt.Sprintf(`<a href="/jobs/%d" data-testid="chart-job-marker"`, job.ID)) ||
		!strings.Contains(groupPage, `aria-current="true" data-testid="chart-range">24 h<`) {
		t.Errorf("the group page's chart: %d bars\n%.4000s", n, groupPage)
	}
	for _, r := range []struct{ label, href string }{{"24 h", "/groups/" + g.ID}, {"7 d", "/groups/" + g.ID + "?chart=7d"}, {"30 d", "/groups/" + g.ID + "?chart=30d"}} {
		if !regexp.MustCompile(`<a href="` + regexp.QuoteMeta(r.href) + `"[^>]*data-testid="chart-range">` + r.label + `<`).MatchString(groupPage) {
			t.Errorf("the group page's range %s does not link to %s", r.label, r.href)
		}
	}
	if !strings.Contains(groupPage, `href="/messages?group=`+g.ID+`&amp;include_gone=true&amp;since=`) {
		t.Error("the group page's bars do not list the group's messages of their slice")
	}
	groupWeek := fx.page(t, "/groups/"+g.ID+"?chart=7d", 200)
	if n := strings.Count(groupWeek, `data-testid="chart-bar"`); n != 56 || !strings.Contains(groupWeek, `data-testid="dl-chart-total">90 dead letters · bars of 3 hours<`) ||
		!strings.Contains(groupWeek, `aria-current="true" data-testid="chart-range">7 d<`) {
		t.Errorf("the group page at 7 d: %d bars\n%.3000s", n, groupWeek)
	}
	if res, _ := do(t, fx.h, httptest.NewRequestWithContext(ctx, "GET", "/groups/"+g.ID+"?chart=1y", nil)); res.StatusCode != http.StatusBadRequest {
		t.Errorf("the group page with chart=1y: %d, want 400", res.StatusCode)
	}
	// The live count (GET /messages/count) brings the chart along when
	// asked (chart=), in that range, and not otherwise.
	_, frag := do(t, fx.h, httptest.NewRequestWithContext(ctx, "GET", "/messages/count?entity=orders&chart=7d", nil))
	if !strings.Contains(frag, `data-testid="matching-count">60<`) || strings.Count(frag, `data-testid="chart-bar"`) != 56 ||
		!strings.Contains(frag, `data-testid="dl-chart-total">60 dead letters · bars of 3 hours<`) {
		t.Errorf("the count with the chart:\n%.3000s", frag)
	}
	if _, frag := do(t, fx.h, httptest.NewRequestWithContext(ctx, "GET", "/messages/count?entity=orders", nil)); strings.Contains(frag, `data-testid="dead-letter-chart"`) ||
		!strings.Contains(frag, `data-testid="matching-count">60<`) {
		t.Errorf("the count without chart= has a chart, or no count:\n%.2000s", frag)
	}
	// No chart without a group or entity; an unknown range is refused.
	if strings.Contains(fx.page(t, "/messages", 200), `data-testid="dead-letter-chart"`) {
		t.Error("a chart on the unfiltered list")
	}
	res, page := do(t, fx.h, httptest.NewRequestWithContext(ctx, "GET", "/messages?entity=orders&chart=1y", nil))
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(page, `data-field="chart"`) {
		t.Errorf("chart=1y: %d", res.StatusCode)
	}
}
