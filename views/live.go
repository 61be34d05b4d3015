package views

import (
	"net/url"
	"strconv"
)

// The live subscriptions of the pages: the query of GET /live (web/live.go)
// that LayoutWith puts in <main data-live> for static/live.js.

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
	v.Set("page", "messages")
	if l.FirstURL == "" {
		v.Set("first", "1")
	}
	return v.Encode()
}

// live subscribes the failure groups page to the groups table.
func (g Groups) live() string {
	if g.IncludeGone {
		return "page=groups&include_gone=true"
	}
	return "page=groups"
}

// live subscribes a message's page to that message: it refetches when the
// message leaves the broker or changes.
func (d MessageDetail) live() string {
	return "page=message&id=" + strconv.FormatInt(d.Item.ID, 10)
}

// live subscribes the jobs page to job changes: rows are replaced, and the
// first page gets jobs newer than its newest (after) prepended.
func (l JobList) live() string {
	if !l.Live {
		return ""
	}
	v := url.Values{"page": {"jobs"}}
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
		return "page=job&id=" + d.Job.idText() + "&first=1"
	}
	return "page=job&id=" + d.Job.idText()
}
