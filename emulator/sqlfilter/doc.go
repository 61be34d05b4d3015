// Package sqlfilter is the Service Bus SQL filter and rule action language
// (Microsoft's "Subscription Rule SQL Filter Syntax" and "SQL Action
// Syntax" pages): a lexer, a parser to a small syntax tree, and an
// evaluator over the Message interface, with no knowledge of the broker.
//
// Filters (ParseFilter, Filter.Match):
//
//   - comparisons = <> != < <= > >=; AND, OR, NOT with SQL precedence
//     (NOT binds tighter than AND, AND tighter than OR) and parentheses;
//   - [NOT] IN (e, …), [NOT] LIKE with % and _ and ESCAPE 'c',
//     IS [NOT] NULL, EXISTS(prop);
//   - arithmetic + - * / % and unary + -, string concatenation with +,
//     date-time ± time span and date-time − date-time;
//   - constants: 'strings' (a quote inside is doubled), integers (64-bit),
//     decimals and 1.5E3 (64-bit float), TRUE, FALSE, NULL;
//   - properties: sys.Name for a system property (MessageId, CorrelationId,
//     To, ReplyTo, Label or Subject, SessionId, ReplyToSessionId,
//     ContentType, DeliveryCount, SequenceNumber, EnqueuedSequenceNumber,
//     EnqueuedTimeUtc, ScheduledEnqueueTimeUtc, ExpiresAtUtc, TimeToLive,
//     LockedUntilUtc, LockToken, PartitionKey, ViaPartitionKey,
//     DeadLetterSource, State, Size), user.Name or a bare Name for an
//     application property; [bracketed] and "quoted" names; names and
//     keywords are case-insensitive; functions newid(), property(name) and
//     p(name);
//   - @parameters bound from the filter's Parameters (keys with or without
//     the @).
//
// Semantics follow Azure's page: a missing property (or a NULL value) is
// unknown, unknown propagates through arithmetic, comparisons, LIKE and
// the left side of IN, AND/OR/NOT use three-valued logic, and a filter
// selects a message only when it is TRUE. Numbers promote as in C#
// (integer with integer stays integral, so 7 / 2 = 3; with a decimal both
// become decimals). Strings compare ordinally and case-sensitively, LIKE
// too. Comparing values of types C# cannot compare (a string with a
// number) or dividing an integer by zero is an evaluation error
// (ErrEvaluation): Azure raises a filter exception and the rule does not
// select the message.
//
// Errors found when a rule is created are *SyntaxError values with a line,
// a column (from 1, in characters) and the offending token: bad syntax, an
// unknown sys. property, a parameter without a value, a constant LIKE
// pattern that is not a string, an ESCAPE that is not one character,
// setting a property the broker owns. SyntaxError.Azure words the fault as
// the service does.
//
// Actions (ParseAction, Action.Apply) are SET prop = expr and REMOVE prop
// statements, each optionally ended by a semicolon, separated by commas or
// white space, run in order on the message. The system properties an
// action may change are MessageId, CorrelationId, To, ReplyTo, Label,
// SessionId, ReplyToSessionId, ContentType, TimeToLive,
// ScheduledEnqueueTimeUtc, PartitionKey and ViaPartitionKey.
package sqlfilter
