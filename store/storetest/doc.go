// Package storetest fills a dlqdash database with catalog rows directly in
// SQL, for tests and benchmarks of the read side (message lists, search,
// export, the API) without the ingester or a broker: a Writer for a few
// hand-made records, and Generate (cached by Catalog) for a synthetic catalog
// of a million messages with the variety of a real namespace.
//
// It writes what the ingester writes (store/ingest.go): messages, bodies,
// search rows (body text, reason, description, properties JSON), failure
// groups with their per-entity counters, and present counts per entity,
// subqueue and state. It must not be imported by non-test code.
package storetest
