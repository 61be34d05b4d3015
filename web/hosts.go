package web

import (
	"net"
	"net/http"
	"strings"
)

// Host names the dashboard answers to, against DNS rebinding: a web page on
// any site can point its own name at 127.0.0.1 and then talk to a local
// dashboard as a same-origin page would, with the local user's rights. Its
// requests carry its own name in Host, so a dashboard that answers only to
// its own names is out of reach.

// AnyHost in Config.AllowedHosts turns the check off.
const AnyHost = "*"

// NormalizeHost is a Host header or host name as AllowedHosts compares it:
// without the port or IPv6 brackets, lower-case, without a trailing dot.
func NormalizeHost(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.Trim(h, "[]"), ".")
	return strings.ToLower(h)
}

// hostSet is the names of Config.AllowedHosts; nil allows every host.
func hostSet(hosts []string) map[string]bool {
	if len(hosts) == 0 {
		return nil
	}
	set := map[string]bool{}
	for _, h := range hosts {
		if strings.TrimSpace(h) == AnyHost {
			return nil
		}
		set[NormalizeHost(strings.TrimSpace(h))] = true
	}
	return set
}

// checkHost answers a request for a host name not in the allowed set with
// 421 Misdirected Request and one line saying which flag to set. GET
// /healthz is answered whatever the name: probes use whatever address
// reaches the container.
func (s *Server) checkHost(next http.Handler) http.Handler {
	if s.allowedHosts == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.allowedHosts[NormalizeHost(r.Host)] || r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusMisdirectedRequest)
		// The name is the client's: quoted, without control characters.
		w.Write([]byte("dlqdash does not answer to the host name " + quote(r.Host) +
			": if this is a name of this dashboard, add it to --allowed-hosts (DLQDASH_ALLOWED_HOSTS)\n"))
	})
}

// quote is s in double quotes, at most 100 bytes of it, with control
// characters, quotes and backslashes as "?".
func quote(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		if r < ' ' || r == 0x7f || r == '"' || r == '\\' {
			b.WriteString("?")
			continue
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}
