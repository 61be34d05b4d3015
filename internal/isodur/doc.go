// Package isodur parses and formats the ISO-8601 durations that Service Bus
// uses for every time span on the wire and in configuration files
// ("PT30S", "P14D", "P10675199DT2H48M5.4775807S").
//
// Service Bus speaks .NET TimeSpan, serialised the way System.Xml.XmlConvert
// does it. This package follows those rules:
//
//   - A year (Y) counts as 365 days and a month (M before T) as 30 days, as in
//     XmlConvert; weeks (W) are accepted too. Fractions are accepted on seconds only.
//   - A value at or beyond the range of time.Duration (about 292 years) becomes
//     Infinite. That is how .NET's TimeSpan.MaxValue ("infinite" TTL,
//     auto-delete-on-idle "never") arrives, and Format turns Infinite back into
//     TimeSpan.MaxValue's text so other clients see what the service sends.
//   - Format writes days, hours, minutes and seconds (never years or months,
//     whose length is ambiguous) and truncates to 100 ns, the TimeSpan tick.
//
// It must not grow policy: limits such as "at most PT5M" belong to callers.
package isodur
