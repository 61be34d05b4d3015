package web

import (
	"testing"

	"github.com/dlqdash/dlqdash/replay"
)

// Pages show the display name beside a namespaced actor; actors stored
// before the namespaces show as they are.
func TestActorLabel(t *testing.T) {
	for actor, want := range map[string]string{
		"oidc:alice":     "alice (oidc:alice)",
		"proxy:token:ci": "token:ci (proxy:token:ci)",
		"token:ci":       "ci (token:ci)",
		"cli:root":       "root (cli:root)",
		"local":          "local",
		"alice":          "alice",
		"oidc:":          "oidc:",
	} {
		if got := actorLabel(actor); got != want {
			t.Errorf("actorLabel(%q) = %q, want %q", actor, got, want)
		}
	}
	if got := jobView(replay.Job{CreatedBy: "proxy:bob"}, false).CreatedBy; got != "bob (proxy:bob)" {
		t.Errorf("job created_by shown as %q", got)
	}
}
