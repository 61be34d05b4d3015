// Package alert tells people, through webhooks, about failures that need
// them: a new failure group, a group growing fast, an untriaged dead letter
// left too long, a replay job that paused itself or whose copies are
// dead-lettered again. It knows about triage: groups marked known or
// resolved are silent.
//
// An Alerter's Run loop is fed by the catalog's changes (CatalogChanged)
// and the replay engine's job changes (JobChanged); both only wake it, so
// the ingest path never waits for a webhook. It reads what it needs from
// its Store, sends through a Poster (package alert/webhook posts over
// HTTP) with a timeout and retries with backoff, and records every
// delivery, answered or not, in the Store's history. Repeats of an alert
// about the same subject are held back for Config.RepeatEvery per webhook,
// event and subject.
//
// Webhook URLs are secrets: nothing here logs or shows one; pages show
// Webhook.Host.
package alert
