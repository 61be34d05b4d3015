package main

import (
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/alert"
)

const alertsNamespace = "namespaces:\n  - name: eu\n    connection_string_env: SB\n"

// TestConfigFileAlerts: the alerts: list reads each webhook's URL from
// its variable or file, with its format, events and thresholds.
func TestConfigFileAlerts(t *testing.T) {
	getenv := env("SB", goodConnStr, "SLACK_URL", "https://hooks.slack.example/services/T/B/XXXXsecretXXXX")
	readFile := fakeFiles(map[string]string{"/run/secrets/teams": "https://contoso.webhook.office.example/webhookb2/XXXX\n"})
	fc, err := parseConfigFile([]byte(alertsNamespace+`alerts:
  - name: ops-slack
    url_env: SLACK_URL
    format: slack
    events: [new_group, group_growth, untriaged]
    growth_per_minute: 50
    untriaged_after: 30m
  - name: teams
    url_file: /run/secrets/teams
    format: teams
    events: job_paused
`), getenv, readFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(fc.Alerts) != 2 {
		t.Fatalf("alerts %+v", fc.Alerts)
	}
	s, tm := fc.Alerts[0], fc.Alerts[1]
	if s.Name != "ops-slack" || s.URL != "https://hooks.slack.example/services/T/B/XXXXsecretXXXX" || s.Host != "hooks.slack.example" ||
		s.Format != alert.FormatSlack || len(s.Events) != 3 || s.GrowthPerMinute != 50 || s.UntriagedAfter != 30*time.Minute ||
		!s.FromConfig || s.Key() != "config:ops-slack" {
		t.Errorf("slack %+v", s)
	}
	if tm.URL != "https://contoso.webhook.office.example/webhookb2/XXXX" || tm.Format != alert.FormatTeams || len(tm.Events) != 1 ||
		tm.Events[0] != alert.EventJobPaused {
		t.Errorf("teams %+v", tm)
	}
}

// TestConfigFileAlertsErrors: each mistake names its line and key, and
// never repeats a URL.
func TestConfigFileAlertsErrors(t *testing.T) {
	getenv := env("SB", goodConnStr, "FTP_URL", "ftp://hooks.example/XXXXsecretXXXX", "SLACK_URL", "https://hooks.example/x")
	tests := []struct{ name, alerts, want string }{
		{"inline url", "  - name: a\n    url: https://hooks.example/XXXXsecretXXXX\n    events: [new_group]\n",
			`line 6: key "url" in alerts[0] would put a secret in the file: name an environment variable with url_env or a file with url_file instead`},
		{"no url", "  - name: a\n    events: [new_group]\n", "line 5: alerts[0] (a) needs url_env (an environment variable) or url_file (a file) holding the webhook URL"},
		{"ftp", "  - name: a\n    url_env: FTP_URL\n    events: [new_group]\n", "line 6: the webhook URL of alerts[0] (a) must start with https:// or http://"},
		{"unset variable", "  - name: a\n    url_env: NOPE\n    events: [new_group]\n", "the environment variable NOPE is not set"},
		{"format", "  - name: a\n    url_env: SLACK_URL\n    format: discord\n    events: [new_group]\n", `line 7: format in alerts[0] (a): "discord" is not a format`},
		{"event", "  - name: a\n    url_env: SLACK_URL\n    events: [everything]\n", `line 7: events in alerts[0] (a): "everything" is not an event`},
		{"no events", "  - name: a\n    url_env: SLACK_URL\n", "alerts[0] (a) has no events"},
		{"growth without threshold", "  - name: a\n    url_env: SLACK_URL\n    events: [group_growth]\n", "growth_per_minute is needed with the group_growth event"},
		{"untriaged", "  - name: a\n    url_env: SLACK_URL\n    events: [untriaged]\n    untriaged_after: soon\n", `line 8: untriaged_after in alerts[0] (a): "soon" is not a duration`},
		{"duplicate", "  - name: a\n    url_env: SLACK_URL\n    events: [new_group]\n  - name: a\n    url_env: SLACK_URL\n    events: [new_group]\n", `"a" is already the name of the webhook on line 5`},
		{"typo", "  - name: a\n    url_envv: SLACK_URL\n    events: [new_group]\n", `unknown key "url_envv" in alerts[0] (did you mean "url_env"?)`},
		{"not a list", "  name: a\n", "alerts must be a list of webhooks"},
	}
	for _, tc := range tests {
		_, err := parseConfigFile([]byte(alertsNamespace+"alerts:\n"+tc.alerts), getenv, fakeFiles(nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant %q", tc.name, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "XXXXsecretXXXX") {
			t.Errorf("%s: the error repeats the URL: %v", tc.name, err)
		}
	}
}

// TestAlertFlags: --public-url and --alert-repeat, and their refusals.
func TestAlertFlags(t *testing.T) {
	c, err := parseConfig([]string{"demo", "--public-url", "https://dlq.example.com/ops/", "--alert-repeat", "1h"}, env())
	if err != nil || c.Alerts.PublicURL != "https://dlq.example.com/ops" || c.Alerts.RepeatEvery != time.Hour {
		t.Errorf("flags: %+v, %v", c.Alerts, err)
	}
	c, err = parseConfig([]string{"demo"}, env(envPublicURL, "http://10.0.0.5:8080", envAlertRepeat, "30s"))
	if err != nil || c.Alerts.PublicURL != "http://10.0.0.5:8080" || c.Alerts.RepeatEvery != 30*time.Second {
		t.Errorf("environment: %+v, %v", c.Alerts, err)
	}
	for _, args := range [][]string{
		{"demo", "--public-url", "ftp://dlq.example.com"},
		{"demo", "--public-url", "dlq.example.com"},
		{"demo", "--public-url", "https://user:pw@dlq.example.com"},
		{"demo", "--alert-repeat", "0s"},
		{"demo", "--alert-repeat", "soon"},
	} {
		if _, err := parseConfig(args, env()); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
