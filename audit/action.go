package audit

import (
	"maps"
	"slices"
)

// Actions: what an entry records. The names are stable: they are stored,
// hashed, filtered on (GET /api/v1/audit?action=) and exported.
const (
	// Jobs (POST /api/v1/jobs). Params: the request, the frozen selection's
	// size; MessageIDs: the selection.
	ActionReplayJobCreated  = "replay_job_created"
	ActionDiscardJobCreated = "discard_job_created"
	// Job control and job events. Params: {"job_id", "reason", counters}.
	ActionJobPaused    = "job_paused"
	ActionJobResumed   = "job_resumed"
	ActionJobCancelled = "job_cancelled"
	ActionJobCompleted = "job_completed"
	ActionJobFailed    = "job_failed"
	// ActionCanaryVerdict: a job's canary was judged after its watch.
	// Params add {"verdict": "passed"|"failed", "canary_sent",
	// "redeadlettered"}; outcome succeeded when it passed, failed when not
	// (the job pauses itself).
	ActionCanaryVerdict = "canary_verdict"
	// What became of each message of a job. MessageIDs: the message.
	ActionReplay  = "replay"  // copy sent and original completed
	ActionDiscard = "discard" // removed from the dead-letter queue without resending
	// ActionMessageFailed: the message could not be replayed or discarded.
	ActionMessageFailed = "message_failed"
	// ActionMessageSkipped: left alone (poison cap, gone from the broker, ...).
	ActionMessageSkipped = "message_skipped"
	// ActionMessageFlagged: possibly sent twice after a crash, to a target
	// without duplicate detection.
	ActionMessageFlagged = "message_flagged"
	// ActionEditReplay: one message edited and replayed; Params keep the
	// original bytes' digest and the changes.
	ActionEditReplay = "edit_and_replay"
	// ActionDeferredResolved: a deferred message resolved by sequence
	// number (replayed or discarded).
	ActionDeferredResolved = "deferred_resolved"
	// ActionScheduledCancelled: scheduled messages cancelled before they
	// were due (an admin's). Params {"namespace", "entity",
	// "sequence_numbers", "reason"}; MessageIDs: the messages.
	ActionScheduledCancelled = "scheduled_cancelled"
	// Sign-in and tokens. Login: Params {"via", "role", "email"}; outcome
	// denied when the provider vouched for someone without a role.
	ActionLogin        = "login"
	ActionLogout       = "logout"
	ActionTokenCreated = "token_created"
	ActionTokenRevoked = "token_revoked"
	// ActionDenied: a request refused for its role. Params: {"route",
	// "method", "path", "role", "required_role"}; outcome denied.
	ActionDenied = "denied"
	// ActionGroupUpdated: a failure group's triage changed (PATCH
	// /api/v1/groups/{key}, the group page). Params: {"group", "name"} and,
	// for each field that changed (name, status, owner, notes),
	// {"from", "to"} under its name.
	ActionGroupUpdated = "group_updated"
	// ActionGroupReopened: a resolved group received new dead letters and
	// went back to new. Actor system; Params {"group", "name", "from":
	// "resolved", "to": "new", "added", "at"}.
	ActionGroupReopened = "group_reopened"
	// Alert webhooks added and removed on the Alerts page. Params {"id",
	// "name", "host", "format", "events"}: never the URL (a secret).
	ActionAlertWebhookAdded   = "alert_webhook_added"
	ActionAlertWebhookRemoved = "alert_webhook_removed"
	// ActionAuditKeyed: from this entry on, every link is an HMAC-SHA256
	// under a key kept outside the database. Params: {"key_id"} (KeyID).
	ActionAuditKeyed = "audit_keyed"
)

// Outcomes.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeFailed    = "failed"
	OutcomeDenied    = "denied" // refused: a guard, a role, a conflict
)

var actions = map[string]bool{
	ActionReplayJobCreated: true, ActionDiscardJobCreated: true,
	ActionJobPaused: true, ActionJobResumed: true, ActionJobCancelled: true, ActionJobCompleted: true, ActionJobFailed: true,
	ActionCanaryVerdict: true,
	ActionReplay:        true, ActionDiscard: true, ActionMessageFailed: true, ActionMessageSkipped: true, ActionMessageFlagged: true,
	ActionEditReplay: true, ActionDeferredResolved: true, ActionScheduledCancelled: true,
	ActionLogin: true, ActionLogout: true, ActionTokenCreated: true, ActionTokenRevoked: true, ActionDenied: true,
	ActionAuditKeyed:   true,
	ActionGroupUpdated: true, ActionGroupReopened: true, ActionAlertWebhookAdded: true, ActionAlertWebhookRemoved: true,
}

// KnownAction reports whether a is in the vocabulary.
func KnownAction(a string) bool { return actions[a] }

// Actions lists the vocabulary, sorted.
func Actions() []string {
	return slices.Sorted(maps.Keys(actions))
}
