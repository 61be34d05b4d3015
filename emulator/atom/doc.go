// Package atom serves the Service Bus admin HTTP/ATOM API (docs/servicebus-protocol.md §12)
// over an in-memory broker.Namespace, so that the azservicebus/admin client,
// and the .NET, Java, JavaScript and Python administration clients, can list,
// create, update and delete queues, topics, subscriptions and rules and read
// runtime counts from the emulator.
//
// It is an http.Handler and nothing more: mount it at the root of a server
// (the admin client always sends to https://<namespace>/; point it at the
// emulator with a transport that rewrites scheme and host, docs/servicebus-protocol.md §12.3).
//
// Routes (paths are case-insensitive where names are):
//
//	GET    /$namespaceinfo
//	GET    /$Resources/Queues, /$Resources/Topics      ($skip, $top; 100 per page by default)
//	GET    /<topic>/Subscriptions                      ($skip, $top; unknown parameters ignored)
//	GET    /<topic>/Subscriptions/<sub>/Rules          ($skip, $top)
//	GET|PUT|DELETE /<queue-or-topic>
//	GET|PUT|DELETE /<topic>/Subscriptions/<sub>
//	GET|PUT|DELETE /<topic>/Subscriptions/<sub>/Rules/<rule>
//
// Queue and topic names may contain '/': a path is split at its first
// "Subscriptions" segment after the first.
//
// Fault injection (not part of Service Bus; faults.go), for tests and demos
// against a running emulator. Same SAS authorization as every request; 204
// on success:
//
//	POST   /$emulator/faults/server-busy?entity=<path>&ops=<n>&for=<duration>
//	POST   /$emulator/faults/expire-locks?entity=<path>
//	POST   /$emulator/faults/drop-connections
//	POST   /$emulator/faults/latency?d=<duration>
//	DELETE /$emulator/faults
//
// server-busy makes the next ops operations on the entity (send, schedule,
// cancel-scheduled, receiver attach, peek, receive-deferred; not settlement)
// and every one within the span "for" fail with com.microsoft:server-busy
// (management: 503); at least one of ops and for is required and a new
// fault replaces the entity's previous one. expire-locks expires every
// message lock held on the entity now. drop-connections closes every AMQP
// connection with amqp:connection:forced; latency delays every AMQP reply
// and delivery (d=0 turns it off). DELETE clears every server-busy fault and
// the latency. Durations are Go durations (250ms, 30s, 1m); entity is a
// queue, topic or subscription path (events/Subscriptions/audit). Errors:
// 400 naming the bad or unknown parameter, 404 for an unknown entity or
// fault, 405, and 501 for drop-connections and latency when Options.Faults
// is nil.
//
// Operation statistics (not part of Service Bus; stats.go), same
// authorization:
//
//	GET    /$emulator/stats    200, application/json
//	DELETE /$emulator/stats    204: every counter back to zero
//
// The body is broker.Stats: the operations served since the namespace was
// created or last reset, in total and per entity path as the client
// addressed it, lower-cased (queue, topic, "topic/subscriptions/sub", each
// also with "/$deadletterqueue" or "/$transfer/$deadletterqueue"):
//
//	{"totals": {"peek": 12, "peeked_messages": 3000, "receive": 40,
//	            "send": 42, "settle": 40, "management": 15, "admin": 3,
//	            "management_ops": {"peek-message": 12, "receive-by-sequence-number": 0,
//	              "renew-lock": 0, "update-disposition": 1, "schedule-message": 2,
//	              "cancel-scheduled-message": 0, "renew-session-lock": 0,
//	              "get-session-state": 0, "set-session-state": 0,
//	              "get-message-sessions": 0, "other": 0}},
//	 "entities": {"orders/$deadletterqueue": {"peek": 12, "peeked_messages": 3000, ...},
//	              "orders": {...}}}
//
// peek counts $management peek requests and peeked_messages the messages
// they returned; receive the messages delivered on receive links plus those
// returned by receive-by-sequence-number; send the messages accepted by send
// links (each message of a batch) and by schedule-message; settle completes,
// abandons, defers and dead-letters, by disposition or update-disposition
// (not releases); management every $management request, split by operation
// in management_ops; admin every request to this handler (failed and
// unauthorized ones included) except those under /$emulator, under the
// entity it names (a rule's request counts for its subscription; lists and
// $namespaceinfo count in the totals only). Entities with nothing counted
// are absent. The AMQP server counts into the same namespace, so the
// endpoint needs no hook.
//
// Choices:
//
//   - Every request needs a valid SharedAccessSignature token for the
//     configured key (HMAC-SHA256 over sr + "\n" + se, sr as written in the
//     token, key name equal, se in the future); otherwise 401. The signed
//     resource is not compared with the request URL, because the SDK signs
//     the real namespace URL that a local transport rewrites. The
//     supplementary forwarding tokens are not checked.
//   - PUT without If-Match creates (201; 409 if a queue or topic of that name
//     exists); PUT with If-Match updates (200; 404 if missing). An update
//     starts from the entity's current properties and applies the elements
//     present, so a partial description changes only what it names. Absent
//     elements at creation take Azure's defaults (broker.Default*Properties).
//   - Every entry is complete (docs/servicebus-protocol.md §17): <id> and <link> hold the entity URL,
//     <title> the name, and the description carries all properties the
//     service returns for that kind, CountDetails with all five counts read
//     from the broker at request time, and times in RFC 3339. Durations are
//     ISO-8601; a zero TTL or AutoDeleteOnIdle (the broker's "never") is
//     written as TimeSpan.MaxValue, P10675199DT2H48M5.4775807S, and read back
//     the same way.
//   - Forwarding targets are stored as given and returned as absolute URLs,
//     as the service does: a URL the client sent comes back unchanged, a
//     name comes back as sb://<host>/<name>, host being the Host header of
//     the request (the namespace the client addressed, which the SDK keeps
//     behind a rewriting transport).
//   - A partitioned queue or topic reports MaxSizeInMegabytes as 16
//     partitions of the size it was created with (4096 → 65536), as the
//     service does; a value of 16384 or more that divides by 16, sent for a
//     partitioned entity, is read as that total (so a read-modify-update
//     round trip keeps it). Changing EnablePartitioning is refused (400,
//     "Partitioning cannot be changed for Queue. ").
//   - AuthorizationRules of queues and topics are stored and returned
//     (keys generated when absent; no CreatedTime or ModifiedTime unless
//     given); an update without the element keeps them. They do not
//     authorize requests.
//   - SqlFilter and SqlRuleAction Parameters are stored and returned:
//     string, int, long, short, double, float, decimal, boolean, dateTime
//     and duration (a TimeSpan, ISO-8601) are read; they are written back
//     as string, int, double, boolean, dateTime or duration (the Go SDK
//     reads all but duration). A SQL expression the language refuses is a
//     400 whose detail is worded as Azure's: "There was an error parsing
//     the SQL expression. [Token line=1, column=18, Token in error= …,
//     Additional details= …]" (columns count characters from 1).
//   - A topic's SqlFilterCount counts true, false and SQL filters of its
//     subscriptions, CorrelationFilterCount the correlation filters.
//   - Errors are <Error><Code>n</Code><Detail>text</Detail></Error>: 400 for
//     a malformed body or a value Service Bus would reject, 401, 404, 405,
//     409, 413, 501 (fault hooks missing) and 500 (detail hidden, error logged).
//
// It must not hold state of its own beyond the handler's creation time (and
// the Faults hook, whose state lives in the AMQP server): the
// broker is the single source of truth, so AMQP clients and the admin API
// always agree.
package atom
