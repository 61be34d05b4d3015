package atom

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dlqdash/dlqdash/emulator/broker"
)

// Faults is what the fault-injection endpoints need from the AMQP server
// (*emulator.Server implements it). Server-busy and lock expiry go to the
// broker directly and work without it.
type Faults interface {
	// DropConnections closes every AMQP connection with amqp:connection:forced.
	DropConnections()
	// SetLatency delays every AMQP reply and delivery by d; 0 turns it off.
	SetLatency(d time.Duration)
}

// faultsPrefix is the root of the fault-injection endpoints (case-insensitive).
const faultsPrefix = "$emulator/faults"

// isFaultsPath reports whether p (without the leading slash) is
// /$emulator/faults or below it.
func isFaultsPath(p string) bool {
	if len(p) < len(faultsPrefix) || !strings.EqualFold(p[:len(faultsPrefix)], faultsPrefix) {
		return false
	}
	return len(p) == len(faultsPrefix) || p[len(faultsPrefix)] == '/'
}

// serveFaults handles /$emulator/faults[/<fault>]. p is the path without
// the leading and trailing slash.
func (h *handler) serveFaults(w http.ResponseWriter, r *http.Request, p string) error {
	fault := strings.ToLower(strings.TrimPrefix(p[len(faultsPrefix):], "/"))
	var err error
	switch fault {
	case "":
		err = h.only(r, http.MethodDelete, func() error { return h.clearFaults(r) })
	case "server-busy":
		err = h.only(r, http.MethodPost, func() error { return h.injectServerBusy(r) })
	case "expire-locks":
		err = h.only(r, http.MethodPost, func() error { return h.expireLocks(r) })
	case "drop-connections":
		err = h.only(r, http.MethodPost, func() error { return h.dropConnections(r) })
	case "latency":
		err = h.only(r, http.MethodPost, func() error { return h.setLatency(r) })
	default:
		return notFound("unknown fault %q: want server-busy, expire-locks, drop-connections or latency under /%s", fault, faultsPrefix)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// faultQuery returns the query parameters after checking that each is one
// of allowed (or api-version, which clients may always add).
func faultQuery(r *http.Request, allowed ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, badRequest("the query string is malformed: %v", err)
	}
	for k := range q {
		if k != "api-version" && !contains(allowed, k) {
			if len(allowed) == 0 {
				return nil, badRequest("unknown parameter %q: this fault takes no parameters", k)
			}
			return nil, badRequest("unknown parameter %q: want %s", k, strings.Join(allowed, ", "))
		}
	}
	return q, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// faultEntity reads the required entity parameter and checks that it exists.
func (h *handler) faultEntity(q url.Values) (string, error) {
	entity := strings.TrimSpace(q.Get("entity"))
	if entity == "" {
		return "", badRequest("entity: missing; give a queue, topic or subscription path, e.g. entity=orders or entity=events/Subscriptions/audit")
	}
	if _, err := h.ns.Resolve(entity); err != nil {
		if errors.Is(err, broker.ErrNotFound) {
			return "", notFound("entity: %q does not exist", entity)
		}
		return "", badRequest("entity: %q is not a valid entity path: %s", entity, brokerDetail(err))
	}
	return entity, nil
}

// faultDuration parses a Go duration ("30s", "1m30s", "250ms").
func faultDuration(name, v string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		return 0, badRequest("%s: %q is not a duration such as 250ms, 30s or 1m", name, v)
	}
	if d < 0 {
		return 0, badRequest("%s: %q must not be negative", name, v)
	}
	return d, nil
}

// POST /$emulator/faults/server-busy?entity=<path>&ops=<n>&for=<duration>
//
// The span starts at Options.Now and ends by the broker's clock; both are
// time.Now unless a test replaces one of them.
func (h *handler) injectServerBusy(r *http.Request) error {
	q, err := faultQuery(r, "entity", "ops", "for")
	if err != nil {
		return err
	}
	entity, err := h.faultEntity(q)
	if err != nil {
		return err
	}
	ops := 0
	if v := q.Get("ops"); v != "" {
		if ops, err = strconv.Atoi(strings.TrimSpace(v)); err != nil || ops < 0 {
			return badRequest("ops: %q is not a non-negative integer", v)
		}
	}
	var span time.Duration
	if v := q.Get("for"); v != "" {
		if span, err = faultDuration("for", v); err != nil {
			return err
		}
	}
	if ops == 0 && span == 0 {
		return badRequest("ops, for: give the number of operations to refuse (ops=3), a time span (for=30s), or both")
	}
	var until time.Time
	if span > 0 {
		until = h.now().Add(span)
	}
	h.ns.InjectServerBusy(entity, ops, until)
	h.log.Info("fault injected: server-busy", "entity", entity, "ops", ops, "for", span)
	return nil
}

// POST /$emulator/faults/expire-locks?entity=<path>
func (h *handler) expireLocks(r *http.Request) error {
	q, err := faultQuery(r, "entity")
	if err != nil {
		return err
	}
	entity, err := h.faultEntity(q)
	if err != nil {
		return err
	}
	h.ns.ExpireLocks(entity)
	h.log.Info("fault injected: expire-locks", "entity", entity)
	return nil
}

func (h *handler) needFaults(what string) error {
	if h.faults == nil {
		return &httpError{http.StatusNotImplemented, fmt.Sprintf("%s needs the AMQP server: this admin endpoint has no fault hook configured", what)}
	}
	return nil
}

// POST /$emulator/faults/drop-connections
func (h *handler) dropConnections(r *http.Request) error {
	if _, err := faultQuery(r); err != nil {
		return err
	}
	if err := h.needFaults("drop-connections"); err != nil {
		return err
	}
	h.faults.DropConnections()
	h.log.Info("fault injected: drop-connections")
	return nil
}

// POST /$emulator/faults/latency?d=<duration>
func (h *handler) setLatency(r *http.Request) error {
	q, err := faultQuery(r, "d")
	if err != nil {
		return err
	}
	if !q.Has("d") {
		return badRequest("d: missing; give the latency as a duration such as 200ms, or 0 to turn it off")
	}
	d, err := faultDuration("d", q.Get("d"))
	if err != nil {
		return err
	}
	if err := h.needFaults("latency"); err != nil {
		return err
	}
	h.faults.SetLatency(d)
	h.log.Info("fault injected: latency", "latency", d)
	return nil
}

// DELETE /$emulator/faults: every server-busy fault and the latency go.
// Locks already expired and connections already dropped stay so.
func (h *handler) clearFaults(r *http.Request) error {
	if _, err := faultQuery(r); err != nil {
		return err
	}
	h.ns.ClearFaults()
	if h.faults != nil {
		h.faults.SetLatency(0)
	}
	h.log.Info("faults cleared")
	return nil
}
