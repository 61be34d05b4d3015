package views

import (
	"strings"
)

// Live fragments: the pieces of a page the websocket hub can replace or
// extend. Each has a stable element id from FragmentID, and the hub sends
// server-rendered HTML for an id; the page's script swaps it in. The ids are
// a contract between the pages (views), the hub (web/hub.go) and the script
// (static/live.js):
//
//	FragmentID("freshness", "")      the freshness panel on every page that shows one
//	FragmentID("totals", "")         the overview's totals
//	FragmentID("entity", path)       one entity's row on the overview (replaced)
//	FragmentID("depth-chart", "")    the overview's depth chart (replaced)
//	FragmentID("message-rows", "")   the tbody of a message list (new rows prepended)
//	FragmentID("message", id)        one message's row in a list (replaced, or marked gone)
//	FragmentID("groups", "")         the groups table body on the failure groups page (replaced)
//	FragmentID("job-progress", id)   a job page's status, counters, progress bar and controls (replaced)
//	FragmentID("job-rows", "")       the tbody of the jobs page (new jobs prepended)
//	FragmentID("job", id)            one job's row on the jobs page (replaced)
func FragmentID(kind, key string) string {
	if key == "" {
		return kind
	}
	var b strings.Builder
	b.WriteString(kind)
	b.WriteByte('-')
	for _, r := range key {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			// Anything else (/, $, spaces, dots) becomes _xx_ with its code
			// point, so that distinct keys stay distinct ids.
			b.WriteString("_")
			b.WriteString(strings.ToLower(strings.TrimLeft(strings.ToUpper(hex4(r)), "0")))
			b.WriteString("_")
		}
	}
	return b.String()
}

func hex4(r rune) string {
	const digits = "0123456789abcdef"
	var out [8]byte
	for i := 7; i >= 0; i-- {
		out[i] = digits[r&0xf]
		r >>= 4
	}
	return string(out[:])
}
