package web

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/views"
)

// What a GET /live connection subscribes to: its page (views.LivePage) and
// what of the page it shows, read from the upgrade's query.

// subscription is what one connection receives: its page, and for a
// message list the filter and whether it shows the first page (only then
// are new rows prepended).
type subscription struct {
	page        views.LivePage
	filter      dlq.Filter
	first       bool
	id          int64  // page=message, page=job
	groupKey    string // page=group
	after       int64  // page=jobs&first=1: the newest job the page shows
	includeGone bool   // page=groups
	seq         int64  // the hub's Seq when the page was requested; -1 if not given
	hideBodies  bool   // rows without body previews, searches not in bodies (a viewer, when bodies are hidden)
	readOnly    bool   // a job's progress without its controls (a role below operator)
	// scope is the namespaces the identity may view (access rules);
	// scopeKey is scope.key(), part of key. Nothing of another namespace
	// is sent to the connection.
	scope    scope
	scopeKey string
	key      string
}

// parseSubscription reads the /live query: page=overview|messages|groups|
// message|inventory|jobs|job; for messages the list's filter parameters (as
// the message list page reads them) and first=1 on the first page; for
// message and job its id; for groups include_gone; for group the group's
// key; for jobs first=1 and
// after=<the newest job id shown> on the first page. Unknown parameters are
// refused.
func parseSubscription(r *http.Request) (subscription, error) {
	q, err := newFormQuery(r)
	if err != nil {
		return subscription{}, err
	}
	var sub subscription
	page, err := q.one("page")
	if err != nil {
		return sub, err
	}
	sub.page = views.LivePage(page)
	// seq is the hub's change count when the page's request started; it is
	// not part of the subscription's key (pages share rendered fragments).
	sub.seq = -1
	if v, err := q.one("seq"); err != nil {
		return sub, err
	} else if v != "" {
		if sub.seq, err = strconv.ParseInt(v, 10, 64); err != nil || sub.seq < 0 {
			return sub, invalidArgument("seq", "seq must be a non-negative number, not %q", v)
		}
	}
	delete(q.values, "seq")
	switch sub.page {
	case views.LiveOverview, views.LiveInventory:
	case views.LiveMessages:
		if sub.filter, err = parseFilter(q); err != nil {
			return sub, err
		}
		if sub.first, err = q.boolean("first"); err != nil {
			return sub, err
		}
	case views.LiveMessage, views.LiveJob:
		v, err := q.one("id")
		if err != nil {
			return sub, err
		}
		if sub.id, err = strconv.ParseInt(v, 10, 64); err != nil || sub.id <= 0 {
			return sub, invalidArgument("id", "id must be a %s id, not %q", sub.page, v)
		}
		if sub.page == views.LiveJob {
			// first=1: the page shows the first, unfiltered page of the
			// job's messages, which is kept current.
			if sub.first, err = q.boolean("first"); err != nil {
				return sub, err
			}
		}
	case views.LiveJobs:
		if sub.first, err = q.boolean("first"); err != nil {
			return sub, err
		}
		v, err := q.one("after")
		if err != nil {
			return sub, err
		}
		if v != "" {
			if sub.after, err = strconv.ParseInt(v, 10, 64); err != nil || sub.after < 0 {
				return sub, invalidArgument("after", "after must be a job id, not %q", v)
			}
		}
	case views.LiveGroups:
		if sub.includeGone, err = q.boolean("include_gone"); err != nil {
			return sub, err
		}
	case views.LiveGroup:
		if sub.groupKey, err = q.one("key"); err != nil {
			return sub, err
		}
		if sub.groupKey == "" {
			return sub, invalidArgument("key", "key is required: the failure group's key")
		}
	case "":
		return sub, invalidArgument("page", "page is required: one of %s", livePageList())
	default:
		return sub, invalidArgument("page", "unknown page %q: want one of %s", sub.page, livePageList())
	}
	if err := q.done(); err != nil {
		return sub, err
	}
	// Connections with equal keys get the same fragments, rendered once. A
	// message list's filter is keyed as dlq writes it, so that equal
	// filters written differently share.
	key := q.values
	if sub.page == views.LiveMessages {
		key = sub.filter.Encode()
		if sub.first {
			key.Set("first", "1")
		}
	}
	sub.key = string(sub.page) + "?" + key.Encode()
	return sub, nil
}

// livePageList names the live pages for an error message.
func livePageList() string {
	names := make([]string, len(views.LivePages))
	for i, p := range views.LivePages {
		names[i] = string(p)
	}
	return strings.Join(names, ", ")
}

// onPage selects the subscriptions of a page.
func onPage(page views.LivePage) func(subscription) bool {
	return func(s subscription) bool { return s.page == page }
}

// everyPage selects every subscription.
func everyPage(subscription) bool { return true }

// inScope selects the subscriptions of want whose scope is sc.
func inScope(want func(subscription) bool, sc scope) func(subscription) bool {
	k := sc.key()
	return func(s subscription) bool { return want(s) && s.scopeKey == k }
}

// sees selects the subscriptions of want whose scope includes namespace.
func sees(want func(subscription) bool, namespace string) func(subscription) bool {
	return func(s subscription) bool { return want(s) && s.scope.has(namespace) }
}
