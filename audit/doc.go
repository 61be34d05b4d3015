// Package audit is the record of everything dlqdash does on someone's
// behalf: every state-changing action and job event, with its actor, time,
// parameters, affected messages and outcome (docs/api.md, "Audit").
//
// # The hash chain
//
// Entries are numbered 1, 2, 3, ... without gaps (Seq) and each carries the
// hash of the one before it (PrevHash) and its own hash (Hash):
//
//	Hash = hex(SHA-256(encoding of Seq, At, Actor, Action, Params, MessageIDs, Outcome, PrevHash))
//
// The first entry's PrevHash is GenesisHash, 64 zeros. The encoding (see
// [Entry.ComputeHash]) is unambiguous: the tag "dlqdash.audit.v1", then
// every field as a netstring "<decimal length>:<bytes>,"; Seq and At (Unix
// milliseconds, UTC) as decimal text; Params as the exact canonical JSON
// stored (object keys sorted, no insignificant space, numbers as written);
// MessageIDs as a netstring of their count followed by one netstring per id.
// No two different entries encode alike, whatever bytes their fields hold.
//
// Changing any field of a stored entry breaks its hash; deleting one leaves
// a gap in Seq; inserting or reordering breaks a PrevHash link. [Log.Verify]
// walks the whole chain and names the first entry that does not hold. The
// table is also append-only in SQLite (triggers refuse UPDATE and DELETE).
//
// # The key
//
// An unkeyed SHA-256 chain only shows accidents: whoever holds the database
// file can rewrite an entry and rehash the rest. So a Log made by
// [NewKeyed] links entries with HMAC-SHA256 under a key kept outside the
// database (ComputeHMAC: the same encoding, the tag
// "dlqdash.audit.v2.hmac-sha256"). Its first append records the switch, an
// [ActionAuditKeyed] entry whose Params name the key by [KeyID]; entries
// before it stay checkable as SHA-256, it and every later one are HMACs.
// Rewriting any entry, even an old unkeyed one, breaks the switch entry or a
// later one, which cannot be recomputed without the key; a chain rehashed
// with no switch entry fails a keyed Verify (NotKeyed).
//
// What a chain cannot show on its own is the removal of its newest entries:
// [Log.VerifyHead] checks it against a [Head] ("SEQ:HASH") recorded
// elsewhere, such as the head dlqdash serve logs every hour.
//
// The actor is whoever the request acts for: package auth puts the
// signed-in user (or "token:NAME" for an API token) in the request context
// with [WithActor], and Append takes it from there when a Record names
// none; with sign-in off it is [ActorLocal]. Sign-ins, sign-outs, refused
// requests and token changes have actions of their own.
//
// An entry that records a change of something else (a job's creation, a
// job's status) is appended in the transaction that makes the change, so
// that neither is ever written without the other: [Log.Builder] makes its
// [Build], which the store calls inside that transaction as
// [Store.AppendAudit] calls its own. A job that no creation entry names,
// and one whose status no entry records, are gaps that dlqdash audit
// verify reports.
//
// The package knows nothing of SQL or HTTP: it declares the small [Store]
// it needs, which package store implements.
package audit
