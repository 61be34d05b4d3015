package views

import (
	"net/url"
	"strconv"
)

// The live subscriptions of the pages: the query of GET /live (web/live.go)
// that LayoutWith puts in <main data-live> for static/live.js.

// LivePage names a page's live subscription: the page parameter of GET
// /live, which says which fragments the hub (web/hub.go) sends it.
type LivePage string

// The pages with live updates.
const (
	LiveOverview  LivePage = "overview"
	LiveMessages  LivePage = "messages"
	LiveGroups    LivePage = "groups"
	LiveGroup     LivePage = "group"
	LiveMessage   LivePage = "message"
	LiveInventory LivePage = "inventory"
	LiveJobs      LivePage = "jobs"
	LiveJob       LivePage = "job"
)

// LivePages are the pages with live updates, in the order errors list them.
var LivePages = []LivePage{LiveOverview, LiveMessages, LiveGroups, LiveGroup, LiveMessage, LiveInventory, LiveJobs, LiveJob}

// Param is the subscription's page parameter (page=overview).
func (p LivePage) Param() string { return "page=" + string(p) }

// live subscribes a message list to its filter's changes; only the first
// page (no FirstURL back to it) gets new rows prepended. A filter the page
// could not use subscribes to nothing.
func (l MessageList) live() string {
	if l.Error != nil {
		return ""
	}
	v := url.Values{}
	for _, p := range l.Params {
		v.Add(p.Name, p.Value)
	}
	v.Set("page", string(LiveMessages))
	if l.FirstURL == "" {
		v.Set("first", "1")
	}
	return v.Encode()
}

// live subscribes the failure groups page to the groups table.
func (g Groups) live() string {
	if g.IncludeGone {
		return LiveGroups.Param() + "&include_gone=true"
	}
	return LiveGroups.Param()
}

// live subscribes a failure group's page to that group: its counts, status
// and chart are fetched again when the group changes.
func (d GroupDetail) live() string {
	return url.Values{"page": {string(LiveGroup)}, "key": {d.Group.ID}}.Encode()
}

// live subscribes a message's page to that message: it refetches when the
// message leaves the broker or changes.
func (d MessageDetail) live() string {
	return LiveMessage.Param() + "&id=" + strconv.FormatInt(d.Item.ID, 10)
}

// live subscribes the jobs page to job changes: rows are replaced, and the
// first page gets jobs newer than its newest (after) prepended.
func (l JobList) live() string {
	if !l.Live {
		return ""
	}
	v := url.Values{"page": {string(LiveJobs)}}
	if l.FirstURL == "" {
		var newest int64
		for _, j := range l.Jobs {
			newest = max(newest, j.ID)
		}
		v.Set("first", "1")
		v.Set("after", strconv.FormatInt(newest, 10))
	}
	return v.Encode()
}

// live subscribes a job's page to that job's changes.
func (d JobDetail) live() string {
	if !d.Live {
		return ""
	}
	if d.State == "" && d.FirstURL == "" {
		// The first page of every message: its table is kept current.
		return LiveJob.Param() + "&id=" + d.Job.idText() + "&first=1"
	}
	return LiveJob.Param() + "&id=" + d.Job.idText()
}
