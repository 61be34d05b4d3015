// Package broker is the in-memory namespace model of the dlqdash Service Bus
// emulator: queues, topics, subscriptions and rules; messages with sequence
// numbers, peek-locks, delivery counts, dead-lettering, TTL, scheduling,
// deferral, duplicate detection and sessions; entity counts; fault hooks.
//
// It must not do AMQP framing, HTTP or any I/O: the AMQP server (package
// emulator) and the admin HTTP API drive it through the exported API, and
// all time comes from Options.Now, with timed work done by Tick (Run calls
// it on a ticker). Messages are go-amqp *goamqp.Message values; the broker
// takes ownership of sent messages, never mutates a stored message in place
// (modifications replace it with a copy), and hands every delivery out as a
// fresh stamped copy the caller may encode on another goroutine.
//
// Data structures: per queue or subscription one mutex guards three
// sub-queues (main, DLQ, transfer DLQ). Each sub-queue keeps every record
// in a chunked ordered index by sequence number (O(log n + page) Peek,
// out-of-order DLQ inserts), a min-heap of deliverable records by sequence
// number (Next is O(log n) no matter how many messages are locked) and a
// heap of locks by expiry; the main queue adds heaps for TTL expiry and
// scheduled activation, and session entities keep one ready heap per
// session. Lock tokens map to records in one namespace-wide table, so
// settlement works from any link or from $management; settlement validates
// the lock under the same store mutex that expiry takes, checking expiry
// lazily against Now, so a settlement racing an expiry has one winner.
// Next and accept-next also do the due timed work (lock expiry, activation,
// TTL) lazily, so consumers never wait for a tick to see it; a topic keeps
// the due time of its earliest scheduled message in an atomic, so its
// subscriptions' consumers check it without taking the topic's mutex.
//
// Emulator choices (behaviour chosen here, not known from Azure):
//   - Sequence numbers start at 1 per queue or topic; subscription copies
//     share the topic's number; dead-lettered messages keep their number, so
//     dead-letter queues are ordered by it, not by arrival.
//   - Lock expiry is an abandon without properties (delivery count + 1).
//     Delivery counts never grow in a dead-letter queue. Release does not
//     count. Defer counts as a finished delivery (MaxDeliveryCount applies).
//     The MaxDeliveryCount description is "Message could not be consumed
//     after N delivery attempts."; TTL dead-lettering uses reason
//     "TTLExpiredException" and "The message expired and was dead lettered.".
//   - Defer is allowed in a dead-letter queue (targeted replay); dead-letter
//     from a dead-letter queue is ErrNotAllowed.
//   - TTL = min(header TTL, entity default, and for subscriptions the
//     topic's default). A locked message is not expired while locked; it is
//     checked when it is unlocked. TTL is not enforced in dead-letter queues.
//   - A deferred message is never expired by the sweep nor when its lock
//     ends (Azure: deferred messages are not moved to the dead-letter queue
//     when they expire); Peek shows it deferred. When ReceiveDeferred fetches
//     one past its TTL, it is dead-lettered (TTLExpiredException, with
//     DeadLetteringOnMessageExpiration) or dropped, and left out of the
//     result, which may then be empty.
//   - Scheduled messages get their number when scheduled, count as
//     Scheduled, are visible to a queue's Peek (state 2) with the due time
//     as enqueued time, and become active after their time at the first
//     Tick, Next, accept-next, Peek or CancelScheduled that sees it due.
//     Cancelling an unknown or no longer scheduled number is ignored.
//     Schedule bypasses duplicate detection (a Send with a future scheduled
//     time does not).
//   - A scheduled message becomes active under a new sequence number, the
//     queue's or topic's next at activation, with its due time as enqueued
//     time (Azure: "appended to the queue as if it had been enqueued at the
//     current instant, which includes assigning a new SequenceNumber"; the
//     emulator stamps the due time, which is that instant unless a tick is
//     late). The scheduled number then names nothing: cancelling it is
//     ignored, so no number is ever reused for two states.
//   - A topic holds its scheduled messages itself until they are due (Azure:
//     scheduled messages "do not materialize" before their time): they are
//     the topic's Counts.Scheduled (Azure's topic ScheduledMessageCount;
//     subscriptions report none), no subscription shows them, and the topic
//     cancels them by number. When due, one is fanned out like a send, to
//     the subscriptions and rules that exist then; a session subscription
//     that matches a message without a session id gets no copy (Send and
//     Schedule refuse such a message for the subscriptions of their time).
//   - Duplicate detection keys on MessageID within the window measured from
//     the first send; a duplicate send succeeds and enqueues nothing.
//   - Rules (rules.go) as Azure's topic-filters page says: the rules without
//     an action select the message once, however many match; each matching
//     rule with a SQL action adds its own copy, the action applied to that
//     copy only and the application property RuleName set to the rule's
//     name. Copies after the first in one subscription take the topic's
//     next sequence numbers (a subscription's numbers stay unique). SQL
//     filters and actions are package sqlfilter's language, parsed when the
//     rule is created (a bad one is ErrInvalidProperties wrapping a
//     *sqlfilter.SyntaxError) and evaluated as the message is fanned out:
//     sys.SequenceNumber and sys.EnqueuedTimeUtc are those it is enqueued
//     with, sys.DeliveryCount 0, sys.LockToken and sys.LockedUntilUtc NULL.
//     A filter that fails to evaluate (a string compared with a number)
//     does not select the message; in a subscription with
//     DeadLetteringOnFilterEvaluationExceptions the message goes to its
//     dead-letter queue instead, with DeadLetterReason "FilterException"
//     (Azure uses the exception's type name) and the error as the
//     description, and no rule of that subscription routes it. An action
//     that fails part way
//     keeps the statements before the failure. SET on a string system
//     property writes other values as text; SET of a number over an
//     integer property keeps the property's integer type when it fits;
//     SET sys.ScheduledEnqueueTimeUtc is ignored, as in a subscription on
//     Azure. User property names match case-insensitively when no exact
//     name exists. Disabled subscriptions get no copies.
//   - ReceiveDeferred returns ErrNotFound for a deferred message that is
//     currently locked.
//   - Session state can be read and written without holding the session
//     lock. Losing a session lock (expiry) ends its consumer with
//     ErrSessionLockLost and expires every message lock of that session;
//     Close releases the session lock but leaves message locks valid.
//   - SizeInBytes is an estimate of the encoded size, not a marshal.
//   - RequiresSession and EnablePartitioning cannot change after creation
//     (ErrInvalidProperties, worded as the service's refusal: "The value
//     for the RequiresSession property of an existing Queue cannot be
//     changed", "Partitioning cannot be changed for Topic. ").
//   - A message sent or scheduled without a message-id gets one, a random
//     GUID in 32 lower-case hex digits (the service assigns one too; its
//     exact format is not documented).
//   - The empty string is a session id: a session entity refuses only a
//     message whose group-id is absent or null, and ConsumerOptions
//     ExactSession locks session "" by name.
//   - Delivered and peeked messages carry x-opt-message-state only when it
//     is not Active (deferred 1, scheduled 2), as the service does.
//   - AccessedAt: a new queue or topic reads as never accessed (the zero
//     time) until a send, schedule or receive; a new subscription reads as
//     accessed at its creation (the SDK's live tests expect both).
//   - Entity authorization rules (queues, topics) are validated (KeyName
//     unique, rights Manage/Send/Listen, Manage with Send and Listen),
//     stored with generated keys where none were given, and returned; they
//     do not authorize anything (tokens are checked against the namespace
//     key).
//   - Server-busy faults affect Send, Schedule, CancelScheduled,
//     NewConsumer, Peek and ReceiveDeferred, not settlement.
//   - Topic counts are the sums of their subscriptions' counts plus the
//     topic's own scheduled messages.
//   - Session ids are case-sensitive; entity names are not.
//   - Next returns the lowest sequence number first; accept-next picks the
//     free session whose next deliverable message has the lowest number.
//
// Auto-forwarding (forward.go). A queue or subscription with ForwardTo
// never keeps an active message: one that becomes active there (send, topic
// fan-out, scheduled activation) is sent on to the target queue or topic as
// a new message (the target's sequence number, enqueued now, the target's
// duplicate detection and rules), keeping body, properties, application
// properties and annotations; the first hop sets
// x-opt-enqueue-sequence-number (int64) to the source number and later hops
// keep it (Azure: the number at the original point of submission). With
// ForwardDeadLetteredMessagesTo, a message that would be dead-lettered
// (explicit, MaxDeliveryCountExceeded, TTLExpiredException) is sent to that
// target instead, with its DeadLetterReason/Description properties and
// x-opt-deadletter-source = the source entity name. A message may be
// forwarded 4 times (Azure's limit); the hop count is a broker-private
// record field (Azure exposes none). A message that cannot be forwarded
// goes to the source's transfer dead-letter queue ("<entity>/$Transfer/
// $DeadLetterQueue", Counts.TransferDeadLetter), keeping its source number:
//   - over the hop limit: "MaxTransferHopCountExceeded" / "The maximum
//     number of allowed hops when forwarding between queues has been
//     exceeded. This value is set to 4." (Azure's documented strings);
//   - a session target and no session id: "Session ID is null" / "Session
//     enabled entity doesn't allow a message whose session identifier is
//     null." (Azure's documented strings);
//   - a missing, deleted, Disabled or SendDisabled target, or any other
//     refusal: emulator choice "TransferToEntityFailed" with the description
//     `Forwarding to "<target>" failed: <cause>.`.
//     A dead-letter forward that fails likewise replaces the dead-letter
//     reason and keeps x-opt-deadletter-source.
//
// Further emulator choices for forwarding:
//   - A duplicate dropped by the target's duplicate detection counts as
//     forwarded. Injected server-busy faults do not apply to forwarding
//     (they model client-facing throttling; Azure retries internal
//     transfers), so a busy target neither refuses nor consumes the fault.
//   - The forwarded copy expires no later than it would have in the
//     source; dead-letter forwards start a fresh TTL in the target.
//   - Forwarding is synchronous for the caller that caused it (Send,
//     settlement, Tick, Next ...) but never holds two store locks: records
//     leave their store into a per-store outbox under its mutex and are
//     sent after it is released (topic fan-out: after the topic mutex too).
//     In that window a record is in neither store; it is counted in
//     Counts.Transfer of the source (normally 0, as Azure's
//     TransferMessageCount) so counts do not lose it, but Peek does not
//     show it. Forwarding order follows sequence numbers for one caller;
//     concurrent callers may interleave.
//   - ForwardTo and ForwardDeadLetteredMessagesTo are kept as the client
//     gave them, an entity name or an absolute URL such as
//     "sb://<namespace>/<name>" (what the service stores and returns);
//     ForwardTarget gives the entity they name. The URL's host is not
//     compared with the namespace.
//   - Create and Update refuse (ErrInvalidProperties) a forward target that
//     is not an existing queue or topic, or that is the entity itself.
//     Deleting or disabling a target later is allowed; forwards then fail
//     as above. Setting ForwardTo later does not move messages already in
//     the main queue; they stay deliverable there.
//
// AutoDeleteOnIdle (idle.go). Tick deletes a queue, topic or subscription
// with its messages once it has been idle for its AutoDeleteOnIdle, as
// DeleteQueue, DeleteTopic or DeleteSubscription would. Service Bus's
// minimum, 5m, is enforced (shorter → ErrInvalidProperties; 0 = never).
// Idleness follows Azure's documented definition:
//   - queue: no send (scheduling and forwarded arrivals included), receive,
//     update or browse/peek, and no scheduled message pending (activation
//     counts as a send at the due time);
//   - topic: no send, update or pending scheduled message, and no activity
//     on any of its subscriptions;
//   - subscription: no receive, update, rule change or browse/peek;
//     messages fanned out to it do not count.
//
// Emulator choices for idleness:
//   - Every $management operation on an entity (renew-lock, settlement,
//     deferred receive, session state and lock, list sessions,
//     cancel-scheduled) counts as activity, as browse/peek does in Azure,
//     and so does settlement on a link: each implies a live client.
//     Reading runtime properties through the admin API does not.
//   - An attached receiver (an open consumer on any sub-queue, with or
//     without credit, or a waiting accept-next) is ongoing activity: the
//     idle time starts when the last one leaves.
//   - A queue or subscription with ForwardTo is never idle (Azure:
//     auto-forwarding is equivalent to a receiver receiving).
//   - Idleness is checked at Tick and checked again under the locks the
//     deletion takes, so activity that races it wins.
//
// Operation statistics (stats.go): CountOp and CountManagement add to
// counters that Stats reads and ResetStats zeroes, in total and per entity
// path as addressed (StatsKey: lower-cased, without surrounding slashes).
// The broker counts nothing itself; the front ends (the AMQP server, the
// admin HTTP API) report the requests they serve, and the namespace is
// where they meet. Counting takes a read lock, a map lookup by the path as
// given and an atomic add; only the first operation on a spelling of a path
// allocates, and at most 10000 entities are tracked (beyond that,
// operations count in the totals only).
//
// Not modelled: MaxSizeInMegabytes and MaxMessageSizeInKilobytes quotas
// (the AMQP server enforces the message size), transactions.
package broker
