// Package servicebus is dlqdash's adapter to Azure Service Bus: Client
// implements dlq.Broker (Entities, Settings, Peek) and replay.Broker
// (Entity, OpenReceiver, OpenSender) over the azservicebus SDK and its
// admin client. It is the only package of the product that imports
// azservicebus or azservicebus/admin; the domain packages see only the
// dlq types and sentinel errors. It must not grow catalog or replay logic:
// it translates, nothing more.
//
// # Connecting
//
// Open takes a connection string (Endpoint, SharedAccessKeyName and
// SharedAccessKey, or SharedAccessSignature; optionally
// UseDevelopmentEmulator=true) and does no I/O, so a namespace that is down
// shows up as ErrUnreachable from the first call, not as a failed start. The
// connection string and its secrets never appear in an error or a log
// record; Namespace gives the host[:port] to show instead.
//
// The admin client always builds https://<namespace>/ URLs. With
// Options.AdminEndpoint, or with UseDevelopmentEmulator=true (default
// http://<endpoint host>:5300, where Microsoft's emulator and ours listen),
// an azcore Transporter rewrites scheme and host of every request after the
// SAS policy has signed it (docs/servicebus-protocol.md §12.3), so the signature still names
// the namespace URL, as both the service and the emulator expect.
//
// # Retries
//
// The SDKs' default retries make a dead connection take about 30 s to fail.
// The adapter retries twice, 250 ms then about 750 ms apart (Options.Retry
// tunes it), so an unreachable namespace is reported in about a second
// and the ingester's own backoff decides what happens next. The admin
// client does not retry 429 and 503 at all: they come back at once as
// throttling, with the server's Retry-After.
//
// # Deadlines
//
// Every call the adapter makes to Service Bus has a deadline of its own,
// whatever the caller's context says (a sooner deadline of the caller's
// still applies), so that a broker that stops answering (a stopped
// process, a dead network path, a connection the SDK is still recovering)
// is reported within seconds instead of never. Options.Timeouts sets them
// per kind of call; zero takes DefaultTimeout (10 s):
//
//	kind      bounds                                                   default
//	--------  -------------------------------------------------------  -----------------------
//	Attach    connecting, $cbs and attaching a link; added to the      10 s
//	          first call of a sender or receiver (and to the first
//	          after its link was replaced)
//	Send      one batch of copies (one round trip)                     10 s
//	Receive   margin over the caller's wait (none for a receive        wait + 10 s
//	          that waits for its context alone)
//	Settle    one complete or abandon                                  10 s
//	Peek      one $management read: a peek, a receive by               10 s + 2 ms per message
//	          sequence number, the check after an empty receive        asked for
//	Admin     one admin API request (each page of a listing, a Get)    10 s
//
// A call that runs out of its deadline fails with an *Error that matches
// dlq.ErrUnreachable and context.DeadlineExceeded (so the ingester and the
// replay engine retry it like a lost connection), worded as "send to
// orders: Service Bus unreachable: the broker did not answer a send to
// orders within 10 s: ...". If the SDK does not return within a second of
// the deadline (a few of its paths wait on a lock or for its background
// releaser without a context), the adapter returns the timeout anyway and
// leaves the SDK's call to end on its own.
//
// A sender or receiver whose call timed out gets a fresh SDK sender or
// receiver (a new link, attached by the next call); the old one is closed
// in the background within Timeouts.Attach. A call that was in flight on
// the old one fails with a retryable dlq.ErrUnreachable, not ErrClosed.
// Messages received on the old link are settled over the new receiver's
// $management link. A cached peek receiver whose peek timed out is
// dropped, and the next peek makes another.
//
// The SDK returns no messages and no error from a receive whose link or
// connection failed, and from one that spent its wait retrying a busy
// broker. So Receive does not take an empty answer at its word: one that
// ends before the wait is made again within the wait, and one that waited
// in vain is confirmed by a one-message peek, whose error (busy,
// unreachable, not found) becomes the receive's (so a receive that gets
// nothing takes its wait and at most Timeouts.Peek more). An empty Receive
// therefore means the broker answered and had nothing to give.
//
// # Connection failures the SDK does not recover from
//
// The SDK reconnects by itself after most connection errors, but a
// connection the broker closed with a condition the SDK deems fatal
// (amqp:not-allowed and the like) is never replaced: the SDK keeps it, and
// every call of a sender on it fails at once with that error, for good.
// go-amqp provokes exactly this: when a session's begin is dropped because
// its context ended before the frame was written, it later ends a session
// the broker never saw, and the broker (the emulator, at least) closes the
// connection with amqp:not-allowed. So an error that says the connection
// ended (*amqp.ConnError with a condition) maps to dlq.ErrUnreachable
// whatever the condition (but amqp:unauthorized-access), and, for a
// condition the SDK does not reconnect after (any but
// amqp:connection:forced and amqp:internal-error), the Client replaces its
// SDK client (Client.connFailed): the next call connects
// afresh, the senders and receivers move to the new one on their next call,
// and calls in flight on the old one fail with a retryable
// dlq.ErrUnreachable instead of ErrClosed.
//
// A receiver that saw its link or connection fail (a call that timed out,
// a lost connection, a receive that ended early with nothing) completes
// messages by lock token over $management from then on: the SDK settles a
// message on the link it came from, falls back to $management only after
// a link error (not a connection error), and retries a settlement with its
// default back-off (4 s, 8 s, 16 s) whatever RetryOptions say, so a
// message received before a dropped connection could otherwise not be
// completed before its lock expired.
//
// What the deadlines cannot shorten: the SDK shares one AMQP connection
// per Client, and a connection whose peer vanished without closing it is
// torn down only when go-amqp's idle timeout (1 minute without a frame)
// notices; until then every call times out after its deadline (and is
// retried by its caller), then the SDK reconnects on the next call.
//
// # Errors
//
// Every error names the operation ("peek orders/$DeadLetterQueue", "list
// queues"), says what to check, and matches a dlq sentinel with errors.Is:
//
//	what the SDK reports                               sentinel
//	-------------------------------------------------  ---------------------------------------
//	azservicebus.Error CodeUnauthorizedAccess          dlq.ErrUnauthorized
//	admin HTTP 401, 403; $management 401               dlq.ErrUnauthorized
//	AMQP amqp:unauthorized-access                      dlq.ErrUnauthorized
//	azservicebus.Error CodeNotFound                    dlq.ErrEntityNotFound
//	admin HTTP 404; $management 404; amqp:not-found    dlq.ErrEntityNotFound
//	admin HTTP 429, 503                                dlq.ErrThrottled, *dlq.ThrottledError
//	                                                   with RetryAfter from Retry-After
//	                                                   (or retry-after-ms)
//	$management 503 (how the SDK surfaces
//	com.microsoft:server-busy on peek, after its
//	retries); AMQP com.microsoft:server-busy           dlq.ErrThrottled (RetryAfter 0)
//	azservicebus.Error CodeLockLost;                   dlq.ErrLockLost
//	AMQP com.microsoft:message-lock-lost
//	azservicebus.Error CodeConnectionLost, CodeTimeout dlq.ErrUnreachable
//	admin HTTP 408, 502, 504; com.microsoft:timeout    dlq.ErrUnreachable
//	AMQP com.microsoft:operation-cancelled (after      dlq.ErrUnreachable
//	the SDK's retries)
//	net errors (DNS, refused, reset, EOF), TLS         dlq.ErrUnreachable
//	certificate errors, the caller's deadline,
//	the call's own deadline (see Deadlines)
//	AMQP com.microsoft:entity-disabled (a Disabled     dlq.ErrEntityDisabled
//	entity; SendDisabled on a send, ReceiveDisabled
//	on a receive), bare or as the link's error
//	AMQP amqp:resource-limit-exceeded (the entity      dlq.ErrQuotaExceeded
//	is full, or another quota is exceeded; the SDK
//	does not retry it)
//	azservicebus.Error CodeClosed, use after Close     ErrClosed
//	the caller's cancellation                          context.Canceled, wrapped with the operation
//	anything else (not allowed, ...)                   *Error without a sentinel
//
// A Send of copies (replay.Sender) that failed before any of them reached
// the destination, for what they are or where they go, is also a
// *RefusedError (Refused() true, replay.Refusal): a copy that cannot be
// built or is larger than one message may be (found before anything is
// sent: every batch is filled first); a refused attach before anything was
// sent (com.microsoft:entity-disabled or amqp:not-allowed, bare or as the
// link's error); or a rejection of the call's first batch with
// amqp:link:message-size-exceeded, com.microsoft:entity-disabled, or
// amqp:not-allowed for a batch of one message. The SDK has no error code
// for these (its Codes name transient, auth, not-found, lock and closed
// failures); the AMQP condition is read from the *amqp.Error. A link that
// ended while a batch was in flight (amqp.LinkError) or a connection that
// ended (amqp.ConnError) never counts, whatever its condition.
//
// The admin client's Get* methods return (nil, nil) for a missing entity;
// Entity, their only user (the listings need none), reports that as
// dlq.ErrEntityNotFound. A peek or receive of a missing entity fails in
// the SDK with CodeNotFound (from $cbs or the attach), which maps to
// dlq.ErrEntityNotFound.
//
// # Peeking
//
// Peek does not open an AMQP link per call: it keeps one SDK receiver per
// (entity, subqueue), created on the first peek, whose links the SDK keeps
// open and re-establishes after a connection loss. Peek-lock receivers grant
// no credit until asked to receive, so a cached receiver never takes a
// message; PeekMessages goes over the entity's $management link. A receiver
// is used by one peek at a time (peeks of different entities run
// concurrently), dropped when its entity is not found, and closed by Close.
// Queues are peeked with NewReceiverForQueue, paths of the form
// <topic>/Subscriptions/<name> with NewReceiverForSubscription; the main
// subqueue with no SubQueue option, the dead-letter queue with
// SubQueueDeadLetter and the transfer dead-letter queue with
// SubQueueTransfer.
//
// # Messages
//
// Every field of dlq.Message comes from the SDK's ReceivedMessage, with
// these rules where the SDK's own field is not the whole story:
//
//   - Body: one data section is the SDK's Body. Several data sections are
//     concatenated (as the .NET client reads them). An amqp-value body is
//     its UTF-8 text for a string, its bytes for binary, and JSON for
//     anything else (numbers, lists, maps: integers with every digit, times
//     RFC 3339, binary as {"base64": ...}). amqp-sequence sections become
//     one JSON array of all their items. Only the first two are exact.
//   - MessageID and CorrelationID: the SDK keeps only string ids; a ulong,
//     uuid or binary id from another client is written as decimal,
//     canonical uuid or hex.
//   - TimeToLive and ExpiresAt: an AMQP header without a ttl reads as 0 in
//     the SDK (and an expiry equal to the enqueued time); the adapter
//     reports both as unset then, unless the message carries an
//     absolute-expiry-time.
//   - ApplicationProperties: dlq.EncodeProperties of the SDK's map, exactly
//     as the broker returned it; a dead-lettered message's
//     DeadLetterReason and DeadLetterErrorDescription are among them, as
//     Service Bus stores them there.
//   - DeliveryCount is the SDK's (the header's count plus one).
//   - Times are UTC.
//
// A peeked message without a sequence number is skipped (and logged).
//
// # Replaying
//
// replay.go implements replay.Broker for the replay engine:
//
//   - Entity describes a queue, topic or subscription with the admin
//     API's Get requests (a topic costs two: queue first, then topic).
//   - OpenReceiver gives a peek-lock receiver on one subqueue. Receive
//     asks for at most 5000 messages (the SDK's limit), bounds its wait
//     with a timeout (no messages then is (nil, nil)) and, once a message
//     arrived, collects for 100 ms so a batch fills on a latent link. An
//     empty answer is confirmed with a peek (see Deadlines).
//     Messages that arrive between calls are released by the SDK, so an
//     idle receiver holds no locks. ReceiveDeferred fetches deferred
//     messages by sequence number, leaving out numbers Service Bus does
//     not find (it fails a whole request for one such number; the adapter
//     halves the request until it isolates them). Complete maps a lost
//     lock to dlq.ErrLockLost.
//   - OpenSender gives a sender to a queue or topic. Send builds each copy
//     from the original's raw AMQP message, so every body kind (data
//     sections, amqp-value, amqp-sequence) is sent exactly as it came, and
//     sends copies in batches as large as the broker allows, grouped so
//     that a batch never mixes sessions, partition keys or schedules (see
//     Send and buildCopy for what is copied and what is not).
//
// Receivers and senders are their callers' to close; Client.Close does not
// close them, and after it their calls fail with ErrClosed.
//
// Package servicebustest holds the behavioural suite that checks all of
// this against the emulator and, opt-in, a real namespace.
package servicebus
