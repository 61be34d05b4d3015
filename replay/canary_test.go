package replay

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestCanaryValidation: every bad canary or ramp option is refused naming
// its parameter; good ones pass, and a canary without a watch gets the
// default.
func TestCanaryValidation(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name   string
		action Action
		rate   float64
		c      Canary
		param  string // "" valid
	}{
		{"none", ActionReplay, 0, Canary{}, ""},
		{"canary", ActionReplay, 0, Canary{Count: 10, PauseOnRedeadletter: f(0.5)}, ""},
		{"guard alone", ActionReplay, 0, Canary{PauseOnRedeadletter: f(0)}, ""},
		{"guard one", ActionReplay, 0, Canary{PauseOnRedeadletter: f(1)}, ""},
		{"ramp with rate", ActionReplay, 50, Canary{Ramp: time.Minute}, ""},
		{"negative count", ActionReplay, 0, Canary{Count: -1}, "canary_count"},
		{"negative watch", ActionReplay, 0, Canary{Count: 1, Watch: -time.Second}, "canary_watch"},
		{"watch too long", ActionReplay, 0, Canary{Count: 1, Watch: 2 * time.Hour}, "canary_watch"},
		{"watch without canary", ActionReplay, 0, Canary{Watch: time.Second}, "canary_watch"},
		{"fraction above 1", ActionReplay, 0, Canary{PauseOnRedeadletter: f(1.5)}, "pause_on_redeadletter"},
		{"fraction below 0", ActionReplay, 0, Canary{PauseOnRedeadletter: f(-0.1)}, "pause_on_redeadletter"},
		{"ramp without rate", ActionReplay, 0, Canary{Ramp: time.Minute}, "ramp"},
		{"negative ramp", ActionReplay, 10, Canary{Ramp: -time.Minute}, "ramp"},
		{"canary of a discard", ActionDiscard, 0, Canary{Count: 5}, "canary_count"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := Request{Action: tt.action, Selection: Selection{IDs: []int64{1}}, RatePerSecond: tt.rate, Reason: "r", Canary: tt.c}
			err := req.validate(now)
			if tt.param == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if tt.c.Count > 0 && req.Canary.Watch != DefaultCanaryWatch {
					t.Fatalf("watch %s, want the default %s", req.Canary.Watch, DefaultCanaryWatch)
				}
				return
			}
			var ie *InvalidError
			if !errors.As(err, &ie) || ie.Param != tt.param {
				t.Fatalf("error %v, want one naming %s", err, tt.param)
			}
		})
	}
}

// TestGuardTripped: the guard's share counts from its base, and its reason
// names the count and the top reason.
func TestGuardTripped(t *testing.T) {
	half := 0.5
	j := Job{Counts: Counts{Completed: 8, Sent: 2, Redeadlettered: 6},
		RedeadletteredReasons: []ReasonCount{{"SqlTimeout", 5}, {"Other", 1}}, Canary: Canary{PauseOnRedeadletter: &half}}
	got := guardTripped(j)
	if got == "" || !strings.Contains(got, "6 of 10 copies") || !strings.Contains(got, "SqlTimeout") {
		t.Fatalf("reason %q", got)
	}
	j.Counts.Redeadlettered = 5 // exactly half: not more than it
	if got := guardTripped(j); got != "" {
		t.Fatalf("at the threshold: %q", got)
	}
	j.Counts.Redeadlettered, j.Canary.SentBase, j.Canary.RedeadletteredBase = 9, 6, 6 // 3 of 4 since the base
	if got := guardTripped(j); !strings.Contains(got, "3 of 4 copies") {
		t.Fatalf("from the base: %q", got)
	}
	j.Canary.PauseOnRedeadletter = nil
	if got := guardTripped(j); got != "" {
		t.Fatalf("without a guard: %q", got)
	}
}
