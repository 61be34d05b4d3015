package views

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The chart draws a bar per bucket, its height by count (the peak reaching
// the top band), each titled and linked; a marker per job in the window,
// linked to it; none for a job outside it.
func TestDeadLetterChartSVG(t *testing.T) {
	since := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	c := DeadLetterChartData{Subject: "orders", Since: since, Until: since.Add(4 * time.Hour), Width: time.Hour,
		Counts:  []int64{0, 3, 12, 6},
		BarURLs: []string{"/messages?b=0", "/messages?b=1", "/messages?b=2", "/messages?b=3"},
		Jobs: []ChartJob{{ID: 7, Action: "replay", Status: "completed", At: since.Add(90 * time.Minute)},
			{ID: 8, Action: "replay", Status: "running", At: since.Add(-time.Minute)}},
		Ranges: []ChartRange{{Label: "24 h", URL: "/messages?entity=orders", Current: true}, {Label: "7 d", URL: "/messages?chart=7d&entity=orders"}}}
	html := render(t, DeadLetterChart(c))

	bars := regexp.MustCompile(`<a href="(/messages\?b=\d)"><rect class="chart-bar" x="([\d.]+)" y="([\d.]+)" width="[\d.]+" height="([\d.]+)" data-testid="chart-bar" data-count="(\d+)"><title>([^<]*)</title>`).FindAllStringSubmatch(html, -1)
	if len(bars) != 4 {
		t.Fatalf("%d bars, want 4:\n%s", len(bars), html)
	}
	for i, b := range bars {
		if b[1] != c.BarURLs[i] || b[5] != strconv.FormatInt(c.Counts[i], 10) {
			t.Errorf("bar %d: %q, count %s", i, b[1], b[5])
		}
		h, _ := strconv.ParseFloat(b[4], 64)
		y, _ := strconv.ParseFloat(b[3], 64)
		if want := float64(c.Counts[i]) / 12 * (dlChartH - dlChartTop - 2); h < want-0.1 || h > want+0.1 || y+h < dlChartH-0.1 {
			t.Errorf("bar %d: height %v at %v, want %v standing on the axis", i, h, y, want)
		}
	}
	if bars[2][6] != "12 dead letters, 2026-11-22 02:00:00 UTC – 2026-11-22 03:00:00 UTC" || !strings.HasPrefix(bars[1][6], "3 dead letters") {
		t.Errorf("titles %q, %q", bars[1][6], bars[2][6])
	}
	markers := regexp.MustCompile(`<a href="/jobs/(\d+)" data-testid="chart-job-marker" data-job="\d+"><title>([^<]*)</title><line class="chart-job" x1="([\d.]+)"`).FindAllStringSubmatch(html, -1)
	if len(markers) != 1 || markers[0][1] != "7" || markers[0][3] != "225.0" || !strings.Contains(markers[0][2], "Job 7 (replay, completed)") {
		t.Errorf("markers %q, want job 7 at 225.0 (1.5 of 4 hours of 600)", markers)
	}
	for _, want := range []string{`aria-current="true" data-testid="chart-range">24 h</a>`, `href="/messages?chart=7d&amp;entity=orders"`,
		`data-testid="dl-chart-total">21 dead letters · bars of 1 hour<`, `href="/jobs/8" data-testid="chart-job-link"`,
		`aria-label="Dead letters of orders from 2026-11-22 00:00:00 UTC to 2026-11-22 04:00:00 UTC: 21 in all, at most 12 in 1 hour; 2 replay jobs marked."`} {
		if !strings.Contains(html, want) {
			t.Errorf("the chart lacks %s", want)
		}
	}
	// Nothing to count: flat bars, no division by zero.
	empty := render(t, DeadLetterChartSVG(DeadLetterChartData{Subject: "x", Since: since, Until: since.Add(time.Hour), Width: 30 * time.Minute, Counts: []int64{0, 0}}))
	if strings.Count(empty, `height="0.0"`) != 2 || strings.Contains(empty, "NaN") {
		t.Errorf("empty chart:\n%s", empty)
	}
}
