package views

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DepthChart is the overview's chart of dead-letter depth over time.
type DepthChart struct {
	Since, Until time.Time
	Points       []int64 // equal slices of [Since, Until], each its peak
	Latest       int64
}

// The chart's drawing area, in SVG user units; it scales to its box.
const (
	chartW = 600
	chartH = 120
)

func (c DepthChart) peak() int64 {
	var p int64
	for _, v := range c.Points {
		p = max(p, v)
	}
	return p
}

// scale maps a depth to a y coordinate: zero at the bottom, the peak near
// the top (a flat zero line for an empty series).
func (c DepthChart) y(v int64) float64 {
	p := c.peak()
	if p == 0 {
		return chartH - 1
	}
	return chartH - 1 - float64(v)/float64(p)*(chartH-8)
}

// areaPath is the filled area under the series, as an SVG path.
func (c DepthChart) areaPath() string {
	if len(c.Points) == 0 {
		return ""
	}
	var b strings.Builder
	step := float64(chartW) / float64(len(c.Points))
	fmt.Fprintf(&b, "M0 %d", chartH)
	for i, v := range c.Points {
		// A step per bucket: flat across it, so a short spike is not drawn
		// as a slope into its neighbours.
		fmt.Fprintf(&b, " L%.1f %.1f L%.1f %.1f", float64(i)*step, c.y(v), float64(i+1)*step, c.y(v))
	}
	fmt.Fprintf(&b, " L%d %d Z", chartW, chartH)
	return b.String()
}

func (c DepthChart) summary() string {
	hours := c.Until.Sub(c.Since).Hours()
	span := strconv.FormatFloat(hours, 'f', -1, 64) + " hours"
	if hours == 1 {
		span = "hour"
	}
	first := int64(0)
	if len(c.Points) > 0 {
		first = c.Points[0]
	}
	return fmt.Sprintf("Dead-letter depth over the last %s: %d at the start, peak %d, %d now.", span, first, c.peak(), c.Latest)
}

func chartViewBox() string { return fmt.Sprintf("0 0 %d %d", chartW, chartH) }
