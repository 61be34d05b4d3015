// Package demo gives the embedded emulator a namespace worth looking at: it
// provisions a small, realistic set of entities and drives simulated
// producers and consumers through the real azservicebus SDK, so that
// messages dead-letter for the reasons they do in production: payloads that
// do not deserialise, validation failures, SQL timeouts that exhaust
// MaxDeliveryCount, expired time-to-live, deferred messages nobody fetches,
// and messages scheduled for later.
//
// The consumers really process each message (parse the JSON, XML, text or
// binary body, validate it, "write" it) and settle it by what they find;
// the producers plant the defects. Nothing here pretends: every dead letter
// the dashboard shows was produced by the broker's own rules.
//
// The package must not be imported by anything but the demo wiring in cmd
// and its own tests: it is sample traffic, not part of the product.
package demo
