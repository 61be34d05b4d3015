package views

import (
	"fmt"
	"strconv"
	"time"
)

// DeadLetterChartData is a failure group's or an entity's dead letters over
// time: a bar per equal slice of [Since, Until), with a marker at the start
// of each replay job that acted on them. Other pages place it with the
// component DeadLetterChart (a panel with the range links and the jobs;
// web builds one with Server.deadLetterChart).
type DeadLetterChartData struct {
	// Subject names what is counted, for the caption and the picture's
	// label: "the group “SqlTimeout”", "orders".
	Subject      string
	Since, Until time.Time
	Width        time.Duration
	Counts       []int64
	// BarURLs, when set (one per bucket), link each bar to the messages of
	// its slice of time.
	BarURLs []string
	Jobs    []ChartJob
	// Ranges are the time ranges offered (24 h, 7 d, 30 d), as links.
	Ranges []ChartRange
}

// ChartJob is a job marked on a chart.
type ChartJob struct {
	ID             int64
	Action, Status string
	At             time.Time
}

// ChartRange is one of a chart's time ranges.
type ChartRange struct {
	Label, URL string
	Current    bool
}

// ChartRanges are the ranges a dead-letter chart offers, by the value of
// its query parameter, with their bucket counts; the first is the default.
var ChartRanges = []struct {
	Param, Label string
	Span         time.Duration
	Buckets      int
}{
	{"24h", "24 h", 24 * time.Hour, 48},
	{"7d", "7 d", 7 * 24 * time.Hour, 56},
	{"30d", "30 d", 30 * 24 * time.Hour, 60},
}

func (c DeadLetterChartData) total() int64 {
	var t int64
	for _, n := range c.Counts {
		t += n
	}
	return t
}

func (c DeadLetterChartData) peak() int64 {
	var p int64
	for _, n := range c.Counts {
		p = max(p, n)
	}
	return p
}

// The drawing: bars under a band where the job markers' heads sit.
const (
	dlChartH   = 140
	dlChartTop = 14 // the markers' band
)

type chartBar struct {
	X, Y, W, H string
	Count      int64
	Title, URL string
}

func (c DeadLetterChartData) bars() []chartBar {
	if len(c.Counts) == 0 {
		return nil
	}
	peak := c.peak()
	step := float64(chartW) / float64(len(c.Counts))
	out := make([]chartBar, len(c.Counts))
	for i, n := range c.Counts {
		h := 0.0
		if peak > 0 {
			h = float64(n) / float64(peak) * (dlChartH - dlChartTop - 2)
		}
		from := c.Since.Add(time.Duration(i) * c.Width)
		to := from.Add(c.Width)
		if to.After(c.Until) {
			to = c.Until
		}
		b := chartBar{X: f1(float64(i)*step + step*0.08), W: f1(step * 0.84), Y: f1(dlChartH - h), H: f1(h), Count: n,
			Title: countOf(n, "dead letter", "dead letters") + ", " + clock(from) + " – " + clock(to)}
		if i < len(c.BarURLs) {
			b.URL = c.BarURLs[i]
		}
		out[i] = b
	}
	return out
}

// jobX is where a job's marker goes; ok is false for one outside the
// window.
func (c DeadLetterChartData) jobX(j ChartJob) (string, bool) {
	span := c.Until.Sub(c.Since)
	if span <= 0 || j.At.Before(c.Since) || !j.At.Before(c.Until) {
		return "", false
	}
	return f1(float64(j.At.Sub(c.Since)) / float64(span) * chartW), true
}

func (c DeadLetterChartData) jobTitle(j ChartJob) string {
	return "Job " + strconv.FormatInt(j.ID, 10) + " (" + j.Action + ", " + j.Status + ") started " + clock(j.At)
}

func (c DeadLetterChartData) summary() string {
	return fmt.Sprintf("Dead letters of %s from %s to %s: %s in all, at most %s in %s; %s marked.", c.Subject, clock(c.Since), clock(c.Until),
		count(c.total()), count(c.peak()), widthText(c.Width), countOf(int64(len(c.Jobs)), "replay job", "replay jobs"))
}

func widthText(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return countOf(int64(d/time.Hour), "hour", "hours")
	case d >= time.Minute && d%time.Minute == 0:
		return countOf(int64(d/time.Minute), "minute", "minutes")
	}
	return d.String()
}

func countOf(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return count(n) + " " + many
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func dlChartViewBox() string { return fmt.Sprintf("0 0 %d %d", chartW, dlChartH) }

func dlChartHeight() string { return strconv.Itoa(dlChartH) }
