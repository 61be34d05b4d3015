package apijson

import (
	"encoding/csv"
	"encoding/json"
	"io"
	"strconv"

	"github.com/dlqdash/dlqdash/audit"
)

// AuditEntry is an entry of GET /api/v1/audit and `dlqdash audit export`.
// params is the exact canonical JSON that was hashed, so an export can be
// verified again outside dlqdash (package audit documents the hash).
type AuditEntry struct {
	Seq        int64           `json:"seq"`
	At         Time            `json:"at"`
	Actor      string          `json:"actor"`
	Action     string          `json:"action"`
	Params     json.RawMessage `json:"params"`
	MessageIDs []string        `json:"message_ids"`
	Outcome    string          `json:"outcome"`
	PrevHash   string          `json:"prev_hash"`
	Hash       string          `json:"hash"`
}

// NewAuditEntry is e as the API's audit entry.
func NewAuditEntry(e audit.Entry) AuditEntry {
	ids := e.MessageIDs
	if ids == nil {
		ids = []string{}
	}
	params := e.Params
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	return AuditEntry{Seq: e.Seq, At: Time(e.At), Actor: e.Actor, Action: e.Action, Params: params,
		MessageIDs: ids, Outcome: e.Outcome, PrevHash: e.PrevHash, Hash: e.Hash}
}

// AuditCSVHeader is the audit export's CSV columns: the entry's keys in
// order; params and message_ids are JSON text.
func AuditCSVHeader() []string {
	return []string{"seq", "at", "actor", "action", "params", "message_ids", "outcome", "prev_hash", "hash"}
}

// CSVRecord is a as a CSV row in AuditCSVHeader's order.
func (a AuditEntry) CSVRecord() []string {
	ids, _ := json.Marshal(a.MessageIDs)
	return []string{strconv.FormatInt(a.Seq, 10), a.At.String(), a.Actor, a.Action, string(a.Params), string(ids),
		a.Outcome, a.PrevHash, a.Hash}
}

// AuditExporter writes audit entries to w in an export format, "csv" (the
// header row first) or anything else for JSON lines. Finish flushes what
// the format buffers; w itself is the caller's to flush.
type AuditExporter struct {
	Write  func(audit.Entry) error
	Finish func() error
}

// NewAuditExporter starts an export to w: `dlqdash audit export` and
// GET /api/v1/audit/export write the same bytes.
func NewAuditExporter(w io.Writer, format string) (AuditExporter, error) {
	if format == "csv" {
		cw := csv.NewWriter(w)
		if err := cw.Write(AuditCSVHeader()); err != nil {
			return AuditExporter{}, err
		}
		return AuditExporter{
			Write:  func(e audit.Entry) error { return cw.Write(NewAuditEntry(e).CSVRecord()) },
			Finish: func() error { cw.Flush(); return cw.Error() },
		}, nil
	}
	enc := json.NewEncoder(w)
	return AuditExporter{
		Write:  func(e audit.Entry) error { return enc.Encode(NewAuditEntry(e)) },
		Finish: func() error { return nil },
	}, nil
}
