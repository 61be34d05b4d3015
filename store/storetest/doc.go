// Package storetest fills a dlqdash database with catalog rows for tests and
// benchmarks of the read side (message lists, search, export, the API)
// without the ingester or a broker: Insert for a few hand-made records,
// AddEntities for entities, and Generate (cached by Catalog) for a synthetic
// catalog of a million messages with the variety of a real namespace.
//
// It writes through the store's own ingest, so that there is one ingest
// path: entities through store.SyncEntities and SaveSettings, as the
// ingester lists them, and messages through store.Import, which shares
// ApplyPage's inserts (messages, bodies, search rows), failure groups and
// present counts, and only lets the records keep their own first-seen,
// last-seen and gone times. OpenSQL is for what no API writes. It must not
// be imported by non-test code.
package storetest
