// Package config reads Microsoft's Service Bus emulator configuration file
// (Config.json, docs/servicebus-protocol.md §18) so that `dlqdash emulator --config` accepts the
// files people already use, and applies it to an in-memory broker namespace.
//
// Shape: UserConfig.Namespaces[0] holds Name, Queues and Topics; a topic holds
// Subscriptions, a subscription holds Rules (a correlation or SQL filter and an
// optional SQL action). UserConfig.Logging.Type is checked and otherwise
// ignored: dlqdash always logs through its own logger.
//
// # Defaults
//
// A property absent from Config.json takes Microsoft's emulator default, so a
// file behaves the same under both emulators:
//
//	LockDuration                         PT1M  (DefaultLockDuration)
//	MaxDeliveryCount                     3     (DefaultMaxDeliveryCount; Azure uses 10)
//	DefaultMessageTimeToLive             PT1H  (DefaultMessageTimeToLive; Azure: unlimited)
//	DuplicateDetectionHistoryTimeWindow  PT20S (DefaultDuplicateDetectionHistoryTimeWindow)
//	booleans                             false
//	ForwardTo, ForwardDeadLetteredMessagesTo  none
//
// Properties Config.json cannot express (MaxSizeInMegabytes, batching,
// status, ...) take the broker's Azure defaults. Entities created later
// through the admin API get Azure's defaults, not these; DefaultsHelp states
// this for the CLI.
//
// # Limits (ours, not Microsoft's)
//
// Microsoft's emulator caps a namespace at 50 entities, TTL at one hour and
// MaxDeliveryCount at 10. Those are limits of that product, not of Service
// Bus, and are not enforced here. What is enforced: exactly one namespace
// (dlqdash serves one); names match Microsoft's pattern (letters, digits,
// '_', '-', '.', '/', starting and ending with a letter or digit), at most
// 260 characters for queues and topics and 50 for subscriptions and rules,
// unique case-insensitively in their scope; LockDuration within PT5S..PT5M;
// MaxDeliveryCount at least 1; DefaultMessageTimeToLive positive;
// DuplicateDetectionHistoryTimeWindow within PT5S..P7D; forwarding targets
// name a queue or topic of the file and not the entity itself; a rule has
// FilterType "Correlation" with a non-empty CorrelationFilter or "Sql" with a
// SqlFilter.SqlExpression that package sqlfilter accepts, and an
// Action.SqlExpression, when given, is a valid SQL action (the error gives
// the line and column inside the expression). Microsoft's format has no
// filter or action parameters, so neither has this one.
//
// # Errors and leniency
//
// Parse reports JSON syntax errors with line and column, and every schema
// error with its JSON path and position, e.g.
//
//	line 12, column 29: UserConfig.Namespaces[0].Queues[2].Properties.LockDuration: "PT10M" exceeds the maximum lock duration PT5M
//
// It reports all errors it finds (errors.Join of *Error values), not only the
// first. Field names match case-insensitively (like .NET configuration
// binding); an unknown field, a duplicated field or a wrong JSON type is an
// error; a JSON null counts as absent. Arrays Microsoft requires (Queues,
// Topics, Subscriptions, Logging) may be omitted here.
//
// This package must not start servers, read environment variables or log:
// it parses, validates and calls broker Create* methods, nothing else.
package config
