package storetest

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// Words and values the generated catalog contains at known rates, for
// benchmarks of search and filters.
const (
	// CommonWord is in the body of about a third of the messages.
	CommonWord = "pending"
	// MidWord is in about 1% of the bodies: many hits, few per page.
	MidWord = "backorder"
	// RareWord is in about 50 bodies per million messages.
	RareWord = "zephyrine"
	// CommonRegion is the region property of about 30% of the messages.
	CommonRegion = "westeurope"
	// RareTenant is the tenant property of about 0.02% of the messages.
	RareTenant = "tenant-1234"
	// SmallEntity holds about 0.1% of the messages; BigEntity about 22%.
	SmallEntity = "audit-log"
	BigEntity   = "orders"
	// DeletedEntity was deleted: all its messages are gone.
	DeletedEntity = "legacy-orders"
)

// Start is the earliest enqueued time of the generated catalog, which spans
// Span.
var (
	Start = time.Date(2026, 10, 23, 0, 0, 0, 0, time.UTC)
	Span  = 30 * 24 * time.Hour
)

// generatorVersion changes whenever Generate's output does, so that cached
// catalogs are rebuilt.
const generatorVersion = 3

type genEntity struct {
	path      string
	kind      dlq.Kind
	weight    float64
	tdl       float64 // share of transfer dead letters
	main      float64 // share of deferred/scheduled messages in the main entity
	body      string  // order, payment, email, invoice, inventory, notice
	templates []int   // failure templates this entity produces
}

var genEntities = []genEntity{
	{path: "orders", weight: 22, tdl: 0.02, main: 0.10, body: "order"},
	{path: "payments", kind: dlq.KindTopic, weight: 0.5, main: 1, body: "payment"},
	{path: "payments/Subscriptions/audit", weight: 6, tdl: 0.02, main: 0.05, body: "payment"},
	{path: "payments/Subscriptions/fraud", weight: 9, tdl: 0.01, main: 0.05, body: "payment"},
	{path: "payments/Subscriptions/ledger", weight: 12, tdl: 0.03, main: 0.08, body: "payment"},
	{path: "email", weight: 10, tdl: 0.01, main: 0.15, body: "email"},
	{path: "invoices", weight: 8, tdl: 0.7, main: 0.02, body: "invoice"},
	{path: "inventory-sync", weight: 7, tdl: 0.02, main: 0.04, body: "inventory"},
	{path: "shipping-labels", weight: 1, tdl: 0.02, main: 0.1, body: "order"},
	{path: "notifications", weight: 8, tdl: 0.01, main: 0.1, body: "notice"},
	{path: "refunds", weight: 4, tdl: 0.02, main: 0.1, body: "payment"},
	{path: "customers", kind: dlq.KindTopic, weight: 0.4, main: 1, body: "notice"},
	{path: "customers/Subscriptions/crm", weight: 6, tdl: 0.02, main: 0.05, body: "notice"},
	{path: "customers/Subscriptions/marketing", weight: 5, tdl: 0.02, main: 0.05, body: "email"},
	{path: DeletedEntity, weight: 2, tdl: 0.01, main: 0.05, body: "order"},
	{path: SmallEntity, weight: 0.1, tdl: 0, main: 0, body: "notice"},
}

type template struct {
	reason string
	desc   string // %d, %g (guid), %h (hex id), %t (time) are filled in
	weight float64
}

// templates are the failures: each normalises to one group. Weights fall
// off like a real incident history: a few huge groups, a long tail.
var templates = []template{
	{"MaxDeliveryCountExceeded", "Message could not be consumed after %d delivery attempts.", 30},
	{"TTLExpiredException", "The message expired and was dead lettered.", 14},
	{"DeserializationFailed", "Unexpected character encountered while parsing value: <. Path '', line %d, position %d.", 9},
	{"ValidationFailed", "Order %d: quantity must be greater than 0 (got -%d)", 7},
	{"ValidationFailed", "Field 'currency' is required (order %d)", 5},
	{"SqlTimeout", "Execution Timeout Expired. The timeout period elapsed prior to completion of the operation (%d ms) on server sql-%d.", 6},
	{"SqlDeadlock", "Transaction (Process ID %d) was deadlocked on lock resources with another process and has been chosen as the deadlock victim.", 3},
	{"HttpError", "POST https://api.partner.example/v2/orders/%d returned 503 Service Unavailable after %d ms", 4},
	{"HttpError", "POST https://api.partner.example/v2/orders/%d returned 429 Too Many Requests; retry after %d s", 2},
	{"HttpError", "GET https://inventory.internal/items/%g returned 404 Not Found", 2},
	{"PaymentDeclined", "Card declined by issuer: code %d, trace %h", 3},
	{"PaymentDeclined", "Insufficient funds for payment %g", 2},
	{"FraudSuspected", "Risk score %d exceeds threshold %d for customer %d", 1.5},
	{"SmtpError", "550 5.1.1 <user%d@example.com>: Recipient address rejected: User unknown", 2.5},
	{"SmtpError", "421 4.7.0 Try again later, closing connection (attempt %d)", 1.5},
	{"TemplateMissing", "Email template 'reminder-v%d' not found", 0.8},
	{"SessionLockLost", "The session lock has expired on the MessageSession. Lock token %g", 1.2},
	{"LockLost", "The lock supplied is invalid. Either the lock expired, or the message has already been removed from the queue. Reference:%g, TrackingId:%g, Timestamp:%t", 2},
	{"MessageSizeExceeded", "The message size %d exceeds the limit of %d bytes", 0.6},
	{"HeaderSizeExceeded", "The size of the message header %d exceeded the maximum of %d", 0.2},
	{"SchemaVersionUnsupported", "Schema version %d is not supported (expected %d)", 0.9},
	{"NullReferenceException", "Object reference not set to an instance of an object. at Orders.Handler.Handle(OrderCreated m) in /src/Handler.cs:line %d", 2.2},
	{"TimeoutException", "The operation did not complete within the allocated time %t for object message.", 1.4},
	{"ConcurrencyConflict", "Entity 'Order' with key %d was modified by another process (etag %h)", 1.1},
	{"DuplicateKey", "Cannot insert duplicate key row in object 'dbo.Payments' with unique index 'IX_Payments_Reference'. The duplicate key value is (%d).", 0.7},
	{"InventoryNegative", "Stock for SKU-%d would become negative (%d)", 0.8},
	{"AddressInvalid", "Postcode '%d' is not valid for country DE", 0.5},
	{"Unauthorized", "401 Unauthorized: token expired at %t", 0.4},
	{"CertificateExpired", "The remote certificate is invalid because of errors in the certificate chain: NotTimeValid", 0.15},
	{"DiskFull", "No space left on device while writing /var/spool/labels/%d.pdf", 0.05},
	{"ManualDeadLetter", "Moved by operator %d during incident INC-%d", 0.1},
	{"PoisonMessage", "Handler threw ArgumentOutOfRangeException: index %d", 0.3},
	{"RateLimited", "Partner quota of %d requests per minute exceeded", 0.35},
	{"GdprErasure", "Customer %d was erased; message cannot be processed", 0.02},
	{"Rejected by downstream", "Downstream system rejected the message with status %d", 0.25},
}

// transfer dead letters have the broker's own reasons.
var transferTemplates = []template{
	{"MaxTransferHopCountExceeded", "The message exceeded the maximum of 4 forwarding hops.", 3},
	{"TransferToDisabledEntity", "The destination entity 'invoices-archive' is disabled for send (tracking %g).", 5},
	{"DestinationEntityNotFound", "The destination entity 'invoices-archive-%d' was not found.", 1},
}

var (
	regions    = []string{"westeurope", "northeurope", "eastus", "westus2", "uksouth", "southeastasia"}
	regionW    = []float64{30, 20, 20, 12, 10, 8}
	statuses   = []string{CommonWord, "paid", "shipped", "cancelled", "refunded", "created"}
	statusW    = []float64{34, 20, 18, 10, 8, 10}
	currencies = []string{"EUR", "USD", "GBP", "SEK", "CHF"}
	subjects   = map[string][]string{
		"order":     {"OrderCreated", "OrderUpdated", "OrderCancelled"},
		"payment":   {"PaymentCaptured", "PaymentRefunded", "PaymentAuthorised"},
		"email":     {"SendEmail", "SendReminder"},
		"invoice":   {"InvoiceIssued"},
		"inventory": {"StockChanged", "StockReserved"},
		"notice":    {"CustomerUpdated", "Notify"},
	}
)

// Generate writes a synthetic catalog of n messages into the database at
// path, which must be freshly created and migrated (store.Open). It is
// deterministic for a given n.
func Generate(ctx context.Context, path string, n int) error {
	// Build the message indexes after the rows: sorting once is several
	// times faster than keeping them current through a million inserts.
	indexes, err := dropIndexes(ctx, path, "messages")
	if err != nil {
		return err
	}
	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	// The entities first (the messages need them), their counts at the end.
	now := time.Now()
	var ents []Entity
	for _, e := range genEntities {
		ents = append(ents, Entity{Path: e.path, Kind: e.kind})
	}
	if err := addEntities(ctx, s, now, ents...); err != nil {
		return err
	}
	g := newGenerator(n)
	batch := make([]dlq.Record, 0, importBatch)
	for i := range n {
		batch = append(batch, g.record(i))
		if len(batch) == importBatch {
			if _, err := s.Import(ctx, batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if _, err := s.Import(ctx, batch); err != nil {
		return err
	}
	if err := addEntities(ctx, s, now, g.entities()...); err != nil {
		return err
	}
	// Close indexes only a few seconds of the tail (the next Open's indexer
	// does the rest), and the catalog's readers open it read-only: index
	// every message first.
	if err := s.FlushIndex(ctx); err != nil {
		return err
	}
	if err := s.Close(); err != nil {
		return err
	}
	return createIndexes(ctx, path, indexes)
}

// generator makes the records of a synthetic catalog one by one, from one
// seeded random stream, and counts the present ones per entity.
type generator struct {
	rng                                              *rand.Rand
	vocab                                            []string
	zipfWords, zipfTenants                           *zipf
	entityPick, transferPick, regionPick, statusPick *picker
	// Each entity fails in its own ways: perEntity picks among the
	// templates perEntityTpl lists for it.
	perEntity    []*picker
	perEntityTpl [][]int
	deletedAt    time.Time
	present      map[string]*dlq.Counts
	seq          map[[2]string]int64 // the last sequence number of each subqueue
	step         float64             // milliseconds between messages, on average
}

func newGenerator(n int) *generator {
	rng := rand.New(rand.NewPCG(uint64(n), 0xd1cda5))
	vocab := vocabulary(rng, 4000)
	zipfWords := newZipf(len(vocab), 1.07)

	var weights []float64
	for _, e := range genEntities {
		weights = append(weights, e.weight)
	}
	entityPick := newPicker(weights)
	// Each entity fails in its own ways: a handful of templates each, with
	// the small templates spread around.
	tplW := make([]float64, len(templates))
	for i, t := range templates {
		tplW[i] = t.weight
	}
	perEntity := make([]*picker, len(genEntities))
	perEntityTpl := make([][]int, len(genEntities))
	for i := range genEntities {
		var idx []int
		var ws []float64
		for j := range templates {
			if (j+i)%3 == 0 || j < 2 {
				idx = append(idx, j)
				ws = append(ws, tplW[j])
			}
		}
		perEntity[i], perEntityTpl[i] = newPicker(ws), idx
	}
	trW := []float64{transferTemplates[0].weight, transferTemplates[1].weight, transferTemplates[2].weight}
	transferPick := newPicker(trW)
	regionPick, statusPick := newPicker(regionW), newPicker(statusW)
	zipfTenants := newZipf(2000, 1.0)

	deletedAt := Start.Add(Span - 6*time.Hour)
	present := map[string]*dlq.Counts{}
	for _, e := range genEntities {
		present[e.path] = &dlq.Counts{}
	}

	seq := map[[2]string]int64{}
	step := float64(Span.Milliseconds()) / float64(n)
	return &generator{rng: rng, vocab: vocab, zipfWords: zipfWords, zipfTenants: zipfTenants, entityPick: entityPick,
		transferPick: transferPick, regionPick: regionPick, statusPick: statusPick, perEntity: perEntity,
		perEntityTpl: perEntityTpl, deletedAt: deletedAt, present: present, seq: seq, step: step}
}

// record makes the i-th record.
func (g *generator) record(i int) dlq.Record {
	rng, vocab, zipfWords, zipfTenants := g.rng, g.vocab, g.zipfWords, g.zipfTenants
	entityPick, transferPick, regionPick, statusPick := g.entityPick, g.transferPick, g.regionPick, g.statusPick
	perEntity, perEntityTpl, deletedAt, present, seq, step := g.perEntity, g.perEntityTpl, g.deletedAt, g.present, g.seq, g.step
	ei := entityPick.pick(rng)
	ge := genEntities[ei]
	var r dlq.Record
	r.Entity = ge.path
	switch u := rng.Float64(); {
	case u < ge.main:
		r.SubQueue = dlq.SubQueueMain
	case u < ge.main+ge.tdl*(1-ge.main):
		r.SubQueue = dlq.SubQueueTransferDeadLetter
	default:
		r.SubQueue = dlq.SubQueueDeadLetter
	}
	if ge.kind == dlq.KindTopic {
		r.SubQueue = dlq.SubQueueMain // a topic only holds scheduled messages
	}
	key := [2]string{ge.path, string(r.SubQueue)}
	seq[key] += 1 + int64(rng.IntN(3))
	r.SequenceNumber = seq[key]

	at := Start.Add(time.Duration(float64(i)*step+rng.NormFloat64()*float64(10*time.Minute/time.Millisecond)) * time.Millisecond).Truncate(time.Millisecond)
	if rng.IntN(1000) != 0 {
		t := at.UTC()
		r.EnqueuedAt = &t
	}
	r.FirstSeenAt = at.Add(time.Duration(rng.IntN(300_000)) * time.Millisecond).UTC()
	r.LastSeenAt = r.FirstSeenAt.Add(time.Duration(rng.IntN(3600)) * time.Second)

	switch {
	case r.SubQueue == dlq.SubQueueMain && (ge.kind == dlq.KindTopic || rng.IntN(10) < 4):
		r.State = dlq.StateScheduled
		t := at.Add(time.Duration(1+rng.IntN(72)) * time.Hour).UTC()
		r.ScheduledEnqueueAt = &t
	case r.SubQueue == dlq.SubQueueMain || rng.IntN(200) == 0:
		r.State = dlq.StateDeferred
	default:
		r.State = dlq.StateActive
	}

	r.MessageID = hexID(rng, 16)
	if rng.IntN(10) < 6 {
		r.CorrelationID = ptr(hexID(rng, 8))
	}
	if ge.path == "inventory-sync" {
		r.SessionID = ptr("warehouse-" + strconv.Itoa(rng.IntN(40)))
	}
	subj := subjects[ge.body]
	r.Subject = ptr(subj[rng.IntN(len(subj))])
	r.DeliveryCount = uint32(1 + rng.IntN(10))
	if rng.IntN(2) == 0 {
		ttl := 14 * 24 * time.Hour
		r.TimeToLive = &ttl
		t := at.Add(ttl).UTC()
		r.ExpiresAt = &t
	}
	if r.SubQueue != dlq.SubQueueMain {
		var t template
		if r.SubQueue == dlq.SubQueueTransferDeadLetter {
			t = transferTemplates[transferPick.pick(rng)]
		} else {
			t = templates[perEntityTpl[ei][perEntity[ei].pick(rng)]]
		}
		r.DeadLetterReason = ptr(t.reason)
		r.DeadLetterErrorDescription = ptr(fillTemplate(rng, t.desc, at))
		if strings.Contains(ge.path, "/Subscriptions/") && rng.IntN(20) == 0 {
			r.DeadLetterSource = ptr(strings.SplitN(ge.path, "/", 2)[0])
		}
	}

	region := regions[regionPick.pick(rng)]
	tenant := fmt.Sprintf("tenant-%04d", zipfTenants.next(rng))
	props := map[string]any{
		"tenant":   tenant,
		"region":   region,
		"priority": []string{"low", "normal", "normal", "high"}[rng.IntN(4)],
		"retries":  rng.IntN(10),
	}
	if rng.IntN(2) == 0 {
		props["traceparent"] = "00-" + hexID(rng, 16) + "-" + hexID(rng, 8) + "-01"
	}
	if rng.IntN(50) == 0 {
		props["isTest"] = true
	}
	if rng.IntN(20) == 0 {
		props["amount"] = float64(rng.IntN(100000)) / 100
	}
	r.ApplicationProperties = dlq.EncodeProperties(props)

	words := func(k int) string {
		var b strings.Builder
		for j := range k {
			if j > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(vocab[zipfWords.next(rng)])
		}
		switch x := rng.IntN(100000); {
		case x < 1000:
			b.WriteString(" " + MidWord)
		case x < 1005:
			b.WriteString(" " + RareWord)
		}
		return b.String()
	}
	status := statuses[statusPick.pick(rng)]
	switch {
	case rng.IntN(50) == 0:
		b := make([]byte, 128+rng.IntN(384))
		for j := range b {
			b[j] = byte(rng.IntN(256))
		}
		b[0] = 0 // never valid text
		r.Body = b
		r.ContentType = ptr("application/octet-stream")
	case ge.body == "invoice":
		r.Body = fmt.Appendf(nil, `<?xml version="1.0"?><Invoice id="INV-%07d" status="%s"><Customer id="CUST-%05d"/><Amount currency="%s">%d.%02d</Amount><Note>%s</Note></Invoice>`,
			rng.IntN(10_000_000), status, rng.IntN(100000), currencies[rng.IntN(len(currencies))], rng.IntN(5000), rng.IntN(100), words(4+rng.IntN(20)))
		r.ContentType = ptr("application/xml")
	default:
		var items strings.Builder
		for j := range 1 + rng.IntN(4) {
			if j > 0 {
				items.WriteByte(',')
			}
			fmt.Fprintf(&items, `{"sku":"SKU-%05d","name":"%s","qty":%d,"price":%d.%02d}`,
				rng.IntN(100000), words(2), 1+rng.IntN(5), rng.IntN(500), rng.IntN(100))
		}
		r.Body = fmt.Appendf(nil, `{"type":"%s","id":"%s-%07d","customerId":"CUST-%05d","status":"%s","currency":"%s","items":[%s],"note":"%s","createdAt":"%s"}`,
			*r.Subject, strings.ToUpper(ge.body[:3]), rng.IntN(10_000_000), rng.IntN(100000), status,
			currencies[rng.IntN(len(currencies))], items.String(), words(3+rng.IntN(25)), at.Format(time.RFC3339))
		if rng.IntN(10) != 0 {
			r.ContentType = ptr("application/json")
		}
	}
	switch x := rng.IntN(1000); {
	case x < 30:
		r.ReplayCount = 1
	case x < 35:
		r.ReplayCount = 2
	}

	if ge.path == DeletedEntity {
		t := deletedAt
		r.GoneAt = &t
	} else if rng.IntN(100) < 8 {
		t := r.LastSeenAt.Add(time.Duration(1+rng.IntN(48)) * time.Hour)
		r.GoneAt = &t
	}
	if r.GoneAt == nil {
		c := present[ge.path]
		switch {
		case r.SubQueue == dlq.SubQueueDeadLetter:
			c.DeadLetter++
		case r.SubQueue == dlq.SubQueueTransferDeadLetter:
			c.TransferDeadLetter++
		case r.State == dlq.StateScheduled:
			c.Scheduled++
		default:
			c.Active++
		}
	}
	return r
}

// entities are the generated entities as the broker lists them: their
// counts are the present messages, plus healthy traffic in the active
// count; the deleted one is deleted, and one is send-disabled.
func (g *generator) entities() []Entity {
	present, deletedAt := g.present, g.deletedAt
	var ents []Entity
	for _, e := range genEntities {
		ent := Entity{Path: e.path, Kind: e.kind, Counts: *present[e.path]}
		ent.Counts.Active += int64(len(e.path) * 7) // the broker also counts healthy traffic
		if e.path == DeletedEntity {
			t := deletedAt
			ent.DeletedAt, ent.Counts = &t, dlq.Counts{}
		}
		if e.path == "shipping-labels" {
			ent.Status = "SendDisabled"
		}
		ents = append(ents, ent)
	}
	return ents
}

// importBatch is how many records Generate writes in one transaction.
const importBatch = 20000

// dropIndexes drops the indexes of table in the database at path and
// returns the SQL that creates them again.
func dropIndexes(ctx context.Context, path, table string) ([]string, error) {
	db, err := OpenSQL(path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT name, sql FROM sqlite_schema WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL`, table)
	if err != nil {
		return nil, err
	}
	var names, ddl []string
	for rows.Next() {
		var n, q string
		if err := rows.Scan(&n, &q); err != nil {
			rows.Close()
			return nil, err
		}
		names, ddl = append(names, n), append(ddl, q)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, n := range names {
		if _, err := db.ExecContext(ctx, `DROP INDEX "`+strings.ReplaceAll(n, `"`, `""`)+`"`); err != nil {
			return nil, err
		}
	}
	return ddl, db.Close()
}

// createIndexes runs the index definitions dropIndexes returned.
func createIndexes(ctx context.Context, path string, ddl []string) error {
	db, err := OpenSQL(path)
	if err != nil {
		return err
	}
	defer db.Close()
	for _, q := range ddl {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("recreate index: %w", err)
		}
	}
	return db.Close()
}

func fillTemplate(rng *rand.Rand, f string, at time.Time) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 == len(f) {
			b.WriteByte(f[i])
			continue
		}
		i++
		switch f[i] {
		case 'd':
			b.WriteString(strconv.Itoa(rng.IntN(100000)))
		case 'g':
			u := hexID(rng, 16)
			b.WriteString(u[:8] + "-" + u[8:12] + "-" + u[12:16] + "-" + u[16:20] + "-" + u[20:])
		case 'h':
			b.WriteString(hexID(rng, 10))
		case 't':
			b.WriteString(at.Add(time.Duration(rng.IntN(3600)) * time.Second).Format("2006-01-02 15:04:05"))
		default:
			b.WriteByte('%')
			b.WriteByte(f[i])
		}
	}
	return b.String()
}

func hexID(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	return hex.EncodeToString(b)
}

func ptr[T any](v T) *T { return &v }

// vocabulary makes n distinct pronounceable words.
func vocabulary(rng *rand.Rand, n int) []string {
	syl := []string{"ka", "ri", "to", "mel", "san", "dor", "vi", "lu", "pe", "nar", "os", "tem", "qui", "bra", "fen", "gal", "hu", "jo", "zel", "wex"}
	seen := map[string]bool{CommonWord: true, MidWord: true, RareWord: true}
	var out []string
	for len(out) < n {
		k := 2 + rng.IntN(3)
		var b strings.Builder
		for range k {
			b.WriteString(syl[rng.IntN(len(syl))])
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// picker draws an index with probability proportional to its weight.
type picker struct{ cum []float64 }

func newPicker(w []float64) *picker {
	p := &picker{cum: make([]float64, len(w))}
	sum := 0.0
	for i, x := range w {
		sum += x
		p.cum[i] = sum
	}
	return p
}

func (p *picker) pick(rng *rand.Rand) int {
	x := rng.Float64() * p.cum[len(p.cum)-1]
	lo, hi := 0, len(p.cum)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if p.cum[mid] < x {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// zipf draws 0..n-1 with probability falling as 1/(k+1)^s.
type zipf struct{ p *picker }

func newZipf(n int, s float64) *zipf {
	w := make([]float64, n)
	for k := range w {
		w[k] = 1 / math.Pow(float64(k+1), s)
	}
	return &zipf{newPicker(w)}
}

func (z *zipf) next(rng *rand.Rand) int { return z.p.pick(rng) }

// Catalog returns the path of a generated catalog of n messages, migrated to
// this binary's schema. It is built once and kept in the temporary
// directory, named by the schema (a hash of its SQL), the generator version
// and n, so later runs reuse it; delete the file to rebuild it. Callers must
// not write to it. Building a million messages takes about two minutes.
func Catalog(tb testing.TB, n int) string {
	tb.Helper()
	ctx := context.Background()
	schema, err := schemaHash(ctx, tb.TempDir())
	if err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	path := filepath.Join(os.TempDir(), fmt.Sprintf("dlqdash-catalog-%s-g%d-n%d.db", schema, generatorVersion, n))
	if _, err := os.Stat(path); err == nil {
		return path
	}
	tb.Logf("storetest: generating a catalog of %d messages at %s (kept for later runs)", n, path)
	started := time.Now()
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	defer func() {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			os.Remove(tmp + suffix)
			os.Remove(store.IndexPath(tmp) + suffix)
		}
	}()
	s, err := store.Open(ctx, tmp, store.Options{})
	if err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	s.Close()
	if err := Generate(ctx, tmp, n); err != nil {
		tb.Fatalf("storetest: generate: %v", err)
	}
	// Fold the WALs into the files so that the renames move everything:
	// the catalog and its index file (store.IndexPath), the catalog last.
	for _, p := range []string{store.IndexPath(tmp), tmp} {
		if err := checkpoint(ctx, p); err != nil {
			tb.Fatalf("storetest: %v", err)
		}
	}
	if err := os.Rename(store.IndexPath(tmp), store.IndexPath(path)); err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	tb.Logf("storetest: generated %d messages in %s", n, time.Since(started).Round(time.Second))
	return path
}

func checkpoint(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=rw")
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return err
	}
	if err := db.Close(); err != nil {
		return err
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if fi, err := os.Stat(path + suffix); err == nil && fi.Size() > 0 && suffix == "-wal" {
			return errors.New("the write-ahead log was not folded into " + path)
		}
		os.Remove(path + suffix)
	}
	return nil
}

// schemaHash identifies the schema this binary migrates to, by its SQL and
// its version (a migration may change data alone: 0015 adds a meta row).
func schemaHash(ctx context.Context, dir string) (string, error) {
	p := filepath.Join(dir, "schema.db")
	s, err := store.Open(ctx, p, store.Options{})
	if err != nil {
		return "", err
	}
	s.Close()
	db, err := sql.Open("sqlite", "file:"+p+"?mode=ro")
	if err != nil {
		return "", err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT type, name, coalesce(sql, '') FROM sqlite_schema ORDER BY type, name`)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	h := sha256.New()
	fmt.Fprintf(h, "version %d\x00", store.SchemaVersion())
	for rows.Next() {
		var a, b, c string
		if err := rows.Scan(&a, &b, &c); err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00", a, b, c)
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:9]), nil
}
