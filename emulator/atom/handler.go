package atom

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/internal/isodur"
)

// Options configure NewHandler.
type Options struct {
	KeyName string // SAS key name; default "RootManageSharedAccessKey"
	Key     string // SAS key; default "SAS_KEY_VALUE"
	// Rules are further namespace-level shared access rules (key name,
	// primary and secondary key, rights). KeyName/Key has every right; a
	// token of a rule without Manage gets Azure's 401 for every entity
	// operation except reading an entity that does not exist (404).
	Rules  []broker.AuthorizationRule
	Logger *slog.Logger     // default: discard
	Now    func() time.Time // default time.Now; token expiry and $namespaceinfo times
	// JWTKey checks Entra-style bearer tokens (HS256); empty refuses them.
	JWTKey []byte
	// Faults serves drop-connections and latency under /$emulator/faults
	// (faults.go); nil answers those two with 501.
	Faults Faults
}

// Defaults of Options, the same as Microsoft's emulator connection string.
const (
	DefaultKeyName = "RootManageSharedAccessKey"
	DefaultKey     = "SAS_KEY_VALUE"
)

// defaultPageSize is what a list returns without $top, as the service does.
const defaultPageSize = 100

// maxBodySize bounds a request body; real descriptions are a few kilobytes.
const maxBodySize = 1 << 20

type handler struct {
	ns      *broker.Namespace
	keyName string
	key     []byte
	log     *slog.Logger
	now     func() time.Time
	created time.Time
	faults  Faults // may be nil
	jwtKey  []byte
	rules   []broker.AuthorizationRule
}

// NewHandler serves the Service Bus admin HTTP/ATOM API for ns. Mount it at
// the root: paths are entity paths ("/myqueue", "/$Resources/Queues").
func NewHandler(ns *broker.Namespace, o Options) http.Handler {
	h := &handler{ns: ns, keyName: o.KeyName, key: []byte(o.Key), log: o.Logger, now: o.Now, faults: o.Faults, jwtKey: o.JWTKey, rules: o.Rules}
	if h.keyName == "" {
		h.keyName = DefaultKeyName
	}
	if o.Key == "" {
		h.key = []byte(DefaultKey)
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	h.created = h.now().UTC()
	return h
}

// httpError is an error with the status code and detail the client sees.
type httpError struct {
	code   int
	detail string
}

func (e *httpError) Error() string { return fmt.Sprintf("%d: %s", e.code, e.detail) }

func badRequest(format string, args ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &httpError{http.StatusNotFound, fmt.Sprintf(format, args...)}
}

// request is what a resource handler needs from the HTTP request.
type request struct {
	r    *http.Request
	path string // entity path without the leading slash, e.g. "t/Subscriptions/s"
}

// self is the absolute URL of an entity path, used for <id> and <link>.
func (rq *request) self(path string) string {
	scheme := "http"
	if rq.r.TLS != nil {
		scheme = "https"
	}
	v := rq.r.URL.Query().Get("api-version")
	if v == "" {
		v = "2021-05"
	}
	u := url.URL{Scheme: scheme, Host: rq.r.Host, Path: "/" + path, RawQuery: "api-version=" + url.QueryEscape(v)}
	return u.String()
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := h.now()
	h.countAdmin(r.URL.Path)
	rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
	manage, err := h.authorize(r)
	switch {
	case err == nil && manage:
		err = h.route(rec, r)
	case err == nil:
		err = h.withoutManage(r)
	}
	if err != nil {
		h.writeError(rec, r, err)
	}
	h.log.Debug("admin request", "method", r.Method, "path", r.URL.Path, "status", rec.code,
		"duration", h.now().Sub(start))
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

// route dispatches on the entity path. Queue and topic names may contain
// '/', so the path is split at its first "Subscriptions" segment.
func (h *handler) route(w http.ResponseWriter, r *http.Request) error {
	path := strings.TrimPrefix(r.URL.Path, "/")
	rq := &request{r: r, path: strings.TrimSuffix(path, "/")}
	p := rq.path
	switch {
	case p == "":
		return notFound("no entity path given")
	case strings.EqualFold(p, "$namespaceinfo"):
		return h.only(r, http.MethodGet, func() error { return h.showNamespace(w, rq) })
	case strings.EqualFold(p, "$Resources/Queues"):
		return h.only(r, http.MethodGet, func() error { return h.listQueues(w, rq) })
	case strings.EqualFold(p, "$Resources/Topics"):
		return h.only(r, http.MethodGet, func() error { return h.listTopics(w, rq) })
	case isFaultsPath(p):
		return h.serveFaults(w, r, p)
	case strings.EqualFold(p, statsPath):
		return h.serveStats(w, r)
	case strings.HasPrefix(p, "$"):
		return notFound("unknown resource %q", "/"+p)
	}

	segs := strings.Split(p, "/")
	at := -1
	for i := 1; i < len(segs); i++ {
		if strings.EqualFold(segs[i], "Subscriptions") {
			at = i
			break
		}
	}
	if at < 0 {
		switch r.Method {
		case http.MethodGet:
			return h.showQueueOrTopic(w, rq, p)
		case http.MethodPut:
			return h.putQueueOrTopic(w, rq, p)
		case http.MethodDelete:
			return h.deleteQueueOrTopic(w, p)
		}
		return methodNotAllowed(r)
	}
	topic := strings.Join(segs[:at], "/")
	rest := segs[at+1:]
	switch {
	case len(rest) == 0:
		return h.only(r, http.MethodGet, func() error { return h.listSubscriptions(w, rq, topic) })
	case len(rest) == 1:
		sub := rest[0]
		switch r.Method {
		case http.MethodGet:
			return h.showSubscription(w, rq, topic, sub)
		case http.MethodPut:
			return h.putSubscription(w, rq, topic, sub)
		case http.MethodDelete:
			return h.deleteSubscription(w, topic, sub)
		}
		return methodNotAllowed(r)
	case strings.EqualFold(rest[1], "Rules") && len(rest) == 2:
		switch r.Method {
		case http.MethodGet:
			return h.listRules(w, rq, topic, rest[0])
		case http.MethodPut:
			// The SDK's CreateRule without a name PUTs to ".../Rules/"; the
			// body then names the rule ("$Default").
			return h.putRule(w, rq, topic, rest[0], "")
		}
		return methodNotAllowed(r)
	case strings.EqualFold(rest[1], "Rules") && len(rest) == 3:
		switch r.Method {
		case http.MethodGet:
			return h.showRule(w, rq, topic, rest[0], rest[2])
		case http.MethodPut:
			return h.putRule(w, rq, topic, rest[0], rest[2])
		case http.MethodDelete:
			return h.deleteRule(w, topic, rest[0], rest[2])
		}
		return methodNotAllowed(r)
	}
	return notFound("unknown resource %q", "/"+p)
}

func (h *handler) only(r *http.Request, method string, fn func() error) error {
	if r.Method != method {
		return methodNotAllowed(r)
	}
	return fn()
}

func methodNotAllowed(r *http.Request) error {
	return &httpError{http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not supported on %s", r.Method, r.URL.Path)}
}

// writeError maps an error to a status code and an <Error> body. Broker
// errors carry safe, descriptive text; anything else is logged and hidden.
func (h *handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	code, detail := http.StatusInternalServerError, "internal error"
	switch {
	case errors.As(err, &he):
		code, detail = he.code, he.detail
	case errors.Is(err, broker.ErrNotFound):
		code, detail = http.StatusNotFound, brokerDetail(err)
	case errors.Is(err, broker.ErrAlreadyExists):
		code, detail = http.StatusConflict, brokerDetail(err)
	case errors.Is(err, broker.ErrInvalidProperties), errors.Is(err, broker.ErrNotAllowed):
		code, detail = http.StatusBadRequest, brokerDetail(err)
	case errors.Is(err, broker.ErrServerBusy):
		code, detail = http.StatusServiceUnavailable, brokerDetail(err)
	default:
		h.log.Error("admin request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", "SharedAccessSignature")
	}
	writeErrorXML(w, code, detail)
}

// writeErrorXML writes <Error><Code>code</Code><Detail>detail</Detail></Error>
// as the service does: only &, < and > escaped in the detail, so that
// quotes stay quotes ('GetSubscription', which callers match on; Go's XML
// encoder would write &#39;).
func writeErrorXML(w http.ResponseWriter, code int, detail string) {
	esc := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(detail)
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	w.WriteHeader(code)
	fmt.Fprintf(w, "%s<Error><Code>%d</Code><Detail>%s</Detail></Error>", xml.Header, code, esc)
}

// brokerDetail turns "broker: x: y" wrapping into readable text.
func brokerDetail(err error) string {
	return strings.ReplaceAll(err.Error(), "broker: ", "")
}

func writeXML(w http.ResponseWriter, code int, v any) {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	if err := xml.NewEncoder(&b).Encode(v); err != nil {
		// Only a programming error can get here: every value is plain data.
		http.Error(w, "encoding error", http.StatusInternalServerError)
		return
	}
	ct := "application/atom+xml;type=entry;charset=utf-8"
	switch v.(type) {
	case *feedXML:
		ct = "application/atom+xml;type=feed;charset=utf-8"
	case errorXML:
		ct = "application/xml; charset=utf-8"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(code)
	w.Write(b.Bytes())
}

// readEntry decodes a PUT body into an entry.
func readEntry(w http.ResponseWriter, r *http.Request) (*entryIn, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodySize))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes", maxBodySize)}
		}
		return nil, badRequest("reading the request body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, badRequest("the request body is empty: expected an ATOM <entry> with a <content> description")
	}
	var e entryIn
	if err := xml.Unmarshal(body, &e); err != nil {
		return nil, badRequest("the request body is not a valid ATOM entry: %s", strings.TrimPrefix(err.Error(), "xml: "))
	}
	return &e, nil
}

// paging reads $skip and $top. Unknown parameters (the SDK sends a stray
// empty "?" one for subscriptions) are ignored.
func paging(r *http.Request) (skip, top int, err error) {
	q := r.URL.Query()
	top = defaultPageSize
	if v := q.Get("$skip"); v != "" {
		if skip, err = strconv.Atoi(v); err != nil || skip < 0 {
			return 0, 0, badRequest("$skip must be a non-negative integer, got %q", v)
		}
	}
	if v := q.Get("$top"); v != "" {
		if top, err = strconv.Atoi(v); err != nil || top < 1 {
			return 0, 0, badRequest("$top must be a positive integer, got %q", v)
		}
	}
	return skip, top, nil
}

func page[T any](items []T, skip, top int) []T {
	if skip >= len(items) {
		return nil
	}
	items = items[skip:]
	if top < len(items) {
		items = items[:top]
	}
	return items
}

func (h *handler) feed(rq *request, title string, entries []*entryXML) *feedXML {
	for _, e := range entries {
		e.Xmlns = "" // inherited from the feed
	}
	self := rq.self(rq.path)
	if q := rq.r.URL.Query(); q.Get("$skip") != "" {
		self += "&%24skip=" + url.QueryEscape(q.Get("$skip"))
	}
	return &feedXML{
		Xmlns:   nsAtom,
		Title:   textXML{Type: "text", Text: title},
		ID:      self,
		Updated: timeText(h.now()),
		Link:    linkXML{Rel: "self", Href: self},
		Entries: entries,
	}
}

func (h *handler) entry(rq *request, path, title string, created, updated time.Time, c contentXML) *entryXML {
	self := rq.self(path)
	c.Type = "application/xml"
	return &entryXML{
		Xmlns:     nsAtom,
		ID:        self,
		Title:     textXML{Type: "text", Text: title},
		Published: timeText(created),
		Updated:   timeText(updated),
		Author:    authorXML{Name: h.ns.Name()},
		Link:      linkXML{Rel: "self", Href: self},
		Content:   c,
	}
}

// timeText writes a time as RFC 3339 in UTC with at most 7 fractional
// digits (.NET's DateTime precision; more would break its parser). "Never"
// (the zero time, or the Unix epoch the broker reports for an entity nobody
// has used) is written "0001-01-01T00:00:00", exactly as the service does.
func timeText(t time.Time) string {
	if t.IsZero() || t.UnixNano() == 0 {
		return neverText
	}
	return t.UTC().Format("2006-01-02T15:04:05.9999999Z07:00")
}

const neverText = "0001-01-01T00:00:00"

// ---- conversions shared by the resources ----

// durationText writes d; zero means "never" for TTL and auto-delete.
func durationText(d time.Duration, zeroIsInfinite bool) string {
	if d == 0 && zeroIsInfinite {
		return isodur.InfiniteText
	}
	return isodur.Format(d)
}

// parseDuration reads a duration element. With infiniteIsZero, TimeSpan.MaxValue
// (and anything too large) maps to 0, the broker's "never".
func parseDuration(field string, s *string, dst *time.Duration, infiniteIsZero bool) error {
	if s == nil {
		return nil
	}
	d, err := isodur.Parse(strings.TrimSpace(*s))
	if err != nil {
		return badRequest("%s: %q is not an ISO-8601 duration such as PT30S, PT1M or P14D", field, *s)
	}
	if d <= 0 {
		return badRequest("%s: %q must be a positive duration", field, *s)
	}
	if d == isodur.Infinite && infiniteIsZero {
		d = 0
	}
	*dst = d
	return nil
}

func parseStatus(s *string, dst *broker.EntityStatus) error {
	if s == nil {
		return nil
	}
	for _, st := range []broker.EntityStatus{broker.StatusActive, broker.StatusDisabled, broker.StatusSendDisabled, broker.StatusReceiveDisabled} {
		if strings.EqualFold(strings.TrimSpace(*s), string(st)) {
			*dst = st
			return nil
		}
	}
	return badRequest("Status: %q is not one of Active, Disabled, SendDisabled, ReceiveDisabled", *s)
}

func setString(s *string, dst *string) {
	if s != nil {
		*dst = *s
	}
}

// setForward keeps a forwarding target as the client wrote it, an entity
// name or an absolute URL; the broker resolves it (broker.ForwardTarget).
func setForward(s *string, dst *string) {
	if s != nil {
		*dst = strings.TrimSpace(*s)
	}
}

// forwardText is a forwarding target as the service returns it: an
// absolute URL. A target given as a URL comes back as given; one given as a
// name (the admin API, Config.json) becomes sb://<namespace>/<name>, the
// namespace being the host the client addressed (the Host header, which
// an SDK behind a rewriting transport still sets to the namespace).
func forwardText(rq *request, v string) string {
	if u, err := url.Parse(v); v == "" || (err == nil && u.IsAbs()) {
		return v
	}
	return (&url.URL{Scheme: "sb", Host: rq.r.Host, Path: "/" + strings.TrimPrefix(v, "/")}).String()
}

// partitions is how many partitions the service gives a partitioned entity
// (standard tier); it reports MaxSizeInMegabytes as the total over them.
const partitions = 16

// maxSizeText is MaxSizeInMegabytes as the service reports it: the size of
// one partition times 16 for a partitioned entity.
func maxSizeText(mb int32, partitioned bool) int32 {
	if partitioned {
		return mb * partitions
	}
	return mb
}

// setMaxSize reads MaxSizeInMegabytes. On a partitioned entity a value of
// at least 16 GB that divides by 16 is the reported total (what a client
// that read the entity sends back on update) and is stored per partition;
// smaller values are a partition's size, as at creation.
func setMaxSize(v *int32, partitioned bool, dst *int32) error {
	if err := setInt32("MaxSizeInMegabytes", v, dst); err != nil {
		return err
	}
	if v != nil && partitioned && *dst >= partitions*1024 && *dst%partitions == 0 {
		*dst /= partitions
	}
	return nil
}

// setAuthRules replaces dst with the rules of the request when it has an
// <AuthorizationRules> element.
func setAuthRules(in *authRulesIn, dst *[]broker.AuthorizationRule) {
	if in == nil {
		return
	}
	out := make([]broker.AuthorizationRule, 0, len(in.Rules))
	for _, r := range in.Rules {
		out = append(out, broker.AuthorizationRule{
			KeyName: strings.TrimSpace(r.KeyName), Rights: r.Rights,
			PrimaryKey: r.PrimaryKey, SecondaryKey: r.SecondaryKey,
			CreatedTime: r.CreatedTime, ModifiedTime: r.ModifiedTime,
		})
	}
	*dst = out
}

func authRulesText(rules []broker.AuthorizationRule) authRulesXML {
	var out authRulesXML
	for _, r := range rules {
		out.Rules = append(out.Rules, authRuleXML{
			Type: "SharedAccessAuthorizationRule", ClaimType: "SharedAccessKey", ClaimValue: "None",
			Rights: r.Rights, KeyName: r.KeyName, CreatedTime: r.CreatedTime, ModifiedTime: r.ModifiedTime,
			PrimaryKey: r.PrimaryKey, SecondaryKey: r.SecondaryKey,
		})
	}
	return out
}

func setBool(b *bool, dst *bool) {
	if b != nil {
		*dst = *b
	}
}

func setInt32(field string, v *int32, dst *int32) error {
	if v == nil {
		return nil
	}
	if *v < 1 {
		return badRequest("%s: must be at least 1, got %d", field, *v)
	}
	*dst = *v
	return nil
}

func setInt64(field string, v *int64, dst *int64) error {
	if v == nil {
		return nil
	}
	if *v < 1 {
		return badRequest("%s: must be at least 1, got %d", field, *v)
	}
	*dst = *v
	return nil
}

func clamp32(n int64) int32 {
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	if n < 0 {
		return 0
	}
	return int32(n)
}

func countDetails(c broker.Counts) countDetailsXML {
	return countDetailsXML{
		XmlnsD2P1:          nsCounts,
		Active:             clamp32(c.Active),
		DeadLetter:         clamp32(c.DeadLetter),
		Scheduled:          clamp32(c.Scheduled),
		Transfer:           clamp32(c.Transfer),
		TransferDeadLetter: clamp32(c.TransferDeadLetter),
	}
}

// isUpdate reports whether a PUT is an update: clients send If-Match: *.
func isUpdate(r *http.Request) bool {
	return r.Header.Get("If-Match") != ""
}

func putStatus(update bool) int {
	if update {
		return http.StatusOK
	}
	return http.StatusCreated
}
