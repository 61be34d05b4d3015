package apijson

import (
	"encoding/json"
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
