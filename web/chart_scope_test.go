package web

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// The dead-letter chart (the group page's, the message list's) counts only
// the namespaces the reader may view: a viewer of prod-eu sees neither
// prod-us's dead letters in the bars nor prod-us's jobs as markers.
func TestAccessChartHidesANamespace(t *testing.T) {
	fx := newAccessFixture(t, accessRules)
	ctx := t.Context()
	now := time.Now().UTC().Add(-time.Minute)
	for name, n := range map[string]int{"prod-eu": 1, "prod-us": 4} {
		var msgs []dlq.Message
		for j := range n {
			msgs = append(msgs, dlq.Message{SequenceNumber: int64(100 + j), State: dlq.StateActive,
				MessageID: fmt.Sprintf("%s-now-%d", name, j), EnqueuedAt: ptr(now), DeadLetterReason: ptr("SqlTimeout")})
		}
		if _, err := fx.st.Namespace(name).ApplyPage(ctx, dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, Through: math.MaxInt64,
			Messages: msgs, SeenAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	usJob := fx.jobAs(t, `{"action":"replay","ids":["`+fx.id("prod-us", 0)+`"]}`)
	code, body := fx.as(t, "bo", "eu-readers", "GET", "/api/v1/groups", "", "")
	var gs struct{ Groups []struct{ ID string } }
	if err := json.Unmarshal([]byte(body), &gs); code != 200 || err != nil || len(gs.Groups) != 1 {
		t.Fatalf("groups for bo: %d %s", code, body)
	}
	key := gs.Groups[0].ID
	bar := regexp.MustCompile(`data-testid="chart-bar" data-count="(\d+)"`)
	for _, target := range []string{"/groups/" + url.PathEscape(key), "/messages?group=" + url.QueryEscape(key)} {
		code, page := fx.as(t, "bo", "eu-readers", "GET", target, "", "")
		if code != 200 {
			t.Fatalf("%s: %d", target, code)
		}
		var sum int64
		for _, m := range bar.FindAllStringSubmatch(page, -1) {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			sum += n
		}
		if sum != 1 {
			t.Errorf("%s: the chart's bars count %d dead letters for a viewer of prod-eu, want 1 (prod-us's 4 left out)", target, sum)
		}
		if strings.Contains(page, `data-job="`+usJob+`"`) {
			t.Errorf("%s: the chart marks prod-us's job %s for a viewer of prod-eu", target, usJob)
		}
	}
}
