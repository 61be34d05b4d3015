// Package replay is the replay engine: jobs that resend dead-lettered (and
// deferred) messages to their entity or another one, or discard them, at a
// safe pace, surviving crashes without losing or duplicating a message, and
// recording everything in the audit trail.
//
// # Jobs
//
// A job is created from a selection (catalog ids, or a filter frozen at
// submission into exactly the messages it matched: package store copies the
// matching rows into job_messages in the transaction that creates the job,
// which also appends the job's creation entry: Store.CreateJobAudited).
// Each message then has its own state machine in SQLite:
//
//	pending → locked → sent → completed     replay
//	pending → locked → completed            discard
//	(any unfinished) → failed | skipped
//
// Each state is written before the broker call that follows it. locked
// means "received under a lock, copy about to be sent"; sent means "copy
// confirmed, only the original's removal is left". So after a crash a locked
// message is sent again under the same MessageId (DerivedMessageID: the
// original's id + "/dlqdash-<job>"), which a target with duplicate detection
// drops as a repeat; to a target without it, the message is flagged
// (Item.Flagged, an audit message_flagged entry) as possibly sent twice.
// The same holds for a batch whose send failed without halting the job:
// its copies are sent again one by one (to find those the destination
// refuses) and flagged, unless the Sender's error says for certain that
// none was sent (Refusal: too large, an invalid property, a destination
// that does not accept messages) on the batch's first attempt. A
// sent message is never sent again. The original is completed only after
// the copy is confirmed; a cancel sends nothing new, still removes the
// originals of copies already sent, and leaves every unsent message in its
// queue. A message is in at most one active job (a unique index), so two
// jobs never race over it.
//
// Jobs left running by a process that died are adopted by the next Run.
//
// # Reaching a selected message
//
// Service Bus can fetch a message by sequence number only when it is
// deferred; everything else is received from the head of the queue, in
// sequence order, under a lock that lasts the entity's lock duration L (at
// most 5 minutes). Deferred messages are received by sequence number, in
// batches; one received but not removed (its copy refused, a pause, a stop)
// is given back when the work on its queue ends, still deferred, so the
// next run (a resume, a new job) receives it at once. A deferred message
// missing from a receive is waited for one lock duration before it is
// taken for gone when an earlier run of the job may hold its lock (after a
// restart, or an item an earlier run got as far as sending). For the rest, the engine scans with one peek-lock receiver per
// (job, entity, subqueue), open for the whole of the job's work there:
//
//   - It receives batches (Config.Batch, 250) and acts at once on the
//     selected messages among them: one send of their copies, then their
//     completes (32 in flight), writing their states before each step (three
//     transactions and one audit entry a batch; two transactions for an
//     unpaced job, below).
//     An unpaced job receives the next batch meanwhile, so a batch costs
//     the longer of a receive and the acting, not their sum; a paced job
//     does not (the next batch's locks would run down while it waits for
//     its rate). An unpaced job also writes a batch's completions in the
//     transaction that locks the next batch's messages when that batch is
//     already at hand (otherwise before it waits for it, or for anything
//     else, and after the next batch if that wrote nothing), so a batch
//     costs two transactions: locked (with the previous completions), then
//     sent. A crash in between leaves those completions sent in the store,
//     which the next run finishes as completed when it does not find their
//     originals (as it does after a crash between a complete and its write).
//   - Unselected messages are neither abandoned nor completed while the
//     scan runs: they stay locked, and so the next receive returns the
//     messages after them. When the work on the queue ends (everything
//     found, or a pause, a cancel, a shutdown), the messages still held are
//     abandoned (up to 1,000, those locked longest: each is a broker
//     operation), so that they are visible again at once (to the next job
//     too) rather than after their locks lapse; Service Bus counts that as a
//     delivery, so their delivery count goes up by one.
//   - A message is acted on only while at least lockMargin (L/3, at most
//     20 s) of its lock is left; otherwise it waits for a later pass.
//   - A pass ends when a sequence number comes back (a lock this pass took
//     has lapsed: the head is available again) or the broker has nothing
//     more to give. After a pass that read everything, a selected message
//     not seen is gone (or locked by someone else; the engine first waits
//     one lock duration after it started, so locks a crashed dlqdash held
//     have lapsed, and one lock duration after a receive of its own failed,
//     which may have failed after the broker delivered messages to it) and
//     is finished as failed, or as completed if its copy was already sent.
//   - The SDK releases messages that arrive after a ReceiveMessages call
//     returns (it does not hold them in a prefetch buffer), so a receiver
//     that is not asking holds no lock, and the engine never closes a
//     receiver with messages in flight.
//
// The cost: one pass reads the queue from its head as far as the selection
// reaches, at the broker's receive rate R; its reach is about R × L messages
// (measured in BENCHMARKS.md, every 10th message selected: the whole of a
// 100,000-message DLQ in one pass within a 30 s lock on the emulator, also
// with 20 ms of latency on every frame, where R is about 5,000 messages a
// second). A pass that runs out of lock time is normal: the next pass starts
// from the head again, where the finished messages are gone. But it reads the
// unselected messages there again as their locks lapse, and reaches new ones
// only with what is left of each batch, so a selection much deeper than R × L
// costs many passes: the same DLQ and latency with a 10 s lock took 97–129 s
// and 720,000–935,000 deliveries instead of 21 s and 100,000, each pass
// finishing fewer than the one before. Only a pass that ends that way having
// finished nothing (every remaining selected message lies deeper than R × L)
// pauses the job, saying so and what to change (the entity's lock duration).
// While a pass runs, the unselected messages it read are locked: other
// receivers of that dead-letter queue (there rarely are any) see them a
// little later. A process that dies cannot give its locks back: they lapse
// after L.
//
// So jobs on one source (a namespace's entity's subqueue) run one at a
// time, in one process and across the replicas of a shared store
// (sources.go, Store.HoldSource): two jobs scanning one queue at once would
// each hold the other's messages locked for as long as they read there,
// and the one that gave up waiting would report messages failed that were
// still in the queue. A run holds its source, through the store, from
// before it opens the receiver until its work there has ended and the
// messages it held were given back; a job that finds its source held
// waits, saying for which job in its paused_reason ("waiting for job 12,
// which is reading orders/$DeadLetterQueue: one job at a time reads a
// queue"). A hold dies with its job (finished or paused), with the process
// that took it (SQLite is one process's), and on PostgreSQL when the
// job's claim stops heart-beating (its replica died; the job is adopted
// and holds the source again elsewhere); a run under an older claim term
// cannot let go of its successor's hold. The locks a dead holder left
// lapse within one lock duration of its death, which every scan waits for
// from its start before it takes an unseen message for gone.
//
// # Pacing and failure
//
// A job's max rate is a token bucket (golang.org/x/time/rate): copies are
// sent only as tokens allow within their locks. Transient broker errors
// (unreachable, server busy, throttled, a call past its deadline) are
// retried with exponential backoff and jitter (github.com/cenkalti/backoff/v5:
// 200 ms doubling to at most 15 s, ±50 %), honouring a throttled broker's
// Retry-After, for Config.GiveUpAfter (2 minutes); then the job pauses with
// the reason, as it does at once when the destination does not exist or the
// credentials are refused. Resume continues it. Every failure is on the job
// at once (Config.OnChange): its status is retrying, with the last error in
// words, the attempts and the next attempt's time; it is running again as
// soon as the call succeeds. A complete that fails is not tried again at
// once (its original stays locked until a later pass finds it) but is on
// the job the same way, as soon as the first one fails, until the next
// broker call succeeds. Every broker call has a deadline (the
// adapter's, and callTimeout, 60 s, over it), so a job is never running
// without progress for longer than one back-off plus one deadline without
// saying why. Waits that are not failures say what they wait for in the
// job's PausedReason while it stays running: the locks a previous run held
// (after a restart, "waiting up to 30 s for message locks held before the
// restart"), or the locks a pass took on messages it could not act on.
//
// # Pause and cancel
//
// Once Pause has answered, the run starts no send and no complete: the
// wait between retries, the wait for the rate (whose reserved tokens go
// back to the bucket) and the chunk loop all end on the stop. What is in
// flight at that moment finishes, at most, per job: one send of one batch
// of copies (Config.Batch, 250; for a paced job one bucketful, a second's
// worth and at most a batch), or up to 32 completes (completeParallel) of
// one batch, plus one receive. So the counts stop moving within a call's
// time (milliseconds on a healthy namespace). Originals whose copies were
// sent but not yet removed stay sent and are removed on resume (never sent
// again). Cancel is the same, except that the completes of the batch whose
// copies were sent still run (no copy is left beside its original), and
// the unsent messages are counted cancelled as soon as the run stops
// sending; a message whose send was interrupted by the cancel fails,
// saying its copy may or may not have been sent.
//
// # Guards
//
// A lineage replayed PoisonCap times (3; the copy's dlqdash.replay_count) is
// skipped as poison unless the job allows it. Replaying a subscription's
// dead letters to its topic (the default destination) would deliver a copy
// to every subscription of the topic whose filter matches: refused unless
// acknowledged. A plan whose destination is a topic lists its
// subscriptions (a broker that is a SubscriptionLister) with what their
// rules take (FanOutWords: "every copy reaches audit and billing; a copy
// reaches eu-only when its filter matches it"); rules are read for topics
// of at most RulesUpTo subscriptions. For a selection the dry run's sample
// holds whole (SampleSize), true, false and correlation filters are
// evaluated against each message, so the plan says exactly which
// subscriptions take each copy (Subscription.Copies); SQL filters are not
// evaluated. A dry run (Submit
// with DryRun) says all of this, and what the destinations' duplicate
// detection and time-to-live imply, without changing anything.
//
// # Scheduled messages
//
// Jobs skip scheduled messages; CancelScheduled cancels them instead (a
// broker that is a ScheduledCanceller): one request per entity, audited
// (scheduled_cancelled, with the reason a person must give), the catalog's
// reader told. It is not a job: a cancel is one idempotent broker call
// (Service Bus ignores numbers no longer scheduled), so it needs no state
// machine to be safe to repeat.
//
// # Outcomes, canary and ramp
//
// A copy that its consumer dead-letters again comes back to a dead-letter
// queue carrying dlqdash.job_id; the catalog counts it for the job as it
// inserts it (Counts.Redeadlettered, with the new reasons), once per copy.
// A job may start small (canary.go): with Canary.Count it sends that many
// copies, then stops sending (its source's held messages are given back)
// and watches Canary.Watch, reading the job's count from the store; with
// Canary.PauseOnRedeadletter it pauses itself as soon as more than that
// share of the copies sent came back, during the watch and after every
// batch from then on, saying how many and the top reason. The verdict is
// stored (a resume sends no canary again) and audited (canary_verdict);
// when the guard pauses a job, the share starts again from there, so a
// resume judges the copies sent after it. A canary larger than the job is
// not watched: the job is its own canary. Canary.Ramp makes a paced job's
// rate and bucket rise linearly from a tenth of its rate to all of it,
// from the start of the run or the canary's pass.
package replay
