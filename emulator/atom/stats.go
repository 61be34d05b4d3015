package atom

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/dlqdash/dlqdash/emulator/broker"
)

// emulatorPrefix is the root of the endpoints that are not part of Service
// Bus (fault injection, statistics); requests under it are not counted as
// admin requests, so that reading the statistics does not change them.
const emulatorPrefix = "$emulator"

// statsPath is the operation statistics endpoint (case-insensitive).
const statsPath = "$emulator/stats"

func isEmulatorPath(p string) bool {
	return len(p) >= len(emulatorPrefix) && strings.EqualFold(p[:len(emulatorPrefix)], emulatorPrefix) &&
		(len(p) == len(emulatorPrefix) || p[len(emulatorPrefix)] == '/')
}

// serveStats handles /$emulator/stats: GET returns the namespace's
// operation statistics as JSON (broker.Stats), DELETE resets them (204).
func (h *handler) serveStats(w http.ResponseWriter, r *http.Request) error {
	if _, err := faultQuery(r); err != nil {
		return err
	}
	switch r.Method {
	case http.MethodGet:
		b, err := json.MarshalIndent(h.ns.Stats(), "", "  ")
		if err != nil {
			return err
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(append(b, '\n'))
		return nil
	case http.MethodDelete:
		h.ns.ResetStats()
		h.log.Info("operation statistics reset")
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	return methodNotAllowed(r)
}

// countAdmin counts one admin request in the namespace's statistics, under
// the entity it addresses: a queue or topic, a subscription (its rules
// count for it), or none for namespace-level resources.
func (h *handler) countAdmin(p string) {
	p = strings.Trim(p, "/")
	if isEmulatorPath(p) {
		return
	}
	h.ns.CountOp(broker.OpAdmin, adminEntity(p), 1)
}

func adminEntity(p string) string {
	if p == "" || strings.HasPrefix(p, "$") {
		return ""
	}
	segs := strings.Split(p, "/")
	for i := 1; i < len(segs); i++ {
		if strings.EqualFold(segs[i], "Subscriptions") {
			if i+1 < len(segs) {
				return strings.Join(segs[:i+2], "/")
			}
			return strings.Join(segs[:i], "/")
		}
	}
	return p
}
