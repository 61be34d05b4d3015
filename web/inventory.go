package web

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/views"
)

// DefaultOrphanAfter is how long a message may stay deferred before the
// inventory flags it as a deferred orphan.
const DefaultOrphanAfter = 24 * time.Hour

// inventoryPage is how many messages of each kind the inventory lists per page.
const inventoryPage = 50

// showInventory renders GET /inventory: deferred messages oldest first
// (orphans flagged) and scheduled ones soonest due first, each list with
// its own cursor (deferred, scheduled).
func (s *Server) showInventory(w http.ResponseWriter, r *http.Request) error {
	q, err := newFormQuery(r)
	if err != nil {
		return err
	}
	dc, err := q.one("deferred")
	if err != nil {
		return err
	}
	sc, err := q.one("scheduled")
	if err != nil {
		return err
	}
	if err := q.done(); err != nil {
		return err
	}
	now := time.Now()
	hide := !s.canSeeBodies(r.Context())
	// Every deferred message at once: for an operator (somewhere, with
	// access rules: the confirm page splits the selection by namespace).
	actOnAll := auth.FromContext(r.Context()).Role.Includes(auth.Operator)
	if s.limited() {
		actOnAll = len(s.sendableNamespaces(r)) > 0
	}
	inv := views.Inventory{OrphanAfter: s.orphanAfter, Actions: s.jobs != nil, ActOnAll: s.jobs != nil && actOnAll}
	deferred, dnext, err := s.catalog.ListWaiting(r.Context(), dlq.StateDeferred, inventoryPage, dc)
	if err != nil {
		return fmt.Errorf("inventory: %w", err)
	}
	scheduled, snext, err := s.catalog.ListWaiting(r.Context(), dlq.StateScheduled, inventoryPage, sc)
	if err != nil {
		return fmt.Errorf("inventory: %w", err)
	}
	// Access rules: the rows of the namespaces the identity may view (a
	// page may then hold fewer rows; its next link still goes on).
	if sc := scopeFrom(r.Context()); !sc.all {
		in := func(rec dlq.Record) bool { return !sc.has(rec.Namespace) }
		deferred, scheduled = slices.DeleteFunc(deferred, in), slices.DeleteFunc(scheduled, in)
	}
	for _, rec := range deferred {
		it := views.WaitingItem{MessageItem: withoutPreview(s.messageItem(rec), hide), Since: rec.EnqueuedAt,
			CanReplay: s.jobs != nil && s.roleIn(r.Context(), rec.Namespace).Includes(auth.Operator)}
		if rec.EnqueuedAt != nil {
			it.Age = now.Sub(*rec.EnqueuedAt)
			it.Orphan = it.Age > s.orphanAfter
		}
		if s.jobs != nil {
			// A job acting on it, or the one that resolved it: the catalog
			// sees it leave only at its next read of the entity, so the
			// row says so instead of offering it again.
			items, _, err := s.jobs.History(r.Context(), rec.ID)
			if err != nil {
				return fmt.Errorf("inventory: %w", err)
			}
			if len(items) > 0 {
				switch st := items[0].State; {
				case st == replay.ItemCompleted:
					it.JobID, it.JobResolved = items[0].JobID, true
				case !st.Finished():
					it.JobID, it.JobActive = items[0].JobID, true
				}
			}
		}
		inv.Deferred = append(inv.Deferred, it)
	}
	for _, rec := range scheduled {
		inv.Scheduled = append(inv.Scheduled, views.WaitingItem{MessageItem: withoutPreview(s.messageItem(rec), hide), Due: rec.ScheduledEnqueueAt,
			CanCancel: s.canCancel(r.Context(), rec)})
	}
	link := func(name, cursor string) string {
		if cursor == "" {
			return ""
		}
		v := url.Values{name: {cursor}}
		if name == "scheduled" && dc != "" {
			v.Set("deferred", dc)
		}
		if name == "deferred" && sc != "" {
			v.Set("scheduled", sc)
		}
		return "/inventory?" + v.Encode()
	}
	inv.DeferredNext, inv.ScheduledNext = link("deferred", dnext), link("scheduled", snext)
	return s.render(w, r, views.InventoryPage(inv))
}
