package views

import "testing"

func TestFragmentID(t *testing.T) {
	tests := []struct{ kind, key, want string }{
		{"freshness", "", "freshness"},
		{"entity", "orders", "entity-orders"},
		{"entity", "payments/Subscriptions/audit", "entity-payments_2f_Subscriptions_2f_audit"},
		{"entity", "a.b", "entity-a_2e_b"},
		{"message", "42", "message-42"},
	}
	for _, tt := range tests {
		if got := FragmentID(tt.kind, tt.key); got != tt.want {
			t.Errorf("FragmentID(%q, %q) = %q, want %q", tt.kind, tt.key, got, tt.want)
		}
	}
	if FragmentID("entity", "a/b") == FragmentID("entity", "a_b") {
		t.Error("distinct keys share an id")
	}
}
