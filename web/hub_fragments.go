package web

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/views"
)

// failed logs a catalog read the hub could not do and makes the pages that
// needed it refetch: they may not miss the update.
func (h *Hub) failed(ctx context.Context, what string, err error, want func(subscription) bool) {
	if ctx.Err() != nil {
		return // shutting down: Close ends every connection anyway
	}
	h.log.Warn("live: cannot read the catalog for an update; pages refetch", "update", what, "error", err.Error())
	h.sendTo(want, resyncFrame)
}

// sendOverview re-renders the rows of the entities whose counts changed and
// the totals.
func (h *Hub) sendOverview(ctx context.Context, changed map[string]bool) {
	if len(h.subscriptions(onPage(views.LiveOverview))) == 0 {
		return
	}
	ents, err := h.catalog.ListEntities(ctx)
	if err != nil {
		h.failed(ctx, "overview", err, onPage(views.LiveOverview))
		return
	}
	// Per scope (access rules): the rows and totals of the entities of
	// the namespaces each connection may view.
	for _, sc := range h.scopes(onPage(views.LiveOverview)) {
		home := views.Home{Entities: overviewEntities(scopeEntities(sc, ents), len(h.cfg.Namespaces) > 1)}
		var frames [][]byte
		for _, e := range home.Entities {
			if !changed[e.Path] {
				continue
			}
			if f, ok := h.replace(ctx, views.EntityRowID(e), views.EntityCounts(e)); ok {
				frames = append(frames, f)
			}
		}
		if f, ok := h.replace(ctx, views.FragmentID("totals", ""), views.Totals(home)); ok {
			frames = append(frames, f)
		}
		h.sendTo(inScope(onPage(views.LiveOverview), sc), frames...)
	}
	h.sendNamespaces(ctx, ents)
}

// sendNamespaces re-renders the overview's namespaces panel (with more than
// one namespace): each namespace's status and counts. ents are the
// entities if the caller has read them.
func (h *Hub) sendNamespaces(ctx context.Context, ents []dlq.EntitySummary) {
	if len(h.cfg.Namespaces) < 2 || h.cfg.Statuses == nil || len(h.subscriptions(onPage(views.LiveOverview))) == 0 {
		return
	}
	if ents == nil {
		var err error
		if ents, err = h.catalog.ListEntities(ctx); err != nil {
			h.failed(ctx, "namespaces", err, onPage(views.LiveOverview))
			return
		}
	}
	statuses := h.cfg.Statuses()
	for _, sc := range h.scopes(onPage(views.LiveOverview)) {
		panel := views.NamespacesPanel(namespaceHealth(scopeNames(sc, h.cfg.Namespaces), statuses, scopeEntities(sc, ents)))
		if f, ok := h.replace(ctx, views.FragmentID("namespaces", ""), panel); ok {
			h.sendTo(inScope(onPage(views.LiveOverview), sc), f)
		}
	}
}

// overviewEntities are the entities the overview lists: every one not
// deleted, with the broker's counts and the catalog's deferred count.
func overviewEntities(ents []dlq.EntitySummary, showNamespace bool) []views.EntityRow {
	var out []views.EntityRow
	for _, e := range ents {
		if e.DeletedAt != nil {
			continue
		}
		out = append(out, views.EntityRow{Path: e.Path, Kind: string(e.Kind), Status: e.Status,
			Active: e.Counts.Active, DeadLetter: e.Counts.DeadLetter, TransferDeadLetter: e.Counts.TransferDeadLetter,
			Scheduled: e.Counts.Scheduled, Deferred: e.Deferred, Namespace: text(e.Namespace), ShowNamespace: showNamespace})
	}
	return out
}

// sendChart re-renders the overview's depth chart.
func (h *Hub) sendChart(ctx context.Context) {
	// The chart is the whole catalog's: only for connections that may
	// view every namespace (the page shows it to no one else).
	pages := inScope(onPage(views.LiveOverview), everything)
	if len(h.subscriptions(pages)) == 0 {
		return
	}
	c, err := depthChart(ctx, h.catalog, time.Now())
	if err != nil {
		h.failed(ctx, "depth chart", err, onPage(views.LiveOverview))
		return
	}
	if f, ok := h.replace(ctx, views.FragmentID("depth-chart", ""), views.DepthChartFragment(c)); ok {
		h.sendTo(pages, f)
	}
}

// sendGroupPages sends recount to the pages of the groups whose counts,
// status or name changed since the hub last looked (as each page's scope
// sees them); a page the hub has not looked at yet is told too (once).
func (h *Hub) sendGroupPages(all []dlq.GroupSummary) {
	pages := onPage(views.LiveGroup)
	seen := map[string]string{}
	for _, sc := range h.scopes(pages) {
		byKey := map[string]dlq.GroupSummary{}
		for _, g := range scopeGroups(sc, all) {
			byKey[g.ID] = g
		}
		for _, sub := range h.subscriptions(inScope(pages, sc)) {
			k := sc.key() + "\x00" + sub.groupKey
			if _, done := seen[k]; done {
				continue
			}
			g, ok := byKey[sub.groupKey]
			if !ok {
				continue // not (yet) a group this scope sees
			}
			seen[k] = groupSignature(g)
			if h.groupSigs[k] != seen[k] {
				key := sub.groupKey
				h.sendTo(func(s subscription) bool { return inScope(pages, sc)(s) && s.groupKey == key }, groupRecountFrame)
			}
		}
	}
	h.groupSigs = seen // the open pages' groups only
}

// groupSignature is what a group's page shows that changes with new dead
// letters or triage: counts, last seen, status, owner, name.
func groupSignature(g dlq.GroupSummary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d/%d/%s/%q/%q", g.Present, g.Total, g.LastSeenAt.UnixNano(), g.Triage.State(), g.Triage.Owner, g.DisplayName())
	for _, n := range g.Namespaces {
		fmt.Fprintf(&b, "|%q:%d/%d", n.Name, n.Present, n.Total)
	}
	return b.String()
}

// listQuery is what a message list's new rows depend on: its filter (as
// dlq writes it, whether searches reach into bodies) and whether rows show
// body previews. Lists that differ in nothing else (a viewer's read-only
// page and an operator's, say) share one query and one rendering.
func listQuery(s subscription) string {
	return s.filter.Encode().Encode() + "|not_bodies=" + strconv.FormatBool(s.filter.QueryNotBodies) + "|hide=" + strconv.FormatBool(s.hideBodies) +
		"|scope=" + s.scopeKey // the filter's Namespaces, which Encode leaves out
}

// sendNew prepends, on the first page of every message list, the new
// messages that match its filter, newest first, and tells the later pages
// of those lists that their count changed (recount): one catalog query per
// distinct list query. It returns how many it made.
func (h *Hub) sendNew(ctx context.Context, ids []int64) int {
	if len(ids) == 0 {
		return 0
	}
	lists := onPage(views.LiveMessages)
	firstPages := func(s subscription) bool { return lists(s) && s.first }
	laterPages := func(s subscription) bool { return lists(s) && !s.first }
	subs := h.subscriptions(lists)
	if len(subs) == 0 {
		return 0
	}
	if len(ids) > maxRowOps {
		h.sendTo(firstPages, resyncFrame)
		h.sendTo(laterPages, recountFrame)
		return 0
	}
	queries := map[string]subscription{}
	for _, sub := range subs {
		queries[listQuery(sub)] = sub
	}
	for q, sub := range queries {
		same := func(s subscription) bool { return lists(s) && listQuery(s) == q }
		recs, err := h.catalog.MessagesByID(ctx, ids, sub.filter)
		if err != nil {
			h.failed(ctx, "new messages", err, same)
			continue
		}
		if len(recs) == 0 {
			continue
		}
		// The later pages show none of the new rows (they are newer than
		// the page's), only the count of the list, which grew.
		h.sendTo(func(s subscription) bool { return same(s) && !s.first }, recountFrame)
		first := func(s subscription) bool { return same(s) && s.first }
		if len(h.subscriptions(first)) == 0 {
			continue
		}
		var buf bytes.Buffer
		var rerr error
		items := make([]views.MessageItem, 0, len(recs))
		for _, r := range recs {
			items = append(items, withoutPreview(namespacedItem(r, len(h.cfg.Namespaces) > 1), sub.hideBodies))
		}
		markItems(ctx, h.catalog, h.log, sub.filter.Query, items) // a search list's rows, as its page marks them
		for _, it := range items {
			if rerr = views.MessageRow(it).Render(ctx, &buf); rerr != nil {
				break
			}
		}
		if rerr != nil {
			h.log.Warn("live: cannot render message rows", "error", rerr.Error())
			h.sendTo(first, resyncFrame)
			continue
		}
		h.sendTo(first, encodeOp(liveOp{Op: "prepend", ID: views.FragmentID("message-rows", ""), HTML: buf.String()}))
	}
	return len(queries)
}

// sendChanged re-renders the rows of messages that left the broker or
// changed, on every message list (a page without the row ignores it), and
// makes a message's own page refetch.
func (h *Hub) sendChanged(ctx context.Context, ids []int64) {
	changed := map[int64]bool{}
	for _, id := range ids {
		changed[id] = true
	}
	h.sendTo(func(s subscription) bool { return s.page == views.LiveMessage && changed[s.id] }, resyncFrame)

	lists := onPage(views.LiveMessages)
	if len(h.subscriptions(lists)) == 0 {
		return
	}
	if len(ids) > maxRowOps {
		h.sendTo(lists, resyncFrame)
		return
	}
	recs, err := h.catalog.MessagesByID(ctx, ids, dlq.Filter{IncludeGone: true})
	if err != nil {
		h.failed(ctx, "changed messages", err, lists)
		return
	}
	// Rows are rendered once for all lists, and once more without the
	// body preview if a list is a viewer's who may not read bodies; a
	// row goes only to the lists whose scope has its namespace.
	for _, hide := range []bool{false, true} {
		to := func(s subscription) bool { return lists(s) && s.hideBodies == hide }
		if hide && len(h.subscriptions(to)) == 0 {
			break
		}
		type row struct {
			namespace string
			frame     []byte
		}
		var rows []row
		for _, r := range recs {
			id := views.FragmentID("message", strconv.FormatInt(r.ID, 10))
			if f, ok := h.replace(ctx, id, views.MessageRow(withoutPreview(namespacedItem(r, len(h.cfg.Namespaces) > 1), hide))); ok {
				rows = append(rows, row{r.Namespace, f})
			}
		}
		for _, sc := range h.scopes(to) {
			var frames [][]byte
			for _, rw := range rows {
				if sc.has(rw.namespace) {
					frames = append(frames, rw.frame)
				}
			}
			if len(frames) > 0 {
				// Messages of the scope left the broker or changed:
				// the lists' counts may have moved (a list without
				// gone messages lost them), wherever their rows are.
				frames = append(frames, recountFrame)
			}
			h.sendTo(inScope(to, sc), frames...)
		}
	}
}

// sendGroups re-renders the failure groups page's table body, and tells
// the pages of the groups that changed to fetch their counts again.
func (h *Hub) sendGroups(ctx context.Context) {
	pages := onPage(views.LiveGroups)
	subs := h.subscriptions(pages)
	groupPages := onPage(views.LiveGroup)
	if len(subs) == 0 && len(h.subscriptions(groupPages)) == 0 {
		return
	}
	all, err := h.catalog.ListGroups(ctx)
	if err != nil {
		h.failed(ctx, "groups", err, func(s subscription) bool { return pages(s) || groupPages(s) })
		return
	}
	h.sendGroupPages(all)
	for _, include := range []bool{false, true} {
		same := func(s subscription) bool { return s.page == views.LiveGroups && s.includeGone == include }
		if !slices.ContainsFunc(subs, same) {
			continue
		}
		// Per scope (access rules): the counts of the namespaces each
		// connection may view, as the page shows them.
		for _, sc := range h.scopes(same) {
			gs := selectGroups(scopeGroups(sc, all), include, "", "")
			if f, ok := h.replace(ctx, views.FragmentID("groups", ""), views.GroupRows(failureGroups(gs, len(h.cfg.Namespaces) > 1))); ok {
				h.sendTo(inScope(same, sc), f)
			}
		}
	}
}
