package metrics

import "github.com/prometheus/client_golang/prometheus"

// AuthFailureReasons are the values of dlqdash_auth_failures_total's
// reason label (package web's Failure constants); any other is counted as
// "other", so the label stays bounded.
var AuthFailureReasons = []string{"bad_token", "bad_header", "sign_in", "no_role", "throttled", "untrusted_peer"}

// authMetrics count refused credentials and the denied requests the audit
// trail leaves out.
type authMetrics struct {
	failures        *prometheus.CounterVec
	deniedUnaudited prometheus.Counter
}

func newAuthMetrics(reg prometheus.Registerer) authMetrics {
	a := authMetrics{
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dlqdash_auth_failures_total",
			Help: "Failed sign-ins and refused credentials, by reason (bad_token, bad_header, sign_in, no_role, throttled, untrusted_peer).",
		}, []string{"reason"}),
		deniedUnaudited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dlqdash_denied_unaudited_total",
			Help: "Requests refused for their role and left out of the audit trail (one per actor and route per minute is recorded).",
		}),
	}
	for _, r := range AuthFailureReasons {
		a.failures.WithLabelValues(r)
	}
	reg.MustRegister(a.failures, a.deniedUnaudited)
	return a
}

// AuthFailed counts one failed sign-in or refused credential (a
// web.AuthFailureCounter).
func (m *Metrics) AuthFailed(reason string) {
	known := false
	for _, r := range AuthFailureReasons {
		known = known || r == reason
	}
	if !known {
		reason = "other"
	}
	m.auth.failures.WithLabelValues(reason).Inc()
}

// DeniedUnaudited counts one refused request the audit trail left out.
func (m *Metrics) DeniedUnaudited() { m.auth.deniedUnaudited.Inc() }
