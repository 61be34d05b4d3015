package metrics

import "testing"

func TestAuthFailuresAndDeniedUnaudited(t *testing.T) {
	m := New(Config{})
	m.AuthFailed("bad_token")
	m.AuthFailed("bad_token")
	m.AuthFailed("throttled")
	m.AuthFailed("a label nobody declared")
	m.DeniedUnaudited()
	fams := scrape(t, m)
	got := map[string]float64{}
	for _, s := range fams["dlqdash_auth_failures_total"].GetMetric() {
		got[s.GetLabel()[0].GetValue()] = s.GetCounter().GetValue()
	}
	want := map[string]float64{"bad_token": 2, "bad_header": 0, "sign_in": 0, "no_role": 0, "throttled": 1, "untrusted_peer": 0, "other": 1}
	if len(got) != len(want) {
		t.Errorf("reasons %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if f := fams["dlqdash_denied_unaudited_total"]; f == nil || f.GetMetric()[0].GetCounter().GetValue() != 1 {
		t.Errorf("dlqdash_denied_unaudited_total: %v", f)
	}
}
