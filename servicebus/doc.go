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
//	net errors (DNS, refused, reset, EOF), TLS         dlq.ErrUnreachable
//	certificate errors, the caller's deadline
//	azservicebus.Error CodeClosed, use after Close     ErrClosed
//	the caller's cancellation                          context.Canceled, wrapped with the operation
//	anything else (entity disabled, not allowed, ...)  *Error without a sentinel
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
//     arrived, collects for 100 ms so a batch fills on a latent link.
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
