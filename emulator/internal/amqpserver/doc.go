// Package amqpserver is the emulator's AMQP 1.0 endpoint: an AMQP server
// written for this project (codec in package amqp) in front of the in-memory
// namespace of package broker. The real azservicebus SDK (v1.11.0, over go-amqp
// v1.7.0) talks to it over plain TCP, exactly as it talks to Azure: SASL
// ANONYMOUS, `$cbs` put-token with a SAS token, data links, and the
// `$management` request/response operations. The Python SDK (uamqp up to
// azure-servicebus 7.8, pyamqp from 7.9) works too, behind TLS. The protocol contract it
// implements is docs/servicebus-protocol.md.
//
// It must not grow business logic: entity semantics (locks, delivery counts,
// dead-lettering, sessions, scheduling, TTL) live in package broker, the admin
// HTTP/ATOM API in package atom. This package only translates between AMQP and
// broker calls.
//
// Everything outside the emulator starts it through emulator.Start (tests
// through emulatortest.Start), which also serves the admin endpoint; this
// package's own tests use New and Start directly:
//
//	srv := amqpserver.New(amqpserver.Options{})         // or Options{Namespace: ns} with entities
//	connStr, err := srv.Start("127.0.0.1:0")            // listens and serves in the background
//	defer srv.Close()                                   // closes connections, waits for goroutines
//
// The connection string is
// `Endpoint=sb://HOST:PORT;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;`
// (key name and key come from Options). Faults: Server.DropConnections and
// Server.SetLatency here; server-busy, lock expiry and the clock through the broker.
//
// Server.Stats counts what the emulator served, in total and per entity path as
// addressed (lower-cased), so a test can assert, for example, that a steady state costs
// no peeks:
//
//	srv.ResetStats()
//	... // let the system under test run
//	if n := srv.Stats().Totals.Peek; n != 0 { t.Errorf("%d peeks in steady state", n) }
//	dlq := srv.Stats().Entity("orders/$DeadLetterQueue") // .Peek, .PeekedMessages, .Receive, ...
//
// Counted here: $management peek requests (Peek) and the messages they returned
// (PeekedMessages); messages delivered on receive links and by receive-by-sequence-number
// (Receive); messages accepted on send links, each of a batch, and by schedule-message
// (Send); completes, abandons, defers and dead-letters by disposition or
// update-disposition, not releases (Settle); every $management request, also by
// operation (Management, ManagementOps). Admin is counted by the admin HTTP handler
// (package atom) on the same namespace, which serves the same numbers as JSON at
// GET /$emulator/stats.
//
// # Architecture
//
// Per connection: one reader goroutine owns the protocol state machine (sessions,
// links, inbound transfers, dispositions, CBS and management requests); one writer
// goroutine owns the socket, draining an unbounded queue and flushing a whole batch in
// one write when the queue runs empty, so a slow client never blocks the broker, the
// reader or other connections; one deliverer goroutine per data receiver link pulls
// from its broker Consumer while the link has credit and the client's session window is
// open, and otherwise waits on the consumer's Notify/Done channels. Session and link
// state is guarded by one mutex per connection that is never held across a socket
// write; broker calls that can block (accepting a session) run off the reader
// goroutine. Panics in connection goroutines are recovered, logged and close only that
// connection.
//
// # Behaviour the emulator chooses
//
// Marked [choice] or [unverified] in docs/servicebus-protocol.md, or decided here:
//
// Connection
//   - SASL offers MSSBCBS (Service Bus's own, the only one uamqp uses) and ANONYMOUS; any
//     other mechanism gets outcome auth (1). A client that skips SASL and sends the plain
//     AMQP header is accepted too. Authorisation is CBS only.
//   - Every performative, terminus, error and outcome is encoded with all its fields
//     (absent ones as null), as Service Bus does; clients read fields by position.
//   - A bad protocol header is answered with the SASL header, then the socket is closed.
//   - open: max-frame-size 65536, channel-max 65535 (explicit), idle-time-out
//     4×HeartbeatInterval (60 s by default), so clients send keep-alives every 30 s.
//   - An empty frame is sent every HeartbeatInterval (15 s), or every half of the peer's
//     idle-time-out when that is shorter (at least 50 ms), unless other frames went out
//     recently; a peer that sends nothing for twice the longer of its own and our
//     idle-time-out is disconnected without a close frame.
//   - Protocol violations close the connection with close{error}: oversized frame →
//     amqp:connection:framing-error; undecodable frame or unknown performative →
//     amqp:decode-error; frames before open, frames on a channel without a session,
//     a second open, begin with remote-channel → amqp:not-allowed; max-frame-size below
//     512 → amqp:frame-size-too-small; transfer/flow/detach on an unknown handle →
//     amqp:session:unattached-handle (at connection level, not just the session);
//     attach on a used handle → amqp:session:handle-in-use; more transfers than the
//     advertised window → amqp:session:window-violation; other performatives →
//     amqp:not-implemented.
//   - Server.Close sends close without an error; DropConnections sends
//     close{amqp:connection:forced}. SetLatency delays every outgoing frame (replies,
//     dispositions, deliveries) by the given time, preserving order.
//
// Sessions and links
//   - The emulator answers on the same channel number the client used, and gives each
//     link the client's handle number (handle spaces are per direction).
//   - Incoming window 5000, re-advertised (with next-incoming-id) in every flow and
//     whenever half of it has been used; outgoing window 5000. A delivery is sent only
//     when all of its transfer frames fit the client's incoming window (one larger than
//     the whole advertised window goes once the window is fully open). RPC replies do not
//     wait.
//   - Back-pressure: while more than 4 MiB of transfer payload is queued or being written
//     on a connection, its links take no more messages from the broker, so a client that
//     stops reading holds a bounded number of locks and bytes; a write blocked for 30 s
//     drops the connection.
//   - End without detaches is an implicit detach of every link; unsettled deliveries of
//     that session are forgotten but their broker locks stay (settle via $management).
//   - A client detach is always answered with detach{closed:true}, once the link's
//     broker consumer (and session lock) has been released.
//   - Client senders get link-credit 5000 right after attach, topped up to 5000 when it
//     falls below 2500. Attach replies to client senders on entities carry
//     max-message-size = Options.MaxMessageSize (262144) and
//     com.microsoft:max-message-batch-size with the same value (ulong); client
//     receivers get initial-delivery-count 0. Receive links, $cbs and $management
//     links get max-message-size 2^64-1 and no batch size: go-amqp enforces a
//     receiver's advertised size on deliveries, and a message sent near the limit is
//     larger once stamped (docs/servicebus-protocol.md §5.2). Settle modes, source
//     (with filter) and target are echoed verbatim.
//   - Link addresses are bare paths (q1, q1/$management, $cbs) or URIs whose path after
//     the host is one (amqps://<namespace>/q1, as the Python SDK sends them; sb://…).
//   - A delivery whose transfer payloads exceed max-message-size is rejected with
//     amqp:link:message-size-exceeded, worded as Azure's "The received message
//     (delivery-id:N, size:N bytes) exceeds the limit (N bytes) currently allowed on the
//     link."; the link stays attached. Exactly max-message-size bytes pass.
//   - One $cbs sender and one $cbs receiver per connection, as Azure: another attach in
//     the same direction while one is attached is refused with amqp:not-allowed.
//   - Attach refusals (null terminus + detach{error}): unknown entity → amqp:not-found;
//     sending to a subscription or sub-queue, receiving from a topic, session filter on a
//     non-session entity or none on a session entity → amqp:not-allowed; session held →
//     com.microsoft:session-cannot-be-locked; no session before the deadline →
//     com.microsoft:timeout. Descriptions clients match on by text begin with the
//     service's sentence, the emulator's detail following in parentheses: a receiver
//     without a session on a session entity ("It is not possible for an entity that
//     requires sessions to create a non-sessionful message receiver."), a lost message
//     lock ("The lock supplied is invalid. Either the lock expired, or the message has
//     already been removed from the queue."; also in $management replies) and a lost
//     session lock. The accept-next deadline is the link's com.microsoft:timeout
//     property less a fifth of it (at most 1 s), so the refusal beats the caller's own
//     context deadline from which the SDK derived it; 60 s without the property.
//   - Session receivers: the com.microsoft:session-filter value may be described
//     (0x137000000C, as the Go, .NET and Java SDKs send it) or plain (the JavaScript
//     SDK sends a bare string); its value is the session id, or null for the next
//     available session (a string, even "", names a session: "" is a valid session id);
//     anything else is refused with amqp:not-allowed. The reply's
//     filter carries the locked session id as a string in the encoding the client used
//     (the JavaScript SDK compares it, as a plain string, with the id it asked for), and
//     the link property com.microsoft:locked-until-utc (.NET ticks).
//   - A receive link in receive-and-delete mode is one whose snd-settle-mode is settled;
//     everything else is peek-lock.
//   - Server-side detach of a receive link: entity deleted → amqp:not-found; consumer
//     ended otherwise (session lock lost, …) → amqp:link:detach-forced.
//   - Drain: available messages are sent first, then the remaining credit is consumed and
//     flow{drain:true, link-credit:0} is sent.
//
// Messages
//   - Every delivered or peeked message carries a header section with all five fields,
//     delivery-count included when it is 0 (go-amqp's encoder would omit defaults, and
//     some non-Go clients do not apply them).
//   - Outgoing deliveries are split at the client's max-frame-size minus 128 bytes.
//     Delivery tag: peek-lock → the lock token in .NET Guid byte order; receive-and-delete
//     → the 8-byte big-endian sequence number; RPC replies → the 4-byte delivery id.
//   - Inbound messages above Options.MaxMessageSize are rejected with
//     amqp:link:message-size-exceeded (RPC requests may be up to 4 MiB).
//   - A batch (message-format 0x80013700) enqueues each data section as its own message,
//     in order; it is not atomic: when one fails, the earlier ones stay enqueued and the
//     delivery is rejected with the failure.
//   - Broker send errors become rejected{condition}: server-busy →
//     com.microsoft:server-busy, invalid message or not allowed → amqp:not-allowed,
//     unknown entity → amqp:not-found, disabled → com.microsoft:entity-disabled.
//   - A message taken from the broker waits on its link until credit and window allow it
//     to be sent. If the client withdraws the credit meanwhile, a peek-lock message is
//     released (no delivery count) and a receive-and-delete one is kept for the next
//     credit. If the link detaches, a peek-lock message is released; a receive-and-delete
//     message taken in that instant is lost, as on a real broker.
//
// Dispositions (client → emulator)
//   - accepted → complete; released → release (no count); modified with
//     undeliverable-here → defer, otherwise abandon (delivery-failed is ignored; abandon
//     always counts); its message-annotations become properties to modify; rejected →
//     dead-letter with DeadLetterReason/DeadLetterErrorDescription from the error info,
//     other info entries become properties; a settled disposition without an outcome →
//     release.
//   - Replies echo the outcome; a successful dead-letter is answered rejected{} without an
//     error. Failures: lock lost → com.microsoft:message-lock-lost; dead-lettering a DLQ
//     message → amqp:not-allowed. A delivery id the session does not know (already
//     settled) is answered with com.microsoft:message-lock-lost. When every delivery of a
//     range succeeded, one disposition covers the range.
//
// $cbs
//   - SAS tokens are validated: key name must equal Options.KeyName, se must be in the
//     future, sig must be the HMAC-SHA256 of "sr\nse" with Options.Key, and sr must cover
//     the audience (equal to it or a path prefix, scheme ignored); otherwise 401. JWT tokens
//     (type jwt) are checked by package jwtcheck against Options.JWTKey (HS256, audience,
//     expiry), and all refused without a key: 401. An audience naming a missing entity → 404; a namespace-level
//     audience is accepted. Success is 202. Other operations or token types → 400.
//   - Replies ($cbs and $management) go to the receiver named by the request's reply-to;
//     a request without reply-to (uamqp sends none) is answered on the client's receiver
//     attached from the same node.
//
// $management
//   - Replies carry status-code and statusCode (int32) and status-description and
//     statusDescription. Broker errors map to: not found → 404, lock or session lock
//     lost → 410, server busy → 503, not allowed / invalid / session held → 400, anything
//     else → 500; unknown operations → 501; malformed requests → 400.
//   - peek-message: 204 when nothing is found; message-count capped at 5000; with a
//     session-id only that session's messages are counted and returned (other sessions'
//     messages are skipped, not counted against message-count).
//   - receive-by-sequence-number: a missing or non-deferred number → 404 (never 204);
//     receiver-settle-mode 0 is receive-and-delete, anything else peek-lock. A deferred
//     message past its TTL is expired by the fetch and left out of the reply (200 with
//     the others, possibly none).
//   - cancel-scheduled-message ignores unknown numbers (200).
//   - get-message-sessions: 204 when empty; the reply's skip is the request's skip plus
//     the number returned; last-updated-time at or after 10000-01-01 means default mode.
//   - get-session-state answers null for an empty state; set-session-state with an empty
//     binary clears it.
package amqpserver
