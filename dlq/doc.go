// Package dlq is the catalog domain: what a dead-lettered (or deferred, or
// scheduled) message is, the entities that hold them, the failure groups they
// fall into, the changes the live dashboard hears about, and the Ingester
// that keeps a SQLite copy of every dead-letter queue current by peeking.
//
// It declares the two small interfaces it consumes, Broker (implemented by
// package servicebus over the Azure SDK) and Catalog (implemented by package
// store over SQLite), and must not import either: it knows nothing of HTTP,
// HTML, SQLite or Azure.
//
// # How the ingester reads a namespace without missing a message
//
// Every poll (Config.Poll, default 1 s) it reads every entity's runtime
// counts with the list calls of the admin API (one paged request for queues,
// one for topics, one per topic for its subscriptions) and peeks nothing
// unless a count moved. In steady state that is the whole cost: no peeks.
//
// Dead-letter and transfer dead-letter queues. A dead-lettered message keeps
// the sequence number it had in its entity, so a DLQ fills out of order: a
// message sent early and dead-lettered late lands below numbers already read.
// The ingester therefore keeps, per DLQ, a floor: a sequence number below
// which nothing new can arrive. Only a message still in the main entity can
// be dead-lettered later, and every message that enters the main entity
// afterwards gets a higher number, so the lowest active or deferred sequence
// number in the main entity, read before a pass starts, is a valid floor once
// that pass ends. (Scheduled messages do not count: they get a new number
// when they become active.) When a DLQ's count rises, the ingester first
// reads the tail (after the highest number it has seen); if the catalog's
// count of present messages then matches the broker's, it is done, else it
// re-reads from the floor, which finds the late, low-numbered arrivals. It
// pages until an empty page: a short page is not the end.
//
// Messages that leave. A pass over a range of sequence numbers sees every
// message present in it, so a cataloged message inside a range a pass covered
// and not returned by it has left the broker: it gets gone_at and is kept.
// When a count falls, or the catalog and the broker still disagree after a
// pass, the ingester runs a full pass (from sequence number 0). Full passes
// are also run for every entity every Config.Sweep (default 5 min) to notice
// a removal hidden by an arrival in the same poll. Their cost is bounded: a
// full pass of an entity starts only when at least max(Config.MinFullInterval,
// 4 × its last full pass's duration) has passed since its last one ended, so
// full passes take at most a fifth of the time for any entity, however large.
//
// Deferred and scheduled messages of the main entities. Service Bus counts
// deferred messages as active, so the only way to find them is to peek the
// whole main entity. The ingester does that when an entity's active or
// scheduled count changed, with the same duty-cycle bound as full passes and
// at least Config.MainInterval (default 10 s) apart, and catalogs only the
// deferred and scheduled messages it sees. Session-enabled entities cannot be
// peeked without a session, so their main entity is not inventoried and their
// DLQ floor stays 0 (correct, at the cost of longer re-reads).
//
// Everything the ingester needs to resume is in the catalog: per (entity,
// subqueue) the floor, the highest number seen, the broker count at the last
// pass and the times of the last passes. A restart with unchanged counts peeks
// nothing; nothing is ever cataloged twice, because a message is identified by
// (entity, subqueue, sequence number) among present messages.
//
// # How fresh the catalog is
//
// Ingester.Status says whether the catalog is current. Each broker read of a
// poll has a deadline (Config.PollTimeout). The status is unhealthy as soon as
// a read fails, and also once no read has succeeded for Config.Stale (default
// max(3 × Poll, 5 s)) even if none has failed: a broker that stops answering
// keeps a read waiting until its deadline, and the status must not wait for
// it. It is computed when asked for, from the time of the last success, and a
// timer publishes a ChangeFreshness the moment it goes stale (and every
// second it stays so, since its words say for how long). The next successful
// read makes it healthy again.
package dlq
