package views

import (
	"strconv"
	"strings"
)

// Honest outcomes: what became of a replay's copies, in words and colour.

// ReasonCount is a new dead-letter reason with how many copies came back
// with it.
type ReasonCount struct {
	Reason string
	Count  int
}

// Outcome is what the catalog saw of a job's copies, and its canary.
type Outcome struct {
	// Redeadlettered counts the copies dead-lettered again; Reasons group
	// them, the most frequent first.
	Redeadlettered int
	Reasons        []ReasonCount
	// The canary and ramp options ("" or 0 when not set) and the verdict
	// ("", passed, failed).
	CanaryCount         int
	CanaryWatch         string
	PauseOnRedeadletter string // "50 %"
	Ramp                string
	CanaryVerdict       string
}

// thousands writes n with thousands separators (1,000).
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// copiesSent counts the copies the job sent (a discard sends none).
func (j Job) copiesSent() int {
	if j.Action == "discard" {
		return 0
	}
	return j.Sent + j.Completed
}

// allCameBack: every copy sent was dead-lettered again.
func (j Job) allCameBack() bool {
	return j.copiesSent() > 0 && j.Redeadlettered >= j.copiesSent()
}

// outcomeText says what became of the copies: "1,000 sent · 987
// dead-lettered again: SqlTimeout"; "" for a job that sent none.
func (j Job) outcomeText() string {
	sent := j.copiesSent()
	if sent == 0 && j.Redeadlettered == 0 {
		return ""
	}
	s := thousands(sent) + " sent · "
	if j.Redeadlettered == 0 {
		return s + "none dead-lettered again so far"
	}
	if j.allCameBack() && j.Redeadlettered > 1 {
		s += "all " + thousands(j.Redeadlettered) + " dead-lettered again"
	} else {
		s += thousands(j.Redeadlettered) + " dead-lettered again"
	}
	var reasons []string
	for i, r := range j.Reasons {
		if i == 3 {
			reasons = append(reasons, "…")
			break
		}
		name := r.Reason
		if name == "" {
			name = "(no reason)"
		}
		if len(j.Reasons) > 1 {
			name += " (" + thousands(r.Count) + ")"
		}
		reasons = append(reasons, name)
	}
	if len(reasons) > 0 {
		s += ": " + strings.Join(reasons, ", ")
	}
	return s
}

// outcomeClass colours the outcome: red when every copy came back, amber
// when some did, green when none has (yet), neutral before any was sent.
func (j Job) outcomeClass() string {
	switch {
	case j.allCameBack():
		return "outcome-failed"
	case j.Redeadlettered > 0:
		return "outcome-warn"
	case j.copiesSent() > 0:
		return "outcome-succeeded"
	}
	return ""
}

// statusClass colours the status badge: a completed job whose copies all
// came back is not shown as a success.
func (j Job) statusClass() string {
	if j.Status == "completed" && j.allCameBack() {
		return "status-failed"
	}
	if j.Status == "completed" && j.Redeadlettered > 0 {
		return "outcome-warn" // amber, as .badge is
	}
	return "status-" + j.Status
}

// canaryText describes the canary and ramp options; "" when none is set.
func (j Job) canaryText() string {
	var parts []string
	if j.CanaryCount > 0 {
		them := "them"
		if j.CanaryCount == 1 {
			them = "it"
		}
		s := "send " + thousands(j.CanaryCount) + " first, watch " + them + " for " + j.CanaryWatch
		switch j.CanaryVerdict {
		case "passed":
			s += " (passed)"
		case "failed":
			s += " (failed: too many came back)"
		}
		parts = append(parts, s)
	}
	if j.PauseOnRedeadletter != "" {
		parts = append(parts, "pause when more than "+j.PauseOnRedeadletter+" of the copies come back")
	}
	if j.Ramp != "" {
		parts = append(parts, "ramp up from a tenth of the rate over "+j.Ramp)
	}
	return strings.Join(parts, "; ")
}
