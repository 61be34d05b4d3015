package replay

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// The application properties a replayed copy carries (docs/api.md).
const (
	PropOriginalMessageID      = "dlqdash.original_message_id"
	PropOriginalSequenceNumber = "dlqdash.original_sequence_number"
	PropOriginalEntity         = "dlqdash.original_entity"
	PropDeadLetterReason       = "dlqdash.dead_letter_reason"
	PropJobID                  = "dlqdash.job_id"
	PropReplayCount            = "dlqdash.replay_count"
)

// maxMessageIDLen is Service Bus's limit on a MessageId.
const maxMessageIDLen = 128

// DerivedMessageID is the MessageId of the copy of a message in a job: the
// original's id with the job's suffix, so that duplicate detection on the
// target never drops the copy as a repeat of the original, and so that a
// resend of the same copy (after a crash) carries the same id and is dropped
// as a repeat where the target detects duplicates. An original without a
// MessageId is named by its sequence number; one too long for the suffix is
// replaced by a digest of it.
func DerivedMessageID(original string, seq, jobID int64) string {
	return derivedMessageID(original, seq, derivedSuffix(jobID))
}

// derivedSuffix is what DerivedMessageID appends for a job.
func derivedSuffix(jobID int64) string { return "/dlqdash-" + strconv.FormatInt(jobID, 10) }

// derivedMessageID is DerivedMessageID with the job's suffix worded once
// for all of a batch's copies.
func derivedMessageID(original string, seq int64, suffix string) string {
	base := original
	if base == "" {
		base = "seq-" + strconv.FormatInt(seq, 10)
	}
	if len(base)+len(suffix) > maxMessageIDLen {
		sum := sha256.Sum256([]byte(base))
		base = hex.EncodeToString(sum[:16])
	}
	return base + suffix
}

// copyProperties are the dlqdash.* properties of the copy of m, replayed
// from entity by job (jobID: the job's id in decimal).
func copyProperties(m *Received, it *Item, jobID string) map[string]any {
	p := map[string]any{
		PropOriginalMessageID:      m.MessageID,
		PropOriginalSequenceNumber: m.SequenceNumber,
		PropOriginalEntity:         it.Entity,
		PropJobID:                  jobID,
		PropReplayCount:            int64(m.ReplayCount) + 1,
	}
	if m.DeadLetterReason != "" {
		p[PropDeadLetterReason] = m.DeadLetterReason
	}
	return p
}
