package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/views"
)

// messagePage is the message list page's page size.
const messagePage = 50

// countCap bounds the count of messages matching a filter, a search's
// too: counting stops at countCap matches, so the page says "more than
// countCap-1" instead of walking a million rows (a search's count reads
// its hits by id, store.CountMessages; BENCHMARKS.md).
const countCap = 10_001

// The message list page does not wait for its count: a count walks up to
// countCap matches (and, for a filter few rows match, every row of its
// index), which at a million messages took up to a second the rows did not
// need (issue 18). Counting beside the rows took their CPU time on a busy
// machine, and interrupting a count made the driver discard its
// connection. The page goes out with its rows saying it is counting, and
// the browser asks GET /messages/count for the number (count.js).

// listMessagesPage renders GET /messages: a page of the messages matching
// the filter in the URL (the API's parameters, read by the API's parser),
// newest first. A filter the catalog cannot use re-renders the form with a
// 400 naming the field.
func (s *Server) listMessagesPage(w http.ResponseWriter, r *http.Request) error {
	ents, err := s.catalog.ListEntities(r.Context())
	if err != nil {
		return fmt.Errorf("list messages page: %w", err)
	}
	sc := scopeFrom(r.Context())
	ents = scopeEntities(sc, ents)
	l := views.MessageList{Filter: formValues(r.URL.Query()), Replay: s.jobs != nil, Namespaces: scopeNames(sc, s.namespaces)}
	if role := s.listReplayRole(r); l.Replay && !role.Includes(auth.Operator) {
		l.Replay, l.ReplayRole = false, role.String()
		if ns := r.URL.Query().Get("namespace"); s.limited() && ns != "" {
			l.ReplayRole += " in " + ns // "you are a viewer in prod-us"
		}
	}
	for _, e := range ents {
		// A path in two namespaces is one choice (the namespace select
		// tells them apart); the list is by path.
		if e.DeletedAt == nil && (len(l.Entities) == 0 || l.Entities[len(l.Entities)-1] != e.Path) {
			l.Entities = append(l.Entities, e.Path)
		}
	}
	f, cursor, rng, err := parseListForm(r)
	if err == nil {
		// The chart (of a group or an entity) is read beside the rows,
		// not after them.
		type charted struct {
			c   *views.DeadLetterChartData
			err error
		}
		ch := make(chan charted, 1)
		go func() {
			c, err := s.deadLetterChart(r.Context(), f, rng, time.Now(), nil)
			ch <- charted{c, err}
		}()
		err = s.fillMessageList(r, &l, f, cursor)
		c := <-ch
		if err == nil {
			l.Chart, err = c.c, c.err
		}
	}
	if err != nil {
		status, fe, ok := formProblem(err)
		if !ok {
			return err
		}
		l.Error = fe
		return s.write(w, r, status, views.MessagesPage(l))
	}
	return s.render(w, r, views.MessagesPage(l))
}

// parseListForm reads the message list's URL: the filter, the cursor and
// the dead-letter chart's range (an index in views.ChartRanges).
func parseListForm(r *http.Request) (dlq.Filter, string, int, error) {
	q, err := newFormQuery(r)
	if err != nil {
		return dlq.Filter{}, "", 0, err
	}
	f, err := parseFilter(q)
	if err != nil {
		return f, "", 0, err
	}
	cursor, err := q.one("cursor")
	if err != nil {
		return f, "", 0, err
	}
	v, err := q.one(chartParam)
	if err != nil {
		return f, "", 0, err
	}
	rng, err := chartRange(v)
	if err != nil {
		return f, "", 0, err
	}
	return f, cursor, rng, q.done()
}

// listReplayRole is the role the message list's replay buttons are
// offered by: the identity's, or with access rules its role in the
// filter's namespace, or its highest in the namespaces it may view (the
// engine refuses a selection in a namespace where it is less).
func (s *Server) listReplayRole(r *http.Request) auth.Role {
	id := auth.FromContext(r.Context())
	if !s.limited() {
		return id.Role
	}
	if ns := r.URL.Query().Get("namespace"); ns != "" {
		return s.roleIn(r.Context(), ns)
	}
	best := auth.NoRole
	for _, ns := range s.namespaces {
		best = max(best, s.roleIn(r.Context(), ns))
	}
	return best
}

// fillMessageList reads the page (readMessages, as the API reads its
// pages). It does not count the matches: the page says it is counting and
// fetches the number from GET /messages/count (l.CountURL).
func (s *Server) fillMessageList(r *http.Request, l *views.MessageList, f dlq.Filter, cursor string) error {
	l.CountCap = countCap
	m, err := s.readMessages(r, f, messagePage, cursor, 0)
	if err != nil {
		return err
	}
	q := f.Encode()
	l.CountURL = "/messages/count"
	if len(q) > 0 {
		l.CountURL += "?" + q.Encode()
	}
	for _, rec := range m.recs {
		l.Messages = append(l.Messages, withoutPreview(s.messageItem(rec), m.hide))
	}
	s.markPreviews(r.Context(), f.Query, l.Messages)
	next := m.next
	// The filter as dlq writes it: the links', the live subscription's
	// and the replay form's.
	params := f.Encode()
	for _, name := range dlq.FilterKeys() {
		for _, v := range params[name] {
			l.Params = append(l.Params, views.Param{Name: name, Value: v})
		}
	}
	if next != "" {
		p := f.Encode()
		p.Set("cursor", next)
		l.NextURL = "/messages?" + p.Encode()
	}
	if cursor != "" {
		l.FirstURL = "/messages"
		if len(params) > 0 {
			l.FirstURL += "?" + params.Encode()
		}
	}
	return nil
}

// countFilter is f as r's caller may count it: a search leaves bodies out
// for one who may not read them (as readMessages lists it).
func (s *Server) countFilter(r *http.Request, f dlq.Filter) dlq.Filter {
	f.QueryNotBodies = !s.canSeeBodies(r.Context())
	return f
}

// messageCountFragment answers GET /messages/count: the message list's
// count paragraph (views.MatchingCount) for the filter in the URL, which
// the list page fetches once it has loaded (count.js). With the parameter
// chart (the live page asking again after new dead letters) it adds the
// dead-letter chart of the filter's group or entity, so that its counts
// follow too.
func (s *Server) messageCountFragment(w http.ResponseWriter, r *http.Request) error {
	f, _, rng, err := parseListForm(r)
	if err != nil {
		return err
	}
	var chart *views.DeadLetterChartData
	if r.URL.Query().Has(chartParam) {
		if chart, err = s.deadLetterChart(r.Context(), f, rng, time.Now(), nil); err != nil {
			return err
		}
	}
	l := views.MessageList{CountCap: countCap}
	f = s.countFilter(r, f)
	empty, err := s.filterScope(r, &f)
	if err != nil {
		return err
	}
	if !empty { // no namespace to view: nothing matches
		if l.Matching, err = s.catalog.CountMessages(r.Context(), f, l.CountCap); err != nil {
			return fmt.Errorf("count messages: %w", err)
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	if chart != nil {
		return s.render(w, r, views.CountAndChart(l, *chart))
	}
	return s.render(w, r, views.MatchingCount(l))
}

// formValues are the filter form's values as the URL has them. Times in
// the API's RFC 3339 form are shown as a datetime-local input wants them.
func formValues(v url.Values) views.MessageFilter {
	return views.MessageFilter{
		Namespace: v.Get("namespace"), Entity: v.Get("entity"), SubQueue: v.Get("subqueue"), State: v.Get("state"),
		Reason: v.Get("reason"), Group: v.Get("group"), Query: v.Get("q"),
		Since: datetimeLocal(v.Get("since")), Until: datetimeLocal(v.Get("until")),
		Properties:  slices.DeleteFunc(slices.Clone(v["property"]), func(s string) bool { return s == "" }),
		IncludeGone: v.Get("include_gone") == "true" || v.Get("include_gone") == "1",
	}
}

// datetimeLocal is a time in the API's RFC 3339 form as a datetime-local
// input shows it (UTC); anything else is returned as it is.
func datetimeLocal(s string) string {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC().Format("2006-01-02T15:04:05")
	}
	return s
}

// text makes s safe to show: invalid UTF-8 becomes U+FFFD.
func text(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

func textOf(p *string) string {
	if p == nil {
		return ""
	}
	return text(*p)
}

// messageItem is a record as a list row shows it, with its namespace when
// more than one is configured.
func (s *Server) messageItem(r dlq.Record) views.MessageItem {
	return namespacedItem(r, len(s.namespaces) > 1)
}

// namespacedItem is a record as a list row shows it; showNamespace adds
// the namespace column.
func namespacedItem(r dlq.Record, showNamespace bool) views.MessageItem {
	it := messageItem(r)
	it.Namespace, it.ShowNamespace = text(r.Namespace), showNamespace
	return it
}

// messageItem is a record as a list row shows it, without its namespace.
func messageItem(r dlq.Record) views.MessageItem {
	return views.MessageItem{
		ID: r.ID, Entity: text(r.Entity), SubQueue: string(r.SubQueue), State: string(r.State),
		SequenceNumber: r.SequenceNumber, EnqueuedAt: r.EnqueuedAt,
		Reason: textOf(r.DeadLetterReason), Description: textOf(r.DeadLetterErrorDescription),
		DeliveryCount: r.DeliveryCount, Subject: textOf(r.Subject), MessageID: text(r.MessageID),
		Preview: text(r.BodyPreview), Gone: r.GoneAt != nil,
	}
}

// withoutPreview blanks a row's body preview if hide: for a viewer when
// bodies are hidden from viewers.
func withoutPreview(it views.MessageItem, hide bool) views.MessageItem {
	if hide {
		it.Preview = ""
	}
	return it
}

// showMessagePage renders GET /messages/{id}.
func (s *Server) showMessagePage(w http.ResponseWriter, r *http.Request) error {
	id, err := messageID(r)
	if err != nil {
		return err
	}
	rec, hide, err := s.readMessage(r, id)
	if err != nil {
		return err
	}
	d := messageDetail(rec)
	d.Item = s.messageItem(rec)
	if hide {
		d.Body = views.BodyView{Kind: views.BodyHidden, Size: d.Body.Size, ContentType: d.Body.ContentType}
		d.Item.Preview = ""
	}
	// Opened from a search (the list's rows link with their q): its
	// matches are marked in the body.
	s.markBody(r.Context(), r.URL.Query().Get("q"), &d)
	if s.jobs != nil {
		// The role in the message's namespace (access rules): an
		// operator of another namespace sees the buttons disabled.
		role := s.roleIn(r.Context(), rec.Namespace)
		d.Replay, d.CanReplay = true, role.Includes(auth.Operator)
		// A scheduled message is not replayed (a job skips it): an admin
		// may cancel it instead.
		d.Scheduled, d.CanCancel = rec.State == dlq.StateScheduled && rec.GoneAt == nil, s.canCancel(r.Context(), rec)
		if role.Includes(auth.Admin) {
			// Only admins may edit (and so see the body in the form).
			d.Edit = true
		}
		if d.Replays, err = s.replayHistory(r.Context(), id); err != nil {
			return fmt.Errorf("show message page %d: %w", id, err)
		}
		for i := range d.Replays {
			for j := range d.Replays[i].Copies {
				d.Replays[i].Copies[j] = withoutPreview(d.Replays[i].Copies[j], hide)
			}
		}
	}
	if src, ok := s.catalog.(lineageSource); ok {
		evs, err := src.Lineage(r.Context(), id)
		if err != nil {
			return fmt.Errorf("show message page %d: %w", id, err)
		}
		d.Lineage = lineageSteps(evs, id)
	}
	return s.render(w, r, views.MessagePage(d))
}

// lineageSteps are a lineage's events as the message page shows them;
// current is the page's message.
func lineageSteps(evs []dlq.LineageEvent, current int64) []views.LineageStep {
	out := make([]views.LineageStep, 0, len(evs))
	for _, e := range evs {
		out = append(out, views.LineageStep{Kind: e.Kind, At: e.At, MessageID: e.Message.ID, Entity: text(e.Message.Entity),
			SubQueue: string(e.Message.SubQueue), Reason: textOf(e.Message.DeadLetterReason), JobID: e.JobID, State: e.State,
			CopyMessageID: text(e.CopyMessageID), Depth: e.Depth, Current: e.Kind == dlq.LineageDeadLettered && e.Message.ID == current})
	}
	return out
}

// replayHistory is what the jobs did to a message, newest job first, and
// what became of each copy: the catalog's messages whose MessageId is the
// copy's (a copy that was dead-lettered again shows up there).
func (s *Server) replayHistory(ctx context.Context, id int64) ([]views.ReplayHistory, error) {
	items, copies, err := s.jobs.History(ctx, id)
	if err != nil {
		return nil, err
	}
	byMessageID := map[string][]views.MessageItem{}
	sc := scopeFrom(ctx)
	for _, c := range copies {
		if !sc.has(c.Namespace) {
			continue // a copy in a namespace the identity may not view
		}
		byMessageID[c.MessageID] = append(byMessageID[c.MessageID], messageItem(c))
	}
	actions := map[int64]string{}
	out := make([]views.ReplayHistory, 0, len(items))
	for _, it := range items {
		action, ok := actions[it.JobID]
		if !ok {
			// A message is in few jobs: one read each.
			j, err := s.jobs.Job(ctx, it.JobID)
			if err != nil && !errors.Is(err, replay.ErrNotFound) {
				return nil, fmt.Errorf("job %d: %w", it.JobID, err)
			}
			action = string(j.Action) // "" for a job that is gone
			actions[it.JobID] = action
		}
		h := views.ReplayHistory{JobID: it.JobID, Action: action, State: string(it.State), CopyMessageID: text(it.CopyMessageID),
			Error: text(it.Error), Flagged: it.Flagged}
		if it.CopyMessageID != "" {
			h.Copies = byMessageID[it.CopyMessageID]
		}
		out = append(out, h)
	}
	return out, nil
}

func messageDetail(r dlq.Record) views.MessageDetail {
	d := views.MessageDetail{
		Item:   messageItem(r),
		Reason: textOf(r.DeadLetterReason), Description: textOf(r.DeadLetterErrorDescription),
		Source:      textOf(r.DeadLetterSource),
		Body:        bodyView(r.Body, textOf(r.ContentType)),
		FirstSeenAt: r.FirstSeenAt, LastSeen: r.LastSeenAt, GoneAt: r.GoneAt, ReplayCount: r.ReplayCount,
	}
	opt := func(p *string) string {
		if p == nil {
			return "–"
		}
		return text(*p)
	}
	tm := func(t *time.Time) string {
		if t == nil {
			return "–"
		}
		return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
	}
	ttl := "–"
	if r.TimeToLive != nil {
		ttl = r.TimeToLive.String()
	}
	d.System = []views.Field{
		{Name: "Entity", Value: text(r.Entity)},
		{Name: "Subqueue", Value: string(r.SubQueue)},
		{Name: "State", Value: string(r.State)},
		{Name: "Sequence number", Value: strconv.FormatInt(r.SequenceNumber, 10)},
		{Name: "Message id", Value: text(r.MessageID)},
		{Name: "Correlation id", Value: opt(r.CorrelationID)},
		{Name: "Session id", Value: opt(r.SessionID)},
		{Name: "Partition key", Value: opt(r.PartitionKey)},
		{Name: "Subject", Value: opt(r.Subject)},
		{Name: "Content type", Value: opt(r.ContentType)},
		{Name: "Reply to", Value: opt(r.ReplyTo)},
		{Name: "Reply to session id", Value: opt(r.ReplyToSessionID)},
		{Name: "To", Value: opt(r.To)},
		{Name: "Enqueued", Value: tm(r.EnqueuedAt)},
		{Name: "Scheduled enqueue", Value: tm(r.ScheduledEnqueueAt)},
		{Name: "Expires", Value: tm(r.ExpiresAt)},
		{Name: "Time to live", Value: ttl},
		{Name: "Delivery count", Value: strconv.FormatUint(uint64(r.DeliveryCount), 10)},
	}
	d.Properties, d.PropertiesRaw = propertyFields(r.ApplicationProperties)
	return d
}

// propertyFields are the application properties by key, each value as
// text: a string's characters, anything else its JSON. Stored properties
// that are not a JSON object come back as raw text instead.
func propertyFields(raw json.RawMessage) ([]views.Field, string) {
	if len(raw) == 0 {
		return nil, ""
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, text(string(raw))
	}
	out := make([]views.Field, 0, len(m))
	for k, v := range m {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			s = string(v)
		}
		out = append(out, views.Field{Name: text(k), Value: text(s)})
	}
	slices.SortFunc(out, func(a, b views.Field) int { return strings.Compare(a.Name, b.Name) })
	return out, ""
}

// maxEditBody is the largest body the edit form offers as text.
const maxEditBody = 256 << 10

// editForm is what the edit form starts from: the body as text (when it is
// valid UTF-8 and not huge) and the properties indented.
func editForm(r dlq.Record) (body string, binary bool, props string) {
	if len(r.Body) > maxEditBody || !utf8.Valid(r.Body) || bytes.IndexByte(r.Body, 0) >= 0 {
		binary = true
	} else {
		body = string(r.Body)
	}
	// The broker's dead-letter properties are left out: no copy carries
	// them (the adapter drops them even if they are typed back in).
	var m map[string]json.RawMessage
	props = "{}"
	if json.Unmarshal(r.ApplicationProperties, &m) == nil {
		maps.DeleteFunc(m, func(k string, _ json.RawMessage) bool { return dlq.IsBrokerDeadLetterProperty(k) })
		var buf bytes.Buffer
		if b, err := json.Marshal(m); err == nil && len(m) > 0 && json.Indent(&buf, b, "", "  ") == nil {
			props = buf.String()
		}
	}
	return body, binary, props
}

// refused shows why a form was refused, with the API's status; anything
// else is a server error.
func (s *Server) refused(w http.ResponseWriter, r *http.Request, err error) error {
	if _, _, ok := formProblem(err); !ok {
		return err
	}
	s.serveErrorTitled(w, r, err, "Not replayed")
	return nil
}
